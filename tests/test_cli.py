"""glm-kv plan: the JSON contract, every shipped profile, launch commands and bad input."""
import json
import subprocess
import sys

import pytest

from glm_kv import shipped_profiles
from glm_kv.cli import main

CONTRACT = {  # plan-contract.md's example column for the article profile
    ("parallel", "attn_tp_size"): 1, ("parallel", "linear_attn_tp_size"): 1,
    ("parallel", "max_running_requests_per_worker"): 64,
    ("token", "page_size"): 64, ("token", "kv_cache_dim"): 528, ("token", "kv_bytes_per_token"): 5808,
    ("token", "indexer_bytes_per_token"): 1452, ("token", "cell_size_bytes"): 7260,
    ("token", "indexer_page_bytes"): 8448, ("token", "indexer_tokens_per_page"): 64,
    ("request", "conv_state_shape"): [3, 24576], ("request", "temporal_state_shape"): [64, 128, 128],
    ("request", "state_slot_bytes"): 147619840, ("request", "slots_per_request"): 5,
    ("request", "state_bytes_per_request"): 738099200,
    ("tail", "rows"): 66, ("tail", "width"): 4, ("tail", "bytes"): 1486848,
    ("host", "entries"): ["kv", "mamba"], ("host", "kv_row_bytes"): 512,
    ("host", "kv_bytes_per_token"): 5632, ("host", "indexer_bytes_per_token"): 0,
    ("host", "mamba_slot_bytes"): 147619840,
}


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "glm_kv.cli", *args], capture_output=True, text=True)


def test_contract_keys_article_json():
    # plan-contract.md's example column is the article profile without its deployment's memory
    # figures (no capacity: 64 requested -> 66 tail rows); the shipped profile now names its GPU
    # and weights so that chapter 6 can size the pools (issue 13).
    r = run_cli("plan", "--profile", "article", "--set", "weights_bytes=null", "--set", "weights_estimate=false",
                "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for (section, key), value in CONTRACT.items():
        assert d[section][key] == value, (section, key)
    assert "capacity" not in d and "errors" not in d


def test_default_profile_has_capacity_and_the_tail_follows_it():
    d = json.loads(run_cli("plan", "--profile", "article", "--json").stdout)
    cap = d["capacity"]
    assert cap["max_total_num_tokens"] > 0 and cap["max_mamba_cache_size"] > 0
    assert d["tail"]["rows"] == cap["max_running_requests"] + 2  # rows follow the resolved cap
    for (section, key), value in CONTRACT.items():
        if section in ("token", "request", "host") or key != "rows" and section != "tail":
            assert d[section][key] == value, (section, key)


def test_contract_capacity_keys_when_known():
    d = json.loads(run_cli("plan", "--profile", "worked-example-0.5.23", "--json").stdout)
    assert (d["capacity"]["max_mamba_cache_size"], d["capacity"]["max_total_num_tokens"],
            d["capacity"]["max_running_requests"]) == (343, 9170688, 68)
    assert d["token"]["page_size"] == 256 and d["token"]["cell_size_bytes"] == 6171
    assert d["host"]["entries"] == ["kv", "indexer", "mamba"]


@pytest.mark.parametrize("name", shipped_profiles())
def test_every_shipped_profile_plans(name, capsys):
    assert main(["plan", "--profile", name, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["profile"]["name"] == name and d["profile"]["description"]
    assert main(["plan", "--profile", name]) == 0


def test_required_profiles_ship():
    need = {"article", "article-bf16", "article-trtllm-raw", "h200-0.5.23", "b200-0.5.23",
            "tp8-dp8-dpattn", "tp8", "tp8-dp4-dpattn", "no-overlap", "ssm-bf16", "mtp"}
    assert need <= set(shipped_profiles())
    assert shipped_profiles()[0] == "article"


def test_launch_command(capsys):
    cmd = ("SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1 python -m sglang.launch_server --model-path "
           "zai-org/GLM-5.3-Flash --tp 8 --dp 8 --enable-dp-attention --kv-cache-dtype fp8_e4m3 "
           "--mamba-radix-cache-strategy extra_buffer --max-running-requests 128 --host 0.0.0.0 "
           "--port 30000 --trust-remote-code")
    assert main(["plan", "--sglang-args", cmd, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["profile"]["sglang_layout"] == "0.5.23"
    assert d["parallel"]["attn_tp_size"] == 1 and d["parallel"]["max_running_requests_per_worker"] == 16
    assert d["request"]["slots_per_request"] == 4
    assert d["token"]["kv_cache_dim"] == 528
    assert "--host 0.0.0.0" in d["ignored_flags"] and "--trust-remote-code" in d["ignored_flags"]
    assert d["inert_flags"] == d["ignored_flags"]
    # no --context-length: SGLang uses the model's max_position_embeddings (config: 1,048,576)
    assert d["profile"]["context_length"] == 1_048_576


def test_launch_command_context_length(capsys):
    cmd = "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --tp-size 8 --context-length 32768"
    assert main(["plan", "--sglang-args", cmd, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["profile"]["context_length"] == 32768


def _one_line_error(r, field):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and field in lines[0]
    assert r.stdout == ""


@pytest.mark.parametrize("args,field", [
    (["--set", "frobnicate=1"], "frobnicate"),
    (["--set", "tp_size=eight"], "tp_size"),
    (["--set", "tp_size=0"], "tp_size"),
    (["--set", "max_running_requests=-4"], "max_running_requests"),
    (["--set", "available_bytes=0"], "available_bytes"),
    (["--set", "tp_size=3"], "tp_size"),
    (["--profile", "article", "--set", "tp_size=128"], "tp_size"),  # article (no DP attention): attn_tp 128 does not divide 64 heads
    (["--set", "sglang_layout=0.5.23", "--set", "mamba_scheduler_strategy=no_buffer"], "mamba_scheduler_strategy"),
    (["--set", "model=/nonexistent/config.json"], "model"),
    (["--set", "gpu=A999"], "gpu"),
    (["--profile", "no-such-profile"], "profile"),
    (["--sglang-args", "python -m sglang.launch_server --tp"], "--tp"),
    (["--sglang-args", "python -m sglang.launch_server --tp eight"], "--tp"),
    (["--sglang-args", "python -m sglang.launch_server --model-path 'unclosed"], "--sglang-args"),
    (["--sglang-args", "vllm serve foo --tp 8"], "--sglang-args"),
])
def test_bad_input_one_line_exit_2(args, field):
    _one_line_error(run_cli("plan", *args), field)


def test_bad_profile_file(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("tp_size: 8\nkv_cache_dtype: fp16\n")
    _one_line_error(run_cli("plan", "--profile", str(bad)), "kv_cache_dtype")
    bad.write_text("tp_size: [8\n")
    _one_line_error(run_cli("plan", "--profile", str(bad)), "profile")
    bad.write_text("unknown_knob: 1\n")
    _one_line_error(run_cli("plan", "--profile", str(bad)), "unknown_knob")


def _config(tmp_path, **text_over):
    from glm_kv.inputs.model import PACKAGE_DIR
    cfg = json.loads((PACKAGE_DIR / "data" / "glm-5.3-flash.json").read_text())
    cfg["text_config"].update(text_over)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_user_config_loads(tmp_path):
    path = _config(tmp_path)
    r = run_cli("plan", "--profile", "article", "--set", f"model={path}", "--json")  # scaled fp8: 528 B rows
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["token"]["kv_bytes_per_token"] == 5808


def test_kpool_not_dividing_64(tmp_path):
    path = _config(tmp_path, index_kpool=3)
    _one_line_error(run_cli("plan", "--set", f"model={path}"), "index_kpool")


def test_unreadable_config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    _one_line_error(run_cli("plan", "--set", f"model={path}"), "model")


def test_layers_come_from_config_not_a_rule(tmp_path):
    # Move the full layers: every 5th layer instead of every 4th; the ledgers must follow.
    full = [4, 9, 14, 19, 24, 29, 34, 39, 44]
    kda = [i for i in range(45) if i not in full]
    types = ["deepseek_sparse_attention" if i in full else "linear_attention" for i in range(45)]
    path = _config(tmp_path, layer_types=types, linear_attn_config={
        "num_heads": 64, "head_dim": 128, "short_conv_kernel_size": 4,
        "kda_layers": kda, "full_attn_layers": full})
    d = json.loads(run_cli("plan", "--profile", "article", "--set", f"model={path}", "--json").stdout)
    assert d["model"]["full_attention_layers"] == full
    assert d["token"]["kv_bytes_per_token"] == 528 * 9


def test_pure_ledgers_import_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import glm_kv, glm_kv.ledgers.plan, glm_kv.cli, glm_kv.ledgers.workload, glm_kv.ledgers.structure\n"
            "print(glm_kv.build_plan('article')['token']['cell_size_bytes'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "7260"
