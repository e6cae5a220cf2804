"""Advice: the SGLang 0.5.23 flags that serve a workload on a deployment, and what they leave over.

A workload is N concurrent requests (global) of T resident tokens, plus P tokens of prefix the
radix cache should keep. On each DP-attention worker SGLang runs at most
``min(requested, tokens // 2, slots // slots_per_request)`` requests (``resolve_max_num_reqs``),
each holding ceil(T / page_size) pages. The one free choice is how the rest is split between the
mamba pool (K state slots) and the token pool: ``--mamba-full-memory-ratio`` (or a pinned
``--max-mamba-cache-size``). Every candidate split is sized by the one capacity kernel
(``capacity.pool_sizes``); this module only chooses among them, then re-plans the chosen flags
through ``plan.compute_plan`` exactly as ``glm-kv plan --sglang-args`` would.

The split chosen maximises the requests of this workload's size that fit at once,
``served = min(K // slots_per_request, (tokens - P) // paged(T), tokens // 2)``: the largest
workload at this context, and the one that leaves the radix cache headroom in both currencies
(tokens and state slots) in the workload's own mix.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import ProfileError
from ..inputs.launch import parse_launch_command
from ..inputs.profile import Profile, make_profile
from ..inputs.workload_spec import WorkloadSpec
from ..units import GiB
from .capacity import pool_sizes, swa_fixed_tokens, swa_pool_tokens, swa_request_tokens
from .host import HICACHE_HOST_MEMORY_RESERVE_BYTES, host_budget, host_memory_fraction
from .host import ranks_per_host as host_ranks_per_host
from .plan import Plan, compute_plan, swa_chunk
from .request import mamba_tracking_slots

ENTRY = "python -m sglang.launch_server"
DEFAULT_RATIO = 0.9              # SGLang 0.5.23's --mamba-full-memory-ratio default
GRID_POINTS_PER_SLOT = 4         # grid density in the mamba share: several points per state slot


def field_max(name: str) -> float:
    """The largest value the profile accepts for a field (its ``le``), so advice stays valid input."""
    for m in Profile.model_fields[name].metadata:
        if getattr(m, "le", None) is not None:
            return float(m.le)
    return math.inf


def paged(tokens: int, page_size: int) -> int:
    """Tokens a request of ``tokens`` occupies: whole pages (the allocator hands out pages)."""
    return -(-tokens // page_size) * page_size


def resident_slots_per_request(plan: Plan) -> int:
    """State slots a running request actually holds: its own + the extra_buffer tracking slots.

    ``get_mamba_tracking_slots``: 2 with overlap, 1 without or lazy (lazy adds the second later);
    none without extra_buffer. The rest of ``slots_per_request`` is reservation, used meanwhile by
    the radix cache's mamba checkpoints.
    """
    strategy = plan.request.mamba_strategy
    if plan.request.slots_per_request == 0:   # no state layers: no slot held
        return 0
    return 1 + mamba_tracking_slots(extra_buffer=strategy in ("extra_buffer", "extra_buffer_lazy"),
                                    overlap=not plan.profile.disable_overlap_schedule,
                                    lazy=strategy == "extra_buffer_lazy")


@dataclass(frozen=True)
class Candidates:
    """Every split the flag can reach for one deployment, sized by the kernel (arrays, one per split)."""

    knob: str                    # "mamba_full_memory_ratio", "max_mamba_cache_size" or "none"
    values: np.ndarray           # the flag's value per split
    slots: np.ndarray            # K per worker
    tokens: np.ndarray           # max_total_num_tokens per worker
    served: np.ndarray           # requests of the workload's size that fit at once (-1: refused)
    error: np.ndarray            # kernel refusal code (0: fine)
    swa: np.ndarray | None = None   # a hybrid-SWA model's SWA pool tokens per split (issue 32)


def _rest_gib(plan: Plan) -> float:
    """SGLang's float rest: available_bytes / GiB as given, else the plan's derived bytes."""
    if plan.capacity is None:
        raise ProfileError("available_bytes", "advise needs the memory left for the pools: give "
                                              "available_bytes, or weights_bytes with gpu, in the profile")
    if plan.profile.available_bytes is None:
        rest = plan.memory.rest_gib
        if rest is not None:
            return rest
    return plan.capacity.available_bytes / GiB


def _kernel(plan: Plan, n: int, *, ratio=np.nan, max_mamba_cache_size=np.nan) -> dict:
    p = plan.profile
    if plan.request.state_slot_bytes == 0:
        # no state layers: no mamba pool, no split; the plan's token pool (attention_capacity_ledger, at the
        # plan's own --max-running-requests) is the one point
        cap = plan.capacity
        return {"max_mamba_cache_size": np.int64(0), "max_total_num_tokens": np.int64(cap.max_total_num_tokens),
                "error": np.int64(0)}
    return pool_sizes(
        _rest_gib(plan), slot=plan.request.budget_slot_bytes, slots_per_request=plan.request.slots_per_request,
        cell_size=plan.token.cell_size_bytes, page_size=plan.token.page_size,
        draft_tokens=plan.args.verify_state_draft_tokens,
        attn_dp=plan.parallel.attn_dp_size, mamba_full_memory_ratio=ratio,
        max_mamba_cache_size=max_mamba_cache_size,
        max_total_tokens=np.nan if p.max_total_tokens is None else float(p.max_total_tokens),
        radix_off=bool(p.disable_radix_cache), requests_per_worker=n, has_requests=True,
        context_length=plan.args.context_length)


def served_requests(slots, tokens, *, slots_per_request: int, tokens_per_request: int, prefix_tokens: int,
                    swa_tokens=None, swa_per_request: int = 0, swa_fixed: int = 0):
    """Requests of ``tokens_per_request`` (paged) that fit at once beside ``prefix_tokens`` of cache.

    A model without state layers (``slots_per_request`` 0: DeepSeek-V3.2, GLM-5.1) has no state slot
    to run out of; only its tokens count. A hybrid-SWA model's SWA pool (``swa_tokens``, issue 32) holds
    each running request's last ``swa_per_request`` tokens (``swa_terms``) beside ``swa_fixed``."""
    slots, tokens = np.asarray(slots), np.asarray(tokens)
    by_tokens = np.maximum(tokens - prefix_tokens, 0) // tokens_per_request
    served = np.minimum(by_tokens, tokens // 2)
    if swa_tokens is not None:
        served = np.minimum(served, np.maximum(np.asarray(swa_tokens) - swa_fixed, 0) // swa_per_request)
    return served if slots_per_request == 0 else np.minimum(slots // slots_per_request, served)


def swa_terms(plan: Plan, t: int) -> dict:
    """What the SWA pool must hold per running request and beside them, counted as SGLang's request cap
    counts it (``compute_swa_request_cap``): a request holds its paged tokens up to the window, the eviction
    interval, a padding page and one decode step's allocation; beside them the prefill chunks in flight and a
    page (a decode server: its pre-allocated rows). Empty for a model without an SWA pool."""
    tok, p, args = plan.token, plan.profile, plan.args
    if tok.swa_kv_bytes_per_token is None:
        return {}
    overlap = not p.disable_overlap_schedule
    per = swa_request_tokens(page_size=tok.page_size, window=tok.sliding_window_size, draft_tokens=args.draft_tokens,
                             overlap=overlap)
    fixed = swa_fixed_tokens(page_size=tok.page_size, window=tok.sliding_window_size, chunked_prefill_size=swa_chunk(args),
                             overlap=overlap, decode_server=p.disaggregation_mode == "decode",
                             decode_extra_slots=args.decode_extra_slots)
    return {"swa_per_request": min(per, t), "swa_fixed": fixed}


SWA_RATIO_STEP = 0.01   # the --swa-full-tokens-ratio grid: every hundredth up to the flag's bound 1.0


def _swa_candidates(plan: Plan) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ratios, full tokens, SWA tokens, refusal) of every --swa-full-tokens-ratio on the grid, sized as
    ``ledgers.capacity.swa_capacity_ledger`` sizes the ratio path (SGLang's float cell, page-aligned, a smaller
    --max-total-tokens re-deriving both pools, an SWA pool that admits no request refused)."""
    tok, cap, p = plan.token, plan.capacity, plan.profile
    top = field_max("swa_full_tokens_ratio")
    ratios = np.round(np.arange(1, int(round(top / SWA_RATIO_STEP)) + 1) * SWA_RATIO_STEP, 6)
    full, swa, err = [], [], []
    for r in ratios:
        cell = tok.kv_bytes_per_token + float(r) * tok.swa_kv_bytes_per_token + tok.dflash_draft_bytes_per_token
        n = int(cap.available_bytes // cell) // tok.page_size * tok.page_size
        if p.max_total_tokens is not None and p.max_total_tokens < n:
            n = p.max_total_tokens // tok.page_size * tok.page_size
        try:
            w = swa_pool_tokens(n, float(r), tok.page_size, tok.sliding_window_size) if n > 0 else 0
            e = 0 if n > 0 else 6
        except ProfileError:
            w, e = 0, 7
        full.append(n), swa.append(w), err.append(e)
    return ratios, np.array(full, dtype=np.int64), np.array(swa, dtype=np.int64), np.array(err, dtype=np.int64)


def candidates(plan: Plan, n: int, t: int, prefix: int) -> Candidates:
    """The splits one flag reaches: a grid uniform in the mamba share r / (1 + r), fine enough to
    hit every slot count, or every pinned slot count; one point when the radix cache is off, or when the
    model has no state layers (no mamba pool: every byte is the token pool's, nothing to split)."""
    # a slot's cost to the mamba budget (with its replay ring under --enable-linear-replayssm-spec),
    # as the plan sizes it (the ring-less slot gave other pools than SGLang: test_advise, replayssm)
    p, slot, attn_dp = plan.profile, plan.request.budget_slot_bytes, plan.parallel.attn_dp_size
    rest_bytes = _rest_gib(plan) * GiB
    swa_kw = swa_terms(plan, t)
    if swa_kw and plan.capacity.swa_max_total_num_tokens != swa_pool_tokens_or_none(plan):
        swa_kw = {**swa_kw, "swa_tokens": plan.capacity.swa_max_total_num_tokens}   # the request-cap pool: one point
        out = _kernel(plan, n)
        values = np.array([np.nan])
        return _candidates("none", values, out, t, prefix, plan, swa_kw)
    if swa_kw:   # hybrid SWA on the ratio path: --swa-full-tokens-ratio splits the rest between the two pools
        values, full, swa, err = _swa_candidates(plan)
        out = {"max_mamba_cache_size": np.int64(0), "max_total_num_tokens": full, "error": err}
        return _candidates("swa_full_tokens_ratio", values, out, t, prefix, plan, {**swa_kw, "swa_tokens": swa})
    if slot == 0 or (p.max_mamba_cache_size is None and p.disable_radix_cache):
        knob, values = "none", np.array([np.nan])   # the pool holds exactly the requests, or there is none
        out = _kernel(plan, n)
    elif p.max_mamba_cache_size is not None:      # pinned: SGLang ignores the ratio (radix on or off)
        knob = "max_mamba_cache_size"
        top = min(int(rest_bytes // slot), int(field_max("max_mamba_cache_size")) // attn_dp)
        per_worker = np.arange(1, max(top, 1) + 1, dtype=np.int64)
        values = per_worker * attn_dp
        out = _kernel(plan, n, max_mamba_cache_size=values.astype(np.float64))
    else:
        knob = "mamba_full_memory_ratio"
        points = GRID_POINTS_PER_SLOT * int(rest_bytes // slot) + 64
        share = np.arange(1, points, dtype=np.float64) / points
        values = share / (1 - share)
        top = field_max("mamba_full_memory_ratio")
        values = values[values < top]
        if math.isfinite(top):
            # the largest ratio the flag accepts is a split of its own: the grid in the share
            # stops short of it when the pool holds few slots (issue 19: seed 424242 served 60
            # requests at ratio 1,000 where the grid's best served 59)
            values = np.append(values, top)
        out = _kernel(plan, n, ratio=values)
    return _candidates(knob, values, out, t, prefix, plan, {})


def swa_pool_tokens_or_none(plan: Plan) -> int | None:
    """The SWA pool the ratio path gives the plan's full pool (None without one): a plan whose SWA pool is
    another size was sized from the request cap (``SWARequestCapPoolConfigurator``)."""
    tok, cap = plan.token, plan.capacity
    if tok.swa_kv_bytes_per_token is None:
        return None
    try:
        return swa_pool_tokens(cap.full_max_total_num_tokens, tok.swa_full_tokens_ratio, tok.page_size,
                               tok.sliding_window_size)
    except ProfileError:
        return None


def _candidates(knob: str, values: np.ndarray, out: dict, t: int, prefix: int, plan: Plan,
                swa_kw: dict) -> Candidates:
    err = np.broadcast_to(out["error"], values.shape)
    slots = np.broadcast_to(out["max_mamba_cache_size"], values.shape)
    tokens = np.broadcast_to(out["max_total_num_tokens"], values.shape)
    swa = None if not swa_kw else np.broadcast_to(swa_kw["swa_tokens"], values.shape)
    served = np.where(err == 0, served_requests(slots, tokens, slots_per_request=plan.request.slots_per_request,
                                                tokens_per_request=t, prefix_tokens=prefix,
                                                **{**swa_kw, **({"swa_tokens": swa} if swa_kw else {})}), -1)
    return Candidates(knob, values, slots, tokens, served, err, swa)


def _roundest(lo: float, hi: float) -> float:
    """The value in [lo, hi] with the fewest decimals, nearest the middle (robust to a rest that differs)."""
    mid = (lo + hi) / 2
    for digits in range(0, 9):
        scale = 10 ** digits
        a, b = math.ceil(lo * scale - 1e-9), math.floor(hi * scale + 1e-9)
        if a <= b:
            m = min(max(round(mid * scale), a), b)
            return round(m / scale, digits)
    return mid


def _pick(c: Candidates) -> tuple[int, float | int | None]:
    """Index of the best split and the flag value for it (None: nothing to set)."""
    best = int(c.served.max())
    idx = np.flatnonzero(c.served == best)
    lo, hi = int(idx[0]), int(idx[-1])   # served is unimodal in K: the best splits are contiguous
    if c.knob == "none":
        return lo, None
    if c.knob == "max_mamba_cache_size":
        mid = (lo + hi) // 2
        return mid, int(c.values[mid])
    if c.knob == "swa_full_tokens_ratio":   # the grid's own hundredths: the roundest of the best, nearest the middle
        mid = (lo + hi) // 2
        return mid, float(c.values[mid])
    return (lo + hi) // 2, _roundest(float(c.values[lo]), float(c.values[hi]))


@dataclass(frozen=True)
class HostAdvice:
    ranks_per_host: int
    budget_bytes_per_rank: int
    hicache_ratio: float | None          # None: not even a tenth of the device pools fits
    kv_tokens: int = 0
    mamba_slots: int = 0
    total_bytes: int = 0
    prefixes_by_kv: int = 0              # cached prefixes of the workload's length the host KV holds
    prefixes_by_mamba: int = 0           # ... and the host mamba slots hold (one checkpoint each)
    binding: str = ""                    # "kv" or "mamba": which host pool runs out of prefixes first


@dataclass(frozen=True)
class LargestFitting:
    concurrent_requests: int             # global, at the workload's tokens per request
    tokens_per_request: int              # at the workload's concurrency (0: none fits)
    binding_resource: str


@dataclass(frozen=True)
class Advice:
    workload: WorkloadSpec
    fits: bool
    flags: tuple[str, ...]
    plan: Plan                           # the plan of the profile with the flags applied
    default_plan: Plan                   # the profile as given, with the workload's max_running_requests
    knob: str
    requests_per_worker: int
    tokens_per_request_paged: int
    tokens_needed_per_worker: int        # requests x paged tokens + prefix_cache_tokens
    served_per_worker: int               # requests of this size the advised pools hold at once
    served_per_worker_default: int       # ... at the profile's own split
    served_per_worker_p50: int           # ... when requests hold the p50 instead
    binding_limit: str
    binding_resource: str                # what runs out first as concurrency grows: tokens / mamba / memory
    slots_reserved: int                  # requests x slots_per_request (what SGLang's cap counts)
    slots_resident: int                  # requests x slots a running request really holds
    token_headroom: int                  # tokens left for the radix cache beyond the running requests
    slot_headroom: int                   # state slots left for the radix cache's checkpoints
    state_bytes_needed: int
    token_bytes_needed: int
    largest_fitting: LargestFitting | None
    host: HostAdvice | None
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        """The advise contract: fits, flags, binding_limit, plan, largest_fitting (+ the details)."""
        lf = self.largest_fitting
        host = None
        if self.host is not None:
            host = {k: getattr(self.host, k) for k in HostAdvice.__dataclass_fields__}
        return {
            "fits": self.fits, "flags": list(self.flags), "binding_limit": self.binding_limit,
            "plan": self.plan.to_dict(),
            "largest_fitting": None if lf is None else {
                "concurrent_requests": lf.concurrent_requests, "tokens_per_request": lf.tokens_per_request,
                "binding_resource": lf.binding_resource},
            "workload": self.workload.model_dump(),
            "binding_resource": self.binding_resource, "knob": self.knob,
            "requests_per_worker": self.requests_per_worker,
            "tokens_per_request_paged": self.tokens_per_request_paged,
            "tokens_needed_per_worker": self.tokens_needed_per_worker,
            "served_per_worker": self.served_per_worker,
            "served_per_worker_default": self.served_per_worker_default,
            "served_per_worker_p50": self.served_per_worker_p50,
            "slots_reserved": self.slots_reserved, "slots_resident": self.slots_resident,
            "token_headroom": self.token_headroom, "slot_headroom": self.slot_headroom,
            "state_bytes_needed": self.state_bytes_needed, "token_bytes_needed": self.token_bytes_needed,
            "host": host, "notes": list(self.notes),
        }


def with_flags(profile: Profile, flags: tuple[str, ...] | list[str]) -> Profile:
    """The profile as ``glm-kv plan --profile P --sglang-args "<launch> FLAGS"`` reads it."""
    fields, _ = parse_launch_command(" ".join([ENTRY, *flags]))
    return make_profile({**profile.model_dump(), **fields})


def _dtype_options(profile: Profile, plan: Plan) -> list[tuple[list[str], Profile]]:
    """The profile's own KV dtype first; fp8 after it where bf16 is what the deployment resolves to.

    Each option is (the flags that select it, the profile with them). Backends the user chose for
    bf16 are kept when fp8 accepts them, else SGLang's fp8 defaults are named in the flags.
    """
    out: list[tuple[list[str], Profile]] = [([], profile)]
    if plan.token.kv_cache_dtype == "bfloat16":
        for keep_backends in (True, False):
            data = {**profile.model_dump(), "kv_cache_dtype": "fp8_e4m3"}
            if not keep_backends:
                data.update(dsa_prefill_backend=None, dsa_decode_backend=None)
            try:
                p = make_profile(data)
                args = compute_plan(p).args
            except ProfileError:
                continue
            flags = ["--kv-cache-dtype fp8_e4m3"]
            if not keep_backends:
                flags += [f"--dsa-prefill-backend {args.dsa_prefill_backend}",
                          f"--dsa-decode-backend {args.dsa_decode_backend}"]
            out.append((flags, p))
            break
    return out


def _flags(knob: str, value, mrr_global: int, dtype_flags: list[str]) -> list[str]:
    flags = []
    if knob == "mamba_full_memory_ratio":
        flags.append(f"--mamba-full-memory-ratio {value}")
    elif knob == "swa_full_tokens_ratio":
        flags.append(f"--swa-full-tokens-ratio {value}")
    elif knob == "max_mamba_cache_size":
        flags.append(f"--max-mamba-cache-size {value}")
    flags.append(f"--max-running-requests {mrr_global}")
    return flags + dtype_flags


def _host_total(h) -> int:
    return h.total_bytes if getattr(h, "total_bytes", None) is not None else h.total_host_bytes


def _host_advice(profile: Profile, plan: Plan, host_memory_bytes: int, t: int) -> tuple[HostAdvice | None, list[str]]:
    """``--hicache-ratio`` as large as the host budget allows (the host ledger sizes every candidate).

    The budget is what SGLang's auto-sizing allows a rank (RAM less its reserve, split over the
    machine's ranks, times --hicache-host-memory-fraction), without auto-sizing's 2.0 cap.
    """
    ranks = host_ranks_per_host(profile)   # SGLang's launch ranks per node unless the profile states them
    budget = host_budget(host_memory_bytes, ranks, host_memory_fraction(profile))
    if budget <= 0:
        return HostAdvice(ranks, budget, None), [
            f"host_memory_bytes leaves nothing for HiCache after SGLang's {HICACHE_HOST_MEMORY_RESERVE_BYTES:,} B reserve"]

    def host_at(ratio: float):
        p = make_profile({**plan.profile.model_dump(), "enable_hierarchical_cache": True,
                          "hicache_ratio": ratio, "hicache_size": 0})
        return compute_plan(p).host

    per_unit = _host_total(host_at(1.0))
    ratio = min(math.floor(budget / per_unit * 100) / 100, field_max("hicache_ratio"))
    while ratio >= 0.1 and _host_total(host_at(ratio)) > budget:
        ratio = round(ratio - 0.01, 2)
    if ratio < 0.1:
        return HostAdvice(ranks, budget, None), [
            f"host memory per rank ({budget:,} B) holds less than a tenth of the device pools: HiCache not advised"]
    h = host_at(ratio)
    kv_tokens, slots = h.kv_host_tokens, h.mamba_host_slots
    by_kv, by_mamba = kv_tokens // t, slots
    notes = []
    if plan.request.slots_per_request == 0:   # no state layers: the host holds KV only, KV binds
        return HostAdvice(ranks, budget, ratio, kv_tokens, slots, _host_total(h), int(by_kv), 0, "kv"), notes
    if ratio < 1:
        notes.append(f"--hicache-ratio {ratio} is below 1: SGLang warns that a host pool smaller than the "
                     "device pool reduces the L2 hit rate")
    return HostAdvice(ranks, budget, ratio, kv_tokens, slots, _host_total(h), int(by_kv), int(by_mamba),
                      "kv" if by_kv < by_mamba else "mamba"), notes


def _binding(slots_term: float, token_term: int) -> str:
    if slots_term < token_term:
        return "mamba"
    if token_term < slots_term:
        return "tokens"
    return "memory"


def _plan_at(profile: Profile, max_running_requests: int) -> Plan | None:
    """The plan with this global --max-running-requests; None where SGLang refuses to size it
    (a pool pinned to the requests that does not fit).

    A pinned --max-mamba-cache-size is advise's own knob, not a constraint: where the count refuses the
    profile's pin (its slots leave no tokens), the plan at a smaller pin SGLang accepts stands in, since
    the candidates scan every pin from the same rest. (Seed 1873192043: the pin 781 refused 80 requests
    under EAGLE, so advise stopped at 79 where the pin 100 serves 111.)"""
    fields = {**profile.model_dump(), "max_running_requests": max_running_requests}
    pin = fields.get("max_mamba_cache_size")
    pins = [pin] if pin is None else [pin] + [1 << j for j in range(pin.bit_length()) if (1 << j) < pin]
    for k in pins:
        try:
            return compute_plan(make_profile({**fields, "max_mamba_cache_size": k}))
        except ProfileError:
            continue
    return None


def _largest_count(prof: Profile, start: int, n: int, attn_dp: int, t: int, prefix: int):
    """The most requests per worker m < n some split serves at ``--max-running-requests m x attn_dp``,
    from ``start`` (a count known to be served), and (candidates, index, value) of the split at m
    (None when m is 0).

    A smaller --max-running-requests can leave a larger rest (SGLang's default mem_fraction_static
    reserves CUDA-graph memory per request; under MTP the verify scratch holds min(m, K // spr) + 1
    slots): walk up while it still fits.
    """
    m, found = start, None
    while m + 1 < n:
        plan_m = _plan_at(prof, (m + 1) * attn_dp)
        if plan_m is None:
            break
        c_m = candidates(plan_m, m + 1, t, prefix)
        i_m, v_m = _pick(c_m)
        if c_m.served[i_m] < m + 1:
            break
        m, found = m + 1, (c_m, i_m, v_m)
    if found is None and m > 0:
        # choose the split again at the count the flags will carry (the rest and, under MTP,
        # the verify scratch depend on it)
        plan_m = _plan_at(prof, m * attn_dp)
        c_m = candidates(plan_m, m, t, prefix)
        found = (c_m, *_pick(c_m))
    return m, found


def advise(profile: Profile, workload: WorkloadSpec) -> Advice:
    """The flags that serve ``workload`` on ``profile``, checked by re-planning them."""
    base_plan = compute_plan(profile)
    _rest_gib(base_plan)  # refuses a profile without capacity, naming the field
    attn_dp = base_plan.parallel.attn_dp_size
    n = -(-workload.concurrent_requests // attn_dp)
    mrr_global = n * attn_dp
    prefix = workload.prefix_cache_tokens
    notes: list[str] = []
    if profile.disable_radix_cache and prefix:
        notes.append("prefix_cache_tokens: the radix cache is disabled in this profile, so nothing is "
                     "cached; the tokens are still kept free")

    tried = []
    for dtype_flags, prof in _dtype_options(profile, base_plan):
        plan_n = _plan_at(prof, mrr_global)
        if plan_n is None:   # SGLang refuses n requests outright (the pool is pinned to them)
            plan_n = compute_plan(make_profile({**prof.model_dump(), "max_running_requests": attn_dp}))
            t = paged(workload.sizing_tokens, plan_n.token.page_size)
            c = candidates(plan_n, 1, t, prefix)
            c = Candidates(c.knob, c.values, c.slots, c.tokens, np.full_like(c.served, -1), c.error)
        else:
            t = paged(workload.sizing_tokens, plan_n.token.page_size)
            c = candidates(plan_n, n, t, prefix)
        i, value = _pick(c)
        tried.append((dtype_flags, prof, plan_n, t, c, i, value))
        if c.served[i] >= n:
            break
    fits_any = [x for x in tried if x[4].served[x[5]] >= n]
    walk = None
    if fits_any:
        chosen = fits_any[0]
    else:
        # Not fitting, the count advised is the most requests m any dtype serves at
        # --max-running-requests m (its verify scratch and rest), not what each serves at n:
        # every dtype is walked, the profile's own kept on a tie. (Seed 1829838217: the pinned
        # pool refused n in both dtypes, the tie at -1 kept bf16, walked to 22 per worker where
        # fp8 serves 34.)
        walks = [(x, _largest_count(x[1], max(int(x[4].served[x[5]]), 0), n, attn_dp, x[3], prefix))
                 for x in tried]
        chosen, walk = max(walks, key=lambda w: w[1][0])
        if chosen[0]:
            notes.append(f"{' '.join(chosen[0])}: with the profile's own KV dtype at most "
                         f"{walks[0][1][0] * attn_dp} requests of this size fit, with it {walk[0] * attn_dp}")
    dtype_flags, prof, plan_n, t, c, i, value = chosen
    best = int(c.served[i])
    fits = best >= n
    spr = plan_n.request.slots_per_request
    if dtype_flags and fits:
        notes.append("--kv-cache-dtype fp8_e4m3: with bfloat16 KV no split of the memory serves this workload")

    largest = None
    if not fits:
        # concurrency at this context: the best split's count; context at this concurrency: the
        # most tokens any split leaves once n requests have their state slots
        ok = c.error == 0
        enough = ok & ((c.slots // spr >= n) if spr else True)
        ctx = 0
        if enough.any():
            most = int(np.max(np.where(enough, c.tokens, 0)))
            ctx = max(most - prefix, 0) // n // plan_n.token.page_size * plan_n.token.page_size
        state_alone = bool(enough.any())
        tokens_alone = bool((ok & (c.tokens >= n * t + prefix)).any())
        state_b = n * spr * plan_n.request.budget_slot_bytes   # with the replay ring, as the budget counts it
        token_b = (n * t + prefix) * plan_n.token.cell_size_bytes
        if state_alone and tokens_alone:
            resource = "memory"      # each fits alone, not both: the total is short, not the split
        elif state_alone:
            resource = "tokens"
        elif tokens_alone:
            resource = "mamba"
        else:
            resource = "mamba" if state_b >= token_b else "tokens"
        m, found = walk
        if found is not None:
            c, i, value = found
        largest = LargestFitting(m * attn_dp, int(ctx), resource)
        needs = f"state slots need {state_b:,} B per worker, tokens {token_b:,} B" if spr else \
            f"tokens need {token_b:,} B per worker; no state layers"
        notes.append(f"does not fit: at most {m * attn_dp} requests of {workload.sizing_tokens} tokens, "
                     f"or {n * attn_dp} requests of at most {ctx} tokens; binding: {resource} ({needs})")
        n_served = m
    else:
        n_served = n

    if n_served > 0 and c.knob == "swa_full_tokens_ratio" and prefix:
        notes.append(f"--swa-full-tokens-ratio {value}: the SWA pool is sized for the running requests' windows; "
                     "a cached prefix is reused only while its last window of sliding-window KV is still in it "
                     "(prefix_cache_tokens are counted in the full pool only)")
    if n_served > 0:
        flags = _flags(c.knob, value, n_served * attn_dp, dtype_flags)
        final = compute_plan(with_flags(profile, flags))
    else:
        flags = []
        final = plan_n
    cap = final.capacity
    host = None
    hm = workload.host_memory_bytes or profile.host_memory_bytes
    if hm and n_served > 0:
        if profile.disable_radix_cache:
            notes.append("host_memory_bytes: HiCache needs the radix cache (SGLang refuses both together)")
        else:
            host, host_notes = _host_advice(profile, final, hm, t)
            notes += host_notes
            if host.hicache_ratio is not None:
                flags += ["--enable-hierarchical-cache", f"--hicache-ratio {host.hicache_ratio}"]
                final = compute_plan(with_flags(profile, flags))
                cap = final.capacity

    # the check: the re-planned flags hold what the choice promised
    def swa_at(pl: Plan, tokens: int) -> dict:   # the SWA pool's terms (issue 32; empty without one)
        kw = swa_terms(pl, tokens)
        return {**kw, "swa_tokens": pl.capacity.swa_max_total_num_tokens} if kw else {}

    served_final = int(served_requests(cap.max_mamba_cache_size, cap.max_total_num_tokens, slots_per_request=spr,
                                       tokens_per_request=t, prefix_tokens=prefix, **swa_at(final, t)))
    if n_served > 0 and (served_final < n_served or cap.max_running_requests_per_worker < n_served):
        raise AssertionError(f"advise: the advised flags {flags} serve {served_final}, not {n_served}")

    default_c = _kernel(plan_n, n, ratio=prof.mamba_full_memory_ratio,
                        max_mamba_cache_size=np.nan if prof.max_mamba_cache_size is None
                        else float(prof.max_mamba_cache_size))
    served_default = -1 if int(default_c["error"]) else int(served_requests(
        default_c["max_mamba_cache_size"], default_c["max_total_num_tokens"], slots_per_request=spr,
        tokens_per_request=t, prefix_tokens=prefix, **swa_at(plan_n, t)))
    t50 = paged(workload.typical_tokens, final.token.page_size)
    served_p50 = int(served_requests(cap.max_mamba_cache_size, cap.max_total_num_tokens, slots_per_request=spr,
                                     tokens_per_request=t50, prefix_tokens=prefix, **swa_at(final, t50)))
    slots_term = cap.max_mamba_cache_size // spr if spr else math.inf   # no state layers: never the limit
    token_term = max(cap.max_total_num_tokens - prefix, 0) // t
    swa_kw = swa_at(final, t)
    swa_term = (max(swa_kw["swa_tokens"] - swa_kw["swa_fixed"], 0) // swa_kw["swa_per_request"]
                if swa_kw else math.inf)
    resident = resident_slots_per_request(final)
    running = min(n, n_served)
    binding_limit = cap.binding_limit if fits else (largest.binding_resource if largest else "memory")
    return Advice(
        workload=workload, fits=fits, flags=tuple(flags), plan=final, default_plan=plan_n, knob=c.knob,
        requests_per_worker=n, tokens_per_request_paged=t, tokens_needed_per_worker=n * t + prefix,
        served_per_worker=served_final, served_per_worker_default=served_default,
        served_per_worker_p50=served_p50, binding_limit=binding_limit,
        binding_resource="swa" if swa_term < min(slots_term, token_term) else _binding(slots_term, int(token_term)),
        slots_reserved=running * spr, slots_resident=running * resident,
        token_headroom=int(cap.max_total_num_tokens - running * t),
        slot_headroom=int(cap.max_mamba_cache_size - running * resident),
        state_bytes_needed=n * spr * final.request.budget_slot_bytes,
        token_bytes_needed=(n * t + prefix) * final.token.cell_size_bytes,
        largest_fitting=largest, host=host, notes=tuple(notes),
    )

