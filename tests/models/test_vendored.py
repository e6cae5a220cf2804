"""Issue 22, deliverable 1: the six vendored configs, their source and licence, and the reader."""
from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import pytest

from glm_kv.errors import ProfileError
from glm_kv.inputs.hf_config import MODELS_DIR, PROVENANCE_FILES, SHIPPED, SUPPORTED_MODEL_TYPES, load_hf_config

SOURCE = MODELS_DIR / "SOURCE.json"


def mismatches(folder: Path) -> list[str]:
    """Files whose bytes differ from their provenance file's sha256 (SOURCE.json, SOURCE_GITHUB.json),
    or that are missing, listed twice, or not listed."""
    bad, listed = [], set(PROVENANCE_FILES)
    for fname in PROVENANCE_FILES:
        for name, meta in json.loads((folder / fname).read_text())["files"].items():
            p = folder / name
            if name in listed or not p.is_file() or hashlib.sha256(p.read_bytes()).hexdigest() != meta["sha256"]:
                bad.append(name)
            listed.add(name)
    bad += sorted(p.name for p in folder.glob("*.json") if p.name not in listed)
    return bad


def test_vendored_files_match_their_source():
    src = json.loads(SOURCE.read_text())
    assert src["package"] == "aiconfigurator-core" and src["version"] == "0.12.0"
    assert src["license"] == "Apache-2.0"
    assert len(src["wheel_sha256"]) == 64
    assert all(m["path_in_wheel"] == f"aiconfigurator_core/model_configs/{n}" for n, m in src["files"].items())
    assert mismatches(MODELS_DIR) == []
    assert "Apache License" in (MODELS_DIR / "LICENSE").read_text()
    assert "aiconfigurator-core 0.12.0" in (MODELS_DIR / "NOTICE").read_text()


def test_github_vendored_files_name_their_commit():
    """SOURCE_GITHUB.json (issue 32): files of a public repository, each at a stated commit, Apache-2.0."""
    src = json.loads((MODELS_DIR / "SOURCE_GITHUB.json").read_text())
    assert src["repository"] == "ai-dynamo/aiconfigurator" and src["license"] == "Apache-2.0"
    for name, meta in src["files"].items():
        assert meta["path"] == f"src/aiconfigurator/model_configs/{name}" and len(meta["commit"]) == 40
    assert "SOURCE_GITHUB.json" in (MODELS_DIR / "NOTICE").read_text()


def test_jet_nemotron_configs_name_their_repository_commit_and_both_licences():
    """SOURCE_GITHUB_NVLABS.json (issue 32): NVlabs/Jet-Nemotron's code configs at a stated commit; the code
    licence (Apache-2.0) covers the files, the weights' NVIDIA License is named, nothing of the weights ships."""
    src = json.loads((MODELS_DIR / "SOURCE_GITHUB_NVLABS.json").read_text())
    assert src["repository"] == "NVlabs/Jet-Nemotron" and src["license"] == "Apache-2.0"
    assert "NVIDIA License" in src["note"] and "non-commercial" in src["note"]
    assert set(src["files"]) == {"jet-ai--Jet-Nemotron-2B_config.json", "jet-ai--Jet-Nemotron-4B_config.json"}
    for name, meta in src["files"].items():
        size = name.split("-")[-1].split("_")[0]
        assert meta["path"] == f"jetai/modeling/configs/jetlm_{size}.json" and len(meta["commit"]) == 40
    assert "SOURCE_GITHUB_NVLABS.json" in (MODELS_DIR / "NOTICE").read_text()


def test_a_file_listed_in_both_provenance_files_is_caught(tmp_path):
    """Planted error: a wheel file claimed by the GitHub provenance file too fails the source check."""
    folder = tmp_path / "models"
    shutil.copytree(MODELS_DIR, folder)
    gh = json.loads((folder / "SOURCE_GITHUB.json").read_text())
    wheel = json.loads((folder / "SOURCE.json").read_text())
    gh["files"]["zai-org--GLM-5.1_config.json"] = {**wheel["files"]["zai-org--GLM-5.1_config.json"],
                                                    "path": "x", "commit": "0" * 40}
    (folder / "SOURCE_GITHUB.json").write_text(json.dumps(gh))
    assert mismatches(folder) == ["zai-org--GLM-5.1_config.json"]


def test_an_edited_vendored_file_is_caught(tmp_path):
    """Planted error: one changed byte in a vendored config fails the source check."""
    folder = tmp_path / "models"
    shutil.copytree(MODELS_DIR, folder)
    p = folder / "zai-org--GLM-5.1_config.json"
    p.write_text(p.read_text().replace('"num_hidden_layers": 78', '"num_hidden_layers": 79'))
    assert mismatches(folder) == ["zai-org--GLM-5.1_config.json"]


@pytest.mark.parametrize("name", list(SHIPPED))
def test_every_shipped_model_loads(name):
    cfg = load_hf_config(name)
    assert cfg.name == name
    assert cfg.model_type in SUPPORTED_MODEL_TYPES
    # the Hugging Face id selects the same model (what --model-path carries)
    assert load_hf_config(SHIPPED[name][1]).model_type == cfg.model_type


def test_reader_reads_as_hugging_face_does():
    nemo = load_hf_config("nemotron-3-super-120b-a12b-fp8")
    assert nemo.text is nemo.top                       # no text_config: the top level is the text config
    assert nemo.top["time_step_limit"][1] == math.inf  # "Infinity" in the file, as json.loads reads it
    assert nemo.kv_cache_quant_algo == "FP8"           # from hf_quant_config.json beside it
    kimi = load_hf_config("kimi-k3")
    assert kimi.is_multimodal and kimi.text["model_type"] == "kimi_linear"
    qwen = load_hf_config("Qwen/Qwen3.5-35B-A3B")
    assert qwen.text["model_type"] == "qwen3_5_moe_text" and qwen.kv_cache_quant_algo is None
    ds = load_hf_config("deepseek-v3.2")
    assert not ds.is_multimodal and ds.architectures == ("DeepseekV32ForCausalLM",)


def test_unknown_model_type_is_refused_listing_the_supported(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2}))
    with pytest.raises(ProfileError) as e:
        load_hf_config(str(p))
    assert e.value.field == "model.model_type"
    assert "'llama'" in str(e.value) and all(t in str(e.value) for t in SUPPORTED_MODEL_TYPES)


def test_a_folder_holding_config_json_is_read(tmp_path):
    shutil.copy(MODELS_DIR / "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8_config.json", tmp_path / "config.json")
    shutil.copy(MODELS_DIR / "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8_hf_quant_config.json",
                tmp_path / "hf_quant_config.json")
    cfg = load_hf_config(str(tmp_path))
    assert cfg.model_type == "nemotron_h" and cfg.kv_cache_quant_algo == "FP8"
