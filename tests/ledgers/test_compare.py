"""glm_kv/ledgers/compare.py: requests of a context that fit vLLM's block pool, and the SGLang side read
off the plan (never re-estimated)."""
from __future__ import annotations

import math

import pytest

from glm_kv.inputs.hf_config import load_hf_config
from glm_kv.inputs.profile import load_profile
from glm_kv.ledgers.compare import (VLLM_DEFAULT_MAX_NUM_SEQS, sglang_pool_bytes, sglang_side, vllm_blocks_per_request,
                                    vllm_side)
from glm_kv.ledgers.plan import compute_plan
from glm_kv.ledgers.vllm import VllmArgs, vllm_plan

GiB = 2**30
LAUNCHES = [("glm-5.3-flash", VllmArgs(tp=8, kv_cache_memory_bytes=60 * GiB)),
            ("glm-5.3-flash", VllmArgs(tp=8, kv_cache_memory_bytes=60 * GiB, enable_prefix_caching=False)),
            ("qwen3.5-35b-a3b", VllmArgs(tp=2, kv_cache_memory_bytes=30 * GiB, max_model_len=131072)),
            ("deepseek-v3.2", VllmArgs(tp=8, kv_cache_memory_bytes=40 * GiB))]


@pytest.fixture(scope="module", params=range(len(LAUNCHES)), ids=[f"{m}-{i}" for i, (m, _) in enumerate(LAUNCHES)])
def plan(request):
    model, args = LAUNCHES[request.param]
    return vllm_plan(load_hf_config(model), args)


def test_blocks_per_request_at_max_model_len_is_vllms(plan):
    # the same sum vllm.py gives vLLM's Maximum concurrency (checked against vLLM in tests/vllm)
    assert vllm_blocks_per_request(plan, plan.max_model_len) == plan.blocks_per_request


def test_requests_at_max_model_len_against_vllms_concurrency(plan):
    side = vllm_side(plan, "H200", 10**9, plan.max_model_len, "test")
    # vLLM's figure counts the null block: ours, without it, is floor(concurrency) or one less
    assert math.floor(plan.maximum_concurrency) - 1 <= side.requests_per_worker <= math.floor(plan.maximum_concurrency)
    assert side.requests_per_worker == (plan.num_blocks - 1) // plan.blocks_per_request
    assert side.binds == "blocks (KV + state)"


def test_shorter_requests_fit_no_fewer(plan):
    fits = [vllm_side(plan, "H200", 10**9, n, "t").requests_per_worker for n in (1, 4096, 65536, plan.max_model_len)]
    assert fits == sorted(fits, reverse=True) and fits[0] > fits[-1]


def test_max_num_seqs_binds_short_requests(plan):
    side = vllm_side(plan, "H200", None, 1, "t")
    by_blocks = (plan.num_blocks - 1) // vllm_blocks_per_request(plan, 1)
    # hybrid models in align mode: every request holds its state blocks, whatever its length, so even
    # one-token requests can run out of blocks before vLLM's default cap (GLM-5.3-Flash TP8 60 GiB: 616)
    assert side.requests_per_worker == min(by_blocks, VLLM_DEFAULT_MAX_NUM_SEQS["H200"])
    assert side.binds == ("blocks (KV + state)" if by_blocks < 1024 else "max_num_seqs")
    assert (vllm_side(plan, "H200", 3, 1, "t").requests_per_worker, vllm_side(plan, "H200", 3, 1, "t").binds) == (
        3, "max_num_seqs")


def test_attention_blocks_grow_with_the_context():
    plan = vllm_plan(load_hf_config("deepseek-v3.2"), VllmArgs(tp=8, kv_cache_memory_bytes=40 * GiB))
    blk = plan.cache_block_size
    # DSA: MLA + indexer groups, each cdiv(n, block) per request
    assert vllm_blocks_per_request(plan, blk) * 2 == vllm_blocks_per_request(plan, 2 * blk)
    assert vllm_blocks_per_request(plan, blk + 1) == vllm_blocks_per_request(plan, 2 * blk)


def test_sglang_side_is_the_plans_own_figures():
    plan = compute_plan(load_profile("h200-0.5.23"))
    cap = plan.to_dict()["capacity"]
    side = sglang_side(plan, plan.profile.context_length)
    assert side.requests_per_worker == cap["requests_fit_at_context"]
    assert side.tokens_per_worker == cap["max_total_num_tokens"]
    assert side.workers == plan.parallel.attn_dp_size == 8
    assert sglang_pool_bytes(plan) == cap["token_pool_bytes"] + cap["mamba_pool_bytes"]
    assert {"tokens": "token slots", "mamba": "state slots", "requested": "max_running_requests"}[
        cap["binds_at_context"]] == side.binds


@pytest.mark.parametrize("model,args", LAUNCHES[1:], ids=[m for m, _ in LAUNCHES[1:]])
def test_the_null_block_holds_no_request(model, args):
    """A pool of exactly k requests' blocks (--num-gpu-blocks-override) serves k - 1: block 0 is vLLM's
    null block. vLLM's own Maximum concurrency line still says k."""
    from dataclasses import replace

    per = vllm_plan(load_hf_config(model), args).blocks_per_request
    plan = vllm_plan(load_hf_config(model), replace(args, num_gpu_blocks_override=10 * per))
    assert plan.num_blocks == 10 * per and plan.maximum_concurrency_printed == "10.00x"
    assert vllm_side(plan, "H200", 10**9, plan.max_model_len, "t").requests_per_worker == 9
