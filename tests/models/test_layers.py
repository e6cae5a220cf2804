"""Issue 22, deliverable 2: layer kinds as code; each model's bytes per token / per state slot.

Expected values are written out from the config's numbers and SGLang 0.5.23's formulas
(calculate_mla_kv_cache_dim, _compute_dsa_indexer_cell_size, get_num_kv_heads,
KimiLinearStateShape.create, Mamba2StateShape.create), never computed by the code under test.
tests/sglang/test_models.py checks the same numbers against SGLang's own classes.
"""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from glm_kv.errors import ProfileError
from glm_kv.inputs.hf_config import load_hf_config
from glm_kv.inputs.rules import SGLANG_0_5_23
from glm_kv.ledgers import layers as layers_module
from glm_kv.ledgers.model_layers import CacheArgs, build_layers

BF16 = CacheArgs("bfloat16", "flashmla_sparse", "fa3", 1, "float32", True)
FP8_SCALED = CacheArgs("fp8_e4m3", "flashmla_sparse", "flashmla_kv", 1, "float32", True)
FP8_RAW = CacheArgs("fp8_e4m3", "trtllm", "trtllm", 1, "float32", True)
GiB = 1 << 30


def layers(name, args):
    return build_layers(load_hf_config(name), args, SGLANG_0_5_23)


# (model, args) -> (bytes per token, bytes per state slot, full-attention layers, state layers)
EXPECTED = {
    # 61 x (656 scaled fp8 row + 132 indexer) / 61 x (576 x 2 + 132) / 61 x (576 + 132)
    ("deepseek-v3.2", FP8_SCALED): (61 * ((512 + 512 // 128 * 4 + 64 * 2) + (128 + 4)), 0, 61, 0),
    ("deepseek-v3.2", BF16): (61 * ((512 + 64) * 2 + 132), 0, 61, 0),
    ("deepseek-v3.2", FP8_RAW): (61 * ((512 + 64) + 132), 0, 61, 0),
    ("glm-5.1", FP8_SCALED): (78 * (656 + 132), 0, 78, 0),
    ("glm-5.1", BF16): (78 * (1152 + 132), 0, 78, 0),
    # Kimi-K3: MLA (no DSA: raw rows) on 24 layers; KDA (96 heads x 128, conv 4) on 69
    ("kimi-k3", BF16): (24 * 576 * 2, 69 * (3 * (3 * 96 * 128) * 2 + 96 * 128 * 128 * 4), 24, 69),
    ("kimi-k3", FP8_SCALED): (24 * 576, 69 * (3 * (3 * 96 * 128) * 2 + 96 * 128 * 128 * 4), 24, 69),
    # Qwen3.5: GQA 2 KV heads x (256 + 256) on 10 layers; GDN conv (32x128 + 2x16x128) x 3, SSM 32x128x128
    ("qwen3.5-35b-a3b", BF16): (10 * 2 * 512 * 2, 30 * ((32 * 128 + 2 * 16 * 128) * 3 * 2 + 32 * 128 * 128 * 4), 10, 30),
    # Nemotron-3-Super: GQA 2 x (128 + 128) on 8 "*" layers; Mamba-2 conv (128x64 + 2x8x128) x 3, SSM 128x64x128
    ("nemotron-3-super-120b-a12b-fp8", FP8_RAW): (8 * 2 * 256, 40 * ((128 * 64 + 2 * 8 * 128) * 3 * 2 + 128 * 64 * 128 * 4), 8, 40),
    # GLM-5.3-Flash: 11 DSA layers x (528 scaled row, no rope + ceil(132 / 4) pooled indexer); 34 KDA
    ("glm-5.3-flash", FP8_SCALED): (11 * (512 + 16 + 33), 34 * (3 * (3 * 64 * 128) * 2 + 64 * 128 * 128 * 4), 11, 34),
    # Jet-Nemotron-2B (issue 32): GQA 2 x (128 + 128) on 4 "attn" / "swa" layers (whole rows: not an SWA-pool
    # architecture); JetBlock on 24: 12 heads, k dim 96, v dim int(96 x 2.6666666667) = 256, conv_size 4:
    # conv (12x256 + 2x12x96) x 3, SSM 12x256x96
    ("jet-nemotron-2b", BF16): (4 * 2 * 256 * 2, 24 * ((12 * 256 + 2 * 12 * 96) * 3 * 2 + 12 * 256 * 96 * 4), 4, 24),
    # Jet-Nemotron-4B: 10 full layers (3 attn + 7 swa), 26 JetBlocks of 16 heads, k 128, v 256
    ("jet-nemotron-4b", FP8_RAW): (10 * 2 * 256, 26 * ((16 * 256 + 2 * 16 * 128) * 3 * 2 + 16 * 256 * 128 * 4), 10, 26),
}


@pytest.mark.parametrize("key", list(EXPECTED), ids=lambda k: f"{k[0]}-{k[1].kv_cache_dtype}-{k[1].dsa_decode_backend}"
                         if isinstance(k, tuple) else str(k))
def test_bytes_per_token_and_per_slot(key):
    name, args = key
    m = layers(name, args)
    per_token, per_slot, n_full, n_state = EXPECTED[key]
    assert (m.bytes_per_token, m.bytes_per_slot) == (per_token, per_slot), name
    assert (len(m.full_attention_layers), len(m.state_layers)) == (n_full, n_state), name


def test_deepseek_v32_anchor_sglang_11309():
    """Public anchor, sglang PR #11309 (trevor-m, 2025-10-07): the PR's own SGLang build (main of
    that day plus the PR, which adds the DSA indexer to profile_max_num_token and to the log) ran
    `python -m sglang.launch_server --model deepseek-ai/DeepSeek-V3.2-Exp --tp 8 --dp 8
    --enable-dp-attention` on 8 x B200 and logged "KV Cache is allocated. #tokens: 975424,
    KV size: 43.67 GB" (SGLang's GB is 2**30 B). That is 61 layers x (656 B fp8 row with FlashMLA's
    scales + 132 B indexer K) = 48,068 B per token; raw fp8 rows would log 40.11."""
    m = layers("deepseek-v3.2", FP8_SCALED)
    assert m.bytes_per_token == 48_068
    assert round(975_424 * m.bytes_per_token / GiB, 2) == 43.67
    # the raw-row alternative would log 40.11 GiB: the anchor tells the two layouts apart
    assert round(975_424 * layers("deepseek-v3.2", FP8_RAW).bytes_per_token / GiB, 2) != 43.67


def test_layer_placement_follows_each_config_class():
    kimi = layers("kimi-k3", BF16)         # KimiLinearConfig.is_kda_layer: 1-based kda_layers
    assert kimi.full_attention_layers == tuple(range(3, 92, 4)) + (92,)   # 1-based 4, 8, ..., 92, 93
    qwen = layers("qwen3.5-35b-a3b", BF16)  # every full_attention_interval-th layer
    assert qwen.full_attention_layers == tuple(range(3, 40, 4))
    nemo = layers("nemotron-3-super-120b-a12b-fp8", BF16)   # '*' in hybrid_override_pattern
    pattern = load_hf_config("nemotron-3-super-120b-a12b-fp8").top["hybrid_override_pattern"]
    assert nemo.full_attention_layers == tuple(i for i, c in enumerate(pattern) if c == "*")
    assert nemo.state_layers == tuple(i for i, c in enumerate(pattern) if c == "M")
    assert nemo.num_hidden_layers == 88
    glm = layers("glm-5.3-flash", BF16)     # 0-based kda_layers
    assert glm.full_attention_layers == tuple(range(3, 45, 4))


def test_indexer_types_shared_layers_get_no_indexer(monkeypatch):
    cfg = load_hf_config("glm-5.1")
    text = dict(cfg.text, indexer_types=["full", "shared"] * 39)
    from dataclasses import replace
    m = build_layers(replace(cfg, text=text), FP8_SCALED, SGLANG_0_5_23)
    assert m.bytes_per_token == 78 * 656 + 39 * 132


def test_tp_that_does_not_divide_the_heads_is_refused():
    with pytest.raises(ProfileError) as e:
        layers("kimi-k3", CacheArgs("bfloat16", "fa3", "fa3", 5, "float32", True)).bytes_per_slot
    assert e.value.field == "tp_size" and "KDA" in str(e.value)


def _seed() -> int:
    return int(os.environ["GLM_KV_SEED"])


def test_state_and_kv_split_over_tp_random():
    """Random TP and dtypes (seed GLM_KV_SEED): state slots split exactly over attention TP,
    GQA keeps max(1, kv_heads // tp) heads per rank, MLA rows are replicated."""
    seed = _seed()
    rng = random.Random(seed)
    for _ in range(20):
        name = rng.choice(["kimi-k3", "qwen3.5-35b-a3b", "nemotron-3-super-120b-a12b-fp8", "glm-5.1"])
        tp = rng.choice([1, 2, 4, 8])
        ssm = rng.choice(["float32", "bfloat16"])
        one = layers(name, CacheArgs("bfloat16", "fa3", "fa3", 1, ssm, False))
        many = layers(name, CacheArgs("bfloat16", "fa3", "fa3", tp, ssm, False))
        assert one.bytes_per_slot == many.bytes_per_slot * tp, f"seed {seed}: {name} tp {tp} {ssm}"
        if name in ("qwen3.5-35b-a3b", "nemotron-3-super-120b-a12b-fp8"):
            n_full = len(one.full_attention_layers)
            hd = 256 if name.startswith("qwen") else 128
            assert many.bytes_per_token == n_full * max(1, 2 // tp) * 2 * hd * 2, f"seed {seed}: {name} tp {tp}"
        else:
            assert many.bytes_per_token == one.bytes_per_token, f"seed {seed}: {name} tp {tp}"


def test_planted_error_in_a_spec_is_caught(monkeypatch):
    """Planted error: one spec's bytes off by one -> the expected-value check above fails."""
    monkeypatch.setattr(layers_module.DsaIndexerK, "bytes_per_token", property(lambda self: 133))
    with pytest.raises(AssertionError):
        test_deepseek_v32_anchor_sglang_11309()


# --- GQA head dimensions (Qwen3.5, Nemotron-3): SGLang 0.5.23's ModelConfig._derive_model_shapes ------
# head_dim None -> hidden_size // num_attention_heads; v_head_dim None or 0 -> head_dim. A value given
# is a dimension like any other: zero, negative, fractional, text or true/false is refused by name.
MODELS_DIR = Path(__file__).resolve().parents[2] / "glm_kv" / "inputs" / "models"
GQA_CONFIGS = {"qwen3.5-35b-a3b": ("Qwen--Qwen3.5-35B-A3B_config.json", "model(text_config)"),
               "nemotron-3-super-120b-a12b-fp8": ("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8_config.json", "model")}


def _edited_layers(tmp_path, name, args=BF16, **edits):
    """The vendored config with ``edits`` in its text part (None: the key removed), as build_layers reads it."""
    cfg = json.loads((MODELS_DIR / GQA_CONFIGS[name][0]).read_text())
    text = cfg.get("text_config", cfg)
    for k, v in edits.items():
        text.pop(k, None) if v is None else text.__setitem__(k, v)
    d = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}"   # a fresh path: configs are cached by path
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return build_layers(load_hf_config(str(d)), args, SGLANG_0_5_23)


def test_gqa_head_dims_as_sglang_derives_them(tmp_path):
    # Qwen3.5 (bf16): 10 GQA layers x 2 KV heads x (K + V) x 2 bytes; shipped head_dim 256, hidden 2048 / 16 heads = 128
    q = "qwen3.5-35b-a3b"
    assert _edited_layers(tmp_path, q).bytes_per_token == 10 * 2 * (256 + 256) * 2
    assert _edited_layers(tmp_path, q, v_head_dim=0).bytes_per_token == 10 * 2 * (256 + 256) * 2
    assert _edited_layers(tmp_path, q, v_head_dim=128).bytes_per_token == 10 * 2 * (256 + 128) * 2
    assert _edited_layers(tmp_path, q, head_dim=None).bytes_per_token == 10 * 2 * (128 + 128) * 2
    # Nemotron-3-Super (fp8, 1 byte): 8 "*" layers x 2 KV heads; hidden 4096 / 32 heads = 128 = its head_dim
    n = "nemotron-3-super-120b-a12b-fp8"
    assert _edited_layers(tmp_path, n, FP8_RAW, head_dim=64).bytes_per_token == 8 * 2 * (64 + 64)
    assert _edited_layers(tmp_path, n, FP8_RAW, head_dim=None, v_head_dim=32).bytes_per_token == 8 * 2 * (128 + 32)


@pytest.mark.parametrize("name", sorted(GQA_CONFIGS))
@pytest.mark.parametrize("key, value", [(k, v) for k in ("head_dim", "v_head_dim") for v in (-5, 1.5, "x", True, [64])]
                         + [("head_dim", 0), ("head_dim", False), ("v_head_dim", 0.0), ("v_head_dim", 10 ** 30)])
def test_bad_gqa_head_dim_is_refused_naming_it(tmp_path, name, key, value):
    with pytest.raises(ProfileError) as e:
        _edited_layers(tmp_path, name, **{key: value})
    assert e.value.field == f"{GQA_CONFIGS[name][1]}.{key}" and "must be an integer" in e.value.rule


def test_derived_head_dim_of_zero_is_refused(tmp_path):
    """hidden_size // num_attention_heads = 0 (8 // 16): SGLang would build a zero-width cache."""
    with pytest.raises(ProfileError) as e:
        _edited_layers(tmp_path, "qwen3.5-35b-a3b", head_dim=None, hidden_size=8)
    assert e.value.field == "model(text_config).hidden_size" and "head_dim 0" in e.value.rule


@pytest.mark.parametrize("edits, field", [
    ({"n_groups": None, "mamba_n_groups": "x"}, "model.mamba_n_groups"),
    ({"conv_kernel": None, "mamba_d_conv": 1}, "model.mamba_d_conv"),
])
def test_nemotron_fallback_keys_are_named_when_bad(tmp_path, edits, field):
    """n_groups / conv_kernel absent: the older key is read, and a bad value there is blamed on it."""
    with pytest.raises(ProfileError) as e:
        _edited_layers(tmp_path, "nemotron-3-super-120b-a12b-fp8", FP8_RAW, **edits)
    assert e.value.field == field


@pytest.mark.parametrize("jet, field", [
    ({"expand_v": 0}, "model.efficient_attention_config.jet.expand_v"),
    ({"expand_v": "2"}, "model.efficient_attention_config.jet.expand_v"),
    ({"expand_v": 0.001}, "model.efficient_attention_config.jet.expand_v"),
    ({"num_heads": 0}, "model.efficient_attention_config.jet.num_heads"),
    ({"conv_size": 1}, "model.efficient_attention_config.jet.conv_size"),
])
def test_bad_jetblock_dimensions_name_the_field(tmp_path, jet, field):
    """Issue 32: the JetBlock's dimensions are checked field by field (a v dim of 0 is refused too)."""
    cfg = json.loads(json.dumps(load_hf_config("jet-nemotron-2b").top))
    cfg["efficient_attention_config"]["jet"].update(jet)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ProfileError) as e:
        build_layers(load_hf_config(str(tmp_path / "config.json")), BF16, SGLANG_0_5_23)
    assert e.value.field == field, e.value


@pytest.mark.parametrize("types", [["jet", "mamba"], "jet", [], None])
def test_bad_jet_layer_types_name_the_field(tmp_path, types):
    cfg = dict(load_hf_config("jet-nemotron-2b").top, layer_types=types)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ProfileError) as e:
        build_layers(load_hf_config(str(tmp_path / "config.json")), BF16, SGLANG_0_5_23)
    assert e.value.field == "model.layer_types", e.value


def test_jet_nemotron_strategy_is_no_buffer_and_extra_buffer_is_refused():
    """Issue 32: JetNemotronForCausalLM is not one of SGLang's extra_buffer architectures: auto gives
    no_buffer (3 slots per request), --page-size 64 and an explicit extra_buffer are refused in SGLang's words."""
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import load_plan

    base = {"model": "jet-nemotron-2b", "gpu": "H200", "available_bytes": 40 * GiB}
    d = load_plan(make_profile(base)).to_dict()
    assert (d["request"]["mamba_strategy"], d["request"]["slots_per_request"]) == ("no_buffer", 3)
    for extra, field, words in ((dict(page_size=64), "page_size", "no_buffer only supports page_size=1."),
                                (dict(mamba_scheduler_strategy="extra_buffer"), "mamba_scheduler_strategy",
                                 "extra_buffer is not supported for JetNemotronForCausalLM; use no_buffer.")):
        with pytest.raises(ProfileError) as e:
            load_plan(make_profile({**base, **extra}))
        assert e.value.field == field and words in str(e.value), e.value
    # Qwen3.5 keeps extra_buffer (an extra_buffer architecture): the gate moves no other model
    q = load_plan(make_profile({**base, "model": "qwen3.5-35b-a3b"})).to_dict()
    assert q["request"]["mamba_strategy"] == "extra_buffer"
