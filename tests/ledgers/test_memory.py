"""Capacity from the GPU up (issue 11): expected values typed by hand from the 0.5.23 wheel's formulas.

memory_hook.py handle_gpu_memory_settings: f = round((gpu_mem - R) / gpu_mem, 3), R in MiB,
then x 0.95 x clamp(1 - 0.1 (L H^2 / (24 x 1024^2) - 1), 0.8, 1.05) for a vision_config.
H200 = 143,771 MiB. Every number below is worked out in the comment next to it.
"""
from __future__ import annotations

import pytest

from glm_kv import ProfileError
from glm_kv.inputs.model import load_model
from glm_kv.ledgers.memory import vlm_factor
from glm_kv.ledgers.plan import load_plan

GiB = 1 << 30
L = {"sglang_layout": "0.5.23", "gpu": "H200", "kv_cache_dtype": "bfloat16"}


def plan(**over):
    return load_plan("worked-example-0.5.23", {**L, "available_bytes": None, "weights_estimate": False, **over})


def mfs(**over) -> float:
    return plan(**over).memory.mem_fraction_static


def test_shipped_config_has_the_vision_fields_sglang_reads():
    m = load_model()
    assert m.has_vision_config and m.vision_hidden_size == 1024 and m.vision_num_hidden_layers is None
    assert m.architectures == ("Glm5NextForConditionalGeneration",)


def test_vlm_factor_values():
    assert vlm_factor(24, 1024) == pytest.approx(0.95)            # ViT-L/14: ratio 1
    assert vlm_factor(24, 2048) == pytest.approx(0.95 * 0.8)      # ratio 4 -> 0.7, clamped to 0.8
    assert vlm_factor(12, 1024) == pytest.approx(0.95 * 1.05)     # ratio 0.5 -> 1.05


def test_default_fraction_dp_attention_with_vlm():
    # R = 512 + 8192*1.5 + 8*1/8*1024 + (64*2 + 64*8*3) + 1536 = 17024 MiB -> round(126747/143771, 3) = 0.882
    assert mfs(tp_size=8, dp_size=8, enable_dp_attention=True, max_running_requests=64) == 0.882 * 0.95


def test_language_only_drops_the_vlm_factor_not_the_reservation():
    p = plan(tp_size=8, dp_size=8, enable_dp_attention=True, language_only=True, weights_bytes=40_000_000_000,
             max_running_requests=64)
    assert p.memory.mem_fraction_static == 0.882
    assert p.memory.mm_reservation_bytes == 100 * (1 << 20)


def test_chunked_prefill_size_moves_the_default():
    # R = 512 + 2048*1.5 + 128 + 64*2 + 1536 = 5376 -> floor 10240 -> round(133531/143771, 3) = 0.929
    assert mfs(chunked_prefill_size=2048, max_running_requests=64) == 0.929 * 0.95


def test_deepep_reserves_graph_and_a2a_buffers():
    # 17024 + 1024 (prefill graph, deepep) = 18048; + 2048 after the floor = 20096 -> 0.860
    assert mfs(tp_size=8, dp_size=8, enable_dp_attention=True, max_running_requests=64,
               moe_a2a_backend="deepep") == pytest.approx(0.860 * 0.95)


def test_decode_server_no_vlm_no_prefill_graph():
    # act = max(64*1, 2048) = 2048: R = 512 + 3072 + 1024 + 64*2 + 64*8*3 = 6272 -> 10240 -> 0.929, no VLM
    assert mfs(tp_size=8, dp_size=8, enable_dp_attention=True, max_running_requests=64,
               disaggregation_mode="decode") == 0.929


def test_decode_graph_max_bs_given():
    # tp 8, no DP attention, max_bs 64: R = 512 + 12288 + 1024 + 128 + 1536 = 15488 -> round(128283/143771,3) = 0.892
    assert mfs(tp_size=8, max_running_requests=None, cuda_graph_max_bs_decode=64) == 0.892 * 0.95


def test_rest_from_pre_load_memory_tp1():
    # tp 1: no float32 pass. rest = (pre - W)/2^30 - pre/2^30 x (1 - f) - 100/1024, f = 0.8 given
    pre, w = 149_000_000_001, 70_000_000_000
    p = plan(mem_fraction_static=0.8, weights_bytes=w, pre_model_load_bytes=pre)
    expected = (pre - w) / GiB - pre / GiB * (1 - 0.8) - 100 / 1024
    assert p.capacity.available_bytes == int(expected * GiB)
    d = p.to_dict()["capacity"]
    assert (d["pre_model_load_bytes"], d["pre_model_load_bytes_source"]) == (pre, "profile")
    assert (d["weights_bytes"], d["weights_bytes_source"], d["mem_fraction_static"]) == (w, "profile", 0.8)
    assert d["rest_bytes"] == d["available_bytes"]


def test_weights_leaving_no_memory_are_refused_with_the_fraction_that_would_do():
    # tp 1, f = 0.5 given: pre = 80 GiB, available after 50 GiB of weights = 30 GiB; rest = 30 - 80 x 0.5 < 0.
    # SGLang's minimum viable fraction = 1 - 30/80 = 0.625, suggested ceil(625.0)/1000 = 0.625.
    with pytest.raises(ProfileError) as e:
        plan(mem_fraction_static=0.5, weights_bytes=50 * GiB, pre_model_load_bytes=80 * GiB)
    assert e.value.field == "weights_bytes"
    assert ("Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.5. Raise "
            "--mem-fraction-static above 0.625 (minimum viable = 1 - available/pre = 0.6250)") in e.value.rule
    # 50.248 GiB: minimum 1 - 29.752/80 = 0.6281 -> suggested 0.629 (rounded up, not to the nearest 0.628)
    with pytest.raises(ProfileError) as e:
        plan(mem_fraction_static=0.5, weights_bytes=int(50.248 * GiB), pre_model_load_bytes=80 * GiB)
    assert "above 0.629 (minimum viable = 1 - available/pre = 0.6281)" in e.value.rule


def test_pre_load_estimate_is_flagged():
    p = plan(weights_bytes=40_000_000_000, tp_size=8)
    d = p.to_dict()
    assert d["capacity"]["pre_model_load_bytes_source"] == "estimate"
    # 143,771 MiB - 1 GiB context - 2 GiB NCCL (tp > 1)
    assert d["capacity"]["pre_model_load_bytes"] == 143_771 * (1 << 20) - 3 * GiB
    assert any("ESTIMATE" in n for n in d["notes"])
    assert "estimate" in d["capacity"]["available_source"]


def test_mtp_draft_weights_are_counted():
    w = 70_000_000_000
    p = plan(weights_bytes=w, speculative_algorithm="EAGLE")
    m = p.memory
    assert m.draft_weights_bytes > 2 * 154_880 * 4096   # at least its own embed + lm_head (bf16, tp 1)
    assert m.weights_bytes == w + m.draft_weights_bytes and m.weights_source == "profile+estimate"
    assert p.capacity.available_bytes < plan(weights_bytes=w).capacity.available_bytes


def test_dp_attention_replicates_attention_weights():
    # split over attn_tp, not tp: KDA q/k/v/o 34 x 4 x 4096 x 8192, MLA q_b/kv_b/o
    # 11 x (1536*64*256 + 512*64*512 + 64*256*4096), embed 154880 x 4096
    # (the one estimate every model gets: model_weights.checkpoint_weights over the config's layer specs),
    # FP8 with 128 x 128 block scales: 1 + 4 / 16384 B per parameter
    from glm_kv.inputs.profile import make_profile
    from glm_kv.inputs.resolve import resolve
    from glm_kv.ledgers.model_layers import layers_for
    from glm_kv.ledgers.model_weights import checkpoint_weights

    args = resolve(make_profile({"gpu": "H200", "tp_size": 8}))
    w = checkpoint_weights(args.config, layers_for(args))
    attn = 34 * 4 * 4096 * 8192 + 11 * (1536 * 64 * 256 + 512 * 64 * 512 + 64 * 256 * 4096) + 154_880 * 4096
    dp8 = w.per_rank(8, 1, dp_attention=True)
    tp8 = w.per_rank(8, 8, dp_attention=False)
    assert abs((dp8 - tp8) - attn * 7 / 8 * (1 + 4 / 16384)) <= 2
    assert 5.5e9 < dp8 - tp8 < 5.7e9


def test_hicache_size_is_split_not_given_twice():
    p = plan(available_bytes=100 * GiB, enable_hierarchical_cache=True, hicache_size=100)
    h = p.host
    # KV + mamba shares add up to 100 GB (each rounded down, plus one page / one slot of padding)
    assert h.kv_bytes + h.mamba_bytes <= 100 * 10**9 + 256 * h.kv_bytes_per_token + h.mamba_slot_bytes
    assert h.kv_bytes + h.mamba_bytes > 99 * 10**9
    assert h.total_bytes == h.kv_bytes + h.mamba_bytes + h.indexer_bytes > 100 * 10**9


def test_hicache_auto_size_from_host_ram():
    # 200 GB RAM, 4 ranks: budget = int((200e9 - 10 GiB) // 4 x 0.8); ratio = budget x 0.95 / device bytes
    p = plan(available_bytes=100 * GiB, enable_hierarchical_cache=True, host_memory_bytes=200 * 10**9,
             ranks_per_host=4)
    budget = int((200 * 10**9 - 10 * GiB) // 4 * 0.8)
    assert p.host.hicache_ratio_source == "auto-size"
    assert p.host.hicache_ratio == pytest.approx(budget * 0.95 / p.host.device_bytes)
    assert p.host.hicache_ratio < 2.0


def test_hicache_mtp_packs_the_draft_layer():
    p = plan(available_bytes=100 * GiB, enable_hierarchical_cache=True, hicache_ratio=1.5,
             speculative_algorithm="EAGLE")
    assert p.host.kv_layers == 12 and p.host.kv_bytes == p.host.kv_tokens * 12 * p.token.kv_row_bytes


@pytest.mark.parametrize("over,field", [
    ({"hicache_mem_layout": "layer_first"}, "hicache_mem_layout"),
    ({"disaggregation_mode": "decode"}, "enable_hierarchical_cache"),
])
def test_host_refusals(over, field):
    with pytest.raises(ProfileError) as e:
        plan(available_bytes=100 * GiB, enable_hierarchical_cache=True, **over)
    assert e.value.field == field


def test_context_parallel_splits_kda_over_tp():
    p = plan(available_bytes=100 * GiB, tp_size=8, attn_cp_size=8, enable_prefill_cp=True,
             cp_strategy="interleave")
    assert p.parallel.attn_tp_size == 1 and p.parallel.linear_attn_tp_size == 8
    assert p.request.state_slot_bytes == 147_619_840 // 8


@pytest.mark.parametrize("over,field", [
    ({"attn_cp_size": 4}, "attn_cp_size"),
    ({"cp_strategy": "zigzag"}, "cp_strategy"),
])
def test_context_parallel_refusals(over, field):
    base = dict(available_bytes=100 * GiB, tp_size=8, attn_cp_size=8, enable_prefill_cp=True,
                cp_strategy="interleave")
    with pytest.raises(ProfileError) as e:
        plan(**{**base, **over})
    assert e.value.field == field


def test_speculative_scratch_uses_divided_max_mamba_cache_size():
    # tp8 dp8: mmc 1200 -> 150 per worker; mrr 256 -> 32 per worker; capped = min(32, 150 // 5) = 30
    p = plan(available_bytes=60 * GiB, tp_size=8, dp_size=8, enable_dp_attention=True,
             speculative_algorithm="EAGLE", max_mamba_cache_size=1200, max_running_requests=256)
    c = p.capacity
    assert c.max_mamba_cache_size == 150
    assert c.spec_scratch_bytes == p.request.state_slot_bytes * (30 + 1) * p.draft_tokens


def test_no_free_memory_before_the_weights_is_refused_without_sglangs_words():
    # a free reading of 0 GiB before the weights (a fuzzed launch found one): SGLang's 1 - available/pre has no
    # value (it would divide by zero), so the refusal keeps glm-kv's own words only
    from dataclasses import replace

    from glm_kv.ledgers.memory import no_memory_rule, sglang_no_memory_text

    m = replace(plan(weights_bytes=40_000_000_000).memory, free_readings_gib=(0.0, -37.25))
    assert sglang_no_memory_text(m) is None
    assert "SGLang 0.5.23 says" not in no_memory_rule(m, "B200")


def test_weights_beyond_the_free_memory_say_no_fraction_fits():
    # 90 GiB of weights on 80 GiB free: SGLang's minimum 1 - (-10)/80 = 1.125 is no fraction at all
    with pytest.raises(ProfileError) as e:
        plan(mem_fraction_static=0.9, weights_bytes=90 * GiB, pre_model_load_bytes=80 * GiB)
    assert "no fraction fits: the weights exceed the free memory" in e.value.rule
    assert "above 1.125 (minimum viable = 1 - available/pre = 1.1250)" in e.value.rule
    with pytest.raises(ProfileError) as e:   # 80 GiB: minimum 1.0, and even 1.0 leaves a rest of 0
        plan(mem_fraction_static=0.9, weights_bytes=80 * GiB, pre_model_load_bytes=80 * GiB)
    assert "no fraction fits" in e.value.rule and "above 1.000 " in e.value.rule
    with pytest.raises(ProfileError) as e:   # 79 GiB: 0.9875 -> 0.988, a fraction that fits
        plan(mem_fraction_static=0.9, weights_bytes=79 * GiB, pre_model_load_bytes=80 * GiB)
    assert "no fraction fits" not in e.value.rule and "above 0.988 " in e.value.rule
