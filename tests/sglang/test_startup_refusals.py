"""Issue 30 items 4 and 6: SGLang 0.5.23's ranks per host, and the start-up refusals glm-kv used to plan through.

SGLang's side is ``oracle_memory.sglang_memory``: its ``ServerArgs`` resolution and ``check_server_args``
(as ``entrypoints/engine.py`` runs them at launch), pool sizing, and with HiCache the host pool group
built by ``build_hybrid_mamba_stack`` with SGLang's own ``ranks_per_host`` (the launch world size per
node, read from the published config; oracle_memory W8) and its host-memory checks against the
profile's ``host_memory_bytes``. glm-kv's side is ``compare_memory.engine`` (make_profile -> resolve ->
plan). Every refusal must be SGLang's on both sides, glm-kv naming the field and quoting SGLang's
message; the neighbouring launches both sides start.

Planted errors: the old ranks rule (1 unless the profile says), no start-up checks, no host-memory
check: each fails the comparison.
"""
from __future__ import annotations

import pytest

GiB = 1 << 30
L = {"sglang_layout": "0.5.23", "max_running_requests": 64}
H8 = {"gpu": "H200", "tp_size": 8, "weights_bytes": 40_000_000_000}
B8 = {"gpu": "B200", "tp_size": 8, "weights_bytes": 40_000_000_000}

# (id, profile as the user wrote it, field glm-kv names or None where both start)
STARTUP = [
    ("nnodes-3-tp8", {**H8, "nnodes": 3}, "nnodes"),
    ("nnodes-2-dp-replicas", {**H8, "nnodes": 2, "dp_size": 2}, "nnodes"),
    ("nnodes-2-tp8", {**H8, "nnodes": 2}, None),
    ("nnodes-2-dpattn", {**H8, "nnodes": 2, "dp_size": 8, "enable_dp_attention": True}, None),
    ("lazy-prefill", {**H8, "mamba_scheduler_strategy": "extra_buffer_lazy", "disaggregation_mode": "prefill"},
     "mamba_scheduler_strategy"),
    ("lazy-decode", {**H8, "mamba_scheduler_strategy": "extra_buffer_lazy", "disaggregation_mode": "decode"}, None),
    ("lazy-colocated", {**H8, "mamba_scheduler_strategy": "extra_buffer_lazy"}, None),
    ("prefill-cp-decode", {**H8, "attn_cp_size": 8, "enable_prefill_cp": True, "cp_strategy": "interleave",
                           "disaggregation_mode": "decode"}, "enable_prefill_cp"),
    ("prefill-cp-decode-no-cp-size", {**H8, "enable_prefill_cp": True, "disaggregation_mode": "decode"},
     "enable_prefill_cp"),
    ("prefill-cp-prefill", {**H8, "attn_cp_size": 8, "enable_prefill_cp": True, "cp_strategy": "interleave",
                            "disaggregation_mode": "prefill"}, "enable_prefill_cp"),
    ("prefill-cp-prefill-eagle", {**H8, "attn_cp_size": 8, "enable_prefill_cp": True, "cp_strategy": "interleave",
                                  "disaggregation_mode": "prefill", "speculative_algorithm": "EAGLE"},
     "enable_prefill_cp"),
    ("eagle-topk-2", {**H8, "speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 2,
                      "speculative_num_draft_tokens": 4}, "speculative_eagle_topk"),
    ("nextn-topk-2", {**H8, "speculative_algorithm": "NEXTN", "speculative_num_steps": 2, "speculative_eagle_topk": 2,
                      "speculative_num_draft_tokens": 3}, "speculative_eagle_topk"),
    ("eagle-topk-1", {**H8, "speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                      "speculative_num_draft_tokens": 4}, None),
    ("prefill-cp-colocated", {**H8, "attn_cp_size": 8, "enable_prefill_cp": True, "cp_strategy": "interleave"},
     None),
    # attention_hook.py handle_linear_attn_backend: FlashInfer linear decode on SM100+ needs a bf16 SSM state
    # (found by the random launches, seed 1862494042: a B200 DFLASH decode server glm-kv planned)
    # (the radix cache off: with it on, no_buffer's page check refuses first on both sides)
    ("flashinfer-b200", {**B8, "linear_attn_backend": "flashinfer", "disable_radix_cache": True},
     "linear_attn_backend"),
    ("flashinfer-b200-fp32", {**B8, "linear_attn_backend": "flashinfer", "mamba_ssm_dtype": "float32",
                              "disable_radix_cache": True}, "linear_attn_backend"),
    ("flashinfer-b200-decode", {**B8, "linear_attn_backend": "flashinfer", "disaggregation_mode": "decode"},
     "linear_attn_backend"),
    ("flashinfer-b200-bf16", {**B8, "linear_attn_backend": "flashinfer", "mamba_ssm_dtype": "bfloat16",
                              "disable_radix_cache": True}, None),
    ("flashinfer-h200", {**H8, "linear_attn_backend": "flashinfer", "disable_radix_cache": True}, None),
]
# --enable-two-batch-overlap: its refusals (no a2a backend without DP attention; megamoe, deepep_v2) and the
# launches SGLang starts, where its breakable prefill graph goes before the fraction (every key compared)
DPA = {"dp_size": 8, "enable_dp_attention": True}
TBO = {"enable_two_batch_overlap": True}
TWO_BATCH_OVERLAP = [
    ("tbo-tp8", {**H8, **TBO}, "enable_two_batch_overlap"),
    ("tbo-tp8-decode", {**H8, **TBO, "disaggregation_mode": "decode"}, "enable_two_batch_overlap"),
    ("tbo-tp8-dpattn-megamoe", {**H8, **TBO, **DPA, "moe_a2a_backend": "megamoe"}, "enable_two_batch_overlap"),
    ("tbo-tp8-dpattn-deepep-v2", {**H8, **TBO, **DPA, "moe_a2a_backend": "deepep_v2"}, "enable_two_batch_overlap"),
    ("tbo-tp8-dpattn", {**H8, **TBO, **DPA}, None),
    ("tbo-tp8-deepep", {**H8, **TBO, "moe_a2a_backend": "deepep"}, None),
    ("tbo-tp8-dpattn-deepep", {**H8, **TBO, **DPA, "moe_a2a_backend": "deepep"}, None),
    ("tbo-b200-tp4-dpattn-eagle", {**B8, "tp_size": 4, "dp_size": 4, "enable_dp_attention": True, **TBO,
                                   "speculative_algorithm": "EAGLE"}, None),
    ("tbo-tp8-dpattn-prefill", {**H8, **TBO, **DPA, "disaggregation_mode": "prefill"}, None),
    ("tbo-tp8-dpattn-decode", {**H8, **TBO, **DPA, "disaggregation_mode": "decode"}, None),
    ("tbo-tp8-dpattn-hicache", {**H8, **TBO, **DPA, "enable_hierarchical_cache": True,
                                "host_memory_bytes": 2000 * 10**9}, None),
    # an explicit prefill backend locks it: apply_cuda_graph_compatibility returns before the TBO rule
    ("tbo-tp8-dpattn-breakable", {**H8, **TBO, **DPA, "cuda_graph_backend_prefill": "breakable"}, None),
]

HC = {"enable_hierarchical_cache": True}
# --disaggregation-decode-enable-radix-cache: a decode server keeps the radix cache (over --disable-radix-cache),
# with the co-located strategy and state slots, HiCache allowed; SGLang's refusals; inert off a decode server
DEC = {"disaggregation_mode": "decode"}
DR = {"disaggregation_decode_enable_radix_cache": True}
DECODE_RADIX = [
    ("decode-radix-tp8", {**H8, **DEC, **DR}, None),
    ("decode-radix-tp8-cap8", {**H8, **DEC, **DR, "max_running_requests": 8}, None),
    ("decode-radix-tp8-eagle", {**H8, **DEC, **DR, "speculative_algorithm": "EAGLE"}, None),
    ("decode-radix-tp8-nextn", {**H8, **DEC, **DR, "speculative_algorithm": "NEXTN"}, None),
    ("decode-radix-tp8-over-disable", {**H8, **DEC, **DR, "disable_radix_cache": True}, None),
    ("decode-radix-tp8-no-overlap", {**H8, **DEC, **DR, "disable_overlap_schedule": True}, None),
    ("decode-radix-tp8-no-buffer", {**H8, **DEC, **DR, "mamba_scheduler_strategy": "no_buffer"},
     "mamba_scheduler_strategy"),
    ("decode-radix-tp8-lazy", {**H8, **DEC, **DR, "mamba_scheduler_strategy": "extra_buffer_lazy"},
     "mamba_scheduler_strategy"),
    ("decode-radix-b200-dpattn", {**B8, "tp_size": 4, "dp_size": 4, "enable_dp_attention": True, **DEC, **DR}, None),
    ("decode-radix-tp8-hicache", {**H8, **DEC, **DR, **HC, "host_memory_bytes": 2000 * 10**9}, None),
    ("decode-hicache", {**H8, **DEC, **HC, "host_memory_bytes": 2000 * 10**9}, "enable_hierarchical_cache"),
    ("prefill-radix-flag", {**H8, "disaggregation_mode": "prefill", **DR}, None),
    ("colocated-radix-flag", {**H8, **DR}, None),
    ("colocated-radix-flag-radix-off", {**H8, **DR, "disable_radix_cache": True}, None),
]
# HiCache host pools: SGLang's ranks per host (no ranks_per_host in the profile) and its host-memory check
HOST = [
    ("auto-tp8", {**H8, **HC, "host_memory_bytes": 500 * 10**9}, None),
    ("auto-tp8-nnodes2", {**H8, **HC, "host_memory_bytes": 500 * 10**9, "nnodes": 2}, None),
    ("auto-tp4-dpattn", {"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True, **HC,
                         "host_memory_bytes": 300 * 10**9, "weights_bytes": 60_000_000_000}, None),
    ("auto-tp8-mtp", {**H8, **HC, "speculative_algorithm": "EAGLE", "host_memory_bytes": 400 * 10**9}, None),
    ("auto-tp1", {"gpu": "H200", "tp_size": 1, **HC, "host_memory_bytes": 900 * 10**9,
                  "available_bytes": 100 * GiB}, None),
    ("size-too-big", {**H8, **HC, "hicache_size": 900, "host_memory_bytes": 500 * 10**9}, "hicache_size"),
    ("size-fits", {**H8, **HC, "hicache_size": 50, "host_memory_bytes": 500 * 10**9}, None),
    # ratio 8: 346 GB of KV host pool per rank; 2 TB over 8 ranks leaves 248 GB each, over 4 (two nodes) 497 GB
    ("ratio-too-big", {**H8, **HC, "hicache_ratio": 8.0, "host_memory_bytes": 2000 * 10**9}, "hicache_ratio"),
    ("ratio-fits-nnodes2", {**H8, **HC, "hicache_ratio": 8.0, "host_memory_bytes": 2000 * 10**9, "nnodes": 2},
     None),
    ("ratio-too-big-tp1", {"gpu": "H200", "tp_size": 1, **HC, "hicache_ratio": 3.0,
                           "host_memory_bytes": 150 * 10**9, "available_bytes": 100 * GiB}, "hicache_ratio"),
]


def check(raw: dict) -> dict:
    """{'ours': field or None, 'theirs': SGLang's message or None, 'quoted': bool, 'keys': mismatched keys}."""
    from compare_memory import compare, engine
    from oracle_memory import sglang_memory
    from profiles import hardware

    from compare_memory import sglang_inputs

    prof, measured = hardware({**L, **raw})
    plan, d = engine(prof, measured)
    sg = sglang_memory(prof, prof, **sglang_inputs(prof, measured))
    theirs = sg["errors"]["message"] if "errors" in sg else None
    out = {"ours": None if plan is not None else d["field"], "theirs": theirs,
           "quoted": plan is None and theirs is not None and theirs in d["rule"], "keys": []}
    if plan is not None and theirs is None:
        out["keys"] = [m["key"] for m in compare("x", {**L, **raw}, engine_fn=engine)["mismatches"]]
    return out


def disagreements(cases) -> list:
    bad = []
    for pid, raw, field in cases:
        got = check(raw)
        if field is None:
            ok = got["ours"] is None and got["theirs"] is None and not got["keys"]
        else:
            ok = got["ours"] == field and got["quoted"]
        if not ok:
            bad.append((pid, got))
    return bad


def test_startup_refusals_are_sglangs(sglang_ready):
    assert disagreements(STARTUP) == []


def test_two_batch_overlap_is_sglangs(sglang_ready):
    assert disagreements(TWO_BATCH_OVERLAP) == []


def test_two_batch_overlap_moves_sglangs_fraction(sglang_ready):
    """Not vacuous: where SGLang starts, TBO moves its default fraction, except where the prefill graph is
    not SGLang's to drop (a decode server; an explicit prefill backend)."""
    from oracle_memory import sglang_memory
    from profiles import hardware

    from compare_memory import sglang_inputs

    def fraction(raw):
        prof, measured = hardware({**L, **raw})
        return sglang_memory(prof, prof, **sglang_inputs(prof, measured))["resolved"]["mem_fraction_static"]

    for pid, raw, field in TWO_BATCH_OVERLAP:
        if field is None:
            plain = {k: v for k, v in raw.items() if k != "enable_two_batch_overlap"}
            inert = raw.get("disaggregation_mode") == "decode" or "cuda_graph_backend_prefill" in raw
            assert (fraction(raw) == fraction(plain)) == inert, pid


def test_planted_tbo_keeps_the_prefill_graph_is_caught(sglang_ready, monkeypatch):
    """glm-kv without the TBO rule of the prefill graph: exactly the launches where SGLang drops it differ."""
    import dataclasses

    import glm_kv.ledgers.memory as memory

    real = memory.reserved_mib
    monkeypatch.setattr(memory, "reserved_mib", lambda f: real(dataclasses.replace(f, two_batch_overlap=False)))
    found = {pid for pid, _ in disagreements(TWO_BATCH_OVERLAP)}
    assert found == {"tbo-tp8-dpattn", "tbo-tp8-deepep", "tbo-tp8-dpattn-deepep", "tbo-b200-tp4-dpattn-eagle",
                     "tbo-tp8-dpattn-prefill", "tbo-tp8-dpattn-hicache"}, found


def test_decode_radix_cache_is_sglangs(sglang_ready):
    assert disagreements(DECODE_RADIX) == []


def test_decode_radix_cache_moves_sglangs_pools(sglang_ready):
    """Not vacuous: on a decode server SGLang's state slots move with the flag; off one they do not."""
    from oracle_memory import sglang_memory
    from profiles import hardware

    from compare_memory import sglang_inputs

    def slots(raw):
        prof, measured = hardware({**L, **raw})
        return sglang_memory(prof, prof, **sglang_inputs(prof, measured))["capacity"]["max_mamba_cache_size"]

    for pid, raw, field in DECODE_RADIX:
        if field is None and "enable_hierarchical_cache" not in raw and "disable_overlap_schedule" not in raw:
            plain = {k: v for k, v in raw.items() if k != "disaggregation_decode_enable_radix_cache"}
            assert (slots(raw) == slots(plain)) == (raw.get("disaggregation_mode") != "decode"), pid


def test_decode_radix_cache_refuses_dflash_as_sglang(sglang_ready, tmp_path):
    """speculative_hook: a decode server keeping the radix cache takes no DFLASH draft (EAGLE, DSPARK it takes);
    the same DFLASH decode server without the flag starts on both sides."""
    from test_flags_dflash import dflash_oracle, write_draft

    dflash = {**H8, **DEC, "speculative_algorithm": "DFLASH", "speculative_draft_model_path": write_draft(tmp_path)}
    with dflash_oracle(90, {}):   # the draft flags passed through, SGLang's own aux config
        assert disagreements([("decode-radix-dflash", {**dflash, **DR}, "disaggregation_decode_enable_radix_cache"),
                              ("decode-dflash", dflash, None)]) == []


def test_decode_radix_cache_takes_dspark_as_sglang(sglang_ready, tmp_path):
    """speculative_hook: DSPARK is one of the algorithms a decode server keeping the radix cache takes (issue 30:
    checked for EAGLE and DFLASH before, not DSPARK); with and without the flag, alone and beside HiCache, every
    key as SGLang's own classes size it (its aux config and the DSPARK draft's sidecar)."""
    from test_flags_dflash import dflash_oracle
    from test_flags_dspark import write_dspark

    dspark = {**H8, **DEC, "speculative_algorithm": "DSPARK", "speculative_draft_model_path": write_dspark(tmp_path)}
    with dflash_oracle(90, {}):
        assert disagreements([("decode-radix-dspark", {**dspark, **DR}, None),
                              ("decode-radix-dspark-hicache", {**dspark, **DR, **HC, "host_memory_bytes": 2000 * 10**9},
                               None),
                              ("decode-dspark", dspark, None)]) == []


def test_planted_decode_ignores_the_radix_flag_is_caught(sglang_ready, monkeypatch):
    """glm-kv without the flag (a decode server always without the radix cache): the decode launches differ."""
    import glm_kv.inputs.profile as profile

    real = profile.make_profile
    monkeypatch.setattr(profile, "make_profile", lambda raw, *a, **k: real(
        {k2: v for k2, v in raw.items() if k2 != "disaggregation_decode_enable_radix_cache"}, *a, **k))
    found = {pid for pid, _ in disagreements(DECODE_RADIX)}
    assert {"decode-radix-tp8", "decode-radix-tp8-eagle", "decode-radix-tp8-hicache",
            "decode-radix-tp8-lazy"} <= found, found
    assert not found & {"prefill-radix-flag", "colocated-radix-flag", "decode-hicache"}, found


def test_host_pools_ranks_and_memory_check_are_sglangs(sglang_ready):
    assert disagreements(HOST) == []


def test_planted_no_startup_checks_is_caught(sglang_ready, monkeypatch):
    import glm_kv.inputs.resolve as resolve

    monkeypatch.setattr(resolve, "validate_startup", lambda p, strategy, model=None, config=None: None)
    monkeypatch.setattr(resolve, "validate_linear_attn_backend", lambda p, sm: None)
    found = {pid for pid, _ in disagreements(STARTUP + TWO_BATCH_OVERLAP)}
    assert found == {pid for pid, _, field in STARTUP + TWO_BATCH_OVERLAP if field is not None}, found


def test_planted_old_ranks_rule_is_caught(sglang_ready, monkeypatch):
    """glm-kv's old default (1 rank per host unless the profile says) moves the auto-sized pools of tp > 1."""
    import glm_kv.ledgers.host as host

    monkeypatch.setattr(host, "ranks_per_host", lambda p: p.ranks_per_host or 1)
    found = dict(disagreements(HOST))
    assert {"auto-tp8", "auto-tp8-nnodes2", "auto-tp4-dpattn", "auto-tp8-mtp"} <= set(found), found
    assert "host.hicache_ratio" in found["auto-tp8"]["keys"], found["auto-tp8"]
    assert "auto-tp1" not in found and "size-fits" not in found, found


def test_planted_no_host_memory_check_is_caught(sglang_ready, monkeypatch):
    import glm_kv.ledgers.host as host

    monkeypatch.setattr(host, "check_host_memory", lambda p, requests, auto_budget: None)
    found = {pid for pid, _ in disagreements(HOST)}
    assert found == {pid for pid, _, field in HOST if field is not None}, found


@pytest.mark.parametrize("fragment,field", [
    ("--nnodes 3", "nnodes"),
    ("--mamba-radix-cache-strategy extra_buffer_lazy --disaggregation-mode prefill", "mamba_scheduler_strategy"),
    ("--enable-prefill-cp --disaggregation-mode decode", "enable_prefill_cp"),
])
def test_startup_refusals_exit_2_on_the_cli(sglang_ready, capsys, fragment, field):
    from glm_kv import cli

    cmd = "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --tp-size 8 " + fragment
    try:
        code = cli.main(["plan", "--json", "--sglang-args", cmd])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    assert code == 2 and out.strip() == "", (code, out, err)
    assert field in err and "SGLang 0.5.23 refuses it" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
