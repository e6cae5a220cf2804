"""Issue 30 item 3: ``host.hicache_ratio`` when ``--hicache-size`` sizes the host pools, against SGLang 0.5.23.

SGLang's ``handle_hicache_ratio_default`` (arg_groups/hicache_hook.py) resolves a ratio on every non-decode
server (the given ``--hicache-ratio``, else 2.0 in cache mode), even when ``--hicache-size`` wins and the
ratio sizes nothing; glm-kv printed null there. SGLang's side: ``oracle_memory.sglang_memory`` (its
resolution pipeline and its host pool group, built on the meta device), whose ``host.hicache_ratio`` is the
ratio SGLang resolved. The host sizes are compared too, so a ratio that leaked into the sizing would show.
Planted error: the old null fails the comparison.
"""
from __future__ import annotations

import pytest

GiB = 1 << 30
L = {"sglang_layout": "0.5.23"}
KEYS = ("hicache_ratio", "kv_tokens", "mamba_slots", "total_bytes")

CASES = [
    ("size-100", {"gpu": "H200", "tp_size": 1, "enable_hierarchical_cache": True, "hicache_size": 100,
                  "available_bytes": 100 * GiB, "max_running_requests": 16}),
    ("size-100-ratio-1.5", {"gpu": "H200", "tp_size": 1, "enable_hierarchical_cache": True, "hicache_size": 100,
                            "hicache_ratio": 1.5, "available_bytes": 100 * GiB, "max_running_requests": 16}),
    ("size-40-mtp", {"gpu": "H200", "tp_size": 2, "enable_hierarchical_cache": True, "hicache_size": 40,
                     "speculative_algorithm": "EAGLE", "available_bytes": 60 * GiB}),
    ("ratio-3", {"gpu": "H200", "tp_size": 1, "enable_hierarchical_cache": True, "hicache_ratio": 3.0,
                 "available_bytes": 100 * GiB, "max_running_requests": 16}),
]


def mismatches(raw: dict) -> list:
    from compare_memory import engine
    from oracle_memory import sglang_memory

    plan, d = engine({**L, **raw})
    assert plan is not None, d
    sg = sglang_memory({**L, **raw}, {**L, **raw}, pre_model_load_bytes=None, weights_bytes=None)
    assert "errors" not in sg, sg
    return [(k, d["host"][k], sg["host"][k]) for k in KEYS if d["host"][k] != sg["host"][k]]


@pytest.mark.parametrize("pid,raw", CASES, ids=[c[0] for c in CASES])
def test_host_ratio_is_sglangs(sglang_ready, pid, raw):
    assert mismatches(raw) == [], pid


def test_sglang_resolves_a_ratio_with_a_size(sglang_ready):
    from oracle_memory import sglang_memory

    raw = {**L, **CASES[0][1]}
    sg = sglang_memory(raw, raw, pre_model_load_bytes=None, weights_bytes=None)
    assert sg["host"]["hicache_ratio"] is not None   # not null == null: SGLang has a ratio here


def test_planted_null_ratio_fails(sglang_ready, monkeypatch):
    import glm_kv.ledgers.host as host

    real = host.HostLedger

    def old_rule(**kw):   # the old contract value: null whenever --hicache-size is given
        if kw.get("hicache_ratio_source") == "unused (hicache_size)":
            kw["hicache_ratio"] = None
        return real(**kw)

    monkeypatch.setattr(host, "HostLedger", old_rule)
    assert mismatches(CASES[0][1]) != []
    assert mismatches(CASES[1][1]) != []
