"""Capacity from the GPU up and HiCache host sizes agree with SGLang 0.5.23's own code (issue 11).

Hand-picked profiles cover each point (vision_config, pre-load below total, weights under DP
attention with the MTP draft, the reservation flags, host ratio / size / auto-size / MTP,
context parallel, speculative + max_mamba_cache_size + DP); >= 100 random profiles (seed
GLM_KV_SEED) cover their combinations. The corruption tests show each point fails the suite
when the engine is wrong. The boot-log tests run `glm-kv verify` on lines SGLang just printed.
"""
from __future__ import annotations

import json
import re

import pytest

try:  # outside the SGLang venv this module must still import (conftest skips every test here)
    from compare_memory import HAND_PICKED, compare, random_profiles
except ImportError:
    HAND_PICKED, compare = [("unavailable", {})], None

    def random_profiles(n):
        return [("unavailable", {})] * 100

RANDOM = random_profiles(120)
BY_ID = dict(HAND_PICKED)


def _ids(cases):
    return [c[0] for c in cases]


@pytest.mark.parametrize("pid,raw", HAND_PICKED, ids=_ids(HAND_PICKED))
def test_hand_picked_agrees(sglang_ready, pid, raw):
    res = compare(pid, raw)
    assert res["compared"], pid
    assert not res["mismatches"], f"{pid}: {res['mismatches']}"


@pytest.mark.parametrize("pid,raw", RANDOM, ids=_ids(RANDOM))
def test_random_agrees(sglang_ready, pid, raw):
    res = compare(pid, raw)
    assert not res["mismatches"], f"{pid} {raw}: {res['mismatches']}"


def _keys(res) -> set:
    return {m["key"] for m in res["mismatches"]}


def test_vlm_factor_forgotten_fails(sglang_ready, monkeypatch):
    import glm_kv.ledgers.memory as memory

    monkeypatch.setattr(memory, "vlm_factor", lambda layers, hidden: 1.0)
    res = compare("vlm-h200-tp8-dp8", BY_ID["vlm-h200-tp8-dp8"])
    assert {"resolved.mem_fraction_static", "capacity.mem_fraction_static", "capacity.rest_bytes",
            "capacity.max_total_num_tokens"} <= _keys(res), res


def test_whole_device_rest_fails(sglang_ready, monkeypatch):
    """The old model: rest = total x fraction - weights (no pre-load reading, no float32)."""
    import glm_kv.ledgers.memory as memory

    def old(pre, weights, f, world, mm):
        return pre / (1 << 30) * f - weights / (1 << 30) - memory.mm_reservation_gib(mm) + 0.5 * (1 - f)

    monkeypatch.setattr(memory, "rest_gib_from", old)
    res = compare("preload-given-tp8", BY_ID["preload-given-tp8"])
    assert {"capacity.rest_bytes", "capacity.token_pool_budget_bytes"} <= _keys(res), res


def test_float32_reading_forgotten_fails(sglang_ready, monkeypatch):
    import glm_kv.ledgers.memory as memory

    monkeypatch.setattr(memory, "free_reading_gib", lambda b, distributed: b / (1 << 30))
    res = compare("preload-given-tp8", BY_ID["preload-given-tp8"])
    assert "capacity.rest_bytes" in _keys(res), res


def test_reservation_flag_dropped_fails(sglang_ready, monkeypatch):
    import glm_kv.ledgers.memory as memory

    real = memory.fraction_inputs

    def drop(p, *a, **k):
        f = real(p, *a, **k)
        return memory.FractionInputs(**{**f.__dict__, "chunked_prefill_size": None,
                                        "moe_a2a_backend": "none"})

    monkeypatch.setattr(memory, "fraction_inputs", drop)
    for pid in ("chunked-2048", "deepep"):
        assert "resolved.mem_fraction_static" in _keys(compare(pid, BY_ID[pid])), pid


def test_host_size_given_whole_to_each_pool_fails(sglang_ready, monkeypatch):
    """The old sizing: --hicache-size to the KV pool and again to the mamba pool."""
    import glm_kv.ledgers.host as host

    real = host.host_size
    monkeypatch.setattr(host, "host_size", lambda cap, page, ratio, size_gb, per: real(
        cap, page, ratio, 100 if size_gb else 0, per))
    res = compare("host-size-100", BY_ID["host-size-100"])
    assert {"host.kv_tokens", "host.mamba_slots", "host.total_bytes"} <= _keys(res), res


def test_host_auto_size_ignored_fails(sglang_ready, monkeypatch):
    import glm_kv.ledgers.host as host

    # the plant keeps a budget its own pools fit (the host-memory check is tested on its own)
    monkeypatch.setattr(host, "auto_ratio", lambda device, ram, ranks, *rest: (2.0, 1 << 60))
    res = compare("host-auto-small-ram", BY_ID["host-auto-small-ram"])
    assert {"host.hicache_ratio", "host.kv_tokens"} <= _keys(res), res


def test_host_mtp_layers_forgotten_fails(sglang_ready, monkeypatch):
    import glm_kv.ledgers.plan as plan_module

    real = plan_module.host_ledger
    monkeypatch.setattr(plan_module, "host_ledger", lambda *a, **k: real(*a, **{**k, "draft_layers": 0}))
    res = compare("host-ratio-mtp", BY_ID["host-ratio-mtp"])
    assert {"host.kv_layers", "host.kv_bytes"} <= _keys(res), res


def test_context_parallel_split_forgotten_fails(sglang_ready, monkeypatch):
    import glm_kv.inputs.resolve as resolve_module

    monkeypatch.setattr(resolve_module, "cp_tp_group_sharing", lambda p, facts: False)
    res = compare("cp-tp8-interleave", BY_ID["cp-tp8-interleave"])
    assert {"parallel.linear_attn_tp_size", "request.state_slot_bytes",
            "capacity.max_mamba_cache_size"} <= _keys(res), res


def test_layer_first_accepted_fails(sglang_ready, monkeypatch):
    import glm_kv.ledgers.host as host

    monkeypatch.setattr(host, "validate_host", lambda *a, **k: None)
    res = compare("host-layer-first-refused", BY_ID["host-layer-first-refused"])
    assert _keys(res) == {"errors"}, res


def test_speculative_undivided_max_mamba_cache_fails(sglang_ready, monkeypatch):
    """Point 7: capping the verify scratch with the undivided --max-mamba-cache-size."""
    import glm_kv.ledgers.capacity as capacity

    real = capacity.pool_sizes

    def undivided(rest_gib, **k):
        out = real(rest_gib, **k)
        mmc, dp, spr = k["max_mamba_cache_size"], k["attn_dp"], k["slots_per_request"]
        if mmc == mmc and k["draft_tokens"]:  # not NaN: recompute the scratch as the old engine did
            per = k["requests_per_worker"]
            wrong = min(per, int(mmc) // spr)
            right = min(per, int(mmc) // dp // spr)
            delta = (wrong - right) * k["slot"] * k["draft_tokens"]
            out["spec_scratch_bytes"] = out["spec_scratch_bytes"] + delta
        return out

    monkeypatch.setattr(capacity, "pool_sizes", undivided)
    res = compare("spec-mmc-dp8-weights", BY_ID["spec-mmc-dp8-weights"])
    assert "capacity.spec_scratch_bytes" in _keys(res), res


# ---- glm-kv verify on lines SGLang printed just now


@pytest.mark.parametrize("name", ["h200-tp1-mtp-hicache", "h200-tp8-dpattn-hicache-auto"])
def test_verify_on_freshly_emitted_log(sglang_ready, tmp_path, capsys, name):
    import yaml
    from capture_boot_logs import compose

    from glm_kv.cli import main

    text, fields = compose(name)
    log, prof = tmp_path / "boot.log", tmp_path / "profile.yaml"
    log.write_text(text)
    prof.write_text(yaml.safe_dump({"name": name, **fields}))
    assert main(["verify", "--boot-log", str(log), "--profile", str(prof), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["ok"] and sum(1 for r in res["lines"] if r["ok"]) >= 10
    bad = re.sub(r"(max_mamba_cache_size: )(\d+)", lambda m: m.group(1) + str(int(m.group(2)) + 1), text, count=1)
    log.write_text(bad)
    assert main(["verify", "--boot-log", str(log), "--profile", str(prof), "--json"]) == 1


def test_verify_context_length_left_to_defaults(sglang_ready, tmp_path, capsys, monkeypatch):
    import yaml
    import capture_boot_logs
    from capture_boot_logs import CASES, compose

    from glm_kv.cli import main

    fields, *rest = CASES["h200-tp1-auto-mrr"]
    fields = {k: v for k, v in fields.items() if k != "context_length"}
    monkeypatch.setitem(capture_boot_logs.CASES, "no-context-length", (fields, *rest))
    text, fields = compose("no-context-length")
    log, prof = tmp_path / "boot.log", tmp_path / "profile.yaml"
    log.write_text(text)
    prof.write_text(yaml.safe_dump({"name": "no-context-length", **fields}))
    rc = main(["verify", "--boot-log", str(log), "--profile", str(prof), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, [r for r in out["lines"] if not r["ok"]]
