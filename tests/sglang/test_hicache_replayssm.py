"""Issue 30 item 2 (ReplaySSM): ``--enable-linear-replayssm-spec`` with HiCache, against SGLang 0.5.23's classes.

It used to be refused. SGLang builds the usual host pools (``build_hybrid_mamba_stack``): the host mamba
pool's slot is the KDA state alone (``MambaPoolHost``), and ``--hicache-size`` is split over the device
pools' bytes (``_split_hicache_size``) where the device mamba pool is ``MambaPool.get_kv_size_bytes``: the
state, the replay ring of every slot and, with a draft, the verify conv windows MambaPool still allocates
(``intermediate_conv_window``, layers x (max_num_reqs + 1) x draft tokens x one conv state) though
``_handle_max_mamba_cache`` leaves them out of the budget. The auto-size sums the same bytes.

SGLang's side is compare_memory.compare (oracle_memory: the flags passed to ServerArgs, the pools at full
size on meta, SGLang's own ranks per host); every compare_memory.KEYS key is compared both ways.
Planted errors: the conv windows left out of the host split, and the old refusal.
"""
from __future__ import annotations

import pytest

GiB = 1 << 30
L = {"sglang_layout": "0.5.23", "max_running_requests": 64}
R = {"enable_linear_replayssm_spec": True, "enable_hierarchical_cache": True}
EAGLE = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
         "speculative_num_draft_tokens": 4}
CASES = [
    ("size100-tp1", {"gpu": "H200", "tp_size": 1, **R, "hicache_size": 100, "available_bytes": 100 * GiB}),
    ("ratio-tp1", {"gpu": "H200", "tp_size": 1, **R, "hicache_ratio": 1.5, "available_bytes": 100 * GiB}),
    ("auto-tp8", {"gpu": "H200", "tp_size": 8, **R, "host_memory_bytes": 900 * 10**9, "weights_bytes": 40 * 10**9}),
    ("len32-size-tp2", {"gpu": "H200", "tp_size": 2, **R, "linear_replayssm_cache_len": 32, "hicache_size": 300,
                        "weights_bytes": 60 * 10**9}),
    ("size-tp8-eagle", {"gpu": "H200", "tp_size": 8, **R, "hicache_size": 200, **EAGLE, "weights_bytes": 40 * 10**9}),
    ("size-tp8-eagle-auto-mrr", {"gpu": "H200", "tp_size": 8, **R, "hicache_size": 200, **EAGLE,
                                 "weights_bytes": 40 * 10**9, "max_running_requests": None}),
    ("auto-dpattn-eagle", {"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True, **R,
                           "host_memory_bytes": 600 * 10**9, "speculative_algorithm": "EAGLE",
                           "weights_bytes": 50 * 10**9}),
    ("ratio-tp2-eagle-len32", {"gpu": "H200", "tp_size": 2, **R, "hicache_ratio": 1.3, "speculative_algorithm": "EAGLE",
                               "linear_replayssm_cache_len": 32, "weights_bytes": 70 * 10**9,
                               "max_running_requests": 16}),
]
WITH_DRAFT = {"size-tp8-eagle", "size-tp8-eagle-auto-mrr", "auto-dpattn-eagle", "ratio-tp2-eagle-len32"}


def _mismatches(raw: dict) -> list:
    from compare_memory import compare

    res = compare("replayssm-hicache", {**L, **raw})
    assert res["compared"], raw
    return res["mismatches"]


@pytest.mark.parametrize("pid,raw", CASES, ids=[c[0] for c in CASES])
def test_replayssm_with_hicache_is_sglangs(sglang_ready, pid, raw):
    bad = _mismatches(raw)
    assert bad == [], (pid, bad)


def test_the_host_pools_are_compared(sglang_ready):
    from compare_memory import compare

    res = compare("x", {**L, **CASES[0][1]})
    assert {"host.kv_tokens", "host.mamba_slots", "host.total_bytes", "capacity.mamba_pool_bytes"} <= set(
        res["compared"]), res


def test_planted_conv_windows_left_out_is_caught(sglang_ready, monkeypatch):
    import glm_kv.ledgers.plan as plan

    monkeypatch.setattr(plan, "replayssm_conv_window_bytes", lambda args, request, reqs: 0)
    failing = {pid for pid, raw in CASES if _mismatches(raw)}
    # the split moves with it (auto-size only where the ratio stays below its 2.0 cap)
    assert {"size-tp8-eagle", "size-tp8-eagle-auto-mrr"} <= failing <= WITH_DRAFT, failing


def test_planted_old_refusal_is_caught(sglang_ready, monkeypatch):
    import glm_kv.inputs.resolve as resolve
    from glm_kv.errors import ProfileError

    real = resolve.validate_replayssm_spec

    def refuse(p, draft_tokens, *rest):
        real(p, draft_tokens, *rest)
        if p.enable_linear_replayssm_spec and p.enable_hierarchical_cache:
            raise ProfileError("enable_hierarchical_cache", "not modelled")

    monkeypatch.setattr(resolve, "validate_replayssm_spec", refuse)
    assert all(any(m["key"] == "errors" for m in _mismatches(raw)) for _, raw in CASES)
