"""Tests against the survivors of the round-4 mutation sample (benchmarks/mutants.md): the other
models' modules. Expected values from SGLang 0.5.23's wheel (quoted where used), the vendored
configs, the plan contract, or hand arithmetic in the docstring."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from glm_kv.errors import ProfileError
from glm_kv.inputs.profile import make_profile
from glm_kv.ledgers.plan import load_plan

GiB = 1 << 30
MODELS = Path(__file__).resolve().parents[2] / "glm_kv" / "inputs" / "models"


def plan_of(model, gpu, **kw):
    return load_plan(make_profile({"model": model, "gpu": gpu, "available_bytes": 60 * GiB, **kw}))


def test_deepseek_v32_host_indexer_pool_by_hand():
    """DSAIndexerPoolHost (pool_host/dsa.py): ``indexer_page_num = (size + page_size + 1) // page_size``
    pages of ``page_bytes(page_size)`` per layer, ``size`` the KV host pool's tokens. DeepSeek-V3.2's
    config: 61 layers, each with an indexer of index_head_dim 128, stored fp8 with one 4 B scale per
    128 (132 B per token), pages of 64 tokens: 61 x 64 x 132 = 515,328 B per host page."""
    p = plan_of("deepseek-v3.2", "H200", enable_hierarchical_cache=True, hicache_ratio=2.0)
    h = p.host
    assert h.indexer_page_bytes == 61 * 64 * 132 == 515_328
    assert h.indexer_bytes == (h.kv_tokens + 64 + 1) // 64 * 515_328
    assert h.indexer_bytes > 0 and h.total_bytes == h.kv_bytes + h.indexer_bytes + h.mamba_bytes


def test_plan_dict_names_the_profile():
    """plan-contract.md: ``profile.name`` is the profile's label (what every consumer reads)."""
    d = plan_of("qwen3.5-35b-a3b", "H200", name="my-qwen").to_dict()
    assert d["profile"]["name"] == "my-qwen" and "NAME" not in d["profile"]


@pytest.mark.parametrize("pattern", ["MX*", "", 7])
def test_bad_hybrid_override_pattern_names_the_rule(tmp_path, pattern):
    """NemotronHConfig's hybrid_override_pattern: M Mamba-2, * attention, E MoE, - MLP."""
    cfg = json.loads((MODELS / "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8_config.json").read_text())
    cfg["hybrid_override_pattern"] = pattern
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ProfileError) as e:
        plan_of(str(tmp_path), "H200")
    assert e.value.field.endswith(".hybrid_override_pattern")
    assert e.value.rule.startswith("must be a string of M, *, E and - (Mamba-2, attention, MoE, MLP), got ")


def test_kimi_k3_bf16_on_blackwell_quotes_sglangs_refusal():
    """SGLang 0.5.23 (arg_groups/overrides.py) refuses it with: 'TensorRT-LLM MLA backend only
    supports kv-cache-dtype of fp8_e4m3, bf16, or auto.' The message says which version refuses."""
    with pytest.raises(ProfileError) as e:
        plan_of("kimi-k3", "B200", kv_cache_dtype="bfloat16")
    assert e.value.field == "kv_cache_dtype"
    assert e.value.rule.startswith("SGLang 0.5.23 refuses bfloat16 here: its default attention backend on Blackwell")
    assert "'TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3, bf16, or auto.'" in e.value.rule


# -- survivors of the sample over the functions changed on 2026-12-01 (benchmarks/mutants.md) ----------

def test_attention_only_model_has_no_mamba_strategy():
    """The plan's documented value: ``mamba_strategy`` is "none" without state layers (DeepSeek-V3.2:
    61 MLA + DSA layers, no linear attention) and with the radix cache off."""
    assert plan_of("deepseek-v3.2", "H200").request.mamba_strategy == "none"
    assert plan_of("qwen3.5-35b-a3b", "H200", disable_radix_cache=True).request.mamba_strategy == "none"


def test_notes_say_what_to_give():
    """No available_bytes nor weights for another model: its weights are estimated (issue 31: every model
    the same device-to-rest path) and the note says so and what to give instead; with the estimate off
    there is no capacity. HiCache without a ratio: SGLang 0.5.23 auto-sizes from free RAM, the note says
    glm-kv took 2.0."""
    p = load_plan(make_profile({"model": "qwen3.5-35b-a3b", "gpu": "H200"}))
    assert p.capacity is not None and p.memory.weights_source == "estimate"
    assert any(n.startswith("weights_bytes is an ESTIMATE from the model's config and quantization")
               for n in p.notes), p.notes
    assert load_plan(make_profile({"model": "qwen3.5-35b-a3b", "gpu": "H200", "weights_estimate": False})).capacity is None
    # the target's weights given, the MTP draft's estimated: the note names the draft, never weights_bytes
    g = load_plan(make_profile({"gpu": "H200", "tp_size": 8, "weights_bytes": 9_750_000_000,
                                "speculative_algorithm": "EAGLE"}))
    assert g.memory.weights_source == "profile+estimate" and g.memory.draft_weights_bytes > 0
    assert not any(n.startswith("weights_bytes is an ESTIMATE") for n in g.notes), g.notes
    assert any(n.startswith("draft_weights_bytes is an ESTIMATE") and f"{g.memory.draft_weights_bytes:,} B" in n
               for n in g.notes), g.notes
    both = load_plan(make_profile({"gpu": "H200", "tp_size": 8, "speculative_algorithm": "EAGLE"}))
    assert [n for n in both.notes if "is an ESTIMATE from the" in n][0].startswith("weights_bytes is an ESTIMATE")
    assert not any(n.startswith("draft_weights_bytes") for n in both.notes)
    h = plan_of("qwen3.5-35b-a3b", "H200", enable_hierarchical_cache=True)
    assert any(n.startswith("HiCache ratio 2.0: SGLang 0.5.23 auto-sizes it") for n in h.notes), h.notes
    given = plan_of("qwen3.5-35b-a3b", "H200", enable_hierarchical_cache=True, hicache_ratio=2.0)
    assert not any(n.startswith("HiCache ratio 2.0") for n in given.notes)


def test_layout_and_page_refusals_say_why():
    """SGLang 0.5.23: MambaPoolHost asserts a page_first layout; validate_mamba_no_buffer reads --page-size
    as given (Nemotron's Blackwell backend sets 64 only later) and refuses no_buffer with trtllm_mha, its
    Blackwell default (both messages checked through SGLang's ServerArgs in
    tests/sglang/test_models_contract.py's FOUND launches and by hand: 'no_buffer do not support
    trtllm_mha attention backend.' unpaged, 'no_buffer only supports page_size=1.' with --page-size 64)."""
    with pytest.raises(ProfileError) as e:
        plan_of("qwen3.5-35b-a3b", "H200", enable_hierarchical_cache=True, hicache_ratio=2.0,
                hicache_mem_layout="layer_first")
    assert e.value.field == "hicache_mem_layout" and "fails MambaPoolHost's layout assert" in e.value.rule
    with pytest.raises(ProfileError) as e:
        plan_of("nemotron-3-super-120b-a12b-fp8", "B200", mamba_scheduler_strategy="no_buffer",
                disable_overlap_schedule=True)
    assert e.value.field == "mamba_scheduler_strategy"
    assert "no_buffer do not support trtllm_mha attention backend." in e.value.rule
    with pytest.raises(ProfileError) as e:
        plan_of("nemotron-3-super-120b-a12b-fp8", "B200", mamba_scheduler_strategy="no_buffer",
                disable_overlap_schedule=True, page_size=64)
    assert e.value.field == "mamba_scheduler_strategy"
    assert e.value.rule.startswith("SGLang 0.5.23 refuses it: \"no_buffer only supports page_size=1.\" "
                                   "(arg_groups/mamba_hook.py), and it forces page_size=64 ")
