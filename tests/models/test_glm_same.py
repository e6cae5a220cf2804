"""Issue 22: GLM-5.3-Flash through the layer-spec path gives today's ledgers' bytes exactly."""
from __future__ import annotations

import pytest

from glm_kv.inputs.hf_config import load_hf_config
from glm_kv.inputs.rules import SGLANG_0_5_23
from glm_kv.ledgers import layers as layers_module
from glm_kv.ledgers.model_layers import CacheArgs, build_layers
from glm_kv.ledgers.plan import load_plan

PROFILES_0523 = ["h200-0.5.23", "b200-0.5.23", "worked-example-0.5.23"]
OVERRIDES = [{}, {"kv_cache_dtype": "bfloat16"}, {"tp_size": 8}, {"mamba_ssm_dtype": "bfloat16"},
             {"kv_cache_dtype": "fp8_e4m3", "dsa_prefill_backend": "trtllm", "dsa_decode_backend": "trtllm"},
             {"tp_size": 8, "dp_size": 8, "enable_dp_attention": True}]


def differences(plan) -> dict[str, tuple[int, int]]:
    """Keys where the new path differs from today's plan: {key: (today, new path)}."""
    tok, req = plan.token, plan.request
    args = CacheArgs(kv_cache_dtype=tok.kv_cache_dtype, dsa_prefill_backend=tok.dsa_prefill_backend,
                     dsa_decode_backend=tok.dsa_decode_backend, attn_tp=req.linear_attn_tp_size,
                     ssm_dtype=req.temporal_dtype, ssm_dtype_from_config=False)
    m = build_layers(load_hf_config("glm-5.3-flash"), args, SGLANG_0_5_23)
    new = {"kv_bytes_per_token": m.bytes_per_token_of(layers_module.MlaKv),
           "indexer_bytes_per_token": m.bytes_per_token_of(layers_module.DsaIndexerK),
           "target_cell_size_bytes": m.bytes_per_token, "state_slot_bytes": m.bytes_per_slot,
           "full_attention_layers": len(m.full_attention_layers), "linear_attention_layers": len(m.state_layers)}
    today = {"kv_bytes_per_token": tok.kv_bytes_per_token, "indexer_bytes_per_token": tok.indexer_bytes_per_token,
             "target_cell_size_bytes": tok.target_cell_size_bytes, "state_slot_bytes": req.state_slot_bytes,
             "full_attention_layers": len(plan.model.full_attention_layers),
             "linear_attention_layers": len(plan.model.linear_attention_layers)}
    return {k: (today[k], new[k]) for k in today if today[k] != new[k]}


@pytest.mark.parametrize("profile", PROFILES_0523)
@pytest.mark.parametrize("overrides", OVERRIDES, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "as-is")
def test_glm_53_flash_new_path_equals_todays_ledgers(profile, overrides):
    plan = load_plan(profile, overrides)
    assert differences(plan) == {}


def test_planted_error_names_the_key(monkeypatch):
    """Planted error: the MLA spec one byte wider -> the comparison names kv_bytes_per_token."""
    plan = load_plan("h200-0.5.23")
    monkeypatch.setattr(layers_module.MlaKv, "bytes_per_token", property(lambda s: s.kv_cache_dim * s.item_bytes + 1))
    diff = differences(plan)
    assert set(diff) == {"kv_bytes_per_token", "target_cell_size_bytes"}
    monkeypatch.undo()
    # the SSM state read as bf16 when it is fp32 -> the slot bytes differ
    monkeypatch.setattr(layers_module.KdaState, "temporal_bytes",
                        property(lambda s: s.temporal_shape[0] * s.head_dim * s.head_dim * 2))
    assert set(differences(plan)) == {"state_slot_bytes"}
