"""Issue 31: the device-to-rest path of every model, glm-kv's ``memory_ledger_for`` against SGLang 0.5.23.

SGLang gets the checkpoint's files and the launch flags only (models_oracle.model_dir); its
``ServerArgs.resolve_once()`` computes mem_fraction_static, and with weights_bytes +
pre_model_load_bytes given its ``KVCacheConfigurator._profile_available_bytes`` computes the rest
(oracle_memory.fake_free_memory answers the two free-memory readings). glm-kv gets the same launch as
a profile; nothing glm-kv computes is handed to SGLang. Compared exactly.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from cpu_workarounds import cpu_as_gpu, quiet_sglang_logs
from models_oracle import model_dir
from oracle import fake_gpu

GiB = 1 << 30
MODELS = ["kimi-k3", "qwen3.5-35b-a3b", "nemotron-3-super-120b-a12b-fp8", "deepseek-v3.2", "glm-5.1", "glm-5.3-flash"]
LAUNCHES = [
    {"tp_size": 8},
    {"tp_size": 2, "chunked_prefill_size": 4096},
    {"tp_size": 8, "dp_size": 8, "enable_dp_attention": True},
    {"tp_size": 4, "max_total_tokens": 3000},
    {"tp_size": 8, "disable_prefill_cuda_graph": True},
    {"tp_size": 1, "max_running_requests": 400},
    {"tp_size": 8, "chunked_prefill_size": -1},
    {"tp_size": 4, "cuda_graph_backend_prefill": "breakable"},
    {"tp_size": 8, "disable_cuda_graph": True, "max_total_tokens": 100000},
]
CASES = [(m, {"gpu": g, **launch}) for m in MODELS for g in ("H200", "B200") for launch in LAUNCHES]
# (weights per rank, pre-load free memory): stated inputs given to both sides
WEIGHTS = {"kimi-k3": 70 * GiB, "qwen3.5-35b-a3b": 9 * GiB, "nemotron-3-super-120b-a12b-fp8": 16 * GiB,
           "deepseek-v3.2": 82 * GiB, "glm-5.1": 90 * GiB, "glm-5.3-flash": 40 * GiB}
PRE = {"H200": int(137.29 * GiB), "B200": int(176.5 * GiB)}
REST_CASES = [(m, {"gpu": g, "tp_size": 8, **extra}) for m in MODELS for g in ("H200", "B200")
              for extra in ({}, {"dp_size": 8, "enable_dp_attention": True})]


def sglang_memory(name: str, launch: dict, weights: int | None = None, pre: int | None = None) -> dict:
    """SGLang's mem_fraction_static, and its rest (before the mamba pool) when weights are given."""
    quiet_sglang_logs()
    gpu = fake_gpu(launch)
    d = model_dir(name)
    with cpu_as_gpu(gpu):
        import torch

        import sglang.srt.utils.common as common
        from oracle_memory import fake_free_memory
        from sglang.srt.arg_groups.overrides import resolved_view
        from sglang.srt.configs.model_config import AttentionArch, ModelConfig
        from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
        from sglang.srt.model_executor.model_runner_components.layer_setup import ModelLayerInfo
        from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import SpecAuxHiddenStateConfig
        from sglang.srt.runtime_context import get_context, get_parallel
        from sglang.srt.server_args import ServerArgs
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        sa = ServerArgs(model_path=d, device="cuda", **{k: v for k, v in launch.items() if k != "gpu"})
        sa.resolve_once()
        v = resolved_view(sa)
        out = {"mem_fraction_static": v.mem_fraction_static}
        if weights is None:
            return out
        get_context().set_server_args(sa)
        par = get_parallel()
        mc = ModelConfig.from_server_args(sa)
        n = mc.num_hidden_layers
        kv_dtype = {"bfloat16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn, "auto": torch.bfloat16}[
            v.kv_cache_dtype]
        kvc = KVCacheConfigurator(
            device="cpu", gpu_id=0, attn_dp_size=par.attn_dp_size, pp_size=1, pp_group=None, model=None,
            model_config=mc, server_args=sa, kv_cache_dtype=kv_dtype, kv_cache_dtype_str=v.kv_cache_dtype,
            model_dtype=torch.bfloat16, page_size=v.page_size, sliding_window_size=None,
            spec_algorithm=SpeculativeAlgorithm.from_string(None), is_draft_worker=False,
            post_capture_kv_active=False, spec_aux_config=SpecAuxHiddenStateConfig(), is_hybrid_swa=False,
            is_hybrid_swa_compress=False, use_mla_backend=mc.attention_arch == AttentionArch.MLA,
            layer_info=ModelLayerInfo(start_layer=0, end_layer=n, num_effective_layers=n), forward_stream=None,
            req_to_token_pool=None, token_to_kv_pool_allocator=None, memory_pool_config=None)
        state = {"free": pre, "total": int(gpu.memory_mib * (1 << 20))}
        seen = {}
        original = KVCacheConfigurator._handle_max_mamba_cache

        def spy(self, rest):   # the rest before the mamba pool takes its share
            seen["rest_gib"] = rest
            return original(self, rest)

        with fake_free_memory(state):
            world = v.tp_size * v.pp_size
            pre_gib = common.get_available_gpu_memory("cuda", 0, distributed=world > 1, cpu_group=None)
            state["free"] = pre - weights
            KVCacheConfigurator._handle_max_mamba_cache = spy
            try:
                with par.override(world_group=SimpleNamespace(cpu_group=None)):
                    returned = kvc._profile_available_bytes(pre_model_load_memory=pre_gib)
            finally:
                KVCacheConfigurator._handle_max_mamba_cache = original
        out["rest_bytes"] = int(seen["rest_gib"] * GiB) if "rest_gib" in seen else returned
        out["is_multimodal"] = bool(mc.is_multimodal)
        return out


def ours(name: str, launch: dict, weights: int | None = None, pre: int | None = None) -> dict:
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.memory import is_multimodal
    from glm_kv.ledgers.plan import load_plan

    # without weights only the fraction is compared: no capacity asked for (with the one plan a 1 GiB
    # available_bytes would size, and refuse, the hybrids' pools)
    given = {"weights_bytes": weights, "pre_model_load_bytes": pre} if weights is not None else \
        {"weights_estimate": False}
    p = make_profile({"model": name, **launch, **given})
    plan = load_plan(p)   # the one engine: the plan's own device-to-rest ledger
    m = plan.memory
    out = {"mem_fraction_static": m.mem_fraction_static}
    if weights is not None:
        out.update(rest_bytes=m.rest_bytes, is_multimodal=is_multimodal(plan.config, p))
    return out


def _id(v):
    return v if isinstance(v, str) else ",".join(f"{k}={x}" for k, x in v.items())


@pytest.mark.parametrize("name, launch", CASES, ids=_id)
def test_default_fraction_agrees(sglang_ready, name, launch):
    assert ours(name, launch) == sglang_memory(name, launch)


@pytest.mark.parametrize("name, launch", REST_CASES, ids=_id)
def test_rest_after_weights_agrees(sglang_ready, name, launch):
    w, pre = WEIGHTS[name], PRE[launch["gpu"]]
    assert ours(name, launch, w, pre) == sglang_memory(name, launch, w, pre)


def test_a_planted_mla_term_for_gqa_models_is_caught(sglang_ready, monkeypatch):
    """Planted error: the flat MLA prefill-graph term for every model (GQA ones included): the
    fraction of Qwen3.5 and Nemotron-3-Super moves away from SGLang's; the MLA models' does not."""
    import glm_kv.ledgers.memory as memory

    real = memory.fraction_inputs

    def planted(*a, **k):
        return memory.FractionInputs(**{**real(*a, **k).__dict__, "mla_backend": True})

    monkeypatch.setattr(memory, "fraction_inputs", planted)
    launch = {"gpu": "H200", "tp_size": 8}
    for name in ("qwen3.5-35b-a3b", "nemotron-3-super-120b-a12b-fp8"):
        assert ours(name, launch) != sglang_memory(name, launch), name
    assert ours("deepseek-v3.2", launch) == sglang_memory("deepseek-v3.2", launch)


def test_a_planted_kda_prefill_graph_is_caught(sglang_ready, monkeypatch):
    """Planted error: Kimi-K3 keeps the breakable prefill graph (SGLang turns it off for KDA models other
    than GLM-5.3-Flash): its fraction moves away from SGLang's."""
    import glm_kv.ledgers.memory as memory

    real = memory.fraction_inputs

    def planted(*a, **k):
        return memory.FractionInputs(**{**real(*a, **k).__dict__, "model_prefill_graph_off": False})

    monkeypatch.setattr(memory, "fraction_inputs", planted)
    launch = {"gpu": "B200", "tp_size": 8}
    assert ours("kimi-k3", launch) != sglang_memory("kimi-k3", launch)


def test_a_planted_multimodal_reservation_is_caught(sglang_ready, monkeypatch):
    """Planted error: no multimodal reservation for any model: the rest of Qwen3.5 (multimodal) moves."""
    import glm_kv.ledgers.memory as memory

    monkeypatch.setattr(memory, "mm_reservation_gib", lambda multimodal: 0.0)
    launch = {"gpu": "H200", "tp_size": 8}
    w, pre = WEIGHTS["qwen3.5-35b-a3b"], PRE["H200"]
    assert ours("qwen3.5-35b-a3b", launch, w, pre)["rest_bytes"] != \
        sglang_memory("qwen3.5-35b-a3b", launch, w, pre)["rest_bytes"]
