"""Vectorised planner: the ledgers and capacity over arrays of deployment points at once.

Categorical settings (dtype, backends, SSM dtype, TP, GPU, layout...) take few distinct values:
each distinct combination is planned once by the scalar engine, then numeric axes (context
length, concurrency, bytes left for pools) are evaluated with numpy, through
the same sizing kernel as the scalar plan (``capacity.pool_sizes``), so every point equals it exactly.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..errors import ProfileError
from ..inputs.gpus import resolve_gpu
from ..inputs.model import load_model
from ..inputs.profile import Profile, load_profile, make_profile
from ..inputs.resolve import (DECODE_EXTRA_SLOTS_MAX_PER_WORKER, DECODE_EXTRA_SLOTS_PER_REQUEST,
                              SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS, resolve_context_length)
from ..units import GiB, requests_per_worker
from .capacity import BINDING_LABELS, NO_REST_CODES, pool_sizes, refusal
from .memory import MemoryLedger, no_memory_rule, rest_for_profile, sglang_no_memory_text
from .plan import compute_plan
from .tail import TAIL_EXTRA_ROWS

NUMERIC = ("context_length", "max_running_requests", "available_bytes")
CATEGORICAL = ("sglang_layout", "gpu", "kv_cache_dtype", "dsa_prefill_backend", "dsa_decode_backend",
               "mamba_ssm_dtype", "tp_size", "dp_size", "enable_dp_attention", "attn_cp_size",
               "disable_overlap_schedule", "disable_radix_cache", "mamba_scheduler_strategy",
               "speculative_algorithm", "speculative_num_draft_tokens", "weights_bytes",
               "mem_fraction_static", "max_mamba_cache_size", "max_total_tokens",
               "mamba_full_memory_ratio", "linear_attn_backend", "language_model_only")
COMBO_COLUMNS = ("kv_cache_dim", "kv_bytes_per_token", "indexer_bytes_per_token", "cell_size_bytes",
                 "state_slot_bytes", "slots_per_request", "state_bytes_per_request", "page_size",
                 "attn_dp_size", "attn_tp_size", "draft_tokens", "verify_state_draft_tokens", "tail_bytes_per_row")


def _axis(values: Any) -> tuple[list, np.ndarray]:
    """Distinct values of one swept field (None kept as a value) and each point's code."""
    if isinstance(values, (list, tuple, np.ndarray, pd.Series, range)):
        arr = np.asarray(values)
        if arr.dtype.kind in "iub":
            uniq, code = np.unique(arr, return_inverse=True)
            return [u.item() for u in uniq], code.reshape(-1).astype(np.int64)
        code, uniq = pd.factorize(pd.Series(list(values), dtype=object), use_na_sentinel=False)
        clean = [None if (u is None or (isinstance(u, float) and np.isnan(u))) else
                 (u.item() if isinstance(u, np.generic) else u) for u in uniq]
        return clean, code.astype(np.int64)
    return [values.item() if isinstance(values, np.generic) else values], np.zeros(1, dtype=np.int64)


def _raw_numeric(values: Any) -> tuple[None, np.ndarray]:
    """Numeric axes skip factorising: (None, the values as float64, NaN for None)."""
    if isinstance(values, (list, tuple, np.ndarray, pd.Series, range)):
        arr = np.asarray(values)
        return None, (arr.astype(float) if arr.dtype.kind in "iuf" else np.array(list(values), dtype=float))
    return None, np.array([np.nan if values is None else float(values)])


def _inputs(grid: bool, params: dict[str, Any]) -> tuple[int, dict[str, tuple[list, np.ndarray]]]:
    """Number of points and, per swept field, (distinct values, code per point)."""
    unknown = sorted(set(params) - set(NUMERIC) - set(CATEGORICAL))
    if unknown:
        raise ProfileError(unknown[0], f"cannot be swept (sweepable: {', '.join(NUMERIC + CATEGORICAL)})")
    axes = {k: (_raw_numeric(v) if k in NUMERIC else _axis(v)) for k, v in params.items()}
    if grid:
        sizes = [len(c) for _, c in axes.values()]
        n = int(np.prod(sizes)) if sizes else 1
        out, inner = {}, n
        for (k, (vals, code)), size in zip(axes.items(), sizes):
            inner //= size
            idx = (np.arange(n, dtype=np.int64) // inner) % size
            out[k] = (vals, code[idx])
        return n, out
    n = max((len(c) for _, c in axes.values()), default=1)
    for k, (_, code) in axes.items():
        if len(code) not in (1, n):
            raise ProfileError(k, f"has {len(code)} values; every swept axis needs 1 or {n} (or use grid=True)")
    return n, {k: (vals, code if len(code) == n else
                   (np.full(n, code[0]) if vals is None else np.zeros(n, dtype=np.int64)))
               for k, (vals, code) in axes.items()}


def _numeric(axes: dict, base: dict, key: str, n: int) -> np.ndarray:
    """A numeric field per point: the swept values, or the profile's value (NaN for None)."""
    if key in axes:
        return axes[key][1]
    return np.full(n, np.nan if base[key] is None else float(base[key]))


def _combos(axes: dict, base: dict, n: int) -> tuple[np.ndarray, list[dict]]:
    """Codes of the distinct combinations of the categorical fields, and each combination."""
    swept = [k for k in CATEGORICAL if k in axes and len(axes[k][0]) > 1]  # numeric axes are not here
    fixed = {k: (axes[k][0][0] if k in axes else base[k]) for k in CATEGORICAL if k not in swept}
    if not swept:
        return np.zeros(n, dtype=np.int64), [fixed]
    combined = np.zeros(n, dtype=np.int64)
    for k in swept:
        vals, code = axes[k]
        combined = combined * len(vals) + code
    uniq, inverse = np.unique(combined, return_inverse=True)
    combos = []
    for u in uniq:
        parts = dict(fixed)
        u = int(u)
        for k in reversed(swept):
            vals = axes[k][0]
            u, i = divmod(u, len(vals))
            parts[k] = vals[i]
        combos.append(parts)
    return inverse.reshape(-1).astype(np.int64), combos


def _combo_row(base: dict, combo: dict) -> dict:
    try:
        # the ledgers only (no capacity here: _derive_rest_gib sizes every point in one place)
        p = make_profile({**base, **combo, "available_bytes": None, "weights_bytes": None,
                          "weights_estimate": False,
                          "max_running_requests": base.get("max_running_requests") or 1})
        plan = compute_plan(p)
        p = p.model_copy(update={"weights_estimate": {**base, **combo}["weights_estimate"]})
    except ProfileError as e:
        return {"error": str(e)}
    t, r = plan.token, plan.request
    return {"error": None, "kv_cache_dim": t.kv_cache_dim, "kv_bytes_per_token": t.kv_bytes_per_token,
            "indexer_bytes_per_token": t.indexer_bytes_per_token, "cell_size_bytes": t.cell_size_bytes,
            "state_slot_bytes": r.state_slot_bytes, "slots_per_request": r.slots_per_request,
            "state_bytes_per_request": r.state_bytes_per_request, "page_size": t.page_size,
            "attn_dp_size": plan.parallel.attn_dp_size, "attn_tp_size": plan.parallel.attn_tp_size,
            "draft_tokens": plan.draft_tokens, "verify_state_draft_tokens": plan.args.verify_state_draft_tokens,
            "tail_bytes_per_row": plan.tail.bytes_per_row,
            "_pd_decode": int(p.disaggregation_mode == "decode"), "_dp_ranks": p.dp_size,
            "_extra_given": -1 if p.disaggregation_decode_extra_slots is None else p.disaggregation_decode_extra_slots,
            "_profile": p}


def sweep(profile: Profile | str | None = None, *, grid: bool = False, **params: Any) -> pd.DataFrame:
    """One row per deployment point: inputs, ledgers, workload and (when known) capacity.

    ``fits`` / ``limit`` answer "do R requests of L tokens, all resident, fit this rank?":
    ``limit`` is "fits", "tokens" (the token pool is too small) or "mamba" (the state slots cap
    concurrency below R). Capacity columns that share a name with an input carry ``_resolved`` (what SGLang ends
    up with: ``max_running_requests_resolved``, ``max_mamba_cache_size_resolved``).

    ``params`` name profile fields; each is a scalar or a sequence. Sequences are zipped
    (equal lengths) or, with ``grid=True``, crossed. A point SGLang would refuse gets its
    one-line reason in ``error`` and NaN elsewhere instead of stopping the sweep.
    """
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    prof = resolve_context_length(prof, load_model(prof.model))
    base = prof.model_dump()
    n, axes = _inputs(grid, params)
    codes, combo_keys = _combos(axes, base, n)
    combos = [_combo_row(base, c) for c in combo_keys]
    messages: list = [None]  # error code 0 = fine; others index this list
    combo_err = np.zeros(len(combos), dtype=np.int64)
    for i, c in enumerate(combos):
        if c["error"] is not None:
            combo_err[i] = _message_code(messages, c["error"])
    err = combo_err[codes]
    out: dict[str, Any] = {}
    for col in COMBO_COLUMNS + ("_pd_decode", "_dp_ranks", "_extra_given"):
        out[col] = _take(np.array([c.get(col, 0) for c in combos], dtype=np.int64), codes)
    per_combo = {k: _take(np.array([np.nan if c[k] is None else float(c[k]) for c in combo_keys]), codes)
                 for k in ("mamba_full_memory_ratio", "max_mamba_cache_size", "max_total_tokens",
                           "weights_bytes")}
    radix_off = _take(np.array([bool(c["disable_radix_cache"]) for c in combo_keys]), codes)

    ctx = _numeric(axes, base, "context_length", n).astype(np.int64)
    mrr_raw = _numeric(axes, base, "max_running_requests", n)
    mrr_user = mrr_raw  # the default mem_fraction_static reads the user's value, before the reset
    # Under speculative decoding an unset --max-running-requests becomes 48 (SGLang's reset).
    mrr_raw = np.where(np.isnan(mrr_raw) & (out["draft_tokens"] > 0),
                       SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS, mrr_raw)
    has_mrr = ~np.isnan(mrr_raw)
    mrr = np.where(has_mrr, mrr_raw, 1).astype(np.int64)
    attn_dp = np.maximum(out["attn_dp_size"], 1)
    per_worker = requests_per_worker(mrr, attn_dp)
    cell = out["cell_size_bytes"]
    requests = np.where(has_mrr, per_worker, 0)
    out["token_ledger_bytes_per_request"] = cell * ctx
    out["requests_per_worker"] = requests
    out["token_ledger_bytes_per_rank"] = cell * ctx * requests
    out["kda_ledger_bytes_per_rank"] = out["state_bytes_per_request"] * requests

    avail = _numeric(axes, base, "available_bytes", n)
    rest_gib, words = _derive_rest_gib(avail, per_combo, codes, combos, ~np.isnan(mrr_user),
                                       np.where(np.isnan(mrr_user), 1, mrr_user).astype(np.int64), err, messages)
    known = (err == 0) & ~np.isnan(rest_gib)
    cap = _capacity(rest_gib, avail, known, per_combo, radix_off, out, ctx, has_mrr, per_worker, err, messages,
                    words)
    out.update(cap)
    good = known & (err == 0)
    out["capacity_known"] = good
    # Does the workload (R requests of L tokens, all resident) fit this rank's pools?
    resident = requests * ctx
    out["resident_tokens_per_rank"] = resident
    limit = np.where(resident > cap["max_total_num_tokens"], 1,
                     np.where(cap["max_running_requests_resolved"] < requests,
                              np.where(cap.pop("_binding_code") == 3, 2, 1), 0))
    out["limit"] = pd.Categorical.from_codes(np.where(good & (requests > 0), limit, -1),
                                             categories=["fits", "tokens", "mamba"])
    out["fits"] = good & (requests > 0) & (limit == 0)
    reqs_for_tail = np.where(good, cap["max_running_requests_resolved"], requests)
    # a PD decode server's pre-allocation rows (resolve.decode_extra_slots, on the user's cap)
    user_per_worker = np.maximum(1, np.where(np.isnan(mrr_user), 1, mrr_user).astype(np.int64)
                                 // np.maximum(out.pop("_dp_ranks"), 1))
    decode, given = out.pop("_pd_decode") > 0, out.pop("_extra_given")
    extra = np.where(decode & (given >= 0), given,   # --disaggregation-decode-extra-slots given: as it is
                     np.where(decode & ~np.isnan(mrr_user) & (user_per_worker <= DECODE_EXTRA_SLOTS_MAX_PER_WORKER),
                              DECODE_EXTRA_SLOTS_PER_REQUEST * user_per_worker, 0))
    rows = np.where(out["tail_bytes_per_row"] > 0, reqs_for_tail + extra + TAIL_EXTRA_ROWS, 0)
    out["tail_rows"] = rows
    out["tail_bytes"] = rows * out["tail_bytes_per_row"]
    bad = err != 0
    columns: dict[str, Any] = {k: (vals_code[1] if vals_code[0] is None else vals_code[0][0]
                                   if len(vals_code[0]) == 1
                                   else np.array(vals_code[0], dtype=object)[vals_code[1]])
                               for k, vals_code in axes.items()}
    columns = {k: (np.full(n, v, dtype=object) if not isinstance(v, np.ndarray) else v)
               for k, v in columns.items()}
    for k in NUMERIC:
        if k in columns and not np.isnan(columns[k]).any():
            columns[k] = columns[k].astype(np.int64)
    for k, v in out.items():
        v = np.broadcast_to(v, (n,)) if np.ndim(v) == 0 else v
        if k in ("capacity_known", "binding_limit", "limit", "fits"):
            columns[k] = v
        elif bad.any() or (k in CAPACITY_COLUMNS and not good.all()):
            masked = pd.array(v, dtype="Int64")
            masked[bad | ((~good) if k in CAPACITY_COLUMNS else False)] = pd.NA
            columns[k] = masked
        else:
            columns[k] = v
    columns["error"] = (np.full(n, None, dtype=object) if len(messages) == 1 else
                        pd.Categorical.from_codes(err - 1, categories=messages[1:]))
    return pd.DataFrame(columns)


CAPACITY_COLUMNS = ("available_bytes_used", "max_mamba_cache_size_resolved", "mamba_pool_bytes",
                    "max_total_num_tokens", "max_running_requests_resolved")


def _take(per_combo: np.ndarray, codes: np.ndarray):
    """Per-point values; a scalar when there is one combination (broadcasting is much faster)."""
    return per_combo[0] if len(per_combo) == 1 else per_combo[codes]


def _message_code(messages: list, message: str) -> int:
    if message not in messages:
        messages.append(message)
    return messages.index(message)


def _fail(err: np.ndarray, where: np.ndarray, messages: list, message: str) -> None:
    """Give ``message`` to the points in ``where`` that have no error yet."""
    hit = where & (err == 0)
    if hit.any():
        err[hit] = _message_code(messages, message)


def _derive_rest_gib(avail, per_combo, codes, combos, has_mrr, mrr, err, messages) -> tuple[np.ndarray, dict]:
    """SGLang's rest in float GiB per point: available_bytes / GiB, or derived from GPU and weights; and, for the
    derived points, their device-to-rest ledger (point -> ledger: SGLang's words if nothing is left after the
    mamba pool)."""
    rest_gib = avail / GiB
    words: dict[int, MemoryLedger] = {}
    weights = np.broadcast_to(per_combo["weights_bytes"], err.shape)
    # weights stated, or estimated from the model (the profile's weights_estimate, on by default:
    # the same resolution the plan makes, so a sweep point equals `glm-kv plan` at that point)
    estimated = np.array([c["error"] is None and bool(c["_profile"].weights_estimate) for c in combos])[codes]
    need = np.isnan(avail) & (~np.isnan(weights) | estimated) & (err == 0)
    if not np.any(need):
        return rest_gib, words
    cache: dict = {}
    for i in np.flatnonzero(need):
        c = combos[codes[i]]
        key = (codes[i], int(mrr[i]) if has_mrr[i] else None, None if np.isnan(weights[i]) else int(weights[i]))
        if key not in cache:
            # the combination's profile (weights were left out to plan it without capacity)
            p = c["_profile"].model_copy(update={"weights_bytes": key[2]})
            gpu = resolve_gpu(p)
            cache[key] = (rest_for_profile(p, gpu, c["attn_dp_size"], key[1]), gpu.name)
        m, gpu_name = cache[key]
        if m.rest_gib is None:
            continue
        if int(m.rest_gib * GiB) > 0:
            rest_gib[i] = m.rest_gib
            words[int(i)] = m
        else:
            _fail(err, np.arange(len(err)) == i, messages, f"weights_bytes: {no_memory_rule(m, gpu_name)}")
    return rest_gib, words


def _capacity(rest_gib, avail, known, per_combo, radix_off, out, ctx, has_mrr, per_worker, err, messages,
              words: dict[int, MemoryLedger]) -> dict:
    """``capacity.pool_sizes`` over every point; refusals take the kernel's one text (``refusal``: with SGLang's
    words, ``words``, at a derived point where nothing is left after the mamba pool)."""
    rest_gib = np.where(known, rest_gib, 1.0)
    given = ~np.isnan(avail)
    a = np.where(given, avail, np.trunc(rest_gib * GiB))
    k = pool_sizes(rest_gib, slot=np.where(out["state_slot_bytes"] > 0, out["state_slot_bytes"], 1),
                   slots_per_request=np.maximum(out["slots_per_request"], 1),
                   cell_size=np.where(out["cell_size_bytes"] > 0, out["cell_size_bytes"], 1),
                   page_size=np.maximum(out["page_size"], 1), draft_tokens=out["verify_state_draft_tokens"],
                   attn_dp=np.maximum(out["attn_dp_size"], 1),
                   mamba_full_memory_ratio=per_combo["mamba_full_memory_ratio"],
                   max_mamba_cache_size=per_combo["max_mamba_cache_size"],
                   max_total_tokens=per_combo["max_total_tokens"], radix_off=radix_off,
                   requests_per_worker=per_worker, has_requests=has_mrr, context_length=ctx)
    kerr = np.broadcast_to(k["error"], err.shape)
    for i in words:   # the derived points (the plan's per-point path already visited each) with their readings
        if known[i] and kerr[i] in NO_REST_CODES:
            _fail(err, np.arange(len(err)) == i, messages, str(refusal(kerr[i], sglang_no_memory_text(words[i]))))
    for code in np.unique(kerr[known & (kerr != 0)]):
        _fail(err, known & (kerr == code), messages, str(refusal(code)))
    good = known & (err == 0)
    K, tokens, nreq, binding = (k["max_mamba_cache_size"], k["max_total_num_tokens"],
                                k["max_running_requests"], k["binding"])
    slot = out["state_slot_bytes"]
    return {
        "available_bytes_used": np.where(good, a, 0).astype(np.int64),
        "max_mamba_cache_size_resolved": np.where(good, K, 0),
        "mamba_pool_bytes": np.where(good, (K + 1) * slot, 0),
        "max_total_num_tokens": np.where(good, tokens, 0),
        "max_running_requests_resolved": np.where(good, nreq, 0),
        "binding_limit": pd.Categorical.from_codes(np.where(good, binding, -1), categories=list(BINDING_LABELS)),
        "_binding_code": np.where(good, binding, -1),
    }
