"""Check a real vLLM 0.33.0 boot log against glm-kv's vLLM plan (glm_kv/ledgers/vllm.py), line by line.

What vLLM prints about its KV sizing (glm_kv/inputs/vllm_boot_log.py): the memory it sized from
(``Available KV cache memory`` after the profile, or ``reserved ... GiB`` under --kv-cache-memory-bytes,
or ``KV cache memory reduced to`` after a multimodal reservation) and the outcome (``GPU KV cache size:
N tokens, Maximum concurrency for L tokens per request: C.CCx``, one line in 0.33.0, two before).

The memory is an input of the plan, never a prediction: glm-kv does not model vLLM's profile run. When
the launch sets --kv-cache-memory-bytes, the plan uses it and the logged figure is checked against
it (as ``format_gib`` prints it). Otherwise the logged figure is read as the input, the way SGLang's
verify takes its ``inputs_from_log``: it is printed to 0.01 GiB, so the plan is evaluated at both ends
of that interval (num_blocks = memory // bytes per block, so tokens and concurrency are monotone in
it), and a logged count agrees when it lies in the predicted range. With the memory exact, tokens must
agree exactly and the concurrency as vLLM prints it (``%.2f``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..errors import ProfileError
from ..inputs.hf_config import HfConfig
from ..inputs.vllm_boot_log import LOOKED_FOR, MEMORY_KINDS, POOL_KINDS, VllmBootLog, VllmLogLine
from .verify import NothingToVerify, VerifyRow, row_dicts
from .vllm import VllmArgs, VllmPlan, vllm_plan

GiB = 1 << 30
HALF_CENT = 0.005   # half the last digit of format_gib's round(x, 2)


def format_gib(b: int) -> float:
    """vLLM's ``format_gib`` (utils/mem_utils.py:30-31) as the number it prints."""
    return round(b / GiB, 2)


@dataclass(frozen=True)
class VllmVerifyResult:
    """Rows of predicted vs logged (``VerifyRow``, as SGLang's verify), the inputs read off the log, the
    plan at the nominal memory and notes; ``ok``: every checked row agrees."""

    ok: bool
    rows: tuple[VerifyRow, ...]
    inputs_from_log: dict
    plan: VllmPlan
    notes: tuple[str, ...] = field(default=())
    label: str = ""

    def to_dict(self) -> dict:
        return {"ok": self.ok, "server": "vllm " + self.plan.vllm_version, "label": self.label,
                "lines": row_dicts(self.rows), "inputs_from_log": self.inputs_from_log, "notes": list(self.notes)}


def log_memory(log: VllmBootLog) -> tuple[float, VllmLogLine, int] | None:
    """The KV memory the sizing was given, as printed (GiB): per process its last memory line, preferring
    the multimodal-reduced figure (what reaches get_kv_cache_configs), then the profile's, then the
    reserved one; the minimum over processes (vLLM sizes every rank by the smallest: get_kv_cache_configs
    takes the least num_blocks). Returns (GiB, the line, how many processes printed one) or None."""
    best: dict = {}
    for ln in log.lines:
        if ln.kind in MEMORY_KINDS:
            cur = best.get(ln.rank_key)
            if cur is None or MEMORY_KINDS.index(ln.kind) <= MEMORY_KINDS.index(cur.kind):
                best[ln.rank_key] = ln
    if not best:
        return None
    gib = {k: (ln.values[5] if ln.kind == "mm_reduced" else ln.values[1] if ln.kind == "reserved_kv"
               else ln.values[0]) for k, ln in best.items()}
    key = min(gib, key=lambda k: gib[k])
    return gib[key], best[key], len(best)


def _memory(args: VllmArgs, log: VllmBootLog) -> tuple[tuple[int, int, int], dict, list[str]]:
    """(low, nominal, high) bytes of KV memory, the inputs read off the log, notes."""
    if args.kv_cache_memory_bytes:
        b = int(args.kv_cache_memory_bytes)
        return (b, b, b), {}, [f"kv_cache_memory_bytes from the launch ({b:,} bytes): every logged figure "
                               "is checked against the plan, tokens exactly"]
    got = log_memory(log)
    if got is None:
        raise ProfileError("--boot-log", "the launch sets no --kv-cache-memory-bytes and the log has no "
                                         "'Available KV cache memory' (or 'reserved ... GiB') line: nothing to size from")
    gib, line, n = got
    lo, hi = math.ceil((gib - HALF_CENT) * GiB), math.floor((gib + HALF_CENT) * GiB)
    inputs = {"kv_cache_memory_gib": gib, "kv_cache_memory_bytes_range": [lo, hi], "from_log_line": line.line_no}
    notes = [f"kv_cache_memory_bytes read off the log (line {line.line_no}, {line.rank_label}: "
             f"'{LOOKED_FOR[line.kind].split(' ...')[0]} ...', the least of {n} process(es) that printed one) to "
             f"0.01 GiB: the plan is evaluated over [{lo:,}, {hi:,}] bytes",
             "only the first rank of each node prints 'Available KV cache memory' (info_once, local scope): "
             "a rank with less memory elsewhere would lower every rank's blocks"]
    return (lo, round(gib * GiB), hi), inputs, notes


def _explain(row: VerifyRow, plan: VllmPlan) -> str:
    """The inputs behind a disagreement, and what the logged figure implies in blocks."""
    base = ("would be explained by kv_cache_memory_bytes (or the profile's memory), max_model_len, tp, "
            "block_size, kv_cache_dtype, mamba_ssm_cache_dtype, enable_prefix_caching or num_gpu_blocks_override")
    if plan.refused is not None or not isinstance(row.logged, (int, float)):
        return base
    if row.quantity.startswith("Maximum concurrency"):
        implied = row.logged * plan.blocks_per_request
    elif row.quantity.startswith("GPU KV cache size"):
        implied = row.logged / plan.max_model_len * plan.blocks_per_request
    else:
        return base
    return (f"the log implies about {implied:,.0f} blocks of {plan.bytes_per_block:,} bytes "
            f"({plan.blocks_per_request} per request), the plan {plan.num_blocks:,}; {base}")


def verify_vllm_boot_log(config: HfConfig, args: VllmArgs, log: VllmBootLog, label: str = "") -> VllmVerifyResult:
    """Predicted vs logged for every recognised line; ok when all checked lines agree.

    Raises ``NothingToVerify`` when the log states no sizing outcome, ``ProfileError`` when there is no
    memory to size from, and ``NotModelled`` (glm_kv/ledgers/vllm.py) for a launch glm-kv does not derive.
    """
    found = {k: len(log.of(k)) for k in LOOKED_FOR}
    if not any(found[k] for k in POOL_KINDS):
        raise NothingToVerify(found, f"{log.source} has no line that states vLLM's KV sizing "
                                     f"({log.total_lines} lines read)", LOOKED_FOR, POOL_KINDS, "vLLM")
    (lo, nom, hi), inputs, notes = _memory(args, log)
    plans = [vllm_plan(config, replace(args, kv_cache_memory_bytes=m)) for m in (lo, nom, hi)]
    nominal = plans[1]
    sized = [p for p in plans if p.refused is None]
    from_log = not args.kv_cache_memory_bytes
    rows: list[VerifyRow] = []

    def add(ln: VllmLogLine, quantity, pred, rng, logged, unit, ok, note=""):
        rows.append(VerifyRow(ln.line_no, ln.rank_label, quantity, pred, rng, logged, unit, ok, note))

    def refused_row(ln: VllmLogLine) -> bool:
        if sized:
            return False
        add(ln, "vLLM's sizing", "refuses: " + nominal.refused["message"][:160], None, "started", "", False,
            f"the plan refuses at {nom:,} bytes ({nominal.refused['stage']}), vLLM did not")
        return True

    def tokens(ln: VllmLogLine, logged: int, note: str = ""):
        vals = [p.gpu_kv_cache_size_tokens for p in sized]
        pred = (nominal if any(p is nominal for p in sized) else sized[0]).gpu_kv_cache_size_tokens
        add(ln, "GPU KV cache size", pred, None if min(vals) == max(vals) else (min(vals), max(vals)), logged,
            "tokens", min(vals) <= logged <= max(vals), note)

    def concurrency(ln: VllmLogLine, logged: float, note: str = ""):
        vals = [float(f"{p.maximum_concurrency:.2f}") for p in sized]
        pred = (nominal if any(p is nominal for p in sized) else sized[0]).maximum_concurrency_printed
        add(ln, "Maximum concurrency", pred, None if min(vals) == max(vals) else (f"{min(vals):.2f}x", f"{max(vals):.2f}x"),
            f"{logged:.2f}x", "x", min(vals) - 1e-9 <= logged <= max(vals) + 1e-9, note)

    def max_len(ln: VllmLogLine, logged: int):
        add(ln, "max_model_len (tokens per request)", nominal.max_model_len if nominal.refused is None else
            args.max_model_len, None, logged, "tokens",
            logged == (nominal.max_model_len if nominal.refused is None else args.max_model_len))

    old = "two-line form of builds before 0.3x: checked against 0.33.0's sizing (vllm#40691: earlier builds " \
          "computed this figure differently for hybrid models)"
    for ln in log.lines:
        v, k = ln.values, ln.kind
        if k == "kv_capacity":
            if refused_row(ln):
                continue
            add(ln, "KV cache pools", "GPU", None, v[0], "", v[0] == "GPU")
            max_len(ln, v[2])
            tokens(ln, v[1])
            concurrency(ln, v[3])
        elif k == "kv_size_line":
            if not refused_row(ln):
                tokens(ln, v[1], old)
        elif k == "concurrency_line":
            if not refused_row(ln):
                max_len(ln, v[0])
                concurrency(ln, v[1], old)
        elif k == "blocks_override":
            add(ln, "num_gpu_blocks_override", args.num_gpu_blocks_override, None, v[1], "blocks",
                args.num_gpu_blocks_override == v[1], "" if args.num_gpu_blocks_override == v[1] else
                "the launch's num_gpu_blocks_override differs")
            if sized:
                blocks = [m // p.bytes_per_block for m, p in zip((lo, nom, hi), plans) if p.refused is None]
                add(ln, "num_gpu_blocks from memory", blocks[len(blocks) // 2], None if min(blocks) == max(blocks)
                    else (min(blocks), max(blocks)), v[0], "blocks", min(blocks) <= v[0] <= max(blocks))
        elif k in MEMORY_KINDS:
            gib = v[5] if k == "mm_reduced" else v[1] if k == "reserved_kv" else v[0]
            what = {"mm_reduced": "KV memory after the multimodal reservation", "reserved_kv":
                    "KV memory reserved (--kv-cache-memory-bytes)", "available_kv": "Available KV cache memory"}[k]
            if from_log:
                add(ln, what + " (input)", None, None, gib, "GiB", None,
                    "kv_cache_memory_bytes: the least over processes" if ln.line_no == inputs["from_log_line"]
                    else "informational")
            else:
                add(ln, what, format_gib(nom), None, gib, "GiB", abs(format_gib(nom) - gib) < 1e-9,
                    "" if abs(format_gib(nom) - gib) < 1e-9 else "the launch's --kv-cache-memory-bytes differs "
                    "from the memory vLLM sized with")
        elif k in ("auto_fit_full", "auto_fit_reduced"):
            add(ln, "auto-fit max_model_len", None, None, v[0] if k == "auto_fit_full" else v[1], "tokens", None,
                "informational (max_model_len -1 is not modelled: pass the fitted length as max_model_len)")
    checked = [r for r in rows if r.ok is not None]
    if not checked:
        raise NothingToVerify(found, "no line of the log can be checked against a plan", LOOKED_FOR, POOL_KINDS,
                              "vLLM")
    rows = [r if r.ok is not False or r.note else replace(r, note=_explain(r, nominal)) for r in rows]
    ok = all(r.ok for r in checked)
    notes.append(f"compared {len(checked)} quantities: {sum(1 for r in checked if r.ok)} agree, "
                 f"{sum(1 for r in checked if not r.ok)} disagree")
    if sized and nominal.refused is None:
        inputs.update(num_blocks=nominal.num_blocks, bytes_per_block=nominal.bytes_per_block,
                      blocks_per_request=nominal.blocks_per_request, kv_cache_memory_bytes=nom)
    return VllmVerifyResult(ok, tuple(rows), inputs, nominal, tuple(notes), label)
