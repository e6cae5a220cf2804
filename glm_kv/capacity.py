"""Capacity: from the bytes left for pools on a rank to mamba slots, tokens and requests.

Follows SGLang 0.5.23's sizing order (``KVCacheConfigurator._handle_max_mamba_cache``, then
``DefaultPoolConfigurator.calculate_pool_sizes``, then ``resolve_max_num_reqs``), including
its float arithmetic in GiB, so results agree with SGLang to the token.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import ProfileError

GiB = 1 << 30
AUTO_REQS_PER_CONTEXT = 512
AUTO_REQS_MIN, AUTO_REQS_MAX = 2048, 4096


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
    requested_max_running_requests: int
    requested_source: str           # "profile" or "auto"
    max_running_requests: int
    binding_limit: str              # "requested", "auto", "tokens" or "mamba"
    capped_message: str | None


SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS = 48


def effective_max_running_requests(p) -> int | None:
    """--max-running-requests as the server ends up with it: 48 under speculative decoding if unset."""
    if p.max_running_requests is None and p.speculative_algorithm:
        return SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS
    return p.max_running_requests


def auto_max_running_requests(tokens: int, context_len: int) -> int:
    """SGLang's estimate when --max-running-requests is absent: tokens / context x 512, in 2048..4096."""
    est = int(tokens / context_len * AUTO_REQS_PER_CONTEXT)
    return max(min(est, AUTO_REQS_MAX), AUTO_REQS_MIN)


def mamba_pool_size(rest_gib: float, p, slot: int, ratio: int, attn_dp: int,
                    draft_tokens: int) -> tuple[int, float, str, int, int]:
    """``_handle_max_mamba_cache``: slots K, the rest left in GiB, the source, budget and scratch."""
    mrr = effective_max_running_requests(p)
    per_worker_reqs = None if mrr is None else max(1, mrr // attn_dp)
    D = draft_tokens
    scratch = 0
    budget_bytes = 0
    if p.max_mamba_cache_size is not None:
        K, source = p.max_mamba_cache_size // attn_dp, "max_mamba_cache_size"
        if D:
            capped = min(per_worker_reqs, p.max_mamba_cache_size // ratio)
            scratch = slot * (capped + 1) * D
    elif p.disable_radix_cache and mrr is not None:
        K, source = per_worker_reqs, "max_running_requests"
        if D:
            scratch = slot * (K + 1) * D
    else:
        r = p.mamba_full_memory_ratio
        budget = rest_gib * r / (1 + r) * GiB
        budget_bytes = int(budget)
        source = "budget"
        if D:
            K = int((budget - slot * (1 + D)) // (slot * (1 + D / ratio)))
            capped = min(per_worker_reqs, K // ratio)
            scratch = slot * (capped + 1) * D
        else:
            K = int((budget - slot) // slot)
    if K <= 0:
        raise ProfileError("available_bytes", f"not enough memory for the hybrid state cache: "
                                              f"max_mamba_cache_size would be {K}")
    rest_gib = rest_gib - scratch / GiB - (K + 1) * slot / GiB
    return K, rest_gib, source, budget_bytes, scratch


def capacity_ledger(p, *, available_bytes: int, available_source: str, attn_dp: int, slot: int,
                    ratio: int, cell_size: int, page_size: int, draft_tokens: int,
                    context_len: int, rest_gib: float | None = None) -> CapacityLedger:
    """``rest_gib``: SGLang's float rest when derived; else available_bytes / GiB."""
    rest_gib = available_bytes / GiB if rest_gib is None else rest_gib
    K, rest_gib, source, budget, scratch = mamba_pool_size(rest_gib, p, slot, ratio, attn_dp, draft_tokens)
    rest_bytes = int(rest_gib * GiB)
    if rest_bytes <= 0:
        raise ProfileError("available_bytes", f"{available_bytes} B leave nothing for the token pool "
                                              f"after {K + 1} mamba slots")
    tokens = rest_bytes // cell_size // page_size * page_size
    if p.max_total_tokens is not None and p.max_total_tokens < tokens:
        tokens = p.max_total_tokens // page_size * page_size
    if tokens <= 0:
        raise ProfileError("available_bytes", "not enough memory for one page of tokens "
                                              "(increase mem_fraction_static or available_bytes)")
    mrr = effective_max_running_requests(p)
    if mrr is not None:
        requested, req_source = max(1, mrr // attn_dp), "profile"
    else:
        requested, req_source = auto_max_running_requests(tokens, context_len), "auto"
    n = min(requested, tokens // 2)
    binding = "requested" if req_source == "profile" else "auto"
    if n < requested:
        binding = "tokens"
    cap = K // ratio
    message = None
    if cap < n:
        message = (f"max_running_requests is capped to {cap} by the mamba state cache "
                   f"(max_mamba_cache_size={K}, {ratio} state slots per request)")
        n, binding = cap, "mamba"
    if n <= 0:
        raise ProfileError("available_bytes", "the hybrid state cache is too small to serve any request")
    return CapacityLedger(
        available_bytes=available_bytes, available_source=available_source,
        mamba_pool_source=source, mamba_budget_bytes=budget, max_mamba_cache_size=K,
        mamba_pool_bytes=(K + 1) * slot, spec_scratch_bytes=scratch,
        token_pool_budget_bytes=rest_bytes, max_total_num_tokens=tokens,
        token_pool_bytes=tokens * cell_size, requested_max_running_requests=requested,
        requested_source=req_source, max_running_requests=n, binding_limit=binding,
        capped_message=message,
    )
