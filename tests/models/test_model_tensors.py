"""Issue 22: the other models' pools as real tensors (glm_kv.tensors.model_pools) against the plan."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from glm_kv.inputs.profile import make_profile  # noqa: E402
from glm_kv.ledgers import layers as layers_module  # noqa: E402
from glm_kv.ledgers.plan import load_plan  # noqa: E402
from glm_kv.tensors.model_pools import measure_model  # noqa: E402

# TP 8 keeps the state slots small enough to allocate on a CI box (Kimi-K3: 56 MB per slot)
CASES = [("kimi-k3", {"gpu": "H200"}), ("kimi-k3", {"gpu": "B200", "kv_cache_dtype": "fp8_e4m3"}),
         ("qwen3.5-35b-a3b", {"gpu": "H200"}), ("qwen3.5-35b-a3b", {"gpu": "B200", "mamba_ssm_dtype": "bfloat16"}),
         ("nemotron-3-super-120b-a12b-fp8", {"gpu": "H200"}), ("nemotron-3-super-120b-a12b-fp8", {"gpu": "B200"}),
         ("deepseek-v3.2", {"gpu": "H200"}), ("deepseek-v3.2", {"gpu": "B200"}),
         ("deepseek-v3.2", {"gpu": "B200", "kv_cache_dtype": "fp8_e4m3", "dsa_prefill_backend": "flashmla_sparse",
                            "dsa_decode_backend": "flashmla_kv"}),
         ("glm-5.1", {"gpu": "H200"}), ("glm-5.1", {"gpu": "B200"}), ("glm-5.3-flash", {"gpu": "H200"}),
         # issue 32: GQA + JetBlock (Jet-Nemotron-2B's 12 JetBlock heads split over 4 at most)
         ("jet-nemotron-2b", {"gpu": "H200", "tp_size": 4}), ("jet-nemotron-4b", {"gpu": "B200"}),
         ("jet-nemotron-4b", {"gpu": "H200", "mamba_ssm_dtype": "bfloat16", "kv_cache_dtype": "fp8_e4m3"}),
         # issue 32: hybrid SWA (SWAKVPool's full and sliding-window pools)
         ("gpt-oss-120b", {"gpu": "H200"}), ("gpt-oss-120b", {"gpu": "B200", "tp_size": 4, "kv_cache_dtype": "fp8_e4m3"})]


def plan_of(name, launch):
    # the pools' shapes only: a stated rest (Kimi-K3's estimated weights do not fit 8 x H200)
    return load_plan(make_profile({"model": name, "tp_size": 8, "available_bytes": 60 << 30, **launch}))


@pytest.mark.parametrize("name, launch", CASES, ids=lambda v: v if isinstance(v, str) else ",".join(map(str, v.values())))
def test_tensors_measure_what_the_plan_says(name, launch):
    report = measure_model(plan_of(name, launch))
    assert report["differences"] == {}, report


def test_planted_error_in_a_state_spec_is_measured(monkeypatch):
    """Planted error: the Gated DeltaNet spec drops its conv state -> the tensors disagree, named."""
    monkeypatch.setattr(layers_module.GatedDeltaNetState, "bytes_per_slot", property(lambda s: s.temporal_bytes))
    report = measure_model(plan_of("qwen3.5-35b-a3b", {"gpu": "H200"}))
    assert set(report["differences"]) == {"state_slot_bytes"}


def test_planted_error_in_the_jetblock_is_measured(monkeypatch):
    """Planted error (issue 32): the JetBlock's v dim taken as its k dim (expand_v ignored) -> measured."""
    monkeypatch.setattr(layers_module.JetBlockState, "temporal_shape",
                        property(lambda s: (s.num_heads // s.attn_tp, s.state_size, s.state_size)))
    report = measure_model(plan_of("jet-nemotron-4b", {"gpu": "H200"}))
    assert set(report["differences"]) == {"state_slot_bytes"}


def test_planted_error_in_the_swa_pool_is_measured(monkeypatch):
    """Planted error (issue 32): the sliding-window spec with one KV head per rank too many -> measured."""
    monkeypatch.setattr(layers_module.SlidingWindowKv, "heads_per_rank",
                        property(lambda s: max(1, s.num_kv_heads // s.attn_tp) + 1))
    report = measure_model(plan_of("gpt-oss-120b", {"gpu": "H200"}))
    assert set(report["differences"]) == {"swa_kv_bytes_per_token"}


def test_planted_error_in_the_indexer_is_measured(monkeypatch):
    monkeypatch.setattr(layers_module.DsaIndexerK, "bytes_per_token", property(lambda s: s.unpooled_bytes))
    report = measure_model(plan_of("glm-5.3-flash", {"gpu": "H200"}))   # kpool 4: 33 B, not 132 B
    assert set(report["differences"]) == {"indexer_bytes_per_token"}


def test_cli_measure_for_another_model(capsys, monkeypatch):
    """`glm-kv measure` with `model:` another model: exit 0 and equal bytes; a planted spec error
    (Mamba-2's SSM state counted in bf16) exits 1 naming the quantity."""
    import json

    from glm_kv.cli import main

    argv = ["measure", "--set", "model=nemotron-3-super-120b-a12b-fp8", "--set", "available_bytes=21474836480",
            "--set", "tp_size=8", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)   # issue 31: the one measure engine's report, per buffer
    assert out["ok"] and out["mismatches"] == [], out["mismatches"]
    monkeypatch.setattr(layers_module.Mamba2State, "temporal_bytes",
                        property(lambda s: s.temporal_shape[0] * s.head_dim * s.state_size * 2))
    assert main(argv) == 1
    bad = json.loads(capsys.readouterr().out)["mismatches"]
    assert bad and all("mamba_pool.temporal" in m or "mamba per mamba_slots" in m for m in bad), bad
