"""Issue 31: every buffer ``glm-kv measure`` allocates for a model other than GLM-5.3-Flash is SGLang 0.5.23's.

SGLang builds its own pools for the launch (``KVCacheConfigurator._build_req_to_token_pool`` and
``_build_token_to_kv_pool``, on the meta device as the contract oracle does, W12) from the model's
config.json and the launch flags only; glm-kv builds ``tensors.model_pools.ModelDevicePools`` from its
plan's resolution at the same sizes. Every buffer is compared by its SGLang object path: shape, dtype,
storage bytes, and which buffer's storage it shares (0.5.23 fuses K and V of one shape into one
allocation per layer). A planted builder error (one KV head per rank too many) must be caught.

Run: ``GLM_KV_SGLANG=1 nice .venv-sglang/bin/python -m pytest tests/sglang/test_model_pool_buffers.py -q -p no:randomly``
"""
from __future__ import annotations

import pytest

GiB = 1 << 30
TOKENS, SLOTS, REQS = 2, 2, 3      # token pages, state slots, requests: small pools
LAUNCH = {"gpu": "H200", "pre_model_load_bytes": 147_412_123_456, "weights_bytes": 40 * GiB,
          "context_length": 256, "max_running_requests": REQS}
CASES = [("qwen3.5-35b-a3b", {"tp_size": 4}),
         ("qwen3.5-35b-a3b", {"tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "mamba_ssm_dtype": "bfloat16"}),
         ("nemotron-3-super-120b-a12b-fp8", {"tp_size": 4}),
         ("kimi-k3", {"tp_size": 8, "weights_bytes": 60 * GiB}),
         ("deepseek-v3.2", {"tp_size": 8}),
         ("deepseek-v3.2", {"tp_size": 8, "gpu": "B200", "pre_model_load_bytes": 189_707_837_347,
                            "kv_cache_dtype": "fp8_e4m3"}),
         ("gpt-oss-120b", {"tp_size": 2}),
         ("gemma-4-26b-a4b", {"tp_size": 2}),   # SWA pool with its own heads and head dim (issue 32)
         ("mimo-v2-flash", {"tp_size": 4}),     # K 192 / V 128 rows in both pools (issue 32)
         ("llama-4-scout-17b-16e-instruct", {"tp_size": 4}),   # chunked attention in the SWA pool (issue 32)
         ("jet-nemotron-2b", {"tp_size": 1, "weights_bytes": 5 * GiB}),
         # speculative verify scratch (MTP / NEXTN): a linear chain dedups the conv windows, a tree keeps them dense
         ("qwen3.5-35b-a3b", {"tp_size": 4, "speculative_algorithm": "NEXTN", "speculative_num_steps": 3,
                              "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
                              "draft_weights_bytes": GiB}),
         ("qwen3.5-35b-a3b", {"tp_size": 4, "speculative_algorithm": "NEXTN", "speculative_num_steps": 3,
                              "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8,
                              "draft_weights_bytes": GiB})]


def _named(pairs) -> dict:
    """name -> [shape, dtype, storage bytes, the first name holding the same storage (None: its own)]."""
    out, owner = {}, {}
    for name, t in pairs:
        base = t._base if t._base is not None else t
        key = id(base)
        shared = owner.get(key)
        owner.setdefault(key, name)
        out[name] = [list(t.shape), str(t.dtype).removeprefix("torch."),
                     base.numel() * base.element_size(), shared]
    return out


def _sglang_side(name: str, launch: dict, tokens: int, slots: int) -> dict:
    """SGLang's pools for this launch at ``tokens`` full (and SWA) tokens and ``slots`` state slots."""
    import models_contract_oracle as O

    seen: dict = {}
    original = O._measure

    def spy(configurator, v, mc, hybrid, dsa, n_reqs, swa=False):
        from sglang.srt.mem_cache.kv_cache_configurator import _PoolSizes
        from sglang.srt.runtime_context import get_context

        k = configurator("meta")
        if hybrid:
            get_context().override("glm-kv pool buffers: small pools", max_mamba_cache_size=slots)
        with O.meta_device_module():
            req = k._build_req_to_token_pool(max_num_reqs=REQS)
            sizes = _PoolSizes(max_total_num_tokens=tokens, max_running_requests=REQS,
                               full_max_total_num_tokens=tokens if swa else None,
                               swa_max_total_num_tokens=tokens if swa else None,
                               c4_max_total_num_tokens=0, c128_max_total_num_tokens=0, c4_state_pool_size=0,
                               c128_state_pool_size=0, c4_state_dtype=None, c128_state_dtype=None)
            kv = k._build_token_to_kv_pool(sizes=sizes, is_dsa_model=dsa, is_dsv4_model=False, req_to_token_pool=req)
        pairs = [("req_to_token_pool.req_to_token", req.req_to_token)]
        if hybrid:
            cache = req.mamba_pool.mamba_cache
            pairs += [(f"mamba_pool.conv[{i}]", c) for i, c in enumerate(cache.conv)]
            pairs.append(("mamba_pool.temporal", cache.temporal))
            if getattr(cache, "intermediate_ssm", None) is not None:   # the speculative verify scratch
                pairs.append(("mamba_pool.intermediate_ssm", cache.intermediate_ssm))
                pairs += [(f"mamba_pool.intermediate_conv_window[{i}]", c)
                          for i, c in enumerate(cache.intermediate_conv_window)]
        for prefix, pool in (("full_kv_pool", getattr(kv, "full_kv_pool", kv)),
                             ("swa_kv_pool", getattr(kv, "swa_kv_pool", None))):
            if pool is None:
                continue
            for attr in ("kv_buffer", "k_buffer", "v_buffer"):
                pairs += [(f"{prefix}.{attr}[{i}]", t) for i, t in enumerate(getattr(pool, attr, None) or [])]
            idx = getattr(pool, "index_key_cache", None)
            if idx is not None:
                pairs += [(f"{prefix}.index_key_cache.buffer[{i}]", t) for i, t in enumerate(idx.buffer)]
        seen["buffers"] = _named(pairs)
        return original(configurator, v, mc, hybrid, dsa, n_reqs, swa)

    O._measure = spy
    try:
        ans = O.sglang_contract(name, launch)
    finally:
        O._measure = original
    assert "errors" not in ans, ans
    return seen["buffers"]


def _sglang_host_side(name: str, launch: dict, tokens: int, slots: int) -> dict:
    """SGLang's HiCache HostPoolGroup over device pools of ``tokens`` / ``slots`` (its hybrid pool assembler's
    strategy, on meta as the contract oracle builds it), every host buffer named by entry and attribute."""
    import models_contract_oracle as O
    from sglang.srt.mem_cache.hybrid_cache import hybrid_pool_assembler as H
    from sglang.srt.runtime_context import get_context

    seen: dict = {}
    original_host, original_select = O._host, H._select_strategy

    def select(kv, components):
        strategy = original_select(kv, components)
        build = strategy.build

        def spy_build(*a, **k):
            result = build(*a, **k)
            pairs = []
            for e in result.host_pool_group.entries:
                pool, head = e.host_pool, f"{type(e.host_pool).__name__}[{e.name.value}]"
                for attr in ("kv_buffer", "index_k_with_scale_buffer", "temporal_buffer"):
                    t = getattr(pool, attr, None)
                    if t is not None and hasattr(t, "shape"):
                        pairs.append((f"{head}.{attr}", t))
                pairs += [(f"{head}.conv_buffer[{i}]", t) for i, t in enumerate(getattr(pool, "conv_buffer", None) or [])]
            seen["host"] = _named(pairs)
            return result

        strategy.build = spy_build
        return strategy

    def spy_host(configurator, sa, v, hybrid, dsa, _tokens, _max_reqs, r, **rest):
        if hybrid:
            get_context().override("glm-kv host buffers: small pools", max_mamba_cache_size=slots)
        return original_host(configurator, sa, v, hybrid, dsa, tokens, REQS, r, **rest)

    O._host, H._select_strategy = spy_host, select
    try:
        ans = O.sglang_contract(name, launch)
    finally:
        O._host, H._select_strategy = original_host, original_select
    assert "errors" not in ans, ans
    return seen["host"]


def _ours_host(name: str, launch: dict, tokens: int, slots: int) -> dict:
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import load_plan
    from glm_kv.tensors.model_pools import ModelDevicePools, ModelHostPools, model_geometry

    plan = load_plan(make_profile({"model": name, **launch}))
    g = model_geometry(plan, max_running_requests_per_worker=REQS, size=tokens, mamba_size=slots)
    host = ModelHostPools(ModelDevicePools(g, device="cpu", fill="empty"), float(plan.profile.hicache_ratio),
                          fill="empty", pin_memory=False)
    return _named(host.named_buffers())


def _ours(name: str, launch: dict, tokens: int, slots: int) -> dict:
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import load_plan
    from glm_kv.tensors.model_pools import ModelDevicePools, model_geometry

    plan = load_plan(make_profile({"model": name, **launch}))
    g = model_geometry(plan, max_running_requests_per_worker=REQS, size=tokens, mamba_size=slots,
                       spec_state_size=REQS)   # HybridReqToTokenPool: the verify scratch has max_num_reqs + 1 rows
    pools = ModelDevicePools(g, device="cpu", fill="empty")
    return _named(pools.named_buffers())


def _problems(name: str, launch: dict) -> list:
    from glm_kv.inputs.resolve import resolve
    from glm_kv.inputs.profile import make_profile

    page = resolve(make_profile({"model": name, **launch})).page_size
    tokens = TOKENS * page
    theirs = _sglang_side(name, launch, tokens, SLOTS)
    ours = _ours(name, launch, tokens, SLOTS)
    return [(k, ours.get(k), theirs.get(k)) for k in sorted(set(ours) | set(theirs)) if ours.get(k) != theirs.get(k)]


@pytest.mark.parametrize("name, launch", CASES, ids=lambda v: v if isinstance(v, str) else
                         ",".join(f"{k}={x}" for k, x in v.items() if k not in ("pre_model_load_bytes", "weights_bytes")))
def test_every_buffer_is_sglangs(name, launch):
    assert _problems(name, {**LAUNCH, **launch}) == []


def test_a_planted_builder_error_is_caught(monkeypatch):
    """Planted: the builder gives the full pool one KV head per rank too many -> every K (and V) buffer named."""
    import dataclasses

    from glm_kv.tensors import model_pools as MP

    real = MP.model_geometry
    monkeypatch.setattr(MP, "model_geometry", lambda *a, **k: dataclasses.replace(real(*a, **k),
                                                                                   kv_heads=real(*a, **k).kv_heads + 1))
    bad = _problems("qwen3.5-35b-a3b", {**LAUNCH, "tp_size": 4})
    assert bad and all(k.startswith("full_kv_pool.") for k, _, _ in bad), bad


HOST_CASES = [("qwen3.5-35b-a3b", {"tp_size": 4}), ("nemotron-3-super-120b-a12b-fp8", {"tp_size": 4}),
              ("kimi-k3", {"tp_size": 8, "weights_bytes": 60 * GiB}), ("deepseek-v3.2", {"tp_size": 8}),
              ("qwen3.5-35b-a3b", {"tp_size": 4, "hicache_ratio": 3.5})]


@pytest.mark.parametrize("name, launch", HOST_CASES, ids=lambda v: v if isinstance(v, str) else
                         ",".join(f"{k}={x}" for k, x in v.items() if k != "weights_bytes"))
def test_every_host_buffer_is_sglangs(name, launch):
    """``glm-kv measure --host`` for the other models: the HiCache host buffers are SGLang's, page_first."""
    from glm_kv.inputs.profile import make_profile
    from glm_kv.inputs.resolve import resolve

    full = {**LAUNCH, "enable_hierarchical_cache": True, **launch}
    page = resolve(make_profile({"model": name, **full})).page_size
    ours, theirs = _ours_host(name, full, TOKENS * page, SLOTS), _sglang_host_side(name, full, TOKENS * page, SLOTS)
    assert ours and [(k, ours.get(k), theirs.get(k)) for k in sorted(set(ours) | set(theirs))
                     if ours.get(k) != theirs.get(k)] == []
