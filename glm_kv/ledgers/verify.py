"""Check a real SGLang 0.5.23 boot log against the plan, line by line.

The log carries two measured inputs of the sizing: the free memory before the weights (the
minimum over ranks of ``Load weight begin. avail mem``) and the free memory once target and MTP
draft are loaded (the minimum of each rank's last ``Load weight end. avail mem``). They are used
in place of the profile's, and said so. Both are printed to 0.01 GiB, so the plan is evaluated
over that input interval (``SAMPLES`` points, plus the printed HiCache ratio's interval when it
was auto-sized), and a logged value agrees when it lies within the predicted range widened by
its own printed precision (and one page for token counts, the most the sampling step can miss).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import ProfileError
from ..inputs.boot_log import LOOKED_FOR, POOL_KINDS, BootLog
from ..inputs.profile import Profile
from ..inputs.resolve import resolve
from ..units import GB, GiB
from .host import device_kv_bytes, host_budget, host_memory_fraction
from .host import ranks_per_host as host_ranks_per_host
from .plan import Plan, plan_from_args

SAMPLES = 41
HALF_CENT = 0.005   # half of the last printed digit of a "%.2f" value


class NothingToVerify(Exception):
    """The log holds no line that states a pool: there is nothing to agree or disagree with.

    ``glm-kv verify`` exits 3 with this message, never "agrees": an excerpt without pool lines
    (sglang #40558's, say) proves nothing about the plan.
    """

    def __init__(self, found: dict[str, int], why: str, looked_for: dict[str, str] = LOOKED_FOR,
                 pool_kinds: tuple[str, ...] = POOL_KINDS, server: str = "SGLang"):
        # looked_for / pool_kinds / server: the vLLM reader's own (glm_kv/inputs/vllm_boot_log.py)
        self.found = {k: n for k, n in found.items() if n}
        self.looked_for = [looked_for[k] for k in pool_kinds]
        got = ", ".join(f"{n} x '{looked_for[k]}'" for k, n in self.found.items()) or \
            f"no {server} memory line at all"
        super().__init__(f"nothing to verify: {why}. Looked for: " + " | ".join(f"'{x}'" for x in self.looked_for)
                         + f". Found: {got}")


# Which input would move a quantity, for the message on a disagreement.
_INPUTS_BEHIND = (
    ("capped by mamba", "the mamba pool's size (weights_bytes, mem_fraction_static, mamba_full_memory_ratio, "
                        "max_mamba_cache_size) or max_running_requests"),
    ("dtype", "kv_cache_dtype (or the DSA backends / the GPU's SM, which decide SGLang's default)"),
    ("slots per request", "mamba_scheduler_strategy, disable_overlap_schedule, disable_radix_cache or the "
                          "speculative flags (each changes the state slots per request)"),
    ("context_len", "context_length (or the model's max_position_embeddings)"),
    ("multimodal", "model (a multimodal architecture reserves SGLANG_VLM_CACHE_SIZE_MB)"),
    ("host", "hicache_ratio / hicache_size / host_memory_bytes / ranks_per_host / hicache_mem_layout"),
    ("HiCache", "host_memory_bytes / ranks_per_host"),
    ("(reduced)", "max_running_requests"),
    ("per worker", "max_running_requests (and dp_size / enable_dp_attention: it is per worker)"),
)


def explain(row: "VerifyRow", plan: Plan) -> str:
    """The input that would explain a disagreement: for pool sizes, the memory it implies."""
    q = row.quantity
    for key, text in _INPUTS_BEHIND:
        if key in q:
            return f"would be explained by {text}"
    cap, tok, req = plan.capacity, plan.token, plan.request
    if cap is None or not isinstance(row.logged, (int, float)) or not isinstance(row.predicted, (int, float)):
        return "check the profile's flags against the server's"
    r = plan.profile.mamba_full_memory_ratio
    if "#tokens" in q or q == "max_total_num_tokens" or (q.endswith("size") and "KV" in q):
        per = tok.cell_size_bytes if "#tokens" in q or q == "max_total_num_tokens" else tok.kv_bytes_per_token
        unit = 1 if "#tokens" in q or q == "max_total_num_tokens" else GiB / per
        delta = (row.logged - row.predicted) * unit * per * (1 + r)
    elif "mamba" in q or "state size" in q:
        per = req.state_slot_bytes
        unit = 1 if q == "max_mamba_cache_size" else GiB / per
        delta = (row.logged - row.predicted) * unit * per * (1 + r) / r
    else:
        return "check the profile's flags against the server's"
    mem = plan.memory
    parts = [f"the log's pools imply about {abs(delta) / GiB:.2f} GiB {'more' if delta > 0 else 'less'} "
             f"memory for the pools than the plan's rest"]
    if mem is not None:
        w = f"{mem.weights_bytes / GiB:.2f} GiB ({mem.weights_source})" if mem.weights_bytes is not None else "unknown"
        pre = (f"{mem.pre_model_load_bytes / GiB:.2f} GiB ({mem.pre_model_load_source})"
               if mem.pre_model_load_bytes is not None else "unknown")
        parts.append(f"inputs that would explain it: weights_bytes (used: {w}), mem_fraction_static (used: "
                     f"{mem.mem_fraction_static:.4g}, {mem.mem_fraction_source}), GPU memory / "
                     f"pre_model_load_bytes (used: {pre}), or a flag that caps a pool (max_total_tokens, "
                     f"max_mamba_cache_size, mamba_full_memory_ratio, mamba_ssm_dtype)")
    else:
        parts.append("inputs that would explain it: available_bytes, or a flag that caps a pool (max_total_tokens, "
                     "max_mamba_cache_size, mamba_full_memory_ratio)")
    return "; ".join(parts)


@dataclass(frozen=True)
class VerifyRow:
    log_line: int
    rank: str
    quantity: str
    predicted: Any
    predicted_range: tuple | None
    logged: Any
    unit: str
    ok: bool | None          # None: an input read off the log, or a line not predicted
    note: str = ""


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    rows: tuple[VerifyRow, ...]
    inputs_from_log: dict
    plan: Plan
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {"ok": self.ok, "lines": row_dicts(self.rows),
                "inputs_from_log": self.inputs_from_log, "notes": list(self.notes)}


def row_dicts(rows) -> list[dict]:
    """The rows as ``--json`` prints them (shared with the vLLM verify, glm_kv/ledgers/vllm_verify.py)."""
    return [{"log_line": r.log_line, "rank": r.rank, "quantity": r.quantity, "predicted": r.predicted,
             "predicted_range": list(r.predicted_range) if r.predicted_range else None,
             "logged": r.logged, "unit": r.unit, "ok": r.ok, "note": r.note} for r in rows]


def _per_rank(lines) -> dict:
    out: dict = {}
    for ln in lines:
        out.setdefault(ln.rank_key, []).append(ln)
    return out


def log_inputs(log: BootLog) -> dict:
    """The measured inputs a log carries (GiB as printed), or an empty dict."""
    out: dict = {}
    begins = _per_rank(log.of("load_begin"))
    ends = _per_rank(log.of("load_end"))
    if begins:
        out["pre_model_load_gib"] = min(lines[0].values[0] for lines in begins.values())
    if ends:
        out["avail_after_weights_gib"] = min(lines[-1].values[2] for lines in ends.values())
        out["weights_mem_usage_gib"] = max(sum(ln.values[3] for ln in lines) for lines in ends.values())
        out["draft_loaded"] = any(len(lines) > 1 for lines in ends.values())
    auto = log.of("hicache_auto")
    if auto:
        out["hicache_ratio_logged"] = min(ln.values[1] for ln in auto)
        out["hicache_budget_gib"] = min(ln.values[2] for ln in auto)
        out["ranks_per_host"] = auto[0].values[4]
    return out


def _plans(profile: Profile, inputs: dict) -> tuple[list[Plan], list[str]]:
    """The plan over the interval of the log's measured inputs (one plan without them)."""
    notes: list[str] = []
    overrides: dict = {}
    if "hicache_ratio_logged" in inputs:
        notes.append("HiCache ratio auto-sized by the server: its printed ratio (3 decimals) is used")
    ratios = [None]
    if "hicache_ratio_logged" in inputs:
        r = inputs["hicache_ratio_logged"]
        ratios = [max(r - 0.0005, 1e-9), r, r + 0.0005]
    if "pre_model_load_gib" in inputs and "avail_after_weights_gib" in inputs:
        pre, avail = inputs["pre_model_load_gib"], inputs["avail_after_weights_gib"]
        notes.append("pre_model_load_bytes and weights_bytes (target + draft) read off the log "
                     "('Load weight begin/end'), each to 0.01 GiB")
        pts = []
        for i in range(SAMPLES):
            t = i / (SAMPLES - 1)
            p_gib = pre - HALF_CENT + 2 * HALF_CENT * t
            w_gib = (pre - avail) + 2 * HALF_CENT - 4 * HALF_CENT * t
            pts.append((int(p_gib * GiB), int(w_gib * GiB)))
        base = profile.model_copy(update={"available_bytes": None})
    else:
        notes.append("the log has no 'Load weight' lines: the profile's own memory inputs are used")
        # a boot log is checked against stated or logged memory, never against glm-kv's weight estimate
        stated = profile.available_bytes is not None or profile.weights_bytes is not None
        pts, base = [None], (profile if stated else profile.model_copy(update={"weights_estimate": False}))
    plans = []
    for ratio in ratios:
        prof = base if ratio is None else base.model_copy(update={"hicache_ratio": ratio, "hicache_size": 0})
        if ratio is not None:   # an explicit ratio: mark it as given
            prof = Profile.model_validate({**prof.model_dump(), "hicache_ratio": ratio})
        args = resolve(prof)
        for pt in pts:
            if pt is not None:
                overrides = dict(pre_model_load_bytes=pt[0], pre_source="boot-log", target_weights_bytes=pt[1],
                                 draft_weights_bytes=0, weights_source="boot-log")
            plans.append(plan_from_args(args, overrides or None))
    return plans, notes


def swa_device_bytes(pl: Plan) -> int:
    """SWAKVPool's sliding-window sub-pool (an ``MHATokenToKVPool``: its tokens + one page of rows, every SWA
    layer's K + V); a TypeError (None) where the plan has no SWA pool, which ``safe`` reads as absent."""
    return (pl.capacity.swa_max_total_num_tokens + pl.token.page_size) * pl.token.swa_kv_bytes_per_token


def _range(values: list) -> tuple:
    vals = [v for v in values if v is not None]
    return (min(vals), max(vals)) if vals else (None, None)


def verify_boot_log(profile: Profile, log: BootLog) -> VerifyResult:
    """Predicted vs logged for every recognised line; ok when all checked lines agree.

    Raises ``NothingToVerify`` when the log states no pool (only inputs, or nothing SGLang printed).
    """
    found = {k: len(log.of(k)) for k in LOOKED_FOR}
    if not any(found[k] for k in POOL_KINDS):
        raise NothingToVerify(found, f"{log.source} has no line that states a pool "
                                     f"({log.total_lines} lines read)")
    inputs = log_inputs(log)
    plans, notes = _plans(profile, inputs)
    nominal = plans[len(plans) // 2]
    if any(pl.capacity is None for pl in plans):
        raise ProfileError("--boot-log", "the log has no 'Load weight begin/end' lines and the profile gives "
                                         "neither available_bytes nor weights_bytes: nothing to size from")
    tok, req = nominal.token, nominal.request
    auto_plans: list[Plan] = []
    if "hicache_ratio_logged" in inputs and profile.host_memory_bytes is not None:
        auto_plans, _ = _plans(profile, {k: v for k, v in inputs.items() if not k.startswith("hicache")})

    def safe(fn, pl):
        """The plan's value, or None where the plan has no such pool (e.g. HiCache off in the profile)."""
        try:
            return fn(pl)
        except (TypeError, AttributeError):
            return None

    def rng(fn):
        return _range([safe(fn, pl) for pl in plans])

    rows: list[VerifyRow] = []

    def check(ln, quantity, fn, logged, unit, tol=0.0, note=""):
        lo, hi = rng(fn)
        pred = safe(fn, nominal)
        if lo is None or pred is None:  # the log shows a pool the profile does not have: a disagreement
            rows.append(VerifyRow(ln.line_no, ln.rank_label, quantity, None, None, logged, unit, False,
                                  note or "the plan has no such pool: does the profile match the server "
                                          "(e.g. enable_hierarchical_cache)?"))
            return
        ok = lo - tol - 1e-9 <= logged <= hi + tol + 1e-9
        if isinstance(pred, float):
            pred = round(pred, 4)
            lo, hi = round(lo, 4), round(hi, 4)
        rows.append(VerifyRow(ln.line_no, ln.rank_label, quantity, pred, None if lo == hi else (lo, hi),
                              logged, unit, ok, note))

    def info(ln, quantity, logged, unit, note):
        rows.append(VerifyRow(ln.line_no, ln.rank_label, quantity, None, None, logged, unit, None, note))

    cap = lambda pl: pl.capacity  # noqa: E731
    page = tok.page_size
    kv_dtype = {"bfloat16": "torch.bfloat16", "fp8_e4m3": "torch.float8_e4m3fn"}.get(tok.kv_cache_dtype,
                                                                                  tok.kv_cache_dtype)
    kv_seen: dict = {}
    begins_seen: dict = {}
    for ln in log.lines:
        v = ln.values
        k = ln.kind
        if k == "load_begin":
            first = begins_seen.setdefault(ln.rank_key, ln.line_no) == ln.line_no
            info(ln, "free before weights" + (" (input)" if first else " (draft)"), v[0], "GiB",
                 "pre_model_load_bytes: min over ranks" if first else "informational")
        elif k == "load_end":
            info(ln, f"weights loaded: {v[1]} (input)", v[3], "GiB",
                 "free after the last load (min over ranks) gives the weights")
        elif k == "memory_baseline":
            info(ln, "CUDA context + NCCL before weights", v[0], "GiB", "informational")
        elif k == "mm_reserve":
            check(ln, "multimodal reservation", lambda pl: pl.memory.mm_reservation_bytes / GiB, v[0], "GiB", HALF_CENT)
        elif k == "mamba_cache":
            check(ln, "max_mamba_cache_size", lambda pl: cap(pl).max_mamba_cache_size, v[0], "slots")
            n_lin = req.num_linear_layers
            check(ln, "conv_state size", lambda pl: (cap(pl).max_mamba_cache_size + 1) * pl.request.conv_state_bytes
                  * n_lin / GiB, v[1], "GiB", HALF_CENT)
            check(ln, "ssm_state size", lambda pl: (cap(pl).max_mamba_cache_size + 1)
                  * pl.request.temporal_state_bytes * n_lin / GiB, v[2], "GiB", HALF_CENT)
        elif k == "kv_cache" and v[0] == "SWA":   # hybrid SWA (issue 32): SWAKVPool's sliding-window sub-pool
            rows.append(VerifyRow(ln.line_no, ln.rank_label, "SWA KV Cache dtype", kv_dtype, None, v[1], "",
                                  v[1] == kv_dtype))
            check(ln, "SWA KV Cache #tokens", lambda pl: cap(pl).swa_max_total_num_tokens, v[2], "tokens", page)
            check(ln, "SWA KV Cache size", lambda pl: swa_device_bytes(pl) / GiB, v[3], "GiB",
                  (HALF_CENT if v[4] is None else 2 * HALF_CENT) + page * tok.cell_size_bytes / GiB)
        elif k == "kv_cache":
            nth = kv_seen.get(ln.rank_key, 0)
            kv_seen[ln.rank_key] = nth + 1
            layers = tok.num_full_layers if nth == 0 else max(tok.draft_layers, 1)
            what = "KV Cache" if nth == 0 else "draft KV Cache"
            rows.append(VerifyRow(ln.line_no, ln.rank_label, f"{what} dtype", kv_dtype, None, v[1], "",
                                  v[1] == kv_dtype))
            check(ln, f"{what} #tokens", lambda pl: cap(pl).max_total_num_tokens, v[2], "tokens", page)
            check(ln, f"{what} size", lambda pl, n=layers: device_kv_bytes(cap(pl).max_total_num_tokens, pl.token, n)
                  / GiB, v[3], "GiB", (HALF_CENT if v[4] is None else 2 * HALF_CENT)   # K + V: two roundings
                  + page * tok.cell_size_bytes / GiB)
        elif k == "mrr_capped":
            check(ln, "max_running_requests capped by mamba", lambda pl: cap(pl).max_running_requests_per_worker
                  if cap(pl).binding_limit == "mamba" else -1, v[0], "requests")
            check(ln, "slots per request", lambda pl: pl.request.slots_per_request, v[2], "slots")
        elif k == "mrr_reduced":
            check(ln, "max_running_requests (reduced)", lambda pl: cap(pl).max_running_requests_per_worker,
                  v[1], "requests")
        elif k == "scheduler":
            check(ln, "max_total_num_tokens", lambda pl: cap(pl).max_total_num_tokens, v[0], "tokens", page)
            check(ln, "max_running_requests (per worker)", lambda pl: cap(pl).max_running_requests_per_worker,
                  v[3], "requests")
            check(ln, "context_len", lambda pl: pl.args.context_length, v[4], "tokens")
            info(ln, "available_gpu_mem after graphs", v[5], "GiB", "informational (CUDA graphs not modelled)")
        elif k == "pool_end":
            info(ln, "free after the pools", v[0], "GiB", "informational")
        elif k == "hicache_auto":
            if auto_plans:   # the profile states the host RAM: predict the auto-sized ratio too
                lo, hi = _range([pl.host.hicache_ratio for pl in auto_plans])
                rows.append(VerifyRow(ln.line_no, ln.rank_label, "HiCache ratio (auto-sized)", round(lo, 4),
                                      (round(lo, 4), round(hi, 4)) if hi - lo > 5e-5 else None, v[1], "",
                                      lo - 0.0005 - 1e-9 <= v[1] <= hi + 0.0005 + 1e-9,
                                      "then used as the ratio for the host pools"))
                budget = host_budget(profile.host_memory_bytes, host_ranks_per_host(profile),
                                     host_memory_fraction(profile)) / GiB
                rows.append(VerifyRow(ln.line_no, ln.rank_label, "HiCache host budget per rank", round(budget, 3),
                                      None, v[2], "GiB", abs(budget - v[2]) <= 0.05 + 1e-9))
            else:
                info(ln, "HiCache ratio (auto-sized)", v[1], "", "used as the HiCache ratio")
        elif k == "swa_split":   # the ratio path's split (issue 32)
            check(ln, "full pool tokens", lambda pl: cap(pl).full_max_total_num_tokens, v[0], "tokens", page)
            check(ln, "SWA pool tokens", lambda pl: cap(pl).swa_max_total_num_tokens, v[1], "tokens", page)
        elif k == "swa_pool":   # SWAKVPool: both sub-pools' K + V
            check(ln, "SWAKVPool size", lambda pl: (device_kv_bytes(cap(pl).max_total_num_tokens, pl.token,
                                                                    pl.token.num_full_layers)
                                                    + swa_device_bytes(pl)) / GiB, v[0], "GiB",
                  HALF_CENT + page * tok.cell_size_bytes / GiB)
            check(ln, "SWAKVPool swa size", lambda pl: cap(pl).swa_max_total_num_tokens, v[1], "tokens", page)
            check(ln, "SWAKVPool full size", lambda pl: cap(pl).full_max_total_num_tokens, v[2], "tokens", page)
        elif k == "host_kv" and v[0] == "swa":   # _SwaStrategy's SWA host pool (issue 32)
            check(ln, "host SWA tokens", lambda pl: pl.host.swa_tokens, v[1], "tokens",
                  page if "hicache_ratio_logged" in inputs else 0)
            check(ln, "host SWA size", lambda pl: pl.host.swa_bytes / GB, v[2], "GB", HALF_CENT)
        elif k == "host_kv":
            check(ln, "host KV tokens", lambda pl: pl.host.kv_tokens, v[1], "tokens",
                  page if "hicache_ratio_logged" in inputs else 0)
            check(ln, "host KV size", lambda pl: pl.host.kv_bytes / GB, v[2], "GB", HALF_CENT)
            if v[5] is not None:
                check(ln, "host KV layers", lambda pl: pl.host.kv_layers, v[5], "layers")
        elif k == "host_indexer":
            check(ln, "host indexer size", lambda pl: pl.host.indexer_logged_bytes / GB, v[0], "GB", HALF_CENT)
        elif k == "host_mamba":
            check(ln, "host mamba slots", lambda pl: pl.host.mamba_slots, v[1], "slots")
            check(ln, "host mamba size", lambda pl: pl.host.mamba_bytes / GB, v[0], "GB", HALF_CENT)
    checked = [r for r in rows if r.ok is not None]
    if not checked:
        raise NothingToVerify(found, "no line of the log can be checked against a plan (only inputs found)")
    rows = [r if r.ok is not False or r.note else
            VerifyRow(r.log_line, r.rank, r.quantity, r.predicted, r.predicted_range, r.logged, r.unit, r.ok,
                      explain(r, nominal)) for r in rows]
    checked = [r for r in rows if r.ok is not None]
    ok = all(r.ok for r in checked)
    notes.append(f"compared {len(checked)} quantities: {sum(1 for r in checked if r.ok)} agree, "
                 f"{sum(1 for r in checked if not r.ok)} disagree")
    shown_inputs = {k: v for k, v in inputs.items()}
    if nominal.memory is not None:
        shown_inputs["pre_model_load_bytes"] = nominal.memory.pre_model_load_bytes
        shown_inputs["weights_bytes"] = nominal.memory.weights_bytes
        shown_inputs["mem_fraction_static"] = nominal.memory.mem_fraction_static
    return VerifyResult(ok, tuple(rows), shown_inputs, nominal, tuple(notes))
