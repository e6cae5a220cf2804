"""Issue 32: the layer kinds added for SGLang 0.5.23's other hybrid architectures, checked key for key.

Each new kind is checked the way test_models_contract.py checks every model (``check``: SGLang's own
classes get the vendored config.json and the launch flags; every plan-contract key both ways), on
fixed launches that reach what the random draw reaches only sometimes (HiCache, the strategy SGLang
picks for an architecture without extra_buffer, its refusals), and with one planted error per kind.
The random launches of the same models run in test_models_contract.py (MODELS_ADDED).
"""
from __future__ import annotations

import pytest

from test_models_contract import GiB, check, planted

_H200 = {"gpu": "H200", "pre_model_load_bytes": 147_412_123_456, "weights_bytes": 8 * GiB}
_B200 = {"gpu": "B200", "pre_model_load_bytes": 189_707_837_347, "weights_bytes": 12 * GiB}

# Jet-Nemotron (GQA + JetBlock): JetNemotronForCausalLM is not in SGLang's _MAMBA_EXTRA_BUFFER_ARCHS, so auto
# resolves to no_buffer (3 slots per request) and turns the overlap schedule off; --page-size above 1 is then
# refused ("no_buffer only supports page_size=1."), and so is an explicit extra_buffer
JET = [
    ("jet-nemotron-2b", {**_H200, "tp_size": 1}),
    ("jet-nemotron-2b", {**_H200, "tp_size": 2, "enable_hierarchical_cache": True, "hicache_ratio": 2.0}),
    ("jet-nemotron-4b", {**_B200, "tp_size": 2, "kv_cache_dtype": "fp8_e4m3", "mamba_ssm_dtype": "bfloat16",
                         "enable_hierarchical_cache": True, "hicache_size": 60}),
    ("jet-nemotron-4b", {**_B200, "tp_size": 4, "dp_size": 2, "enable_dp_attention": True, "max_running_requests": 64}),
    ("jet-nemotron-4b", {**_H200, "tp_size": 1, "page_size": 64}),                                   # both refuse
    ("jet-nemotron-2b", {**_H200, "tp_size": 1, "mamba_scheduler_strategy": "extra_buffer"}),        # both refuse
    ("jet-nemotron-2b", {**_H200, "tp_size": 8}),     # 12 JetBlock heads over 8: both refuse (divide)
]


@pytest.mark.parametrize("name, launch", JET, ids=[f"{n}-{i}" for i, (n, _) in enumerate(JET)])
def test_jet_nemotron_agrees_key_for_key(sglang_ready, name, launch):
    problems, sg = check(name, launch)
    assert problems == [], problems
    refused = "page_size" in launch or "mamba_scheduler_strategy" in launch or launch["tp_size"] == 8
    assert ("errors" in sg) == refused, sg.get("errors")
    if not refused:
        assert sg["request"]["mamba_strategy"] == "no_buffer" and sg["request"]["slots_per_request"] == 3


def test_a_planted_jetblock_conv_is_caught(sglang_ready, monkeypatch):
    """Planted: the JetBlock conv state over the v projection only (no q / k groups); caught in the
    request ledger and in the state slots the memory holds."""
    from glm_kv.ledgers import layers

    def conv_v_only(s):
        return (s.intermediate_size // s.attn_tp, s.conv_kernel - 1)

    problems = planted(monkeypatch, "jet-nemotron-2b", {**_H200, "tp_size": 1},
                       lambda mp: mp.setattr(layers.JetBlockState, "conv_shape", property(conv_v_only)))
    keys = {p.split(":")[0] for p in problems}
    assert {"request.conv_state_shape", "request.state_slot_bytes", "capacity.max_mamba_cache_size"} <= keys, problems


def test_a_planted_extra_buffer_default_is_caught(sglang_ready, monkeypatch):
    """Planted: Jet-Nemotron treated as an extra_buffer architecture (auto -> extra_buffer, 5 slots)."""
    from glm_kv.inputs import hf_config

    problems = planted(monkeypatch, "jet-nemotron-2b", {**_H200, "tp_size": 1}, lambda mp: mp.setattr(
        hf_config, "MAMBA_EXTRA_BUFFER_ARCHS", hf_config.MAMBA_EXTRA_BUFFER_ARCHS | {"JetNemotronForCausalLM"}))
    keys = {p.split(":")[0] for p in problems}
    assert {"request.mamba_strategy", "request.slots_per_request", "capacity.max_running_requests"} <= keys, problems
