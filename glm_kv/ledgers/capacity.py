"""Capacity: from the bytes left for pools on a rank to mamba slots, tokens and requests.

One kernel, ``pool_sizes``, does the arithmetic for a single deployment and for the sweep (n-d
arrays) alike. A single plan takes its scalar branch (``scalar=True``: plain Python numbers, no
numpy import, so ``glm-kv plan`` starts fast); ``tests/ledgers/test_capacity_scalar.py`` proves
both branches equal on random points. It follows SGLang 0.5.23's sizing order
(``KVCacheConfigurator._handle_max_mamba_cache``, then ``DefaultPoolConfigurator.calculate_pool_sizes``,
then ``resolve_max_num_reqs``), including its float arithmetic in GiB, so results agree with
SGLang to the token. A refusal is an error code per point; ``REFUSALS`` holds its one text.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ProfileError, sglang_says
from ..units import GiB

AUTO_REQS_PER_CONTEXT = 512
AUTO_REQS_MIN, AUTO_REQS_MAX = 2048, 4096

BINDING_LABELS = ("requested", "auto", "tokens", "mamba")
SOURCE_LABELS = ("budget", "max_mamba_cache_size", "max_running_requests")

# error code -> (field, rule): the one text a refusal carries, in the plan and in the sweep alike
REFUSALS: dict[int, tuple[str, str]] = {
    1: ("max_mamba_cache_size", "leaves no state slot per worker once divided over the DP-attention workers"),
    2: ("available_bytes", "not enough memory for the hybrid state cache (not one state slot fits the "
                           "mamba budget); the memory is available_bytes, or what gpu/memory_bytes, "
                           "mem_fraction_static and weights_bytes leave"),
    3: ("max_mamba_cache_size", "its state slots leave nothing for the token pool (lower max_mamba_cache_size)"),
    4: ("available_bytes", "nothing is left for the token pool after the mamba pool; the memory is "
                           "available_bytes, or what gpu/memory_bytes, mem_fraction_static and weights_bytes leave"),
    5: ("max_total_tokens", "is smaller than one page of tokens"),
    6: ("available_bytes", "not enough memory for one page of tokens "
                           "(increase mem_fraction_static or available_bytes)"),
    7: ("max_mamba_cache_size", "is too small to serve one request (fewer slots than slots_per_request)"),
    8: ("available_bytes", "the hybrid state cache is too small to serve any request (increase "
                           "available_bytes or mem_fraction_static, or raise mamba_full_memory_ratio)"),
}


# the rest after the mamba pool is not positive: SGLang raises _profile_available_bytes' "Loaded weights leave no
# GPU memory" there, which the refusal quotes when the rest came from the weights (memory.sglang_no_memory_text)
NO_REST_CODES = frozenset({3, 4})


def refusal(code: int, sglang_words: str | None = None) -> ProfileError:
    """The code's one text; ``sglang_words``: SGLang's own message for a ``NO_REST_CODES`` refusal, quoted after."""
    field, rule = REFUSALS[int(code)]
    if sglang_words is not None and int(code) in NO_REST_CODES:
        rule += sglang_says(sglang_words)
    return ProfileError(field, rule)


@dataclass(frozen=True)
class CapacityLedger:
    available_bytes: int
    available_source: str
    mamba_pool_source: str          # "budget", "max_mamba_cache_size" or "max_running_requests"
    mamba_budget_bytes: int
    max_mamba_cache_size: int       # state slots per worker (the tensors hold one more)
    mamba_pool_bytes: int           # (slots + 1) x slot bytes
    spec_scratch_bytes: int         # EAGLE verify scratch taken from the same budget
    token_pool_budget_bytes: int
    max_total_num_tokens: int
    token_pool_bytes: int           # tokens x cell_size (the page padding is not in SGLang's count)
    requested_max_running_requests_per_worker: int   # JSON: requested_max_running_requests
    requested_source: str           # "profile" or "auto"
    max_running_requests_per_worker: int             # JSON: max_running_requests
    binding_limit: str              # "requested", "auto", "tokens" or "mamba"
    capped_message: str | None
    # a hybrid-SWA model's two pools (HybridSWAPoolConfigurator; None for every other model): the full pool's
    # tokens (= max_total_num_tokens) and the SWA pool's, ratio x full, page-aligned (appended, issue 32)
    full_max_total_num_tokens: int | None = None
    swa_max_total_num_tokens: int | None = None


JSON_NAMES = {"requested_max_running_requests_per_worker": "requested_max_running_requests",
              "max_running_requests_per_worker": "max_running_requests"}


def _is_nan_scalar(x) -> bool:
    import numpy as np

    return np.ndim(x) == 0 and bool(np.isnan(x))


def pool_sizes(rest_gib, *, slot, slots_per_request, cell_size, page_size, draft_tokens, attn_dp,
               mamba_full_memory_ratio, max_mamba_cache_size, max_total_tokens, radix_off,
               requests_per_worker, has_requests, context_length, scalar: bool = False, fixed_bytes=0) -> dict:
    """SGLang 0.5.23's pool sizing over numpy values (0-d or n-d, broadcast together).

    Optional inputs (``max_mamba_cache_size``, ``max_total_tokens``) are NaN when unset;
    ``requests_per_worker`` is ignored where ``has_requests`` is False (SGLang's automatic value).
    Returns the sizes, a binding code (index into BINDING_LABELS), a source code (SOURCE_LABELS)
    and ``error`` (0, or a key of REFUSALS: the first check that failed). With ``scalar=True``
    every input is one Python number and so is every output (the same arithmetic, no numpy).
    ``fixed_bytes``: state-pool bytes reserved before the slots are counted (Gated DeltaNet's ReplaySSM ring,
    ``_handle_max_mamba_cache``'s ``replayssm_fixed_bytes``); it joins ``spec_scratch_bytes`` in the output.
    """
    kw = dict(fixed_bytes=fixed_bytes, slot=slot, slots_per_request=slots_per_request, cell_size=cell_size, page_size=page_size,
              draft_tokens=draft_tokens, attn_dp=attn_dp, mamba_full_memory_ratio=mamba_full_memory_ratio,
              max_mamba_cache_size=max_mamba_cache_size, max_total_tokens=max_total_tokens, radix_off=radix_off,
              requests_per_worker=requests_per_worker, has_requests=has_requests, context_length=context_length)
    return _pool_sizes_scalar(rest_gib, **kw) if scalar else _pool_sizes_array(rest_gib, **kw)


def _finite_int(x: float) -> int:
    """numpy's ``where(isfinite(x), x, 0).astype(int64)`` for one float: truncates, inf/NaN -> 0."""
    return int(x) if math.isfinite(x) else 0


def _floor_div(a: float, b: float) -> float:
    """``np.floor_divide`` on float64 for one pair (Python's float ``//`` is the same algorithm);
    a zero divisor gives inf/NaN there, which the callers turn into 0."""
    if b == 0:
        return math.nan
    return float(a) // float(b)


def _pool_sizes_scalar(rest_gib, *, slot, slots_per_request, cell_size, page_size, draft_tokens, attn_dp,
                       mamba_full_memory_ratio, max_mamba_cache_size, max_total_tokens, radix_off,
                       requests_per_worker, has_requests, context_length, fixed_bytes=0) -> dict[str, int]:
    """``_pool_sizes_array`` for one point, line for line, in plain Python numbers."""
    rest_gib = float(rest_gib)
    ratio, cell, page, draft, r = slots_per_request, cell_size, page_size, draft_tokens, mamba_full_memory_ratio
    mmc, mtt, per_worker = float(max_mamba_cache_size), float(max_total_tokens), requests_per_worker
    err = 0

    def fail(where: bool, code: int) -> None:
        nonlocal err
        if where and err == 0:
            err = code

    budget = rest_gib * r / (1 + r) * GiB
    spec = draft > 0
    if spec:
        k_budget = _floor_div(budget - slot * (1 + draft), slot * (1 + draft / ratio))
    else:
        k_budget = _floor_div(budget - fixed_bytes - slot, slot)
    k_budget = _finite_int(k_budget)
    src_mmc = not math.isnan(mmc)
    src_radix = not src_mmc and bool(radix_off) and bool(has_requests)
    K = int(mmc) // attn_dp if src_mmc else per_worker if src_radix else k_budget
    capped = min(per_worker, K // ratio)
    scratch = slot * ((K if src_radix else capped) + 1) * draft if spec else 0
    fail(K <= 0 and src_mmc, 1)
    fail(K <= 0, 2)
    rest_gib = rest_gib - float(scratch) / GiB - float((K + 1) * slot + fixed_bytes) / GiB
    rest_bytes = _finite_int(math.trunc(rest_gib * GiB) if math.isfinite(rest_gib * GiB) else math.nan)
    fail(rest_bytes <= 0 and src_mmc, 3)
    fail(rest_bytes <= 0, 4)
    tokens = rest_bytes // cell // page * page
    if not math.isnan(mtt):
        mtt_i = int(mtt)
        trimmed = mtt_i < tokens
        if trimmed:
            tokens = mtt_i // page * page
        fail(trimmed and tokens <= 0, 5)
    fail(tokens <= 0, 6)
    est = int(float(tokens) / float(max(context_length, 1)) * AUTO_REQS_PER_CONTEXT)
    auto = max(min(est, AUTO_REQS_MAX), AUTO_REQS_MIN)
    requested = per_worker if has_requests else auto
    nreq = min(requested, tokens // 2)
    binding = 2 if nreq < requested else 0 if has_requests else 1
    cap = K // ratio
    if cap < nreq:
        binding = 3
    nreq = min(nreq, cap)
    fail(nreq <= 0 and src_mmc, 7)
    fail(nreq <= 0, 8)
    source = 1 if src_mmc else 2 if src_radix else 0
    budget_bytes = _finite_int(budget) if source == 0 else 0
    return {"max_mamba_cache_size": K, "mamba_budget_bytes": budget_bytes, "spec_scratch_bytes": scratch + fixed_bytes,
            "token_pool_budget_bytes": rest_bytes, "max_total_num_tokens": tokens,
            "requested_max_running_requests": requested, "max_running_requests": nreq,
            "binding": binding, "source": source, "error": err}


def _pool_sizes_array(rest_gib, *, slot, slots_per_request, cell_size, page_size, draft_tokens, attn_dp,
                      mamba_full_memory_ratio, max_mamba_cache_size, max_total_tokens, radix_off,
                      requests_per_worker, has_requests, context_length, fixed_bytes=0) -> dict:
    """The kernel over numpy values (0-d or n-d, broadcast together): the sweep's branch."""
    import numpy as np

    rest_gib = np.asarray(rest_gib, dtype=np.float64)
    slot, ratio, cell, page = slot, slots_per_request, cell_size, page_size
    draft, r = draft_tokens, mamba_full_memory_ratio
    mmc, mtt = max_mamba_cache_size, max_total_tokens
    per_worker = requests_per_worker
    shape = np.broadcast_shapes(*(np.shape(v) for v in (rest_gib, slot, ratio, cell, page, draft, attn_dp, r,
                                                        mmc, mtt, radix_off, per_worker, has_requests,
                                                        context_length)))
    err = np.zeros(shape, dtype=np.int64)

    def fail(where, code):
        np.copyto(err, code, where=np.broadcast_to(where, shape) & (err == 0))

    budget = rest_gib * r / (1 + r) * GiB
    no_spec = np.ndim(draft) == 0 and draft == 0  # scalar shortcut: one combination, no MTP
    spec = np.asarray(draft) > 0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        k_budget = np.floor_divide(budget - fixed_bytes - slot, slot)
        if not no_spec:
            k_spec = np.floor_divide(budget - slot * (1 + draft), slot * (1 + draft / ratio))
            k_budget = np.where(spec, k_spec, k_budget)
    k_budget = np.where(np.isfinite(k_budget), k_budget, 0).astype(np.int64)
    if _is_nan_scalar(mmc) and np.ndim(radix_off) == 0 and not radix_off:
        K, src_mmc, src_radix, capped = k_budget, np.False_, np.False_, None
    else:
        src_mmc = ~np.isnan(mmc)
        mmc_i = np.where(src_mmc, mmc, 0).astype(np.int64)
        src_radix = ~src_mmc & radix_off & has_requests
        K = np.where(src_mmc, mmc_i // attn_dp, np.where(src_radix, per_worker, k_budget))
        # SGLang overrides max_mamba_cache_size with the per-DP-worker value first, then caps the
        # speculative scratch with it: the DIVIDED value (K), never the flag as given.
        capped = np.minimum(per_worker, K // ratio)
    if no_spec:
        scratch = np.int64(0)
    else:
        if capped is None:
            capped = np.minimum(per_worker, K // ratio)
        scratch = np.where(spec, slot * (np.where(src_radix, K, capped) + 1) * draft, 0)
    fail((K <= 0) & src_mmc, 1)
    fail(K <= 0, 2)
    rest_gib = rest_gib - scratch / GiB - ((K + 1) * slot + fixed_bytes) / GiB
    with np.errstate(invalid="ignore", over="ignore"):
        rest_bytes = np.trunc(rest_gib * GiB)
    rest_bytes = np.where(np.isfinite(rest_bytes), rest_bytes, 0).astype(np.int64)
    fail((rest_bytes <= 0) & src_mmc, 3)
    fail(rest_bytes <= 0, 4)
    tokens = rest_bytes // cell // page * page
    if not _is_nan_scalar(mtt):
        has_mtt = ~np.isnan(mtt)
        mtt_i = np.where(has_mtt, mtt, 0).astype(np.int64)
        trimmed = has_mtt & (mtt_i < tokens)
        tokens = np.where(trimmed, mtt_i // page * page, tokens)
        fail(trimmed & (tokens <= 0), 5)
    fail(tokens <= 0, 6)
    est = (tokens / np.maximum(context_length, 1) * AUTO_REQS_PER_CONTEXT).astype(np.int64)
    auto = np.maximum(np.minimum(est, AUTO_REQS_MAX), AUTO_REQS_MIN)
    requested = np.where(has_requests, per_worker, auto)
    nreq = np.minimum(requested, tokens // 2)
    binding = np.where(nreq < requested, 2, np.where(has_requests, 0, 1))
    cap = K // ratio
    binding = np.where(cap < nreq, 3, binding)
    nreq = np.minimum(nreq, cap)
    fail((nreq <= 0) & src_mmc, 7)
    fail(nreq <= 0, 8)
    source = np.where(src_mmc, 1, np.where(src_radix, 2, 0))
    budget_bytes = np.where(source == 0, np.trunc(np.where(np.isfinite(budget), budget, 0)), 0).astype(np.int64)
    return {"max_mamba_cache_size": K, "mamba_budget_bytes": budget_bytes, "spec_scratch_bytes": scratch + fixed_bytes,
            "token_pool_budget_bytes": rest_bytes, "max_total_num_tokens": tokens,
            "requested_max_running_requests": requested, "max_running_requests": nreq,
            "binding": binding, "source": source, "error": err}


def pool_point(p, *, rest_gib: float, slot: int, ratio: int, cell_size: int, page_size: int, draft_tokens: int,
               attn_dp: int, requests_per_worker: int | None, context_len: int, fixed_bytes: int = 0,
               sglang_words: Callable[[], str | None] | None = None) -> dict[str, int]:
    """``pool_sizes`` at one point with the profile's limits, as ints; SGLang's refusal raised (``refusal``'s
    ``sglang_words``, asked for only when a refusal is raised).

    Shared by the capacity ledger and the advice's sweeps."""
    nan = float("nan")
    out = pool_sizes(
        rest_gib, slot=slot, slots_per_request=ratio, cell_size=cell_size, page_size=page_size,
        draft_tokens=draft_tokens, attn_dp=attn_dp, mamba_full_memory_ratio=p.mamba_full_memory_ratio,
        max_mamba_cache_size=nan if p.max_mamba_cache_size is None else float(p.max_mamba_cache_size),
        max_total_tokens=nan if p.max_total_tokens is None else float(p.max_total_tokens),
        radix_off=bool(p.disable_radix_cache), requests_per_worker=requests_per_worker or 1,
        has_requests=requests_per_worker is not None, context_length=context_len, scalar=True,
        fixed_bytes=fixed_bytes)
    v = {k: int(x) for k, x in out.items()}
    if v["error"]:
        raise refusal(v["error"], sglang_words() if sglang_words else None)
    return v


def capacity_ledger(p, *, rest_gib: float, available_bytes: int, available_source: str, attn_dp: int,
                    slot: int, ratio: int, cell_size: int, page_size: int, draft_tokens: int,
                    requests_per_worker: int | None, context_len: int, fixed_bytes: int = 0,
                    sglang_words: Callable[[], str | None] | None = None) -> CapacityLedger:
    """The kernel at one point; ``rest_gib`` is SGLang's float rest (available_bytes / GiB when given);
    ``sglang_words``: what SGLang says when the rest after the mamba pool is not positive (``refusal``)."""
    v = pool_point(p, rest_gib=rest_gib, slot=slot, ratio=ratio, cell_size=cell_size, page_size=page_size,
                   draft_tokens=draft_tokens, attn_dp=attn_dp, requests_per_worker=requests_per_worker,
                   context_len=context_len, fixed_bytes=fixed_bytes, sglang_words=sglang_words)
    K, n, binding = v["max_mamba_cache_size"], v["max_running_requests"], BINDING_LABELS[v["binding"]]
    message = None
    if binding == "mamba":
        message = (f"max_running_requests is capped to {n} by the mamba state cache "
                   f"(max_mamba_cache_size={K}, {ratio} state slots per request)")
    return CapacityLedger(
        available_bytes=available_bytes, available_source=available_source,
        mamba_pool_source=SOURCE_LABELS[v["source"]], mamba_budget_bytes=v["mamba_budget_bytes"],
        max_mamba_cache_size=K, mamba_pool_bytes=(K + 1) * slot, spec_scratch_bytes=v["spec_scratch_bytes"],
        token_pool_budget_bytes=v["token_pool_budget_bytes"], max_total_num_tokens=v["max_total_num_tokens"],
        token_pool_bytes=v["max_total_num_tokens"] * cell_size,
        requested_max_running_requests_per_worker=v["requested_max_running_requests"],
        requested_source="profile" if requests_per_worker is not None else "auto",
        max_running_requests_per_worker=n, binding_limit=binding, capped_message=message,
    )


# What can limit the requests of one context length resident at once (the book's "binds"),
# in the order a tie is reported (first of equals wins).
FIT_LIMITS = ("requested", "tokens", "mamba")


def requests_fit_at(requested: int, tokens: int, context_length: int, mamba_slots: int,
                    slots_per_request: int) -> tuple[int, str]:
    """(requests of ``context_length`` tokens that fit at once on a rank, which limit binds).

    The smallest of the requests asked for, the token slots over the context length and the state
    slots over the slots per request. Scalars only, for the plan contract's ``requests_fit_at_context``
    and ``binds_at_context``; ``derivations.requests_fit_expr`` is the same formula as a shown
    derivation (and over sweep arrays), and a test holds the two equal.
    """
    spr = int(slots_per_request)
    # a model without state layers (0 slots per request) has no state term: it never binds
    state = int(mamba_slots) // spr if spr else int(requested)
    terms = (int(requested), int(tokens) // int(context_length), state)
    n = min(terms)
    return n, FIT_LIMITS[terms.index(n)]



def attention_capacity_ledger(p, *, available_bytes: int, available_source: str, cell_size: int, page_size: int,
                              requests_per_worker: int | None, context_len: int) -> CapacityLedger:
    """A model without state layers (MLA + DSA, plain GQA): every byte left goes to the token pool
    (``DefaultPoolConfigurator.calculate_pool_sizes``: rest // cell_size, page-aligned, trimmed by
    --max-total-tokens), then ``resolve_max_num_reqs`` (the requested cap or the automatic one,
    at most half the tokens). No mamba pool: its fields are 0."""
    tokens = available_bytes // cell_size // page_size * page_size
    if p.max_total_tokens is not None and p.max_total_tokens < tokens:
        tokens = p.max_total_tokens // page_size * page_size
    if tokens <= 0:
        raise refusal(6)
    return _token_only_ledger(available_bytes, available_source, tokens, tokens * cell_size, requests_per_worker,
                              context_len)


def _token_only_ledger(available_bytes: int, available_source: str, tokens: int, token_pool_bytes: int,
                       requests_per_worker: int | None, context_len: int, **swa) -> CapacityLedger:
    """``resolve_max_num_reqs`` over a token pool without a mamba pool: the requested cap or the automatic
    one, at most half the tokens."""
    est = max(min(int(tokens / context_len * AUTO_REQS_PER_CONTEXT), AUTO_REQS_MAX), AUTO_REQS_MIN)
    requested = requests_per_worker if requests_per_worker is not None else est
    n = min(requested, tokens // 2)
    binding = "tokens" if n < requested else "requested" if requests_per_worker is not None else "auto"
    return CapacityLedger(
        available_bytes=available_bytes, available_source=available_source, mamba_pool_source="none",
        mamba_budget_bytes=0, max_mamba_cache_size=0, mamba_pool_bytes=0, spec_scratch_bytes=0,
        token_pool_budget_bytes=available_bytes, max_total_num_tokens=tokens, token_pool_bytes=token_pool_bytes,
        requested_max_running_requests_per_worker=requested,
        requested_source="profile" if requests_per_worker is not None else "auto",
        max_running_requests_per_worker=n, binding_limit=binding, capped_message=None, **swa)


def swa_pool_tokens(full_tokens: int, ratio: float, page_size: int, window: int) -> int:
    """``HybridSWAPoolConfigurator._solve_pool_sizes``: the SWA pool's tokens, ``int(full x ratio)`` page-aligned,
    refused as SGLang refuses a pool that cannot admit one request (``validate_swa_pool_size``)."""
    swa = int(full_tokens * ratio) // page_size * page_size
    if window + page_size >= swa:
        raise ProfileError("weights_bytes", f"SGLang 0.5.23 refuses it: \"SWA pool ({swa} tokens) cannot hold even one "
                                            f"request: the prefill admission floor is sliding_window_size ({window}) + "
                                            f"page_size ({page_size}). Increase --swa-full-tokens-ratio or the total KV "
                                            f"budget.\" (validate_swa_pool_size)")
    return swa


SWA_EVICTION_INTERVAL = 128   # envs.SGLANG_SWA_EVICTION_INTERVAL's default (the variable is not modelled)


def swa_request_cap(*, page_size: int, window: int, requests_per_worker: int, chunked_prefill_size: int,
                    overlap: bool, draft_tokens: int = 0, decode_server: bool = False,
                    decode_extra_slots: int = 0) -> int:
    """``compute_swa_request_cap``: the SWA slots the scheduler holds live at the request cap. Per request the
    window, the eviction interval x the draft tokens (1 without speculative decoding) and a page of padding,
    plus one decode step's allocation: a page; under a DFLASH / DSPARK draft (one step, top-k 1) the draft
    tokens page-aligned (``spec_decode_alloc_len_per_request``, overlap off) or twice the draft tokens
    (``get_alloc_reserve_per_decode``, overlap on). A PD decode server adds (window + page) per pre-allocated
    request row (``disaggregation_decode_extra_slots``); every other server the prefill chunks in flight (two
    under the overlap schedule) and a page."""
    held = swa_request_tokens(page_size=page_size, window=window, draft_tokens=draft_tokens,
                              overlap=overlap) * max(1, requests_per_worker)
    return held + swa_fixed_tokens(page_size=page_size, window=window, chunked_prefill_size=chunked_prefill_size,
                                   overlap=overlap, decode_server=decode_server,
                                   decode_extra_slots=decode_extra_slots)


def swa_request_tokens(*, page_size: int, window: int, draft_tokens: int, overlap: bool) -> int:
    """``compute_swa_request_cap``'s ``per_request``: the SWA slots one running request holds at most."""
    trailing = window + SWA_EVICTION_INTERVAL * max(draft_tokens, 1) + page_size
    if not draft_tokens:
        decode_alloc = page_size
    elif not overlap:
        decode_alloc = -(-draft_tokens // page_size) * page_size
    else:
        decode_alloc = 2 * draft_tokens
    return trailing + decode_alloc


def swa_fixed_tokens(*, page_size: int, window: int, chunked_prefill_size: int, overlap: bool,
                     decode_server: bool = False, decode_extra_slots: int = 0) -> int:
    """``compute_swa_request_cap``'s term beside the requests: a decode server's pre-allocated rows, or the
    prefill chunks in flight and a page."""
    if decode_server:
        return (window + page_size) * decode_extra_slots
    return (2 if overlap else 1) * chunked_prefill_size + page_size


def swa_capacity_ledger(p, *, available_bytes: int, available_source: str, cell_size: float, ratio: float,
                        window: int, page_size: int, requests_per_worker: int | None, context_len: int,
                        full_bytes_per_token: int = 0, swa_bytes_per_token: int = 0,
                        request_cap: int | None = None) -> CapacityLedger:
    """A hybrid-SWA model (``HybridSWAPoolConfigurator.calculate_pool_sizes``): the full pool's tokens are
    ``int(rest // cell_size)`` with SGLang's float cell (full rows + ratio x SWA rows), page-aligned; a smaller
    --max-total-tokens re-derives both pools from it (``calculate_pool_sizes_from_max_tokens``); the SWA pool
    holds ``ratio`` x the full pool's tokens. Requests as ``resolve_max_num_reqs`` over the full pool.

    ``request_cap`` (``SWARequestCapPoolConfigurator``, applicable with --max-running-requests, the radix cache
    off and a chunked prefill): the SWA pool is that cap page-aligned up, and the full pool takes the rest at
    its own rows (``full_bytes_per_token``); a smaller --max-total-tokens sets the full pool and caps the SWA
    pool at it."""
    if request_cap is not None:
        swa = -(-request_cap // page_size) * page_size
        tokens = int((available_bytes - swa * swa_bytes_per_token) // full_bytes_per_token) // page_size * page_size
        if tokens <= 0:
            raise ProfileError("max_running_requests", f"SGLang 0.5.23 refuses it: \"SWA pool cap ({swa} tokens, "
                                                       f"{swa * swa_bytes_per_token / (1 << 30):.2f} GiB) leaves no "
                                                       f"room for the full KV pool within the available "
                                                       f"{available_bytes / (1 << 30):.2f} GiB. Reduce "
                                                       f"--max-running-requests, lower SGLANG_SWA_EVICTION_INTERVAL, "
                                                       f"or increase --mem-fraction-static.\" "
                                                       f"(SWARequestCapPoolConfigurator)")
        if p.max_total_tokens is not None and p.max_total_tokens < tokens:
            swa = min(swa, p.max_total_tokens)
            tokens = p.max_total_tokens // page_size * page_size
        return _token_only_ledger(available_bytes, available_source, tokens,
                                  tokens * full_bytes_per_token + swa * swa_bytes_per_token, requests_per_worker,
                                  context_len, full_max_total_num_tokens=tokens, swa_max_total_num_tokens=swa)
    tokens = int(available_bytes // cell_size) // page_size * page_size
    if p.max_total_tokens is not None and p.max_total_tokens < tokens:
        tokens = p.max_total_tokens // page_size * page_size
    if tokens <= 0:
        raise refusal(6)
    swa = swa_pool_tokens(tokens, ratio, page_size, window)
    return _token_only_ledger(available_bytes, available_source, tokens, int(tokens * cell_size), requests_per_worker,
                              context_len, full_max_total_num_tokens=tokens, swa_max_total_num_tokens=swa)
