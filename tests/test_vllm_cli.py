"""glm-kv plan --vllm-args and glm-kv compare (issue 33): the JSON is the ledgers' figures, and every bad
input is one line naming the flag, exit 2, nothing on stdout; a launch vLLM refuses: exit 3, its words."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from glm_kv.cli import main
from glm_kv.inputs.hf_config import load_hf_config
from glm_kv.ledgers.vllm import VllmArgs, vllm_plan

GiB = 2**30
GLM_V = "vllm serve zai-org/GLM-5.3-Flash -tp 8 --kv-cache-memory-bytes 60G --max-model-len 128k"
GLM_S = "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --tp-size 8"


def _json(capsys, *argv) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_plan_vllm_json_is_vllm_plan(capsys):
    d = _json(capsys, "plan", "--vllm-args", GLM_V + " --host 0.0.0.0", "--json")
    want = vllm_plan(load_hf_config("glm-5.3-flash"),
                     VllmArgs(gpu="H200", tp=8, kv_cache_memory_bytes=60 * GiB, max_model_len=128_000)).to_dict()
    assert {k: v for k, v in d.items() if k not in ("model", "gpu", "inert_flags")} == want
    assert (d["model"], d["gpu"], d["inert_flags"]) == ("glm-5.3-flash", "H200", ["--host 0.0.0.0"])
    assert (d["cache_block_size"], len(d["groups"])) == (640, 6)   # the study's H200 TP8 figures


def test_plan_vllm_table_and_b200(capsys):
    assert main(["plan", "--vllm-args", GLM_V, "--gpu", "B200"]) == 0
    out = capsys.readouterr().out
    assert "B200 sm_100" in out and "Maximum concurrency" in out


def test_plan_vllm_refused_by_vllm(capsys):
    assert main(["plan", "--vllm-args", "vllm serve zai-org/GLM-5.3-Flash -tp 8 --kv-cache-memory-bytes 1G",
                 "--json"]) == 3
    cap = capsys.readouterr()
    assert json.loads(cap.out)["refused"]["stage"] == "get_kv_cache_configs"
    assert "refuses this launch at get_kv_cache_configs" in cap.err


@pytest.mark.parametrize("argv,field", [
    (["plan", "--vllm-args", "vllm serve zai-org/GLM-5.3-Flash -tp 8"], "--kv-cache-memory-bytes"),
    (["plan", "--vllm-args", GLM_V + " --frobnicate 1"], "--frobnicate"),
    (["plan", "--vllm-args", GLM_V + " --enforce-eager"], "--enforce-eager"),
    (["plan", "--vllm-args", GLM_V, "--gpu", "A100"], "--gpu"),
    (["plan", "--vllm-args", GLM_V, "--profile", "h200-0.5.23"], "--vllm-args"),
    (["plan", "--vllm-args", GLM_V.replace("128k", "2M")], "--vllm-args"),   # above the config: NotModelled
    # a speculative method other than the checkpoint's MTP layers (glm-kv sizes MTP only)
    (["plan", "--vllm-args", "vllm serve zai-org/GLM-5.3-Flash -tp 8 --kv-cache-memory-bytes 60G "
      "--speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 1}'"], "--speculative-config"),
    (["plan", "--vllm-args", "vllm serve zai-org/GLM-5.3-Flash -tp 8 --kv-cache-memory-bytes 60G "
      "--speculative-config '{\"num_speculative_tokens\": 1}'"], "--speculative-config"),
    # Kimi-K3's checkpoint has no MTP layer: vLLM fails (ZeroDivisionError), glm-kv says so (exit 3, below)
    (["plan", "--profile", "h200-0.5.23", "--gpu", "B200"], "--gpu"),
    (["compare", "--vllm-args", GLM_V], "compare"),
    (["compare", "--sglang-args", GLM_S, "--vllm-args", GLM_V.replace("zai-org/GLM-5.3-Flash", "deepseek-v3.2")],
     "--vllm-args"),
    (["compare", "--sglang-args", GLM_S, "--vllm-args", GLM_V.replace("-tp 8", "-tp 4")], "--vllm-args"),
    (["compare", "--sglang-args", GLM_S, "--vllm-args", GLM_V, "--context", "200000"], "--context"),
    (["compare", "--sglang-args", GLM_S, "--vllm-args", GLM_V, "--gpu", "H100"], "--gpu"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, field):
    assert main(argv) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.startswith(f"glm-kv: error: {field}:") and cap.err.count("\n") == 1, cap.err


def test_bad_input_no_traceback():
    r = subprocess.run([sys.executable, "-m", "glm_kv", "compare", "--sglang-args", GLM_S, "--vllm-args",
                        GLM_V + " --kv-cache-dtype fp9"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "--kv-cache-dtype" in r.stderr


def test_compare_reads_both_plans(capsys):
    d = _json(capsys, "compare", "--sglang-args", GLM_S, "--vllm-args", GLM_V, "--context", "65536", "--json")
    s, v = d["engines"]
    sg = _json(capsys, "plan", "--sglang-args", GLM_S, "--json")["capacity"]
    assert s["tokens_per_worker"] == sg["max_total_num_tokens"]          # the plan's own figure
    assert v["kv_bytes_per_rank"] == 60 * GiB and d["vllm_kv_bytes_source"] == "--kv-cache-memory-bytes"
    vp = vllm_plan(load_hf_config("glm-5.3-flash"),
                   VllmArgs(gpu="H200", tp=8, kv_cache_memory_bytes=60 * GiB, max_model_len=128_000))
    assert v["tokens_per_worker"] == vp.gpu_kv_cache_size_tokens and v["num_blocks"] == vp.num_blocks
    assert v["requests_per_worker"] == min((vp.num_blocks - 1) // v["blocks_per_request"], 1024)
    assert d["context"] == s["context"] == v["context"] == 65536


def test_compare_same_kv_bytes(capsys):
    d = _json(capsys, "compare", "--sglang-args", GLM_S, "--vllm-args", GLM_V, "--same-kv-bytes", "--json")
    s, v = d["engines"]
    assert v["kv_bytes_per_rank"] == s["kv_bytes_per_rank"] and "--same-kv-bytes" in d["vllm_kv_bytes_source"]
    assert d["context"] == 128_000   # vLLM's max_model_len by default
    d2 = _json(capsys, "compare", "--sglang-args", GLM_S, "--vllm-args", GLM_V.replace(" --kv-cache-memory-bytes 60G", ""),
               "--json")
    assert d2["engines"][1]["kv_bytes_per_rank"] == s["kv_bytes_per_rank"]
    assert "gives no --kv-cache-memory-bytes" in d2["vllm_kv_bytes_source"]


def test_plan_vllm_mtp(capsys):
    """MTP is planned (the drafter's layers: ledgers/vllm.py, checked against vLLM in tests/vllm); the profile's
    num_speculative_tokens is the same MTP launch."""
    d = _json(capsys, "plan", "--vllm-args", GLM_V + " -sc '{\"method\": \"mtp\", \"num_speculative_tokens\": 3}'",
              "--json")
    assert d["num_speculative_tokens"] == 3 and "model.layers.45.self_attn.attn" in d["layers"]
    assert d["groups"][-1]["kind"] == "CircularBufferSpec" and d["groups"][-1]["block_size"] == 8


def test_plan_vllm_mtp_without_mtp_layers_is_vllms_failure(capsys, tmp_path):
    assert main(["plan", "--vllm-args", "vllm serve moonshotai/Kimi-K3 -tp 8 --kv-cache-memory-bytes 60G "
                 "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["refused"] == {"stage": "engine_config", "type": "ZeroDivisionError",
                                                              "message": "integer modulo by zero"}


def test_vllm_profile_is_the_command(capsys, tmp_path):
    f = tmp_path / "glm-vllm.yaml"
    f.write_text("model: zai-org/GLM-5.3-Flash\ngpu: H200\ntp: 8\nkv_cache_memory_bytes: 60G\nmax_model_len: 128k\n"
                 "enable_prefix_caching: false\n")
    a = _json(capsys, "plan", "--vllm-profile", str(f), "--json")
    b = _json(capsys, "plan", "--vllm-args", GLM_V + " --no-enable-prefix-caching", "--json")
    assert a == b and a["mamba_cache_mode"] == "none"
    f.write_text(f.read_text() + "num_speculative_tokens: 2\n")
    a = _json(capsys, "plan", "--vllm-profile", str(f), "--json")
    b = _json(capsys, "plan", "--vllm-args", GLM_V + " --no-enable-prefix-caching "
              "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 2}'", "--json")
    assert a == b and a["num_speculative_tokens"] == 2


@pytest.mark.parametrize("text,field", [
    ("model: glm-5.3-flash\ntp: 8\nkv_cache_memory_bytes: 1G\nport: 8000\n", "'port'"),
    ("model: glm-5.3-flash\ntp: eight\nkv_cache_memory_bytes: 1G\n", "tp"),
    ("model: glm-5.3-flash\ntp: 8\nkv_cache_memory_bytes: 1.5G\n", "kv_cache_memory_bytes"),
    ("model: glm-5.3-flash\ntp: 8\nkv_cache_memory_bytes: 60G\nkv_cache_dtype: fp8_e5m2\n", "--kv-cache-dtype"),
    ("model: glm-5.3-flash\ntp: 8\n", "--kv-cache-memory-bytes"),
    ("tp: 8\n", "model"),
    ("model: glm-5.3-flash\ngpu: B200\ntp: 8\nkv_cache_memory_bytes: 60G\n", "--gpu"),   # beside --gpu H200
])
def test_vllm_profile_bad_input(capsys, tmp_path, text, field):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    assert main(["plan", "--vllm-profile", str(f), "--gpu", "H200"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.startswith(f"glm-kv: error: {field}:") and cap.err.count("\n") == 1, cap.err


# glm-kv verify on a vLLM boot log (issue 33 item 5): vLLM 0.33.0's own printed lines (tests/ledgers/vllm_boot_logs)
VLOG = Path(__file__).resolve().parent / "ledgers" / "vllm_boot_logs" / "glm-5.3-flash-h200-tp8.log"
VSERVE = "vllm serve zai-org/GLM-5.3-Flash -tp 8"


@pytest.mark.parametrize("extra, rc", [("--kv-cache-memory-bytes 64424509440", 0),
                                       ("--kv-cache-memory-bytes 64424509441000", 1)])
def test_verify_vllm_boot_log_exit_codes(capsys, extra, rc):
    assert main(["verify", "--boot-log", str(VLOG), "--vllm-args", f"{VSERVE} {extra}", "--json"]) == rc
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is (rc == 0) and any(r["quantity"].startswith("GPU KV cache size") for r in out["lines"]), out


def test_verify_vllm_needs_memory_and_one_launch(capsys, tmp_path):
    assert main(["verify", "--boot-log", str(VLOG), "--vllm-args", VSERVE]) == 2   # no memory line, no flag
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--kv-cache-memory-bytes" in err, err
    assert main(["verify", "--boot-log", str(VLOG), "--vllm-args", VSERVE, "--profile", "h200-0.5.23"]) == 2
    assert "--vllm-args" in capsys.readouterr().err
    empty = tmp_path / "quiet.log"
    empty.write_text("(EngineCore pid=1) INFO 12-03 16:14:35 [core.py:1] nothing about memory\n")
    assert main(["verify", "--boot-log", str(empty), "--vllm-args",
                 f"{VSERVE} --kv-cache-memory-bytes 64424509440"]) == 3


# decode context parallelism (-dcp, ledgers/vllm_dcp.py; key for key against vLLM in tests/vllm, test_glm_kv_plan.py
# DCP). The figures below are vLLM 0.33.0's own, printed by tests/vllm/oracle.py for these launches (2026-12-05),
# pinned so that a run without .venv-vllm checks them too.
DSV32_DCP = "vllm serve deepseek-ai/DeepSeek-V3.2 -tp 8 -dcp 8 --kv-cache-dtype fp8 --kv-cache-memory-bytes 60G"


@pytest.mark.parametrize("command,blocks,printed,tokens", [
    (DSV32_DCP, 20941, "65.44x", 10_721_792),   # FLASHMLA_SPARSE fp8_ds_mla; dcp 1: 8.18x, the same 20,941 blocks
    ("vllm serve Qwen/Qwen3.5-35B-A3B -tp 8 -dcp 2 --kv-cache-memory-bytes 60G", 19660, "46.92x", 12_300_121),
])
def test_plan_vllm_dcp_is_vllms(capsys, command, blocks, printed, tokens):
    d = _json(capsys, "plan", "--vllm-args", command, "--json")
    assert (d["num_blocks"], d["maximum_concurrency_printed"], d["gpu_kv_cache_size_tokens"]) == (blocks, printed, tokens)


def test_vllm_profile_dcp_is_the_command(capsys, tmp_path):
    f = tmp_path / "dsv32-dcp.yaml"
    f.write_text("model: deepseek-ai/DeepSeek-V3.2\ngpu: H200\ntp: 8\ndecode_context_parallel_size: 8\n"
                 "kv_cache_dtype: fp8\nkv_cache_memory_bytes: 60G\n")
    assert _json(capsys, "plan", "--vllm-profile", str(f), "--json") == _json(capsys, "plan", "--vllm-args", DSV32_DCP,
                                                                              "--json")


@pytest.mark.parametrize("command,stage,words", [
    ("vllm serve deepseek-ai/DeepSeek-V3.2 -tp 8 -dcp 2 --kv-cache-memory-bytes 60G", "model",
     "DCP for FlashMLA sparse requires an fp8_ds_mla kv-cache"),
    ("vllm serve deepseek-ai/DeepSeek-V3.2 -tp 8 -dcp 3 --kv-cache-memory-bytes 60G", "engine_config",
     "tp_size=8 must be divisible by dcp_size=3."),
    ("vllm serve Qwen/Qwen3.5-35B-A3B -tp 2 -dcp 2 --kv-cache-memory-bytes 60G", "engine_config",
     "Decode context parallelism for GQA/MQA requires `--tensor-parallel-size` (2)"),
])
def test_plan_vllm_dcp_refused_by_vllm(capsys, command, stage, words):
    assert main(["plan", "--vllm-args", command, "--json"]) == 3
    refused = json.loads(capsys.readouterr().out)["refused"]
    assert refused["stage"] == stage and words in refused["message"]


def test_vllm_profile_dcp_bad_input(capsys, tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("model: deepseek-v3.2\ntp: 8\nkv_cache_memory_bytes: 60G\ndecode_context_parallel_size: 0\n")
    assert main(["plan", "--vllm-profile", str(f), "--gpu", "H200"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.startswith("glm-kv: error: decode_context_parallel_size:") \
        and cap.err.count("\n") == 1, cap.err
