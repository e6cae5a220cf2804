"""Issue 32: `glm-kv plan` for DeepSeek-V4 (glm_kv/ledgers/dsv4_plan.py), and what it refuses by name.

The expected numbers are SGLang 0.5.23's (read off ``DSV4PoolConfigurator`` on the CPU, see
tests/ledgers/test_dsv4_pools.py; tests/sglang/test_dsv4_pools.py compares plans with SGLang on random
launches). Every refusal is one line naming its field, exit 2.
"""
from __future__ import annotations

import json

import pytest

from glm_kv.cli import main
from tests.ledgers.test_dsv4_pools import SGLANG_FLASH

# SGLang 0.5.23's own resolution and sizing of the default launch (tests/sglang/test_dsv4_plan.py's path:
# ServerArgs.resolve_once on a faked H200, KVCacheConfigurator.config_from_budget(60e9), resolve_max_num_reqs,
# finalize_with_max_running_requests): the model override's SWA ratio 0.1, which SGLang counts as given
SGLANG_DEFAULT = {"full_max_total_num_tokens": 8083200, "swa_max_total_num_tokens": 808192,
                  "c4_max_total_num_tokens": 2020800, "c128_max_total_num_tokens": 63150,
                  "c4_state_pool_size": 25256, "c128_state_pool_size": 32896, "max_running_requests": 256}
FLASH = ["--set", "model=deepseek-v4-flash", "--set", "available_bytes=60000000000", "--set", "tp_size=1",
         "--set", "dp_size=1", "--set", "enable_dp_attention=false", "--set", "max_running_requests=256",
         "--set", "chunked_prefill_size=8192"]


def plan_json(capsys, *extra: str) -> dict:
    assert main(["plan", "--json", *FLASH, *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_flash_plan_gives_sglangs_pool_sizes(capsys):
    d = plan_json(capsys)
    cap, tok = d["capacity"], d["token"]
    assert d["model"]["family"] == "dsv4" and d["model"]["num_hidden_layers"] == 43
    assert tok["page_size"] == 256 and tok["kv_cache_dtype"] == "fp8_e4m3" and tok["swa_mode"] == "ratio"
    assert tok["swa_kv_bytes_per_token"] == SGLANG_FLASH["bytes_per_swa_token"]   # DSV4PoolConfigurator's
    assert {k: cap[k] for k in SGLANG_DEFAULT} == SGLANG_DEFAULT
    assert cap["max_total_num_tokens"] == SGLANG_DEFAULT["full_max_total_num_tokens"]


def test_the_table_prints(capsys):
    assert main(["plan", *FLASH]) == 0
    assert "SWA pool tokens" in capsys.readouterr().out


def test_pro_and_the_hugging_face_id_plan(capsys):
    d = plan_json(capsys, "--set", "model=deepseek-ai/DeepSeek-V4-Pro")
    assert d["model"]["num_hidden_layers"] == 61 and d["capacity"]["full_max_total_num_tokens"] > 0


def test_unset_max_running_requests_is_sglangs_256(capsys):
    d = plan_json(capsys, "--set", "max_running_requests=null")
    assert d["capacity"]["requested_max_running_requests"] == 256
    assert any("apply_deepseek_v4_defaults" in n for n in d["notes"])


@pytest.mark.parametrize("extra, field", [
    (["--set", "available_bytes=null", "--set", "weights_estimate=false"], "weights_bytes"),   # no rest, no weights
    (["--set", "speculative_algorithm=EAGLE"], "speculative_eagle_topk"),
    (["--set", "speculative_algorithm=NGRAM"], "speculative_algorithm"),
    (["--set", "speculative_algorithm=EAGLE", "--set", "speculative_eagle_topk=1", "--set", "speculative_num_steps=10",
      "--set", "speculative_num_draft_tokens=2"], "speculative_num_draft_tokens"),   # 11 drafts: the c4 ring serves 10
    (["--set", "speculative_algorithm=EAGLE", "--set", "speculative_eagle_topk=1"], "speculative_num_steps"),
    (["--set", "enable_hisparse=true"], "enable_hisparse"),
    (["--set", "kv_cache_dtype=bfloat16"], "kv_cache_dtype"),
    (["--set", "swa_full_tokens_ratio=0.00001"], "swa_full_tokens_ratio"),
    (["--set", "disaggregation_mode=decode"], "disaggregation_mode"),
    # HiCache: SGLang refuses DeepSeek-V4 without an explicit --hicache-ratio (its auto-size) or with --hicache-size;
    # the HiCache fields glm-kv does not model for it stay refused by name
    (["--set", "enable_hierarchical_cache=true"], "hicache_ratio"),
    (["--set", "enable_hierarchical_cache=true", "--set", "hicache_ratio=2", "--set", "hicache_size=100"],
     "hicache_size"),
    (["--set", "enable_hierarchical_cache=true", "--set", "hicache_ratio=2", "--set",
      "hicache_mem_layout=page_first_kv_split"], "hicache_mem_layout"),
    (["--set", "enable_hierarchical_cache=true", "--set", "hicache_ratio=2", "--set", "hicache_storage_backend=file"],
     "hicache_storage_backend"),
    (["--set", "enable_hierarchical_cache=true", "--set", "hicache_ratio=2", "--set", "hicache_host_memory_fraction=0.5"],
     "hicache_host_memory_fraction"),
])
def test_what_is_not_sized_is_refused_by_name(capsys, extra, field):
    assert main(["plan", *FLASH, *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and field in err and "Traceback" not in err, err


def test_other_commands_refuse_deepseek_v4_by_name(capsys):
    assert main(["advise", "--workload", "chat", "--set", "model=deepseek-v4-flash"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "model" in err and "DeepSeek-V4" in err, err


def test_planted_page_size_is_caught(monkeypatch, capsys):
    import glm_kv.ledgers.dsv4_plan as P

    monkeypatch.setattr(P, "DSV4_PAGE_SIZE", 128)   # the model override's 256, planted wrong
    d = plan_json(capsys)
    assert d["capacity"]["full_max_total_num_tokens"] != SGLANG_DEFAULT["full_max_total_num_tokens"]


def test_planted_request_cap_sizing_is_caught(monkeypatch, capsys):
    import glm_kv.ledgers.dsv4_plan as P

    monkeypatch.setattr(P, "DSV4_SWA_FULL_TOKENS_RATIO", None)   # cap mode: not what SGLang's resolution gives
    d = plan_json(capsys)
    assert {k: d["capacity"][k] for k in SGLANG_DEFAULT} != SGLANG_DEFAULT


@pytest.mark.parametrize("flag", ["--dsv4-attn-backend trtllm", "--enable-deepseek-v4-fp4-indexer",
                                  "--swa-prefix-tails 8"])
def test_launch_flags_its_sizing_reads_are_refused_by_name(capsys, flag):
    """Flags the flag table proves inert on GLM-5.3-Flash but DeepSeek-V4's pool sizing reads."""
    cmd = f"python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V4-Flash --tp 8 {flag}"
    assert main(["plan", "--sglang-args", cmd, "--set", "available_bytes=60000000000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag.split()[0] in err, err


# SGLang 0.5.23's DeepSeek-V4 host pools for the default launch at --hicache-ratio 2 (tests/sglang/test_dsv4_host.py's
# path: build_deepseek_v4_hicache_stack over its DeepSeekV4TokenToKVPool at SGLANG_DEFAULT's sizes): (layers, pages,
# item bytes) per entry
SGLANG_HOST = {"kv": (0, 63150, 0), "swa": (43, 6314, 149760), "deepseek_v4_c4": (21, 63150, 37440),
               "deepseek_v4_c4_indexer": (21, 63150, 8448), "deepseek_v4_c4_state": (21, 6314, 65536),
               "deepseek_v4_c4_indexer_state": (21, 6314, 16384), "deepseek_v4_c128": (20, 63150, 1728)}


def test_hicache_host_pools_are_sglangs(capsys):
    without = plan_json(capsys)
    d = plan_json(capsys, "--set", "enable_hierarchical_cache=true", "--set", "hicache_ratio=2")
    assert "host" not in without and {k: v for k, v in d.items() if k not in ("host", "notes", "profile")} == {
        k: v for k, v in without.items() if k not in ("notes", "profile")}
    h = d["host"]
    assert {k: (p["layers"], p["pages"], p["item_bytes"]) for k, p in h["pools"].items()} == SGLANG_HOST
    assert h["total_bytes"] == sum(a * b * c for a, b, c in SGLANG_HOST.values())
    assert h["kv_tokens"] == 63150 * 256 and h["swa_tokens"] == 6314 * 256 and h["hicache_ratio"] == 2.0
    assert main(["plan", *FLASH, "--set", "enable_hierarchical_cache=true", "--set", "hicache_ratio=2"]) == 0


def test_the_layer_counts_and_host_layout_are_the_inputs(capsys):
    """The JSON's per-layer sections count the config's own ``compress_ratios`` (read here as raw JSON, its first
    ``num_hidden_layers`` entries: the last entry is the MTP layer's), and the host section names the layout the
    launch asked for (page_first is accepted for DeepSeek-V4; page_first_kv_split is refused above). Mutation run of
    2026-12-05: ``layers_of(None)`` for c128 and a misspelt ``mem_layout`` key survived the fast suite."""
    from pathlib import Path

    import glm_kv

    raw = json.loads((Path(glm_kv.__file__).parent / "inputs" / "models" /
                      "deepseek-ai--DeepSeek-V4-Flash_config.json").read_text())
    ratios = raw["compress_ratios"][:raw["num_hidden_layers"]]
    d = plan_json(capsys, "--set", "enable_hierarchical_cache=true", "--set", "hicache_ratio=2",
                  "--set", "hicache_mem_layout=page_first")
    assert {k: v["layers"] for k, v in d["layers"].items()} == {
        "dsv4_latent_kv": raw["num_hidden_layers"], "dsv4_c4": ratios.count(4), "dsv4_c128": ratios.count(128),
        "dsv4_swa_only": ratios.count(0)}
    assert d["host"]["mem_layout"] == "page_first"
