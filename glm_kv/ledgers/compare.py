"""SGLang 0.5.23 and vLLM 0.33.0 side by side for one model on one GPU (issue 33, ``glm-kv compare``).

Every figure here is read off the two engines' plans, never re-estimated: the SGLang side is the plan
``glm-kv plan`` prints (its capacity ledger and ``derivations.requests_fit`` / ``binding_at_context``,
the one formula the book and ``plan`` use), the vLLM side is ``ledgers.vllm.vllm_plan``. What is computed
here is only what vLLM's log does not state: how many requests of a given context fit its block pool.

vLLM's pool: ``num_blocks`` blocks shared by every KV cache group (attention, indexer, Mamba state, the
kpool ring); one request of ``n`` tokens takes ``sum over groups of blocks_per_request(n)`` of them
(``kv_cache_interface.py`` ``max_memory_usage_bytes`` / page: attention cdiv(n, block size), a Mamba
group its state blocks, whatever ``n``). Block 0 is the null block (``v1/core/block_pool.py``: taken from
the free queue at start-up, never handed to a request), so ``num_blocks - 1`` are for requests; vLLM's
own ``Maximum concurrency`` line divides all ``num_blocks`` (``get_max_concurrency_for_kv_cache_config``)
and is shown as vLLM prints it. The scheduler admits at most ``max_num_seqs`` running requests.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional

from .vllm import VllmPlan

# vLLM 0.33.0's default max_num_seqs for `vllm serve` (UsageContext.OPENAI_API_SERVER) on a GPU of at least
# 70 GiB that is not an A100 (H100/H200) or of at least 160 GiB (B200/B300): 1024 in both tiers
# (engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args, lines 2973-2996)
VLLM_DEFAULT_MAX_NUM_SEQS = {"H200": 1024, "B200": 1024}


def vllm_blocks_per_request(plan: VllmPlan, context: int) -> int:
    """Blocks of vLLM's pool one request of ``context`` tokens holds (every group's, as vLLM sums them)."""
    return sum(g.spec.blocks_per_request(context, plan.mamba_cache_mode, plan.decode_context_parallel_size)
               for g in plan.groups)


def vllm_max_num_seqs(gpu: str, given: Optional[int]) -> tuple[int, str]:
    """max_num_seqs and where it comes from (the command, or vLLM's default for the GPU)."""
    if given is not None:
        return given, "--max-num-seqs"
    return VLLM_DEFAULT_MAX_NUM_SEQS[gpu], "vLLM's default for `vllm serve` on this GPU (arg_utils.py:2973-2996)"


@dataclass(frozen=True)
class EngineSide:
    """One engine's answer, per worker (an SGLang attention-DP rank, or a vLLM engine of TP ranks)."""

    engine: str
    workers: int                    # SGLang: attn_dp workers, each with its own pools; vLLM: 1 engine
    kv_bytes_per_rank: int          # the pools' bytes on one GPU
    kv_bytes_source: str
    tokens_per_worker: int          # SGLang: max_total_num_tokens; vLLM: gpu_kv_cache_size_tokens
    tokens_source: str
    request_cap_per_worker: int     # SGLang: max_running_requests per worker; vLLM: max_num_seqs
    request_cap_source: str
    context: int
    requests_per_worker: int        # requests of `context` tokens resident at once
    binds: str                      # which limit gives requests_per_worker
    state_slots_per_worker: Optional[int] = None        # SGLang: max_mamba_cache_size
    blocks_per_request: Optional[int] = None            # vLLM, at `context`
    num_blocks: Optional[int] = None                     # vLLM
    maximum_concurrency_printed: Optional[str] = None    # vLLM's line, at max_model_len
    max_model_len: Optional[int] = None                  # vLLM

    @property
    def requests_total(self) -> int:
        return self.requests_per_worker * self.workers

    @property
    def tokens_total(self) -> int:
        return self.tokens_per_worker * self.workers

    def to_dict(self) -> dict:
        return {**asdict(self), "requests_total": self.requests_total, "tokens_total": self.tokens_total}


def vllm_side(plan: VllmPlan, gpu: str, max_num_seqs: Optional[int], context: int, kv_source: str) -> EngineSide:
    """vLLM's answer at ``context`` tokens: min(free blocks // blocks per request, max_num_seqs)."""
    per_request = vllm_blocks_per_request(plan, context)
    by_blocks = (plan.num_blocks - 1) // per_request
    cap, cap_source = vllm_max_num_seqs(gpu, max_num_seqs)
    return EngineSide(
        engine="vLLM 0.33.0", workers=1, kv_bytes_per_rank=plan.kv_cache_memory_bytes, kv_bytes_source=kv_source,
        tokens_per_worker=plan.gpu_kv_cache_size_tokens,
        tokens_source="GPU KV cache size (vLLM's line: int(Maximum concurrency x max_model_len))",
        request_cap_per_worker=cap, request_cap_source=cap_source, context=context,
        requests_per_worker=min(by_blocks, cap), binds="blocks (KV + state)" if by_blocks < cap else "max_num_seqs",
        blocks_per_request=per_request, num_blocks=plan.num_blocks,
        maximum_concurrency_printed=plan.maximum_concurrency_printed, max_model_len=plan.max_model_len)


SGLANG_BINDS = {"requested": "max_running_requests", "tokens": "token slots", "mamba": "state slots"}


def sglang_pool_bytes(plan) -> int:
    """The SGLang plan's KV + state pool bytes on one rank (token pool + Mamba pool): what
    ``--same-kv-bytes`` gives vLLM as --kv-cache-memory-bytes."""
    c = plan.capacity
    return c.token_pool_bytes + (c.mamba_pool_bytes if plan.hybrid else 0)


def sglang_side(plan, context: int) -> EngineSide:
    """SGLang's answer at ``context`` tokens: ``derivations.requests_fit`` (the plan's own formula)."""
    from .derivations import binding_at_context, requests_fit

    c = plan.capacity
    return EngineSide(
        engine="SGLang 0.5.23", workers=plan.parallel.attn_dp_size, kv_bytes_per_rank=sglang_pool_bytes(plan),
        kv_bytes_source="the plan's token pool + state pool (from the GPU's memory)",
        tokens_per_worker=c.max_total_num_tokens, tokens_source="max_total_num_tokens",
        request_cap_per_worker=c.requested_max_running_requests_per_worker,
        request_cap_source="max_running_requests per worker",
        context=context, requests_per_worker=int(requests_fit(plan, context).value),
        binds=SGLANG_BINDS[binding_at_context(plan, context)],
        state_slots_per_worker=c.max_mamba_cache_size if plan.hybrid else None)
