"""A PD decode server's raised MambaPool in the ``--hicache-size`` split, against SGLang 0.5.23's classes.

On a decode server ``HybridMambaDecodeReqToTokenPool`` (disaggregation/decode.py) raises MambaPool to
``(requests + pre-allocated rows) x (1 + tracking slots)`` when the budget's ``max_mamba_cache_size`` is smaller,
and ``_split_hicache_size`` (mem_cache/hybrid_cache/hybrid_pool_assembler.py) splits ``--hicache-size`` over the
device pools' own bytes (``MambaPool.get_kv_size_bytes``): the raised slots, each with its replay ring under
``--enable-linear-replayssm-spec``, move bytes from the host KV pool to the host state pool. Found by a random
launch (seed 389378802, launch 20): glm-kv split by the budget's slots (host mamba slots 410, SGLang 451).

SGLang's side is compare_memory.compare (oracle_memory: the flags passed to ServerArgs, the decode request pool
and the host pool group built by SGLang at full size on meta); every compared key both ways.
Planted error: the split read without the raised slots.
"""
from __future__ import annotations

import pytest

GiB = 1 << 30
D = {"sglang_layout": "0.5.23", "gpu": "H200", "tp_size": 1, "disaggregation_mode": "decode",
     "disaggregation_decode_enable_radix_cache": True, "enable_hierarchical_cache": True,
     "max_running_requests": 32, "host_memory_bytes": 1695 * 10**9}
CASES = [   # a small rest so that the budget's state slots bind and the decode pool raises them
    ("replayssm-extra17", {**D, "disaggregation_decode_extra_slots": 17, "enable_linear_replayssm_spec": True,
                           "disable_overlap_schedule": True, "hicache_size": 130, "available_bytes": 21208761791}),
    ("extra30-no-overlap", {**D, "disaggregation_decode_extra_slots": 30, "disable_overlap_schedule": True,
                            "hicache_size": 130, "available_bytes": 21208761791}),
    ("extra-default-overlap", {**D, "hicache_size": 90, "available_bytes": 24 * GiB}),
    ("not-raised", {**D, "max_running_requests": 64, "hicache_size": 130, "available_bytes": 60 * GiB}),
]
RAISED = {"replayssm-extra17", "extra30-no-overlap", "extra-default-overlap"}


def _mismatches(raw: dict) -> list:
    from compare_memory import compare

    res = compare("decode-raised", raw)
    assert {"host.mamba_slots", "host.kv_tokens"} <= set(res["compared"]), res
    return res["mismatches"]


@pytest.mark.parametrize("pid,raw", CASES, ids=[c[0] for c in CASES])
def test_decode_hicache_size_split_is_sglangs(sglang_ready, pid, raw):
    assert _mismatches(raw) == [], pid


def test_the_cases_raise_the_pool(sglang_ready):
    """The cases mean what they say: glm-kv's own note names the raise exactly where RAISED says."""
    from compare_memory import engine

    raised = {pid for pid, raw in CASES if any("MambaPool holds" in n for n in engine(raw)[0].notes)}
    assert raised == RAISED, raised


def test_planted_split_without_the_raised_slots_is_caught(sglang_ready, monkeypatch):
    import glm_kv.ledgers.plan as plan

    real = plan.host_ledger

    def budget_slots(layers, p, tok, slot, tokens, pool_slots, *, mamba_device_bytes=None, **kw):
        # the old reading: the budget's MambaPool bytes, whatever the decode pool raised it to
        return real(layers, p, tok, slot, tokens, pool_slots, mamba_device_bytes=None, **kw)

    monkeypatch.setattr(plan, "host_ledger", budget_slots)
    failing = {pid for pid, raw in CASES if _mismatches(raw)}
    assert failing and failing <= RAISED, failing
