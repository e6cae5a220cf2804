"""Issue 32: gpt-oss-120b, a hybrid sliding-window model: the full pool and the SWA pool beside it.

Every expected number is written out from the vendored config (36 layers alternating sliding / full, 8 KV heads
of 64, sliding_window 128) and SGLang 0.5.23's HybridSWAPoolConfigurator / SWARequestCapPoolConfigurator
rules, not computed by the code under test. The same plans are compared key for key with SGLang's own classes
in tests/sglang/test_models_contract.py.
"""
from __future__ import annotations

import pytest

from glm_kv.cli import main
from glm_kv.errors import ProfileError
from glm_kv.inputs.profile import make_profile
from glm_kv.ledgers.plan import load_plan

GPT = "gpt-oss-120b"
GiB = 1 << 30


def plan(**fields):
    return load_plan(make_profile({"model": GPT, "gpu": "H200", "tp_size": 8, **fields}))


def test_layers_split_into_the_full_and_the_swa_pool():
    d = plan(available_bytes=50 * GiB).to_dict()
    assert d["model"]["full_attention_layers"] == list(range(1, 36, 2))
    assert d["model"]["swa_attention_layers"] == list(range(0, 36, 2))
    t = d["token"]
    # TP 8 over 8 KV heads: 1 head of 64 (K) + 64 (V), bf16: 256 B per layer and token, in either pool
    assert (t["kv_row_bytes"], t["num_full_layers"], t["kv_bytes_per_token"]) == (256, 18, 18 * 256)
    assert (t["swa_kv_bytes_per_token"], t["num_swa_layers"], t["sliding_window_size"]) == (18 * 256, 18, 127)
    assert t["swa_full_tokens_ratio"] == 0.8
    assert t["cell_size_bytes"] == 8294            # int(4608 + 0.8 x 4608) = int(8294.4)


def test_capacity_by_hand():
    c = plan(available_bytes=50 * GiB, page_size=1).to_dict()["capacity"]
    full = int(50 * GiB // 8294.4)                 # 6,472,691: SGLang's config_from_budget on the same rest
    assert full == 6_472_691
    assert c["max_total_num_tokens"] == c["full_max_total_num_tokens"] == full
    assert c["swa_max_total_num_tokens"] == int(full * 0.8) == 5_178_152
    assert c["max_running_requests"] == 4096       # resolve_max_num_reqs: the automatic 4,096


def test_b200_pages_and_max_total_tokens():
    """B200 (trtllm_mha): 64-token pages; --max-total-tokens re-derives both pools from the cap."""
    d = plan(gpu="B200", tp_size=4, available_bytes=50 * GiB, max_total_tokens=1_000_003).to_dict()
    assert d["token"]["page_size"] == 64 and d["token"]["kv_row_bytes"] == 512
    c = d["capacity"]
    assert c["full_max_total_num_tokens"] == 1_000_003 // 64 * 64 == 1_000_000
    assert c["swa_max_total_num_tokens"] == int(1_000_000 * 0.8) // 64 * 64 == 800_000


def test_request_cap_path_by_hand():
    """--max-running-requests 64, --disable-radix-cache, chunked prefill 8192 (H200 default), overlap on:
    the SWA pool is (127 + 128 + 1 + 1) x 64 + 2 x 8192 + 1 = 32,833 tokens; the full pool the rest at 4,608 B."""
    c = plan(available_bytes=50 * GiB, max_running_requests=64, disable_radix_cache=True).to_dict()["capacity"]
    swa = 257 * 64 + 2 * 8192 + 1
    assert c["swa_max_total_num_tokens"] == swa == 32_833
    assert c["full_max_total_num_tokens"] == (50 * GiB - swa * 4608) // 4608 == 11_618_011
    assert c["max_running_requests"] == 64


def test_an_swa_pool_that_admits_no_request_is_refused_in_sglangs_words():
    with pytest.raises(ProfileError) as e:
        plan(available_bytes=1_000_000, page_size=1)   # 120 full tokens: SWA 96 <= 127 + 1
    assert "cannot hold even one request" in e.value.rule and "validate_swa_pool_size" in e.value.rule


def test_eagle_without_a_draft_is_refused_as_for_every_model_without_mtp_layers():
    """gpt-oss's config names no MTP layer: EAGLE / NEXTN without a draft checkpoint are refused by name."""
    with pytest.raises(ProfileError) as e:
        plan(available_bytes=50 * GiB, speculative_algorithm="EAGLE")
    assert e.value.field == "speculative_algorithm" and "no MTP layer" in e.value.rule


def test_decode_server_request_cap_by_hand():
    """A PD decode server runs without the radix cache: --max-running-requests 16 sizes the SWA pool from the
    cap, (127 + 128 + 1 + 1) x 16 requests + (127 + 1) x 32 pre-allocated rows (2 x 16, at most 32 per worker)
    and no prefill chunk; 64 requests get no pre-allocated rows (64 > 32)."""
    c = plan(available_bytes=50 * GiB, disaggregation_mode="decode", max_running_requests=16).to_dict()["capacity"]
    assert c["swa_max_total_num_tokens"] == 257 * 16 + 128 * 32 == 8208
    assert c["full_max_total_num_tokens"] == (50 * GiB - 8208 * 4608) // 4608
    c = plan(available_bytes=50 * GiB, disaggregation_mode="decode", max_running_requests=64).to_dict()["capacity"]
    assert c["swa_max_total_num_tokens"] == 257 * 64 == 16448


def test_hicache_host_pools_by_hand():
    """HiCache (issue 32): _SwaStrategy's KV and SWA host pools. Ratio 1.5 on the page-1 pools above: KV
    int(6,472,691 x 1.5) + 1 page, SWA int(5,178,152 x 1.5) + 1 page; --hicache-size 100 (GB) split over both
    device pools' bytes ((tokens + 1 page) x 4,608 each)."""
    h = plan(available_bytes=50 * GiB, page_size=1, enable_hierarchical_cache=True, hicache_ratio=1.5).to_dict()["host"]
    assert (h["entries"], h["entry_classes"]) == (["kv", "swa"], ["MHATokenToKVPoolHost"] * 2)
    assert (h["kv_tokens"], h["swa_tokens"]) == (9_709_036 + 1, 7_767_228 + 1)
    assert (h["swa_bytes_per_token"], h["swa_layers"], h["swa_bytes"]) == (4608, 18, 7_767_229 * 4608)
    assert h["total_bytes"] == (9_709_037 + 7_767_229) * 4608
    h = plan(available_bytes=50 * GiB, page_size=1, enable_hierarchical_cache=True, hicache_size=100).to_dict()["host"]
    full, swa = 6_472_692 * 4608, 5_178_153 * 4608
    assert h["kv_tokens"] == int(100 * full / (full + swa) * 10**9 // 4608) + 1 == 12_056_328
    assert h["swa_tokens"] == int(100 * swa / (full + swa) * 10**9 // 4608) + 1 == 9_645_062


def test_swa_full_tokens_ratio_by_hand():
    """--swa-full-tokens-ratio 0.5: cell int(4,608 + 0.5 x 4,608) = 6,912; full int(50 GiB / 6,912) page 1;
    SWA int(full x 0.5)."""
    c = plan(available_bytes=50 * GiB, page_size=1, swa_full_tokens_ratio=0.5).to_dict()
    assert (c["token"]["swa_full_tokens_ratio"], c["token"]["cell_size_bytes"]) == (0.5, 6912)
    full = 50 * GiB // 6912
    assert full == 7_767_229 and c["capacity"]["full_max_total_num_tokens"] == full
    assert c["capacity"]["swa_max_total_num_tokens"] == full // 2 == 3_883_614


def test_disable_hybrid_swa_memory_by_hand():
    """--disable-hybrid-swa-memory: no SWA pool; 36 layers x 256 B = 9,216 B per token in the one full pool."""
    d = plan(available_bytes=50 * GiB, page_size=1, disable_hybrid_swa_memory=True).to_dict()
    assert d["model"]["full_attention_layers"] == list(range(36)) and "swa_attention_layers" not in d["model"]
    assert (d["token"]["num_full_layers"], d["token"]["kv_bytes_per_token"], d["token"]["cell_size_bytes"]) == \
        (36, 9216, 9216)
    assert "swa_kv_bytes_per_token" not in d["token"] and "swa_max_total_num_tokens" not in d["capacity"]
    assert d["capacity"]["max_total_num_tokens"] == 50 * GiB // 9216 == 5_825_422


@pytest.mark.parametrize("flag, field, value", [("--swa-full-tokens-ratio 0.5", "swa_full_tokens_ratio", 0.5),
                                                ("--disable-hybrid-swa-memory", "disable_hybrid_swa_memory", True)])
def test_swa_pool_flags_are_read_from_a_launch_command(flag, field, value):
    from glm_kv.inputs.launch import parse_launch_command

    fields, inert = parse_launch_command(f"python -m sglang.launch_server --model-path {GPT} --tp 8 {flag}",
                                         layout="0.5.23")
    assert fields[field] == value and inert == []


@pytest.mark.parametrize("value", [0, 1.5, -0.2])
def test_a_ratio_outside_sglangs_range_is_refused(capsys, value):
    """SGLang: "--swa-full-tokens-ratio should be in range (0, 1.0]." (kv_cache_hook, every model)."""
    cmd = f"python -m sglang.launch_server --model-path {GPT} --tp 8 --swa-full-tokens-ratio {value}"
    assert main(["plan", "--sglang-args", cmd, "--set", "weights_bytes=40000000000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "swa_full_tokens_ratio" in err, err


def test_swa_prefix_tails_is_inert_but_refused_below_zero(capsys):
    """--swa-prefix-tails is read by DeepSeek-V4's configurator only (inert here), but SGLang refuses a negative
    count at start-up for every model."""
    from glm_kv.inputs.launch import parse_launch_command

    base = f"python -m sglang.launch_server --model-path {GPT} --tp 8"
    _, inert = parse_launch_command(f"{base} --swa-prefix-tails 2", layout="0.5.23")
    assert inert == ["--swa-prefix-tails 2"]
    assert main(["plan", "--sglang-args", f"{base} --swa-prefix-tails -1", "--set", "weights_bytes=40000000000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--swa-prefix-tails should be a non-negative integer." in err, err


def test_weight_estimate_near_the_published_size():
    """117B parameters (OpenAI's model card); MXFP4 experts + bf16 attention / embeddings: about 65 GB."""
    from glm_kv.inputs.resolve import resolve
    from glm_kv.ledgers.model_layers import layers_for
    from glm_kv.ledgers.model_weights import checkpoint_weights

    a = resolve(make_profile({"model": GPT, "gpu": "H200", "tp_size": 8, "available_bytes": GiB}))
    w = checkpoint_weights(a.config, layers_for(a))
    assert w.quantization == "mxfp4" and 116e9 < w.total_params < 118e9
    experts = 36 * 128 * 3 * 2880 * 2880
    assert w.quantized.over_tp == experts


def test_a_planted_swa_layer_in_the_full_pool_is_caught(monkeypatch):
    """Planted: the sliding-window layers counted as full-attention GQA (glm-kv before issue 32): the
    hand-worked cell and layer split no longer hold."""
    import glm_kv.ledgers.model_layers as ml

    monkeypatch.setattr(ml, "swa_layer_types", lambda t, where: ["full_attention"] * 35 + ["sliding_attention"])
    with pytest.raises(AssertionError):
        test_layers_split_into_the_full_and_the_swa_pool()
