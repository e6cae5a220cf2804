"""Issue 22, deliverable 3: `glm-kv plan` for every shipped model (token, request, capacity, host).

The capacity literals are SGLang 0.5.23's own answers for the same launch (its
KVCacheConfigurator on a fake H200 / B200 with 60 GiB left for the pools, read off
tests/sglang/models_oracle.py); tests/sglang/test_models.py asks SGLang again on every run.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from glm_kv.cli import main
from glm_kv.errors import ProfileError
from glm_kv.inputs.profile import make_profile
from glm_kv.ledgers import layers as layers_module
from glm_kv.ledgers.plan import load_plan

GiB = 1 << 30

# (model, gpu) -> SGLang 0.5.23: (page_size, kv dtype, cell_size, mamba_cache_per_req, slots/request,
#                                 max_total_num_tokens, max_running_requests, max_mamba_cache_size)
SGLANG_60GIB = {
    ("kimi-k3", "H200"): (1, "bfloat16", 27648, 449372160, 5, 1241195, 13, 66),
    ("kimi-k3", "B200"): (64, "bfloat16", 27648, 449372160, 5, 1241152, 13, 66),
    ("qwen3.5-35b-a3b", "H200"): (1, "bfloat16", 20480, 64389120, 5, 1658616, 94, 472),
    ("qwen3.5-35b-a3b", "B200"): (1, "bfloat16", 20480, 64389120, 5, 1658616, 94, 472),
    ("nemotron-3-super-120b-a12b-fp8", "H200"): (1, "fp8_e4m3", 4096, 170229760, 5, 8289400, 35, 178),
    ("nemotron-3-super-120b-a12b-fp8", "B200"): (64, "fp8_e4m3", 4096, 170229760, 5, 8289344, 35, 178),
    ("deepseek-v3.2", "H200"): (64, "bfloat16", 78324, 0, 0, 822528, 2570, None),
    ("deepseek-v3.2", "B200"): (64, "fp8_e4m3", 43188, 0, 0, 1491712, 4096, None),
    ("glm-5.1", "H200"): (64, "bfloat16", 100152, 0, 0, 643264, 2048, None),
    ("glm-5.1", "B200"): (64, "fp8_e4m3", 55224, 0, 0, 1166592, 2945, None),
}
# GLM-5.3-Flash through the same oracle (the same plan as every other model)
SGLANG_60GIB_GLM53 = {
    "H200": (256, "bfloat16", 11627, 147619840, 5, 2925312, 41, 205),
    "B200": (256, "fp8_e4m3", 5995, 147619840, 5, 5673728, 41, 205),
}


def plan_of(model, gpu, **kw):
    return load_plan(make_profile({"model": model, "gpu": gpu, "available_bytes": 60 * GiB, **kw}))


def row(plan):
    t, r, c = plan.token, plan.request, plan.capacity
    return (t.page_size, t.kv_cache_dtype, t.cell_size_bytes, r.state_slot_bytes, r.slots_per_request,
            c.max_total_num_tokens, c.max_running_requests_per_worker, c.max_mamba_cache_size or None)


@pytest.mark.parametrize("key", list(SGLANG_60GIB), ids=lambda k: f"{k[0]}-{k[1]}")
def test_plan_equals_sglangs_answer(key):
    assert row(plan_of(*key)) == SGLANG_60GIB[key]


def test_attention_only_capacity_by_hand():
    """DeepSeek-V3.2 on B200 (fp8, trtllm raw rows): tokens = rest // cell // page x page."""
    p = plan_of("deepseek-v3.2", "B200")
    assert p.capacity.max_total_num_tokens == 60 * GiB // (61 * (576 + 132)) // 64 * 64
    assert p.capacity.max_running_requests_per_worker == 4096   # auto: min(max(est, 2048), 4096)
    assert p.request.state_bytes_per_request == 0


def test_planted_error_moves_capacity(monkeypatch):
    """Planted error: the GQA spec one byte wider per token -> Qwen3.5's row differs from SGLang's."""
    monkeypatch.setattr(layers_module.GqaKv, "bytes_per_token",
                        property(lambda s: s.heads_per_rank * (s.head_dim + s.v_head_dim) * s.item_bytes + 1))
    assert row(plan_of("qwen3.5-35b-a3b", "H200")) != SGLANG_60GIB[("qwen3.5-35b-a3b", "H200")]


def test_cli_json_for_a_profile_yaml(tmp_path, capsys):
    prof = tmp_path / "p.yaml"
    prof.write_text("model: glm-5.1\ngpu: H200\navailable_bytes: 64424509440\n")
    assert main(["plan", "--profile", str(prof), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["model"]["model_type"] == "glm_moe_dsa"
    assert d["token"]["cell_size_bytes"] == 78 * (1152 + 132)
    assert d["capacity"]["max_total_num_tokens"] == 643264
    assert d["layers"]["dsa_indexer_k"] == {"pool": "token", "layers": 78, "bytes_per_layer": 132, "bytes": 78 * 132}


def _json_row(d: dict) -> tuple:
    t, r, c = d["token"], d["request"], d["capacity"]
    return (t["page_size"], t["kv_cache_dtype"], t["cell_size_bytes"], r["state_slot_bytes"], r["slots_per_request"],
            c["max_total_num_tokens"], c["max_running_requests"], c["max_mamba_cache_size"] or None)


@pytest.mark.parametrize("gpu", ["H200", "B200"])
@pytest.mark.parametrize("model", sorted({m for m, _ in SGLANG_60GIB} | {"glm-5.3-flash"}))
def test_cli_plan_profile_yaml_for_every_model(tmp_path, capsys, model, gpu):
    """Issue 22's Done-when: `glm-kv plan --profile <yaml with model: ...>` gives token, request and
    capacity figures for each of the six models, equal to SGLang 0.5.23's answers (literals above)."""
    prof = tmp_path / "p.yaml"
    prof.write_text(f"model: {model}\ngpu: {gpu}\navailable_bytes: {60 * GiB}\n")
    assert main(["plan", "--profile", str(prof), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    want = SGLANG_60GIB_GLM53[gpu] if model == "glm-5.3-flash" else SGLANG_60GIB[(model, gpu)]
    assert _json_row(d) == want
    # and the table form runs too (the default output)
    assert main(["plan", "--profile", str(prof)]) == 0
    out = capsys.readouterr().out
    assert "token" in out and "request" in out and "capacity" in out


def test_model_path_in_a_launch_command_selects_the_model(capsys):
    cmd = ("python -m sglang.launch_server --model-path nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8 "
           "--tp-size 4 --mamba-ssm-dtype bfloat16")
    assert main(["plan", "--sglang-args", cmd, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["model"]["name"] == "nemotron-3-super-120b-a12b-fp8"
    # 40 Mamba-2 layers, tp 4: conv (10240/4, 3) bf16 + SSM (128/4, 64, 128) bf16
    assert d["request"]["state_slot_bytes"] == 40 * (2560 * 3 * 2 + 32 * 64 * 128 * 2)
    assert d["token"]["cell_size_bytes"] == 8 * 1 * 256   # 2 KV heads / tp 4 -> 1 head, fp8
    # no weights given: estimated from the config and its ModelOpt FP8 quantization, and said so
    assert d["capacity"]["weights_bytes_source"] == "estimate" and d["notes"]


@pytest.mark.parametrize("sets, field", [
    (["model=kimi-k3", "speculative_algorithm=EAGLE"], "speculative_algorithm"),
    (["model=kimi-k3", "mem_fraction_static=0.8"], "weights_bytes"),   # its estimated weights do not fit a rank
    (["model=kimi-k3", "tp_size=5"], "tp_size"),
    (["model=deepseek-v3.2", "available_bytes=1000"], "available_bytes"),
    (["model=qwen3.5-35b-a3b", "page_size=64", "mamba_scheduler_strategy=no_buffer"], "mamba_scheduler_strategy"),
    # the article layout's rules do not model other models
    (["model=qwen3.5-35b-a3b", "sglang_layout=article"], "sglang_layout"),
    # the replay ring is sized for every model (issue 31); Gated DeltaNet's needs max_running_requests
    (["model=qwen3.5-35b-a3b", "enable_linear_replayssm_spec=true"], "enable_linear_replayssm_spec"),
    # SGLang's refusals of prefill CP (issue 31): no strategy; zigzag on DeepSeek-V3.2; Nemotron-H's CP
    (["model=qwen3.5-35b-a3b", "enable_prefill_cp=true"], "enable_prefill_cp"),
    (["model=deepseek-v3.2", "enable_prefill_cp=true", "cp_strategy=zigzag"], "cp_strategy"),
    (["model=nemotron-3-super-120b-a12b-fp8", "attn_cp_size=2"], "attn_cp_size"),
])
def test_bad_input_exits_2_naming_the_field(tmp_path, capsys, sets, field):
    prof = tmp_path / "p.yaml"
    prof.write_text("gpu: H200\n")
    args = ["plan", "--profile", str(prof), "--json"]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and f"{field}:" in out.err and "Traceback" not in out.err


def test_replayssm_is_planned_for_another_model(capsys):
    """Issue 31: the replay ring is sized for every model (tests/sglang/test_models_contract.py checks the bytes
    through SGLang); here only that the pasted flags plan and move the state slot's cost."""
    cmd = "python -m sglang.launch_server --model-path moonshotai/Kimi-K3 --tp-size 16 --nnodes 2"
    plans = []
    for flags in ("", " --enable-linear-replayssm-spec --linear-replayssm-cache-len 32"):
        assert main(["plan", "--sglang-args", cmd + flags, "--json"]) == 0
        plans.append(json.loads(capsys.readouterr().out))
    assert plans[0]["request"]["replayssm_ring_bytes_per_slot"] == 0 < plans[1]["request"]["replayssm_ring_bytes_per_slot"]
    assert plans[1]["capacity"]["max_mamba_cache_size"] < plans[0]["capacity"]["max_mamba_cache_size"]


@pytest.mark.parametrize("flag, field", [
    ("--dcp-size 2", "--dcp-size"),
])
def test_unmodelled_launch_flags_for_another_model_exit_2_naming_them(capsys, flag, field):
    cmd = f"python -m sglang.launch_server --model-path moonshotai/Kimi-K3 --tp-size 8 {flag}"
    assert main(["plan", "--sglang-args", cmd, "--json"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and f"{field}:" in out.err and "Traceback" not in out.err


def test_mamba_max_states_per_path_moves_nothing_for_another_model(capsys):
    """A radix-tree eviction cap (read only by the tree at run time in the wheel: rust_tree_core,
    unified_cache/components/mamba.py); a legal value leaves the plan as it is, an illegal one is refused."""
    cmd = "python -m sglang.launch_server --model-path Qwen/Qwen3.5-35B-A3B --tp-size 2"
    assert main(["plan", "--sglang-args", cmd, "--json"]) == 0
    base = json.loads(capsys.readouterr().out)
    assert main(["plan", "--sglang-args", cmd + " --mamba-max-states-per-path 4", "--json"]) == 0
    capped = json.loads(capsys.readouterr().out)
    capped.pop("inert_flags", None)
    assert capped == base
    assert main(["plan", "--sglang-args", cmd + " --mamba-max-states-per-path 0", "--json"]) == 2
    assert "--mamba-max-states-per-path:" in capsys.readouterr().err


def test_unknown_model_type_exits_2(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "mixtral", "num_hidden_layers": 2}))
    prof = tmp_path / "p.yaml"
    prof.write_text(f"model: {cfg}\n")
    assert main(["plan", "--profile", str(prof), "--json"]) == 2
    err = capsys.readouterr().err
    assert "model.model_type" in err and "'mixtral'" in err and "kimi_k3" in err


def test_hicache_host_pools_by_ratio():
    p = plan_of("qwen3.5-35b-a3b", "H200", enable_hierarchical_cache=True, hicache_ratio=2.0)
    h, c = p.host, p.capacity
    assert h.kv_tokens == (c.max_total_num_tokens * 2 // 1 + 1) * 1
    assert h.mamba_slots == c.max_mamba_cache_size * 2 + 1
    assert h.total_bytes == h.kv_tokens * 20480 + h.mamba_slots * 64389120
    # --hicache-size (decimal GB) is split over the KV and mamba device pools (_split_hicache_size), by hand
    s = plan_of("qwen3.5-35b-a3b", "H200", enable_hierarchical_cache=True, hicache_size=100).host
    kv_dev = (c.max_total_num_tokens + 1) * 20480                 # (size + page) rows x 10 layers x K+V
    mamba_dev = (c.max_mamba_cache_size + 1) * 64389120
    share = 100e9 * kv_dev / (kv_dev + mamba_dev)
    assert s.kv_tokens == int(share // 20480) + 1 and s.mamba_slots == int((100e9 - share) // 64389120) + 1


@pytest.mark.parametrize("value", [0, -5, 1.5, "x", True, [4096]])
def test_bad_max_position_embeddings_is_refused_naming_it(tmp_path, value):
    """The config's context length was int()-ed (1.5 -> 1, "x" a traceback, -5 blamed on context_length)."""
    src = Path(__file__).resolve().parents[2] / "glm_kv" / "inputs" / "models" / "Qwen--Qwen3.5-35B-A3B_config.json"
    cfg = json.loads(src.read_text())
    cfg["text_config"]["max_position_embeddings"] = value
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ProfileError) as e:
        plan_of(str(tmp_path), "H200")
    assert e.value.field == "model(text_config).max_position_embeddings" and "must be an integer" in e.value.rule
    # a context_length given wins over the config's (the config value is not read)
    assert plan_of(str(tmp_path), "H200", context_length=4096).args.context_length == 4096


@pytest.mark.parametrize("model", ["glm-5.3-flash", "kimi-k3", "qwen3.5-35b-a3b", "nemotron-3-super-120b-a12b-fp8",
                                   "deepseek-v3.2", "glm-5.1", "qwen3-next-80b-a3b-thinking", "qwen3.5-27b",
                                   "nemotron-h-56b-base-8k", "nemotron-3-nano-30b-a3b-bf16",
                                   "nemotron-3-ultra-550b-a55b-bf16"])
def test_launch_command_and_yaml_give_the_same_plan(tmp_path, capsys, model):
    """Issue 31's done-when, one half: a pasted `--model-path <config dir> --tp N ...` and the equivalent YAML
    resolve to the same plan, capacity from GPU memory included (the other half, equal to SGLang's classes key
    for key, is tests/sglang/test_models_contract.py)."""
    from glm_kv.inputs.hf_config import SHIPPED

    hf_id = SHIPPED[model][1]
    sets = ["--set", "gpu=B200", "--set", "weights_bytes=60000000000", "--set", "pre_model_load_bytes=190000000000"]
    cmd = f"python -m sglang.launch_server --model-path {hf_id} --tp 8 --max-running-requests 64 --kv-cache-dtype fp8_e4m3"
    assert main(["plan", "--sglang-args", cmd, *sets, "--json"]) == 0
    pasted = json.loads(capsys.readouterr().out)
    prof = tmp_path / "p.yaml"
    prof.write_text(f"model: {hf_id}\ntp_size: 8\nmax_running_requests: 64\nkv_cache_dtype: fp8_e4m3\n")
    assert main(["plan", "--profile", str(prof), *sets, "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    for d in (pasted, written):
        d.pop("profile"), d.pop("inert_flags", None), d.pop("ignored_flags", None)
    assert "capacity" in written and pasted == written
