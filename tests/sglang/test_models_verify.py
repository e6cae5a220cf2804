"""Issue 31: ``glm-kv verify`` for every model, on boot-log lines SGLang 0.5.23 printed just now.

SGLang gets each model's files and the launch (models_contract_oracle.sglang_contract: its ServerArgs,
its KVCacheConfigurator from GPU memory, its full-size device pools and HiCache host group on meta). Its
own pool messages ("Mamba Cache is allocated", "KV Cache is allocated" with one KV size for MLA and K /
V sizes for GQA, "max_running_requests is capped", the HiCache auto-size and host-pool lines) are kept
as it printed them; the lines a CPU cannot print (``Load weight begin/end``, the scheduler's line) are
composed from the wheel's format strings with the launch's readings and SGLang's values
(capture_boot_logs.boot_log_text). glm-kv gets the log and the launch as a profile, nothing SGLang
computed, and must agree with every line it checks; a planted wrong spec must make it disagree.
"""
from __future__ import annotations

import json
import random
import re

import pytest

GiB = 1 << 30
# (model, launch): a hybrid and a non-hybrid of each token-pool kind; HiCache on so that SGLang builds its
# pools at full size (and prints their lines); stated readings: free memory before weights, weights per rank.
# Each states --chunked-prefill-size, which the scheduler's line prints (the oracle does not return it).
CASES = [(name, {"chunked_prefill_size": 8192, **launch}) for name, launch in [
    ("qwen3.5-35b-a3b", {"gpu": "H200", "tp_size": 8, "pre_model_load_bytes": int(137.29 * GiB),
                         "weights_bytes": 9 * GiB}),
    ("qwen3.5-35b-a3b", {"gpu": "B200", "tp_size": 2, "kv_cache_dtype": "fp8_e4m3", "hicache_ratio": 1.5,
                         "max_running_requests": 64, "pre_model_load_bytes": int(176.5 * GiB), "weights_bytes": 36 * GiB}),
    ("nemotron-3-super-120b-a12b-fp8", {"gpu": "H200", "tp_size": 8, "pre_model_load_bytes": int(137.29 * GiB),
                                        "weights_bytes": 16 * GiB}),
    ("kimi-k3", {"gpu": "H200", "tp_size": 8, "pre_model_load_bytes": int(137.29 * GiB), "weights_bytes": 70 * GiB}),
    ("kimi-k3", {"gpu": "B200", "tp_size": 8, "mamba_ssm_dtype": "bfloat16", "hicache_size": 120,
                 "pre_model_load_bytes": int(176.5 * GiB), "weights_bytes": 80 * GiB}),
    ("deepseek-v3.2", {"gpu": "H200", "tp_size": 8, "pre_model_load_bytes": int(137.29 * GiB),
                       "weights_bytes": 82 * GiB}),
    ("glm-5.1", {"gpu": "B200", "tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "pre_model_load_bytes": int(176.5 * GiB),
                 "weights_bytes": 90 * GiB}),
    # hybrid SWA (issue 32): the configurator's split, "Full" / "SWA KV Cache", SWAKVPool's total, the full and
    # swa host pools; by ratio, and by --hicache-size at another --swa-full-tokens-ratio on B200's 64-token pages
    ("gpt-oss-120b", {"gpu": "H200", "tp_size": 8, "hicache_ratio": 1.5, "pre_model_load_bytes": int(137.29 * GiB),
                      "weights_bytes": 9 * GiB}),
    ("gpt-oss-20b", {"gpu": "B200", "tp_size": 2, "hicache_size": 150, "swa_full_tokens_ratio": 0.3,
                     "kv_cache_dtype": "fp8_e4m3", "pre_model_load_bytes": int(176.5 * GiB), "weights_bytes": 7 * GiB}),
]]
ARCH = {"qwen3.5-35b-a3b": "Qwen3_5MoeForConditionalGeneration", "nemotron-3-super-120b-a12b-fp8": "NemotronHForCausalLM",
        "kimi-k3": "KimiK3ForConditionalGeneration", "deepseek-v3.2": "DeepseekV32ForCausalLM",
        "glm-5.1": "GlmMoeDsaForCausalLM", "gpt-oss-120b": "GptOssForCausalLM", "gpt-oss-20b": "GptOssForCausalLM"}
HOST_LINES = ("hierarchical KV host pool", "host memory for DSA indexer", "hierarchical Mamba cache")


def sglang_boot_log(name: str, launch: dict) -> str:
    """SGLang's pool lines for the launch (the full-size pools' lines only: the oracle's small W6 pools come
    after the host group), in a log with the composed load and scheduler lines."""
    import models_contract_oracle
    from capture_boot_logs import boot_log_text
    from oracle_memory import capture_logs

    from cpu_workarounds import quiet_sglang_logs

    launch = {**launch, "enable_hierarchical_cache": True}
    real = models_contract_oracle.quiet_sglang_logs
    models_contract_oracle.quiet_sglang_logs = lambda: None   # keep SGLang's INFO lines while it sizes
    try:
        with capture_logs() as records:
            sg = models_contract_oracle.sglang_contract(name, launch)
    finally:
        models_contract_oracle.quiet_sglang_logs = real
        quiet_sglang_logs()
    assert "errors" not in sg, sg["errors"]
    last_host = max(i for i, m in enumerate(records) if any(k in m for k in HOST_LINES))
    cap = sg["capacity"]
    return boot_log_text(launch, records[:last_host + 1], launch["pre_model_load_bytes"], launch["weights_bytes"], 0,
                         cap, {"context_len": cap["context_length"], "chunked_prefill_size": launch["chunked_prefill_size"]},
                         ARCH[name])


def verify(tmp_path, capsys, name: str, launch: dict, text: str) -> tuple[int, dict]:
    import yaml

    from glm_kv.cli import main

    fields = {k: v for k, v in launch.items() if k not in ("pre_model_load_bytes", "weights_bytes")}
    log, prof = tmp_path / "boot.log", tmp_path / "profile.yaml"
    log.write_text(text)
    prof.write_text(yaml.safe_dump({"name": f"{name}-verify", "model": name, "sglang_layout": "0.5.23",
                                    "enable_hierarchical_cache": True, **fields}))
    rc = main(["verify", "--boot-log", str(log), "--profile", str(prof), "--json"])
    return rc, json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def logs(sglang_ready):
    return {i: sglang_boot_log(name, launch) for i, (name, launch) in enumerate(CASES)}


@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_verify_agrees_with_what_sglang_printed(sglang_ready, logs, tmp_path, capsys, i):
    name, launch = CASES[i]
    rc, res = verify(tmp_path, capsys, name, launch, logs[i])
    bad = [r for r in res["lines"] if r["ok"] is False]
    assert rc == 0 and res["ok"], bad
    checked = {r["quantity"] for r in res["lines"] if r["ok"]}
    # every pool SGLang printed is checked: the token pool, its size, the state pool where the model has one,
    # the host pools and the scheduler's totals
    want = {"KV Cache #tokens", "KV Cache size", "KV Cache dtype", "host KV tokens", "host KV size",
            "max_total_num_tokens", "max_running_requests (per worker)", "context_len"}
    if "Mamba Cache is allocated" in logs[i]:
        want |= {"max_mamba_cache_size", "conv_state size", "ssm_state size", "host mamba slots", "host mamba size"}
    if "DSA indexer" in logs[i]:
        want |= {"host indexer size"}
    if "SWAKVPool" in logs[i]:
        want |= {"full pool tokens", "SWA pool tokens", "SWA KV Cache #tokens", "SWA KV Cache size",
                 "SWA KV Cache dtype", "SWAKVPool size", "SWAKVPool swa size", "SWAKVPool full size",
                 "host SWA tokens", "host SWA size"}
    assert want <= checked, sorted(want - checked)


def test_a_planted_swa_pool_without_its_share_disagrees(sglang_ready, logs, tmp_path, capsys, monkeypatch):
    """Planted (issue 32): gpt-oss's SWA pool as large as the full pool (the ratio read as 1): the split, the SWA
    sub-pool, SWAKVPool's total and the SWA host pool disagree."""
    import glm_kv.ledgers.token as token

    i = next(i for i, (n, _) in enumerate(CASES) if n == "gpt-oss-120b")
    name, launch = CASES[i]
    monkeypatch.setattr(token, "swa_full_tokens_ratio", lambda p: 1.0)
    rc, res = verify(tmp_path, capsys, name, launch, logs[i])
    bad = {r["quantity"] for r in res["lines"] if r["ok"] is False}
    assert rc == 1 and {"SWA pool tokens", "SWA KV Cache #tokens", "SWAKVPool swa size", "host SWA tokens"} <= bad, bad


def test_the_gqa_line_is_read_as_k_plus_v(sglang_ready, logs):
    """SGLang prints K and V sizes for an MHA pool; glm-kv reads the pool as their sum."""
    from glm_kv.inputs.boot_log import parse_boot_log

    i = next(i for i, (n, _) in enumerate(CASES) if n == "nemotron-3-super-120b-a12b-fp8")
    kv = parse_boot_log(logs[i]).of("kv_cache")[0]
    k, v = (float(x) for x in re.search(r"K size: ([\d.]+) GB, V size: ([\d.]+) GB", kv.text).groups())
    assert kv.values[3] == round(k + v, 2) and kv.values[4:] == (k, v)


@pytest.mark.parametrize("i", [0, 3], ids=["qwen3.5-gqa-heads", "kimi-k3-mla-rope"])
def test_planted_wrong_spec_disagrees(sglang_ready, logs, tmp_path, capsys, monkeypatch, i):
    """A wrong token spec (GQA: one KV head more per rank; MLA: the rope part dropped) -> verify exits 1."""
    import glm_kv.ledgers.layers as layers

    name, launch = CASES[i]
    if name.startswith("qwen"):
        monkeypatch.setattr(layers.GqaKv, "heads_per_rank", property(lambda s: max(1, s.num_kv_heads // s.attn_tp) + 1))
    else:
        real = layers.MlaKv.kv_cache_dim.fget
        monkeypatch.setattr(layers.MlaKv, "kv_cache_dim", property(lambda s: real(s) - s.qk_rope_head_dim))
    rc, res = verify(tmp_path, capsys, name, launch, logs[i])
    assert rc == 1 and not res["ok"]
    assert any(r["quantity"].startswith("KV Cache") for r in res["lines"] if r["ok"] is False), res["lines"]


def test_a_corrupted_line_disagrees(sglang_ready, logs, tmp_path, capsys):
    """One number of SGLang's own line changed (a random model and line, the run's seed) -> exit 1."""
    from tests.pytest_glm_kv import run_seed

    rng = random.Random(run_seed())
    i = rng.randrange(len(CASES))
    name, launch = CASES[i]
    pattern = rng.choice([r"(#tokens: )(\d+)", r"(hierarchical KV host pool: )(\d+)", r"(max_total_num_tokens=)(\d+)"])
    # 2 % more, at least 4,096: the logged free memory has 0.01 GB resolution, which for a small cell (Nemotron's
    # fp8 2,048 B/token) leaves the plan a range ~10,000 tokens wide, so a flat +4,096 passed (seed 512083128:
    # predicted 29,415,365..29,425,377, logged 29,419,461)
    bad = re.sub(pattern, lambda m: m.group(1) + str(int(m.group(2)) + max(4096, int(m.group(2)) // 50)), logs[i],
                 count=1)
    assert bad != logs[i]
    rc, _ = verify(tmp_path, capsys, name, launch, bad)
    assert rc == 1, (name, pattern)
