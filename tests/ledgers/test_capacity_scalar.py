"""The plan's scalar branch of the sizing kernel equals the sweep's numpy branch (issue 23).

``glm-kv plan`` sizes one point in plain Python (no numpy import at start-up); the sweep and
``advise`` size many with numpy. Both must give the same integers for every input, refusals
included: random points drawn around the real profiles' magnitudes and at the edges (tiny and
huge memory, MTP, DP attention, caps set and unset, the radix cache off). A refused point
compares its error code only (past the failed check numpy's int64 may wrap; Python's ints do not). The float32 cast of
``free_reading_gib`` is checked against numpy's the same way.
"""
from __future__ import annotations

import math
import os
import random

import numpy as np
import pytest

from glm_kv.ledgers import capacity, memory
from glm_kv.units import GiB

SEED = int(os.environ.get("GLM_KV_SEED") or random.SystemRandom().randrange(2**32))


def _point(rng: random.Random) -> tuple[float, dict]:
    slot = rng.choice([147_619_840, 73_809_920, 18_452_480, rng.randint(1, 2**28), 1])
    ratio = rng.choice([1, 2, 4, 5, 9, rng.randint(1, 64)])
    kw = dict(
        slot=slot, slots_per_request=ratio,
        cell_size=rng.choice([7260, 6171, 9000, rng.randint(1, 2**16)]),
        page_size=rng.choice([1, 64, 256, rng.randint(1, 4096)]),
        draft_tokens=rng.choice([0, 0, 4, rng.randint(1, 64)]),
        attn_dp=rng.choice([1, 1, 2, 4, 8, rng.randint(1, 64)]),
        mamba_full_memory_ratio=rng.choice([0.9, 1e-9, 1000.0, rng.uniform(1e-3, 50)]),
        max_mamba_cache_size=rng.choice([math.nan, math.nan, float(rng.randint(1, 2**24))]),
        max_total_tokens=rng.choice([math.nan, math.nan, float(rng.randint(1, 2**40))]),
        radix_off=rng.random() < 0.2, requests_per_worker=rng.choice([1, 8, 64, rng.randint(1, 2**24)]),
        has_requests=rng.random() < 0.7, context_length=rng.choice([1, 131072, 1_048_576, rng.randint(1, 2**31)]),
    )
    rest = rng.choice([100.0, rng.uniform(-5, 200), rng.uniform(0, 1e-3), rng.uniform(0, 2**20),
                       rng.randint(1, 2**50) / GiB])
    return rest, kw


def _first_difference(n: int) -> tuple[str | None, dict]:
    """Draw ``n`` points; the first where the branches differ (as a message), and the counts."""
    rng = random.Random(SEED)
    seen = {"ok": 0, "refused": 0}
    for i in range(n):
        rest, kw = _point(rng)
        with np.errstate(all="ignore"):
            want = {k: int(v) for k, v in capacity._pool_sizes_array(rest, **kw).items()}
        got = capacity.pool_sizes(rest, **kw, scalar=True)
        if want["error"]:   # refused: the numbers after the failed check are not used (numpy's may wrap)
            got, want = {"error": got["error"]}, {"error": want["error"]}
        if got != want or not all(type(v) is int for v in got.values()):
            return f"seed {SEED}, point {i}: rest_gib={rest!r} {kw}\nscalar {got}\nnumpy  {want}", seen
        seen["refused" if want["error"] else "ok"] += 1
    return None, seen


def test_scalar_branch_equals_numpy_branch_on_random_points():
    diff, seen = _first_difference(20_000)
    assert diff is None, diff
    assert min(seen.values()) > 1000, (SEED, seen)   # both sides of every branch were drawn


def test_the_identity_check_catches_a_planted_difference(monkeypatch):
    """Plant an off-by-one in the scalar branch's floor division: the check reports a point."""
    real = capacity._floor_div
    monkeypatch.setattr(capacity, "_floor_div", lambda a, b: real(a, b) + 1)
    diff, _ = _first_difference(20_000)
    assert diff is not None and f"seed {SEED}" in diff


def test_float32_cast_equals_numpy():
    rng = random.Random(SEED + 1)
    for _ in range(20_000):
        x = rng.choice([rng.randint(0, 2**50), rng.randint(0, 2**60), rng.random() * 2**40])
        assert memory.float32(x) == float(np.float32(x)), (SEED, x)
