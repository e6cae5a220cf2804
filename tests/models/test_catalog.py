"""Issue 32: `glm-kv models` lists what glm-kv plans (architecture, layers, vendored files, source) and what not."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from glm_kv.cli import main
from glm_kv.errors import ProfileError
from glm_kv.inputs.catalog import NO_CONFIG, NOT_MODELLED
from glm_kv.inputs.hf_config import (DSV4_SHIPPED, MODELS_DIR, SHIPPED, SUPPORTED_MODEL_TYPES, load_dsv4_config,
                                     load_hf_config, vendored_sources)

ROOT = Path(__file__).resolve().parents[2]


def models_json(capsys) -> dict:
    assert main(["models", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_every_shipped_model_is_listed_with_its_files_and_source(capsys):
    cat = models_json(capsys)
    listed = {c["model"]: (r, c) for r in cat["planned"] for c in r["configs"]}
    assert set(listed) == set(SHIPPED) | set(DSV4_SHIPPED)
    for name, (row, c) in listed.items():
        if name in DSV4_SHIPPED:   # issue 32: DeepSeek-V4's own pools (glm_kv.ledgers.dsv4_plan)
            cfg = load_dsv4_config(name)
            assert row["architecture"] == "DeepseekV4ForCausalLM" and row["family"] == cfg.family == "dsv4"
            assert c["source"] == cfg.source == vendored_sources()[c["files"][0]]
            continue
        cfg = load_hf_config(name)
        assert row["architecture"] in cfg.architectures and cfg.model_type in row["model_types"]
        assert row["family"] == cfg.family == SUPPORTED_MODEL_TYPES[cfg.model_type]
        assert c["source"] == cfg.source
        if name != "glm-5.3-flash":
            assert all((MODELS_DIR / f).is_file() for f in c["files"]) and c["source"] == vendored_sources()[c["files"][0]]


def test_the_added_architectures_plan(capsys):
    archs = {r["architecture"]: r for r in models_json(capsys)["planned"]}
    assert archs["Qwen3NextForCausalLM"]["layers"] == archs["Qwen3_5ForConditionalGeneration"]["layers"] \
        == "GQA / Gated DeltaNet"
    assert {c["model"] for c in archs["NemotronHForCausalLM"]["configs"]} >= {
        "nemotron-h-56b-base-8k", "nemotron-3-nano-30b-a3b-bf16", "nemotron-3-ultra-550b-a55b-bf16"}
    assert archs["Qwen3NextForCausalLM"]["configs"][0]["source"].startswith("github.com/ai-dynamo/aiconfigurator ")
    jet = archs["JetNemotronForCausalLM"]
    assert jet["layers"] == "GQA / JetBlock" and jet["model_types"] == ["jet_nemotron"]
    assert {c["model"] for c in jet["configs"]} == {"jet-nemotron-2b", "jet-nemotron-4b"}
    assert all(c["source"].startswith("github.com/NVlabs/Jet-Nemotron jetai/modeling/configs/") for c in jet["configs"])
    assert {c["model"] for c in archs["Qwen3_5MoeForConditionalGeneration"]["configs"]} >= {
        "qwen3.5-35b-a3b", "qwen3.5-122b-a10b", "qwen3.5-397b-a17b"}


def test_the_round_five_configs_are_listed(capsys):
    """Issue 32: Qwen3.6 (GDN), the two ModelOpt MIXED_PRECISION checkpoints and gpt-oss (hybrid SWA)."""
    archs = {r["architecture"]: r for r in models_json(capsys)["planned"]}
    assert "qwen3.6-35b-a3b" in {c["model"] for c in archs["Qwen3_5MoeForConditionalGeneration"]["configs"]}
    assert "qwen3.6-27b-nvfp4" in {c["model"] for c in archs["Qwen3_5ForConditionalGeneration"]["configs"]}
    light = next(c for c in archs["NemotronHForCausalLM"]["configs"] if c["model"].startswith("nemotron-3.5"))
    assert light["files"][1].endswith("_hf_quant_config.json") and "NemotronHConfig" in light["sglang_refuses"]
    gpt = archs["GptOssForCausalLM"]
    assert gpt["family"] == "gqa_swa" and gpt["model_types"] == ["gpt_oss"]
    assert [c["model"] for c in gpt["configs"]] == ["gpt-oss-120b", "gpt-oss-20b"]
    assert gpt["configs"][0]["source"].startswith("aiconfigurator-core 0.12.0 wheel")


def test_more_hybrid_swa_configs_are_listed(capsys):
    """Issue 32: more sliding-window hybrids SGLang 0.5.23 sizes with SWAKVPool, from the aiconfigurator wheel."""
    archs = {r["architecture"]: r for r in models_json(capsys)["planned"]}
    gemma = archs["Gemma4ForConditionalGeneration"]
    assert gemma["family"] == "gqa_swa" and gemma["model_types"] == ["gemma4"]
    assert [c["model"] for c in gemma["configs"]] == ["gemma-4-26b-a4b"]
    assert gemma["configs"][0]["source"].startswith("aiconfigurator-core 0.12.0 wheel")
    mimo = archs["MiMoV2FlashForCausalLM"]
    assert mimo["family"] == "gqa_swa" and [c["model"] for c in mimo["configs"]] == ["mimo-v2-flash"]
    llama = archs["Llama4ForConditionalGeneration"]
    assert llama["family"] == "gqa_swa" and [c["model"] for c in llama["configs"]] == [
        "llama-4-scout-17b-16e-instruct", "llama-4-maverick-17b-128e-instruct"]


def test_not_planned_rows_give_the_one_reason_and_no_planned_type(capsys):
    """Issue 32: every architecture of SGLang 0.5.23's hybrid dispatch plans, or is listed with the one reason
    it cannot be: no public config (DeepSeek-V4 was the last "layer kind not modelled" with a config)."""
    cat = models_json(capsys)
    planned_types = {t for r in cat["planned"] for t in r["model_types"]}
    assert cat["not_planned"]
    for r in cat["not_planned"]:
        assert r["reason"] == NO_CONFIG and r["reason"] != NOT_MODELLED and r["detail"], r
        assert not {t.strip() for t in r["model_types"].split(",")} & planned_types, r
    for mt in ("jet_vlm", "falcon_h1", "lfm2", "mamba", "zaya", "step3p7"):
        assert any(mt in r["model_types"].split(", ") for r in cat["not_planned"]), mt


def test_not_planned_model_types_are_refused_by_name(capsys):
    """What the listing says is not planned, the planner refuses (field named), never half-plans."""
    for row in models_json(capsys)["not_planned"]:
        for mt in row["model_types"].split(", "):
            from glm_kv.inputs.hf_config import hf_config_from_dict

            with pytest.raises(ProfileError) as e:
                hf_config_from_dict({"model_type": mt}, "x", "x")
            assert e.value.field == "model.model_type"


def test_every_shipped_model_is_checked_through_sglang():
    """Every vendored config is in the SGLang contract test's model lists (random launches, key for key)."""
    sys.path.insert(0, str(ROOT / "tests" / "sglang"))
    try:
        import test_models_contract as contract
    finally:
        sys.path.pop(0)
    assert set(contract.MODELS) | set(contract.MODELS_ADDED) == set(SHIPPED)
    assert set(contract.FACTS) == set(SHIPPED)


def test_text_listing_and_readme_table_name_every_architecture(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    cat = models_json(capsys)
    table = (ROOT / "README.md").read_text().split("### Other hybrid models", 1)[1].split("\n### ", 1)[0]
    for r in cat["planned"]:
        if r["architecture"]:
            assert r["architecture"] in out and f"`{r['architecture']}`" in table, r["architecture"]
        for c in r["configs"]:
            assert {**SHIPPED, **DSV4_SHIPPED}[c["model"]][1] in table, c["model"]
    for r in cat["not_planned"]:
        assert r["sglang"] in out
        first = re.split(r"[ ,/(]", r["model_types"])[0]
        assert f"`{first}`" in table, first


def test_bad_option_is_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["models", "--jsn"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--jsn" in err


def test_layers_block_type_reads_as_the_pattern_it_stands_for(tmp_path):
    """NemotronHConfig: layers_block_type (Nemotron-3 Ultra) is the canonical form of hybrid_override_pattern."""
    from glm_kv.inputs.hf_config import NEMOTRON_BLOCK_LETTERS
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import load_plan

    cfg = dict(load_hf_config("nemotron-3-ultra-550b-a55b-bf16").top)
    legacy = {k: v for k, v in cfg.items() if k != "layers_block_type"}
    legacy["hybrid_override_pattern"] = "".join(NEMOTRON_BLOCK_LETTERS[b] for b in cfg["layers_block_type"])
    (tmp_path / "config.json").write_text(json.dumps(legacy))
    fields = {"gpu": "B200", "tp_size": 8, "available_bytes": 50 << 30}
    a = load_plan(make_profile({"model": "nemotron-3-ultra-550b-a55b-bf16", **fields})).to_dict()
    b = load_plan(make_profile({"model": str(tmp_path / "config.json"), **fields})).to_dict()
    assert a["model"]["num_hidden_layers"] == len(cfg["layers_block_type"]) == 108
    for key in ("token", "request", "layers"):
        assert a[key] == b[key], key


@pytest.mark.parametrize("blocks", [["mamba", "ssm"], "mamba", [], [1]])
def test_bad_layers_block_type_names_the_field(tmp_path, capsys, blocks):
    cfg = dict(load_hf_config("nemotron-3-ultra-550b-a55b-bf16").top, layers_block_type=blocks)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert main(["plan", "--set", f"model={tmp_path / 'config.json'}", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("glm-kv: error: model.layers_block_type:"), err
