"""Issue 30 item 2 (DFLASH, DSPARK): ``--speculative-algorithm DFLASH`` / ``DSPARK`` with HiCache, against SGLang 0.5.23's classes.

It used to be refused. SGLang builds the usual host pools (``build_hybrid_mamba_stack``) and, for a draft
with its own KV pool that it cannot pack (``_build_hicache_draft_plan``: ``HiCacheDraftMode.SIDECAR``), a
draft sidecar (``build_full_draft_pools``): an MHA host pool whose token capacity is the host KV pool's
(``host_token_capacity = logical_size``), so the host bytes add host KV tokens x the draft's KV bytes per
token; the auto-size counts the draft's device pool (``hicache_auto_size._draft_bytes``); the sidecar's
host-memory check runs outside the auto-size scope. ``--hicache-size`` is split over the target's KV and
mamba pools only (``_split_hicache_size``).

SGLang's side: test_flags_dflash's oracle (SGLang's own aux config from the draft checkpoint) and
oracle_memory's host group plus the sidecar built by ``build_full_draft_pools`` over the draft worker's
``MHATokenToKVPool`` on meta (W12). glm-kv's side: its plan. Keys: every compare_memory.KEYS host.* key,
the pool sizes and the draft KV bytes per token. Planted errors: the sidecar left out, the sidecar sized by
the device tokens, the draft left out of the auto-size.
"""
from __future__ import annotations

import json

import pytest

GiB = 1 << 30
HOST_KEYS = ("kv_tokens", "kv_bytes", "kv_layers", "indexer_bytes", "mamba_slots", "mamba_bytes", "total_bytes",
             "hicache_ratio", "draft_tokens", "draft_bytes")
CAP_KEYS = ("max_total_num_tokens", "max_mamba_cache_size", "max_running_requests")


def cases(tmp_path) -> list:
    from test_flags_dflash import write_draft
    from test_flags_dspark import write_dspark

    if (tmp_path / "draft").exists():   # written once per test
        return _CASES[str(tmp_path)]
    d5 = write_draft(tmp_path)
    d2 = write_draft(tmp_path, "draft-kv2", dflash_config=None, block_size=8, num_key_value_heads=2)
    dfl, hc = {"speculative_algorithm": "DFLASH"}, {"enable_hierarchical_cache": True}
    _CASES[str(tmp_path)] = out = [
        ("h200-tp8-ratio", {**dfl, **hc, "gpu": "H200", "tp_size": 8, "speculative_draft_model_path": d5,
                            "hicache_ratio": 1.5, "max_running_requests": 64}, 140 * GiB, 40 * GiB),
        ("h200-tp8-size", {**dfl, **hc, "gpu": "H200", "tp_size": 8, "speculative_draft_model_path": d5,
                           "hicache_size": 150, "max_running_requests": 64}, 140 * GiB, 40 * GiB),
        ("h200-tp8-auto", {**dfl, **hc, "gpu": "H200", "tp_size": 8, "speculative_draft_model_path": d5,
                           "host_memory_bytes": 600 * 10**9, "max_running_requests": 64}, 140 * GiB, 40 * GiB),
        ("h200-tp1-default-ratio", {**dfl, **hc, "gpu": "H200", "tp_size": 1, "speculative_draft_model_path": d2,
                                    "max_running_requests": 16}, 140 * GiB, 75 * GiB),
        ("b200-tp4-fp8-auto", {**dfl, **hc, "gpu": "B200", "tp_size": 4, "speculative_draft_model_path": d2,
                               "host_memory_bytes": 1500 * 10**9, "max_running_requests": 32}, 178 * GiB, 60 * GiB),
        ("h200-tp8-dspark-ratio", {"speculative_algorithm": "DSPARK", **hc, "gpu": "H200", "tp_size": 8,
                                   "speculative_draft_model_path": write_dspark(tmp_path), "hicache_ratio": 1.5,
                                   "max_running_requests": 64}, 140 * GiB, 40 * GiB),
        ("b200-tp4-dspark-auto", {"speculative_algorithm": "DSPARK", **hc, "gpu": "B200", "tp_size": 4,
                                  "speculative_draft_model_path": write_dspark(tmp_path, "dspark-2"),
                                  "host_memory_bytes": 1200 * 10**9, "max_running_requests": 32},
         178 * GiB, 60 * GiB),
        ("h200-tp8-size-too-big", {**dfl, **hc, "gpu": "H200", "tp_size": 8, "speculative_draft_model_path": d5,
                                   "hicache_size": 300, "host_memory_bytes": 900 * 10**9,
                                   "max_running_requests": 64}, 140 * GiB, 40 * GiB),
    ]
    return out


_CASES: dict = {}


def sglang_side(prof: dict, pre: int, w: int) -> dict:
    from cpu_workarounds import GPU_FACTS, gpu_memory_bytes
    from test_flags_dflash import dflash_oracle

    sm = GPU_FACTS[prof["gpu"]]["sm"]
    seen: dict = {}
    with dflash_oracle(sm, seen) as om:
        out = om.sglang_memory({**prof, "memory_bytes": gpu_memory_bytes(prof["gpu"]), "sm": sm}, prof,
                               pre_model_load_bytes=pre, weights_bytes=w)
    if "errors" in out:
        return {"errors": out["errors"]["message"]}
    return {**{f"host.{k}": out["host"][k] for k in HOST_KEYS},
            **{f"capacity.{k}": out["capacity"][k] for k in CAP_KEYS}, "draft_kv_bytes_per_token": seen["draft_cell"]}


def glm_kv_side(prof: dict, pre: int, w: int) -> dict:
    from glm_kv.errors import ProfileError
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    try:
        plan = compute_plan(make_profile({**prof, "pre_model_load_bytes": pre, "weights_bytes": w,
                                          "draft_weights_bytes": 0}))
    except ProfileError as e:
        return {"errors": e.rule, "field": e.field}
    d = plan.to_dict()
    return {**{f"host.{k}": d["host"][k] for k in HOST_KEYS},
            **{f"capacity.{k}": d["capacity"][k] for k in CAP_KEYS},
            "draft_kv_bytes_per_token": d["token"]["dflash_draft_bytes_per_token"]}


def mismatches(pid, prof, pre, w) -> list:
    theirs, ours = sglang_side(prof, pre, w), glm_kv_side(prof, pre, w)
    if "errors" in theirs or "errors" in ours:
        ok = "errors" in theirs and "errors" in ours and theirs["errors"] in ours["errors"]
        return [] if ok else [("errors", ours.get("errors"), theirs.get("errors"))]
    return [(k, ours.get(k, "<missing>"), v) for k, v in theirs.items() if ours.get(k, "<missing>") != v] + [
        (k, v, "<missing>") for k, v in ours.items() if k not in theirs]


def test_dflash_with_hicache_is_sglangs(sglang_ready, tmp_path):
    bad = {pid: m for pid, prof, pre, w in cases(tmp_path) if (m := mismatches(pid, prof, pre, w))}
    assert bad == {}, bad


def test_the_sidecar_is_there(sglang_ready, tmp_path):
    pid, prof, pre, w = cases(tmp_path)[0]
    theirs = sglang_side(prof, pre, w)
    assert theirs["host.draft_tokens"] == theirs["host.kv_tokens"] > 0, theirs
    assert theirs["host.draft_bytes"] == theirs["host.kv_tokens"] * theirs["draft_kv_bytes_per_token"], theirs


def _planted(monkeypatch, tmp_path, fn) -> set:
    import glm_kv.ledgers.plan as plan

    real = plan.host_ledger
    monkeypatch.setattr(plan, "host_ledger", lambda *a, **k: fn(real, *a, **k))
    return {pid for pid, prof, pre, w in cases(tmp_path) if mismatches(pid, prof, pre, w)}


def test_planted_sidecar_left_out_is_caught(sglang_ready, tmp_path, monkeypatch):
    found = _planted(monkeypatch, tmp_path, lambda real, *a, **k: real(*a, **{**k, "sidecar_draft_bytes_per_token": 0}))
    # every launch SGLang starts (the too-big one is refused at its KV host pool, before any sidecar)
    assert found == {pid for pid, *_ in cases(tmp_path)} - {"h200-tp8-size-too-big"}, found


def test_planted_sidecar_sized_by_device_tokens_is_caught(sglang_ready, tmp_path, monkeypatch):
    import dataclasses

    def planted(real, model, p, token, slot, device_tokens, *a, **k):
        h = real(model, p, token, slot, device_tokens, *a, **k)
        if not h.draft_tokens:
            return h
        per = h.draft_bytes // h.draft_tokens
        return dataclasses.replace(h, draft_tokens=device_tokens, draft_bytes=device_tokens * per,
                                   total_bytes=h.total_bytes - h.draft_bytes + device_tokens * per)

    found = _planted(monkeypatch, tmp_path, planted)
    assert {"h200-tp8-ratio", "h200-tp8-size", "h200-tp8-auto"} <= found, found


def test_planted_draft_left_out_of_auto_size_is_caught(sglang_ready, tmp_path, monkeypatch):
    import glm_kv.ledgers.host as host

    real = host.auto_ratio
    calls = []

    def planted(device, ram, ranks, *rest):
        calls.append(device)
        return real(device, ram, ranks, *rest)

    monkeypatch.setattr(host, "auto_ratio", planted)
    import glm_kv.ledgers.plan as plan

    real_ledger = plan.host_ledger

    def ledger(model, p, token, slot, device_tokens, *a, **k):
        per = k.get("sidecar_draft_bytes_per_token", 0)
        if not per or device_tokens is None:
            return real_ledger(model, p, token, slot, device_tokens, *a, **k)
        # the auto-size without the draft's device pool: its ratio, then the sidecar as SGLang builds it
        monkeypatch.setattr(host, "auto_ratio", lambda d, ram, ranks, *rest: real(
            d - (device_tokens + token.page_size) * per, ram, ranks, *rest))
        try:
            return real_ledger(model, p, token, slot, device_tokens, *a, **k)
        finally:
            monkeypatch.setattr(host, "auto_ratio", planted)

    monkeypatch.setattr(plan, "host_ledger", ledger)
    found = {pid for pid, prof, pre, w in cases(tmp_path) if mismatches(pid, prof, pre, w)}
    assert {"h200-tp8-auto", "b200-tp4-fp8-auto"} & found, found
    assert "h200-tp8-ratio" not in found and "h200-tp8-size" not in found, found
