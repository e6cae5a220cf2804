"""A PD decode server's retraction backup (issue 30 / 32 follow-up), planned by glm-kv and run through SGLang 0.5.23's
own code: ``kv_cache_builder.resolve_decode_retraction_backup`` on the full-size device pools (on meta), the host
pool group its ``host_pool`` makes ``create_unified_radix_cache`` build without ``--enable-hierarchical-cache``
(the strategy ``hybrid_pool_assembler._select_strategy`` picks, under ``auto_size_hicache``), and the refusals of
``registry.create_unified_radix_cache`` / ``UnifiedRadixCache.validate_retraction_host_capacity``
(``models_contract_oracle._host``). Every plan-contract key is compared both ways (``test_models_contract.check``):
with ``host_pool`` every ``host.*`` size, and ``host.retraction_backup`` on every decode server.

Qualifying models (an MHA or hybrid-SWA pool, no recurrent state): gpt-oss, Gemma-4, MiMo-V2-Flash, Llama-4. Not
qualifying: GLM-5.3-Flash and the other state-layer models (Mamba state: ``cpu_tensor``), DeepSeek-V3.2 (an MLA
pool). Planted errors: the backup rule always ``cpu_tensor``; the backup-only ratio without its
one-longest-request floor; the host receive threshold's doubling of that floor left out.
"""
from __future__ import annotations

import pytest

from test_models_contract import PLANT_H200, check, planted

GiB = 1 << 30
D = {**PLANT_H200, "disaggregation_mode": "decode"}
HOST_POOL = [
    ("gpt-oss-20b", D),                                                        # SWAKVPool: KV + SWA host pools, 0.2
    ("gpt-oss-120b", {**D, "tp_size": 2, "disable_hybrid_swa_memory": True}),   # one MHATokenToKVPool
    ("gemma-4-26b-a4b", D),                             # 256K context: the one-longest-request floor binds (> 0.2)
    ("mimo-v2-flash", {**D, "tp_size": 8}),             # asymmetric K / V host pools
    ("llama-4-scout-17b-16e-instruct", {**D, "tp_size": 4, "hicache_size": 40}),   # --hicache-size split, ratio 0.2
    ("gpt-oss-20b", {**D, "hicache_ratio": 1.5}),                              # a given ratio sizes them
    ("gpt-oss-20b", {**D, "disaggregation_decode_host_receive_threshold": 0.5}),   # host_pool, layer_first
    ("gemma-4-26b-a4b", {**D, "disaggregation_decode_host_receive_threshold": 0.25}),   # floor of two requests
    ("gpt-oss-20b", {**D, "enable_priority_scheduling": True, "disable_priority_preemption": True}),
    ("gpt-oss-20b", {**D, "host_memory_bytes": 40 * 10**9, "ranks_per_host": 1}),   # auto-size: 0.2 fits
    ("gpt-oss-20b", {**D, "host_memory_bytes": 25 * 10**9, "ranks_per_host": 1}),   # auto-size binds below 0.2
    ("gemma-4-26b-a4b", {**D, "host_memory_bytes": 60 * 10**9, "ranks_per_host": 1}),   # ... below the floor
    ("mimo-v2-flash", {**D, "tp_size": 8, "host_memory_bytes": 200 * 10**9}),   # 8 ranks on the host share it
    ("llama-4-scout-17b-16e-instruct", {**D, "tp_size": 4, "disaggregation_decode_host_receive_threshold": 0.0}),
    ("gemma-4-26b-a4b", {**D, "disaggregation_decode_retraction_backup": "host_pool", "max_running_requests": 64}),
]
CPU_TENSOR = [
    ("glm-5.3-flash", {**D, "tp_size": 8}),                      # KDA state (uses_ssm_state)
    ("qwen3.5-35b-a3b", D),                                      # Gated DeltaNet state
    ("deepseek-v3.2", {**D, "tp_size": 8}),                      # an MLA / DSA pool
    ("gpt-oss-20b", {**D, "enable_priority_scheduling": True}),  # priority preemption
    ("gpt-oss-20b", {**D, "disaggregation_decode_enable_radix_cache": True}),   # the decode radix cache
    ("gpt-oss-20b", {**D, "disaggregation_decode_retraction_backup": "cpu_tensor"}),
    ("mimo-v2-flash", {**D, "tp_size": 8, "disaggregation_decode_enable_radix_cache": True,
                       "enable_hierarchical_cache": True}),   # HiCache's own pools at 2.0, backup cpu_tensor
]
NO_BACKUP = [   # "none": a retracted request is aborted with 503; no host pool is built
    ("gpt-oss-20b", {**D, "disaggregation_decode_retraction_backup": "none"}),
    ("mimo-v2-flash", {**D, "tp_size": 8, "disaggregation_decode_retraction_backup": "none"}),
]
REFUSED = [
    ("qwen3.5-35b-a3b", {**D, "disaggregation_decode_retraction_backup": "host_pool"}),   # Mamba models
    ("glm-5.3-flash", {**D, "tp_size": 8, "disaggregation_decode_host_receive_threshold": 0.5}),   # ... via threshold
    ("deepseek-v3.2", {**D, "tp_size": 8, "disaggregation_decode_retraction_backup": "host_pool"}),   # MLA host stack
    ("gpt-oss-20b", {**PLANT_H200, "disaggregation_decode_retraction_backup": "host_pool"}),   # not a decode server
    ("gpt-oss-20b", {**D, "enable_priority_scheduling": True, "disaggregation_decode_retraction_backup": "host_pool"}),
    ("gpt-oss-20b", {**D, "disaggregation_decode_host_receive_threshold": 0.5,
                     "disaggregation_decode_retraction_backup": "cpu_tensor"}),
    ("gpt-oss-20b", {**D, "disaggregation_decode_host_receive_threshold": 1.5}),
    # the host-memory check of the host pools (pool_host/base.py), --hicache-size past the host's RAM
    ("gpt-oss-20b", {**D, "host_memory_bytes": 30 * 10**9, "hicache_size": 40, "ranks_per_host": 1}),
    # K and V head dims differ (AsymmetricMHATokenToKVPoolHost): the threshold's layer_first is refused
    ("mimo-v2-flash", {**D, "tp_size": 2, "disaggregation_decode_host_receive_threshold": 0.0}),
    ("mimo-v2-flash", {**D, "tp_size": 8, "disaggregation_decode_retraction_backup": "host_pool",
                       "disaggregation_decode_host_receive_threshold": 0.5}),
]
# "none" with a threshold below 1: handle_pd_disaggregation declares host_pool over it
HOST_POOL.append(("gpt-oss-20b", {**D, "disaggregation_decode_retraction_backup": "none",
                                  "disaggregation_decode_host_receive_threshold": 0.5}))
ALL = HOST_POOL + CPU_TENSOR + NO_BACKUP + REFUSED


def _id(case) -> str:
    name, launch = case
    extra = [f"{k}={v}" for k, v in launch.items() if k not in PLANT_H200 and k != "disaggregation_mode"]
    return "-".join([name, launch.get("disaggregation_mode", "null"), *extra])[:120]


@pytest.mark.parametrize("name, launch", ALL, ids=[_id(c) for c in ALL])
def test_decode_server_agrees_key_for_key(sglang_ready, name, launch):
    problems, sg = check(name, launch)
    assert problems == [], problems
    if (name, launch) in HOST_POOL:   # not vacuous: SGLang built the host pools, without HiCache
        assert sg["host"]["retraction_backup"] == "host_pool" and sg["host"]["kv_tokens"] > 0, sg.get("host")
    elif (name, launch) in CPU_TENSOR:
        assert sg["host"]["retraction_backup"] == "cpu_tensor", sg.get("host")
    elif (name, launch) in NO_BACKUP:
        assert sg["host"]["retraction_backup"] == "none" and not sg["host"].get("kv_tokens"), sg.get("host")
    else:
        assert "errors" in sg, sg.get("host")


@pytest.mark.parametrize("name, launch", REFUSED, ids=[_id(c) for c in REFUSED])
def test_refusals_are_in_sglangs_words(sglang_ready, name, launch):
    from test_models_contract import glm_kv_side
    from models_contract_oracle import sglang_contract

    _plan, err = glm_kv_side(name, launch)
    says = sglang_contract(name, launch)["errors"]["message"]
    assert err is not None and f"\"{says}\"" in err.rule, (err, says)


def test_a_drafts_host_sidecar_on_a_decode_server(sglang_ready, tmp_path):
    """DFLASH on gpt-oss-120b's decode server (test_models_contract's g5 draft checkpoint): host_pool registers the
    draft's host sidecar beside the KV and SWA host pools (maybe_register_hicache_draft), as HiCache does."""
    from test_models_contract import draft_checkpoint_launches

    name, launch = next((n, x) for n, x in draft_checkpoint_launches(tmp_path)
                        if x.get("speculative_draft_model_path", "").endswith("g5"))
    for extra in ({}, {"disaggregation_decode_host_receive_threshold": 0.5}):
        problems, sg = check(name, {**launch, **extra})
        assert problems == [] and sg["host"]["draft_tokens"] == sg["host"]["kv_tokens"] > 0, (problems, sg["host"])


def test_a_planted_cpu_tensor_rule_is_caught(sglang_ready, monkeypatch):
    """Planted: the backup rule always cpu_tensor (glm-kv's old plan: no host pools on a decode server)."""
    import glm_kv.ledgers.plan as plan

    problems = planted(monkeypatch, "gpt-oss-20b", D,
                       lambda mp: mp.setattr(plan, "retraction_backup", lambda p, family: "cpu_tensor"))
    keys = {p.split(":")[0] for p in problems}
    assert {"host.retraction_backup", "host.kv_tokens", "host.swa_tokens", "host.total_bytes"} <= keys, problems


def test_a_planted_floorless_ratio_is_caught(sglang_ready, monkeypatch):
    """Planted: the backup-only ratio without decode_retraction_max_tokens' floor (0.2 always): Gemma-4's 256K
    context needs more than 0.2 of its full pool."""
    import glm_kv.ledgers.host as host

    problems = planted(monkeypatch, "gemma-4-26b-a4b", D, lambda mp: mp.setattr(
        host, "backup_only_ratio", lambda p, tokens, page, ctx: host.BACKUP_ONLY_HICACHE_RATIO))
    keys = {p.split(":")[0] for p in problems}
    assert {"host.hicache_ratio", "host.kv_tokens", "host.swa_tokens"} <= keys, problems


def test_a_planted_single_request_floor_under_a_threshold_is_caught(sglang_ready, monkeypatch):
    """Planted: a host receive threshold below 1 left out of the floor (one longest request, not two)."""
    import glm_kv.ledgers.host as host

    real = host.backup_only_ratio

    def one_request(p, tokens, page, ctx):
        return real(p.model_copy(update={"disaggregation_decode_host_receive_threshold": 1.0}), tokens, page, ctx)

    launch = {**D, "disaggregation_decode_host_receive_threshold": 0.25}
    problems = planted(monkeypatch, "gemma-4-26b-a4b", launch, lambda mp: mp.setattr(host, "backup_only_ratio",
                                                                                    one_request))
    assert any(p.startswith("host.kv_tokens:") for p in problems), problems


# GLM-5.3-Flash as a pasted command, through the suite's own comparison (test_random_launches.compare_launch: SGLang
# reads the command with its argparse; the memory oracle's keys both ways, a refusal on both sides)
GLM = "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --tp 8 --disaggregation-mode decode "
GLM_HW = {"gpu": "H200", "weights_bytes": 40 * 10**9}
GLM_LAUNCHES = [
    ("glm-cpu-tensor", GLM + "--disaggregation-decode-retraction-backup cpu_tensor"),
    ("glm-priority", GLM + "--enable-priority-scheduling"),
    ("glm-host-pool", GLM + "--disaggregation-decode-retraction-backup host_pool"),   # refused: Mamba models
    ("glm-threshold", GLM + "--disaggregation-decode-host-receive-threshold 0.5"),   # refused alike
]


@pytest.mark.parametrize("pid,cmd", GLM_LAUNCHES, ids=[x[0] for x in GLM_LAUNCHES])
def test_glm_decode_server_commands_agree(sglang_ready, pid, cmd):
    from test_random_launches import compare_launch

    assert compare_launch(pid, cmd, GLM_HW) == []
