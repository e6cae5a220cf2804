"""Issue 32: more hybrid sliding-window models SGLang 0.5.23 sizes with SWAKVPool (Gemma-4, MiMo-V2-Flash, Llama-4).

Every expected number is written out from the vendored configs and SGLang 0.5.23's rules (ModelConfig's reading,
get_hybrid_layer_ids, resolve_sliding_window_size), not computed by the code under test. The same plans are
compared key for key with SGLang's own classes in tests/sglang/test_models_contract.py.
"""
from __future__ import annotations

import json

import pytest

from glm_kv.cli import main
from glm_kv.errors import ProfileError
from glm_kv.inputs.hf_config import load_hf_config
from glm_kv.inputs.profile import make_profile
from glm_kv.ledgers.plan import load_plan

GiB = 1 << 30


def plan(model: str, tp: int, **fields) -> dict:
    return load_plan(make_profile({"model": model, "gpu": "H200", "tp_size": tp, "enable_dp_attention": False,
                                   "available_bytes": 50 * GiB, **fields})).to_dict()


def test_gemma4_full_and_swa_shapes_are_sglangs_flip():
    """Gemma-4 26B-A4B at TP 2: full layers 512-dim x max(1, 2 // 2) = 1 head; SWA layers 256-dim x 8 // 2 = 4
    heads; bf16 K + V. Layers 5, 11, 17, 23, 29 full; window 1024 - 1."""
    d = plan("gemma-4-26b-a4b", 2)
    assert d["model"]["full_attention_layers"] == [5, 11, 17, 23, 29]
    t = d["token"]
    assert (t["kv_row_bytes"], t["num_full_layers"], t["kv_bytes_per_token"]) == (2048, 5, 5 * 2048)
    assert (t["swa_kv_bytes_per_token"], t["num_swa_layers"], t["sliding_window_size"]) == (25 * 4096, 25, 1023)


def test_mimo_split_dims_and_window():
    """MiMo-V2-Flash at TP 4: hybrid_layer_pattern's 0s full (9), 1s SWA (39); K 192 + V 128 = 320 per head,
    full 4 // 4 = 1 head, SWA 8 // 4 = 2 heads; window sliding_window_size 128 (no minus one)."""
    d = plan("mimo-v2-flash", 4)
    assert d["model"]["full_attention_layers"] == [0, 5, 11, 17, 23, 29, 35, 41, 47]
    t = d["token"]
    assert (t["kv_row_bytes"], t["kv_bytes_per_token"]) == (640, 9 * 640)
    assert (t["swa_kv_bytes_per_token"], t["num_swa_layers"], t["sliding_window_size"]) == (39 * 1280, 39, 128)


def test_mimo_on_blackwell_runs_fa4_pages_of_128():
    assert plan("mimo-v2-flash", 4, gpu="B200", page_size=64)["token"]["page_size"] == 128
    assert plan("gpt-oss-120b", 4, gpu="B200", page_size=64)["token"]["page_size"] == 64


def test_mimo_hicache_host_pools_are_asymmetric():
    d = plan("mimo-v2-flash", 4, enable_hierarchical_cache=True, hicache_ratio=2)
    assert d["host"]["entry_classes"] == ["AsymmetricMHATokenToKVPoolHost"] * 2


def test_llama4_every_fourth_layer_full_and_the_chunk_as_window():
    d = plan("llama-4-scout-17b-16e-instruct", 8)
    assert d["model"]["full_attention_layers"] == list(range(3, 48, 4))
    t = d["token"]   # 8 KV heads of 128 over TP 8: 1 head, (128 + 128) x 2 B in either pool
    assert (t["kv_row_bytes"], t["num_swa_layers"], t["sliding_window_size"]) == (512, 36, 8192)


@pytest.mark.parametrize("pattern", [[0, 2] * 24, "0,1", [], [0, 1] * 20])
def test_bad_mimo_pattern_is_one_line_exit_2(tmp_path, capsys, pattern):
    cfg = dict(load_hf_config("mimo-v2-flash").top, hybrid_layer_pattern=pattern)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ProfileError) as e:
        load_plan(make_profile({"model": str(tmp_path / "config.json"), "gpu": "H200", "tp_size": 4}))
    assert e.value.field == "model.hybrid_layer_pattern", e.value
    rc = main(["plan", "--set", f"model={tmp_path / 'config.json'}", "--set", "gpu=H200", "--set", "tp_size=8"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "hybrid_layer_pattern" in err and "Traceback" not in err


def test_mimo_prefill_cp_takes_zigzag_only():
    with pytest.raises(ProfileError) as e:
        plan("mimo-v2-flash", 2, attn_cp_size=2, enable_prefill_cp=True, cp_strategy="interleave")
    assert e.value.field == "cp_strategy" and "zigzag" in str(e.value)
