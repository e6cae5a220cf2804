"""Issue 32: ModelOpt MIXED_PRECISION checkpoints (Qwen3.6-27B-NVFP4, Nemotron-3.5-Lightning-30B-A3B-NVFP4).

Their weights are estimated per weight group at the width each group's Linears have in ``quantized_layers``
(SGLang 0.5.23 ``ModelOptMixedPrecisionConfig.get_quant_method``: FP8 -> ModelOpt per-tensor FP8,
W4A16_NVFP4 -> NVFP4, a Linear not listed -> unquantized). Expected numbers are written out from the
vendored files and the config dimensions, not computed by the code under test. The KV dtype SGLang reads
from these checkpoints is checked through SGLang itself in tests/sglang/test_models_contract.py.
"""
from __future__ import annotations

import json

import pytest

from glm_kv.cli import main
from glm_kv.errors import ProfileError
from glm_kv.inputs.hf_config import MODELS_DIR, load_hf_config, model_override_refusal
from glm_kv.inputs.profile import make_profile
from glm_kv.inputs.resolve import resolve
from glm_kv.inputs.weights import mixed_precision_section, mixed_precision_widths
from glm_kv.ledgers.model_layers import layers_for
from glm_kv.ledgers.model_weights import checkpoint_weights

QWEN = "qwen3.6-27b-nvfp4"
LIGHTNING = "nemotron-3.5-lightning-30b-a3b-nvfp4"
FP8, NVFP4 = 1.0, 0.5 + 1 / 16     # ModelOpt FP8 per tensor; e2m1 + one fp8 scale per 16 weights


def widths(name: str) -> dict[str, str]:
    cfg = load_hf_config(name)
    return mixed_precision_widths(mixed_precision_section(cfg.top, cfg.text, cfg.quant))


def test_each_weight_group_has_the_width_its_quantized_layers_give():
    # Qwen3.6-27B-NVFP4 (config.json's quantization_config): self_attn and linear_attn FP8, mlp and lm_head NVFP4
    assert widths(QWEN) == {"lm_head": "nvfp4", "attention": "fp8_tensor", "linear_attention": "fp8_tensor",
                            "mlp": "nvfp4"}
    # Lightning (hf_quant_config.json): Mamba in/out_proj FP8, experts + shared experts NVFP4, lm_head NVFP4;
    # the attention q/k/v/o are on exclude_modules, listed nowhere: bf16
    assert widths(LIGHTNING) == {"lm_head": "nvfp4", "attention": "bf16", "linear_attention": "fp8_tensor",
                                 "mlp": "nvfp4"}


def test_qwen36_27b_estimate_by_hand():
    """Dense Qwen3.6-27B: 16 gated-GQA layers and 48 Gated DeltaNet layers at FP8, 64 MLPs and lm_head at NVFP4,
    embed_tokens bf16 (hidden 5120, 24 heads / 4 KV heads of 256, linear 16 k heads / 48 v heads of 128,
    intermediate 17408, vocab 248320)."""
    p = make_profile({"model": QWEN, "gpu": "H200", "tp_size": 1, "available_bytes": 1 << 30})
    args = resolve(p)
    w = checkpoint_weights(args.config, layers_for(args))
    h, v = 5120, 248320
    gqa = h * 24 * 256 * 2 + h * 4 * 512 + 24 * 256 * h
    gdn = h * (2 * 16 * 128 + 2 * 48 * 128) + h * 96 + (2 * 16 * 128 + 48 * 128) * 4 + 48 * 128 * h
    mlp = 3 * h * 17408
    assert w.quantization == "modelopt_mixed"
    assert w.total_params == 16 * gqa + 48 * gdn + 64 * mlp + 2 * v * h
    assert 26.5e9 < w.total_params < 27.5e9                          # 27B (vision tower excluded)
    assert w.whole_bytes == pytest.approx((16 * gqa + 48 * gdn) * FP8 + (64 * mlp + v * h) * NVFP4 + v * h * 2)
    assert w.per_rank(1, 1) == int(w.whole_bytes)


def test_kv_dtype_auto_follows_the_checkpoint():
    """--kv-cache-dtype auto: FP8 from Qwen3.6-27B-NVFP4's kv_cache_scheme {float, 8 bits}; bf16 for Qwen3.6-35B-A3B."""
    for name, kv in ((QWEN, "fp8_e4m3"), ("qwen3.6-35b-a3b", "bfloat16")):
        p = make_profile({"model": name, "gpu": "H200", "tp_size": 8, "available_bytes": 1 << 30})
        assert resolve(p).kv_cache_dtype == kv, name


def test_lightning_as_shipped_is_refused_in_sglangs_words(capsys):
    assert "'NemotronHConfig' object has no attribute 'quantization_config'" in model_override_refusal(
        load_hf_config(LIGHTNING))
    assert main(["plan", "--set", f"model={LIGHTNING}", "--set", "tp_size=1", "--set", "dp_size=1",
                 "--set", "enable_dp_attention=false"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("glm-kv: error: model: SGLang 0.5.23 refuses it:"), err


def lightning_folder(tmp_path, quant_in_config: bool = True) -> str:
    cfg = json.loads((MODELS_DIR / "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4_config.json").read_text())
    quant = json.loads((MODELS_DIR / "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4_hf_quant_config.json")
                       .read_text())
    if quant_in_config:
        cfg["quantization_config"] = {**quant["quantization"], "quant_method": "modelopt"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return str(tmp_path / "config.json")


def test_lightning_with_its_quantization_in_config_json_plans(tmp_path):
    """The same checkpoint with its ModelOpt section in config.json: SGLang starts it, so glm-kv plans it:
    FP8 KV (kv_cache_quant_algo), attention bf16, and 128 routed + 1 shared expert of 23 MoE layers at NVFP4."""
    path = lightning_folder(tmp_path)
    assert model_override_refusal(load_hf_config(path)) is None
    p = make_profile({"model": path, "gpu": "H200", "tp_size": 1, "available_bytes": 1 << 30})
    args = resolve(p)
    assert args.kv_cache_dtype == "fp8_e4m3"
    w = checkpoint_weights(args.config, layers_for(args))
    h = 2688
    assert w.quantized.over_tp == 23 * (128 * 2 * h * 1856 + 2 * h * 3712) and w.quantized_bytes_per_param == NVFP4
    assert [b for _w, b in w.others] == [2.0, FP8, NVFP4]   # attention, linear attention, lm_head
    assert 30e9 < w.total_params < 33e9                     # 30B-A3B (model card), MTP left out


@pytest.mark.parametrize("layers, rule", [
    ({"backbone.layers.0.mixer.in_proj": {"quant_algo": "INT4_AWQ"}}, "quant_algo 'INT4_AWQ' is not modelled"),
    ({"backbone.layers.0.mixer.router.proj": {"quant_algo": "NVFP4"}}, "is in no weight group"),
    ({"backbone.layers.1.mixer.experts.0.up_proj": {"quant_algo": "NVFP4"},
      "backbone.layers.1.mixer.experts.1.up_proj": {"quant_algo": "FP8"}}, "the mlp layers mix"),
    ({"backbone.layers.0.mixer.in_proj": {"quant_algo": "FP8"}}, "without NVFP4 layers"),
    ({}, "requires a non-empty quantized_layers map"),
])
def test_a_mixed_section_glm_kv_cannot_size_is_one_line_exit_2(tmp_path, capsys, layers, rule):
    path = lightning_folder(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["quantization_config"]["quantized_layers"] = layers
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert main(["plan", "--set", f"model={path}", "--set", "tp_size=1", "--set", "dp_size=1",
                 "--set", "enable_dp_attention=false"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("glm-kv: error: model: ") and rule in err, err


def test_a_planted_single_width_is_caught(monkeypatch):
    """Planted: every group at the MLP's width (NVFP4), as a plain NVFP4 checkpoint would be: the by-hand
    bytes of Qwen3.6-27B (FP8 projections) no longer match."""
    import glm_kv.ledgers.model_weights as mw

    real = mw.mixed_precision_widths
    monkeypatch.setattr(mw, "mixed_precision_widths", lambda section: {g: "nvfp4" for g in real(section)})
    with pytest.raises(AssertionError):
        test_qwen36_27b_estimate_by_hand()
