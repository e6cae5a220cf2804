"""Issue 31: the device-to-rest path for every model (``memory.memory_ledger_for``), by hand.

Every expected number below is worked out from SGLang 0.5.23's rules (arg_groups/memory_hook.py) and
the shipped config.json values, written out in the test, not computed by the code under test.
"""
from __future__ import annotations

import pytest

from glm_kv.inputs.gpus import resolve_gpu
from glm_kv.inputs.hf_config import load_hf_config
from glm_kv.inputs.profile import make_profile
from glm_kv.inputs.rules import rules_for
from glm_kv.ledgers import memory
from glm_kv.ledgers.model_layers import build_layers
from glm_kv.inputs.resolve import resolve
from glm_kv.ledgers.model_layers import layers_for
from glm_kv.ledgers.model_weights import checkpoint_weights

H200_MIB = 143771          # gpus.json: H200 as CUDA reports it
GiB = 1 << 30


def ledger(name: str, **launch):
    p = make_profile({"model": name, "gpu": "H200", **launch})
    args = resolve(p)
    layers = layers_for(args)
    return (memory.memory_ledger_for(p, args.config, layers, args.gpu, args.attn_dp_size, p.max_running_requests,
                                     args.attn_tp_size), args.config, layers)


def frac(reserved: float) -> float:
    return round((H200_MIB - reserved) / H200_MIB, 3)


def test_non_mla_prefill_graph_is_eight_mib_per_capture_size():
    # Nemotron-3-Super (GQA, no vision), H200 TP 8: chunk 8192, decode max_bs 512.
    # prefill capture sizes up to 8192: 8 (4..32) + 14 (48..256) + 8 (288..512) + 8 (576..1024)
    # + 12 (1280..4096) + 8 (4608..8192) = 58 -> 464 MiB
    m, _, _ = ledger("nemotron-3-super-120b-a12b-fp8", tp_size=8, available_bytes=GiB)
    reserved = 512 + 8192 * 1.5 + 8 / 8 * 1024 + 512 * 2 + 58 * 8
    assert m.reserved_mib == reserved == 15312
    assert m.mem_fraction_static == frac(reserved) == 0.893


def test_max_total_tokens_caps_the_prefill_graph():
    # max_total_tokens 3000 -> prefill max_bs 3000: 8 + 14 + 8 + 8 + 7 (1280..2816) = 45 sizes
    m, _, _ = ledger("nemotron-3-super-120b-a12b-fp8", tp_size=4, max_total_tokens=3000, available_bytes=GiB)
    assert m.reserved_mib == 512 + 12288 + 512 + 1024 + 45 * 8


def test_mla_prefill_graph_is_flat():
    # DeepSeek-V3.2 (MLA): 1.5 GiB whatever the chunk
    m, _, _ = ledger("deepseek-v3.2", tp_size=8, available_bytes=GiB)
    assert m.reserved_mib == 512 + 12288 + 1024 + 1024 + 1536
    assert m.mem_fraction_static == frac(16384) == 0.886


def test_kda_model_other_than_glm_has_no_prefill_graph_and_a_vlm_factor():
    # Kimi-K3: KDA -> breakable prefill graph off; vision 27 x 1024 -> 0.95 x (1 - 0.1 x 0.125)
    m, _, _ = ledger("kimi-k3", tp_size=8, available_bytes=GiB)
    assert m.reserved_mib == 512 + 12288 + 1024 + 1024
    assert m.is_vlm and m.mem_fraction_static == pytest.approx(0.897 * 0.95 * 0.9875, abs=1e-12)


def test_qwen35_vision_depth_reads_as_24():
    # Qwen3.5: the vision config names its depth "depth" -> 24 layers, hidden 1152
    m, _, _ = ledger("qwen3.5-35b-a3b", tp_size=8, available_bytes=GiB)
    ratio = 24 * 1152 ** 2 / (24 * 1024 ** 2)
    assert m.mem_fraction_static == pytest.approx(0.893 * 0.95 * (1 - 0.1 * (ratio - 1)), abs=1e-12)
    assert m.mm_reservation_bytes == int(100 / 1024 * GiB)   # SGLANG_VLM_CACHE_SIZE_MB for a multimodal model


def test_qwen3_vl_expansion_does_not_apply_to_qwen35():
    # expand_multimodal_decode_graph_to_running_limit is for model_type qwen3_vl / qwen3_vl_moe only:
    # TP 1 on H200 keeps max_bs 256 under --max-running-requests 400
    f = memory.fraction_inputs(make_profile({"model": "qwen3.5-35b-a3b", "gpu": "H200", "max_running_requests": 400,
                                             "available_bytes": GiB}),
                               load_hf_config("qwen3.5-35b-a3b"), resolve_gpu(make_profile({"gpu": "H200"})), 1, 400)
    assert not f.expand_decode_to_running
    assert memory.reserved_mib(f) == 512 + 12288 + 128 + 256 * 2 + 58 * 8
    g = memory.FractionInputs(**{**f.__dict__, "expand_decode_to_running": True})
    assert memory.reserved_mib(g) == 512 + 12288 + 128 + 400 * 2 + 58 * 8


def test_rest_after_given_weights():
    # DeepSeek-V3.2 TP 8 (no multimodal reservation), float32 readings of pre-load and after-weights
    pre, w = 137 * GiB, 80 * GiB
    m, _, _ = ledger("deepseek-v3.2", tp_size=8, weights_bytes=w, pre_model_load_bytes=pre)
    assert m.weights_source == "profile" and m.mm_reservation_bytes == 0
    assert m.rest_gib == pytest.approx(57 - 137 * (1 - 0.886), abs=1e-9)


def test_weight_estimate_counts_by_hand():
    # Qwen3.5-35B-A3B, bf16: 40 layers, hidden 2048, vocab 248320
    _, cfg, layers = ledger("qwen3.5-35b-a3b", tp_size=1, available_bytes=GiB)
    w = checkpoint_weights(cfg, layers)
    h = 2048
    gqa = h * 16 * 256 * 2 + h * 2 * 512 + 16 * 256 * h               # gated q, k + v, o
    gdn = h * (2 * 16 * 128 + 2 * 32 * 128) + h * 64 + (2 * 16 * 128 + 32 * 128) * 4 + 32 * 128 * h
    moe = 256 * 3 * h * 512 + 3 * h * 512
    kept = 40 * (256 * h + h) + 2 * 248320 * h                        # routers + shared gate, embed + head
    assert w.quantization == "bf16"
    assert w.total_params == 10 * gqa + 30 * gdn + 40 * moe + kept
    assert 34e9 < w.total_params < 35.5e9                             # model card: 35B (vision tower excluded)


@pytest.mark.parametrize("name, q, lo, hi", [
    ("deepseek-v3.2", "fp8", 665e9, 680e9),         # 671B without the MTP layer (model card: 685B with it)
    ("glm-5.1", "bf16", 735e9, 755e9),               # GLM-5: 744B
    ("nemotron-3-super-120b-a12b-fp8", "fp8_tensor", 115e9, 125e9),   # 120B
    ("kimi-k3", "mxfp4", 2.7e12, 2.9e12),            # 2.8T (Hugging Face collection)
])
def test_estimate_near_published_parameter_counts(name, q, lo, hi):
    _, cfg, layers = ledger(name, tp_size=8, available_bytes=GiB)
    w = checkpoint_weights(cfg, layers)
    assert w.quantization == q and lo < w.total_params < hi


def test_draft_estimate_only_for_mla_nextn():
    from glm_kv.errors import ProfileError

    _, cfg, layers = ledger("nemotron-3-super-120b-a12b-fp8", tp_size=8, available_bytes=GiB)
    with pytest.raises(ProfileError):
        memory.estimate_draft_bytes_for(cfg, layers, 8, 8)
    _, cfg, layers = ledger("deepseek-v3.2", tp_size=8, available_bytes=GiB)
    h, v = 7168, 129280
    layer = 256 * 3 * h * 2048 + 1 * 3 * h * 2048       # routed + shared, over tp
    assert memory.estimate_draft_bytes_for(cfg, layers, 8, 8) > (layer / 8 + 2 * v * h * 2 / 8) * 1.0
