"""DeepSeek-V4's weights per rank: glm-kv's estimate (``ledgers.dsv4_weights``) against SGLang 0.5.23's own model.

SGLang builds ``DeepseekV4ForCausalLM`` and its MTP draft ``DeepseekV4ForCausalLMNextN`` from the vendored
config.json on the ``meta`` device, as its loader does (``_get_quantization_config`` -> ``Fp8Config`` with the
FP4 experts the model config detects, ``set_default_torch_dtype(model_config.dtype)``, ``_initialize_model``),
after ``ServerArgs.resolve_once()`` resolved the launch on a faked H200 (SM90: the ``flashinfer_mxfp4`` MoE
runner SGLang picks there). The bytes are ``numel * element_size`` over every distinct tensor the model holds
(parameters, buffers, tensor attributes of its modules); the draft counts only tensors the target does not
already hold (SGLang's RoPE caches hand the draft the target's tables). glm-kv's formula never sees these
numbers; equality is exact, on both models, TP 1/2/4/8, with and without DP attention.

Workarounds on top of cpu_workarounds.cpu_as_gpu (W1-W4), none of which changes a shape or dtype SGLang chooses:

  M1 RANKS      the process groups and ranks a model asks ``get_parallel()`` for (pp_group, tp_rank, ...) are
                stated with SGLang's own ``get_parallel().override``: rank 0 of the launch's widths, which come
                from the resolved ServerArgs (tp / attention TP / MoE TP as SGLang derives them).
  M2 DP_FLAG    ``initialize_dp_attention_flags`` (SGLang's, as the scheduler calls it) sets the DP-attention
                flag ``VocabParallelEmbedding`` reads.
  M3 MOE_FLAGS  ``initialize_moe_config`` (SGLang's, as the scheduler calls it) publishes the resolved MoE runner.
  M4 ROPE_CUDA  ``rotary_embedding.base._is_cuda`` answers True (the profile's GPU is CUDA): the CUDA build keeps
                ``cos_sin_cache`` in fp32 (elsewhere it is cast to the model dtype, and a vLLM kernel import is
                attempted); ``rope_variant.get_device`` answers "meta" instead of raising without a device.
  M5 FLASHINFER ``is_flashinfer_available`` answers True for the FlashInfer CUTLASS MXFP4 MoE method (a CUDA
                package; its ``create_weights`` is SGLang's, unpatched).
  M6 WO_A_FP8   (one case) ``deepseek_v4._FP8_WO_A_GEMM`` True: what ``serving_hook`` leaves on where DeepGEMM's
                SM100 / SM120 build is present (no DeepGEMM on a CPU, so the hook turns it off here).

Not covered by construction on a CPU: the module was imported without CUDA, so its decoder layer is
``DeepseekV4PlatformDecoderLayer`` rather than ``DeepseekV4CudaDecoderLayer``; both run the same
``DeepseekV4DecoderLayerBase.__init__`` (every parameter), the CUDA one adds residual-boundary declarations
and the platform mixin three plain attributes, neither a tensor. Anything created after loading
(``process_weights_after_loading``) is outside this check (see the module docstring).

Run: ``GLM_KV_SGLANG=1 nice .venv-sglang/bin/python -m pytest tests/sglang/test_dsv4_weights.py -q -p no:randomly``
"""
from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

import pytest

CASES = [(1, False), (2, False), (4, False), (8, False), (4, True), (8, True)]
MODELS = ["deepseek-v4-flash", "deepseek-v4-pro"]


def _tensors(model, skip: set[int] | None = None) -> dict[int, int]:
    """id -> bytes of every distinct tensor the model holds, minus those in ``skip``."""
    import torch

    out: dict[int, int] = {}
    for t in [*model.parameters(), *model.buffers()]:
        out.setdefault(id(t), t.numel() * t.element_size())
    for mod in model.modules():
        for v in vars(mod).values():
            if isinstance(v, torch.Tensor) and v.device.type == "meta":
                out.setdefault(id(v), v.numel() * v.element_size())
    return {k: v for k, v in out.items() if not skip or k not in skip}


@contextlib.contextmanager
def _patched(wo_a_fp8: bool):
    import sglang.srt.layers.quantization.mxfp4_flashinfer_cutlass_moe as cutlass
    import sglang.srt.layers.rotary_embedding.base as rope_base
    import sglang.srt.layers.rotary_embedding.rope_variant as rope_variant
    import sglang.srt.models.deepseek_v4 as dv4

    saved = [(rope_base, "_is_cuda"), (rope_variant, "get_device"), (cutlass, "is_flashinfer_available"),
             (dv4, "_FP8_WO_A_GEMM")]
    old = [getattr(m, a) for m, a in saved]
    rope_base._is_cuda = True                               # M4
    rope_variant.get_device = lambda: "meta"                # M4
    cutlass.is_flashinfer_available = lambda: True          # M5
    try:
        yield dv4
    finally:
        for (m, a), v in zip(saved, old):
            setattr(m, a, v)


def sglang_bytes(name: str, tp: int, dp_attention: bool, wo_a_fp8: bool = False, ep: int = 1) -> tuple[int, int]:
    """(target bytes, draft's own bytes) on rank 0, from SGLang's model classes built on meta."""
    import torch
    from cpu_workarounds import cpu_as_gpu, quiet_sglang_logs
    from oracle import fake_gpu

    from glm_kv.inputs.hf_config import DSV4_SHIPPED, MODELS_DIR

    quiet_sglang_logs()
    d = Path(tempfile.mkdtemp(prefix="glm-kv-dsv4w-"))
    shutil.copy(MODELS_DIR / f"{DSV4_SHIPPED[name][0]}_config.json", d / "config.json")
    try:
        with cpu_as_gpu(fake_gpu({"gpu": "H200"})):
            from sglang.kernels.ops.attention.dsv4.rope import precompute_freqs_cis
            from sglang.srt.configs.load_config import LoadConfig
            from sglang.srt.configs.model_config import ModelConfig
            from sglang.srt.layers.dp_attention import initialize_dp_attention_flags
            from sglang.srt.layers.moe.utils import initialize_moe_config
            from sglang.srt.layers.rotary_embedding import factory
            from sglang.srt.model_loader import loader
            from sglang.srt.model_loader.utils import set_default_torch_dtype
            from sglang.srt.runtime_context import get_context, get_parallel
            from sglang.srt.server_args import ServerArgs

            sa = ServerArgs(model_path=str(d), device="cuda", tp_size=tp, dp_size=tp if dp_attention else 1,
                            enable_dp_attention=dp_attention, **({"ep_size": ep} if ep > 1 else {}))
            sa.resolve_once()
            sa.check_server_args()
            get_context().set_server_args(sa)
            par = get_parallel()
            assert par.attn_tp_size == (1 if dp_attention else tp) and par.moe_ep_size == ep

            def group(n: int):
                from types import SimpleNamespace
                return SimpleNamespace(world_size=n, rank=0, rank_in_group=0, is_first_rank=True,
                                       is_last_rank=True, ranks=list(range(n)), first_rank=0, last_rank=n - 1,
                                       device_group=None, cpu_group=None)

            ranks = {k: 0 for k in ("tp_rank", "pp_rank", "moe_ep_rank", "moe_dp_rank", "moe_tp_rank",
                                     "attn_tp_rank", "attn_cp_rank", "dcp_rank", "attn_dcp_rank", "attn_dp_rank",
                                     "dp_rank")}
            ranks.update(world_group=group(tp), tp_group=group(tp), pp_group=group(1),
                         moe_ep_group=group(par.moe_ep_size), moe_dp_group=group(1),
                         moe_tp_group=group(par.moe_tp_size), attn_tp_group=group(par.attn_tp_size),
                         attn_cp_group=group(1), shared_experts_tp_group=group(tp), dcp_group=group(1))
            with par.override(**ranks), _patched(wo_a_fp8) as dv4:          # M1
                initialize_dp_attention_flags(sa)                           # M2
                initialize_moe_config()                                     # M3
                dv4._FP8_WO_A_GEMM = wo_a_fp8                               # M6 (False: as the hook left it)
                precompute_freqs_cis.cache_clear()                          # a fresh process's RoPE caches
                factory._ROPE_DICT.clear()
                mc = ModelConfig.from_server_args(sa)
                lc = LoadConfig()
                qc = loader._get_quantization_config(mc, lc)
                assert qc.is_fp4_experts
                with set_default_torch_dtype(mc.dtype), torch.device("meta"):
                    target = loader._initialize_model(mc, lc, qc)
                seen = _tensors(target)
                draft_mc = ModelConfig.from_server_args(sa, is_draft_model=True)
                assert draft_mc.hf_config.architectures[0] == "DeepseekV4ForCausalLMNextN"
                draft_qc = loader._get_quantization_config(draft_mc, lc)
                with set_default_torch_dtype(draft_mc.dtype), torch.device("meta"):
                    draft = loader._initialize_model(draft_mc, lc, draft_qc)
                assert type(draft).__name__ == "DeepseekV4ForCausalLMNextN"
                return sum(seen.values()), sum(_tensors(draft, set(seen)).values())
    finally:
        shutil.rmtree(d, ignore_errors=True)


def glm_kv_bytes(name: str, tp: int, dp_attention: bool, wo_a_fp8: bool = False) -> tuple[int, int]:
    from glm_kv.inputs.hf_config import load_dsv4_config
    from glm_kv.ledgers.dsv4_weights import dsv4_draft_weight_bytes, dsv4_weight_bytes

    cfg = load_dsv4_config(name)
    attn_tp = 1 if dp_attention else tp
    return (dsv4_weight_bytes(cfg, tp, attn_tp, dp_attention, wo_a_fp8=wo_a_fp8),
            dsv4_draft_weight_bytes(cfg, tp, attn_tp, dp_attention, wo_a_fp8=wo_a_fp8))


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("tp, dp_attention", CASES)
def test_weights_equal_sglangs_model(name, tp, dp_attention):
    """Target and draft bytes on one rank: glm-kv's formula equals SGLang's model, byte for byte."""
    assert glm_kv_bytes(name, tp, dp_attention) == sglang_bytes(name, tp, dp_attention)


@pytest.mark.parametrize("name", MODELS)
def test_expert_parallel_holds_the_same_bytes(name):
    """--ep-size 8: each rank holds 1/8 of the experts at full width instead of 1/8 of every expert's width;
    the formula's 1/tp of the routed experts is the same bytes."""
    assert glm_kv_bytes(name, 8, False) == sglang_bytes(name, 8, False, ep=8)


@pytest.mark.parametrize("name", MODELS)
def test_wo_a_fp8_equals_sglangs_model(name):
    """SM100's fp8 wo_a (M6): wo_a kept in FP8 with its block scales (fewer bytes than SM90's bf16 wo_a)."""
    fp8 = sglang_bytes(name, 8, False, wo_a_fp8=True)
    assert fp8[0] < sglang_bytes(name, 8, False)[0]
    assert glm_kv_bytes(name, 8, False, wo_a_fp8=True) == fp8


@pytest.mark.parametrize("plant", ["no_shared_expert", "fp8_experts", "indexer_over_attn_tp"])
def test_planted_error_is_caught(plant, monkeypatch):
    """A planted formula error (the shared expert dropped; routed experts counted at FP8; the indexer's wq_b
    split over attention TP) must make the comparison fail."""
    import glm_kv.ledgers.dsv4_weights as W

    if plant == "no_shared_expert":
        real = W.moe_bytes
        monkeypatch.setattr(W, "moe_bytes", lambda t, i, tp, nextn=False: real({**t, "n_shared_experts": 0}, i, tp, nextn))
    elif plant == "fp8_experts":
        real = W.moe_bytes
        monkeypatch.setattr(W, "moe_bytes", lambda t, i, tp, nextn=False: real({**t, "expert_dtype": "fp8"}, i, tp, nextn))
    else:
        real = W.fp8_linear
        monkeypatch.setattr(W, "fp8_linear", lambda t, out, inp: real(
            t, out // 8 if out == t["index_n_heads"] * t["index_head_dim"] else out, inp))
    assert glm_kv_bytes("deepseek-v4-flash", 8, False) != sglang_bytes("deepseek-v4-flash", 8, False)
