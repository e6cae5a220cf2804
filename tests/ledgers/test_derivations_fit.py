"""The plan contract's requests that fit (``capacity.requests_fit_at``) and the book's shown
derivation (``derivations.requests_fit_expr`` / ``fit_binding``) are one formula in two forms:
held equal on random inputs, scalars and sweep arrays, and both against hand-derived cases."""
from __future__ import annotations

import random

import numpy as np
import pytest

from glm_kv.ledgers.capacity import requests_fit_at
from glm_kv.ledgers.derivations import fit_binding, requests_fit_expr
from tests.pytest_glm_kv import run_seed


@pytest.mark.parametrize("args,want", [
    ((8, 3_557_888, 1_048_576, 251, 5), (3, "tokens")),      # h200-0.5.23 at 1M: 3 < 8 < 50
    ((8, 3_557_888, 131_072, 251, 5), (8, "requested")),     # at 128K: 27 tokens-wise, 50 state-wise
    ((64, 9_000_000, 4096, 100, 5), (20, "mamba")),          # 100 // 5 = 20 < 64 < 2197
    ((5, 50, 10, 25, 5), (5, "requested")),                  # a three-way tie reports the first
])
def test_hand_derived(args, want):
    assert requests_fit_at(*args) == want
    expr = requests_fit_expr(*args)
    assert (int(expr.value()), fit_binding(expr)) == want


def test_scalar_and_array_forms_agree():
    rng = random.Random(run_seed())
    rows = [(rng.randint(1, 4096), rng.randint(1, 1 << 26), rng.choice([1 << k for k in range(10, 21)]),
             rng.randint(1, 4096), rng.choice([1, 3, 4, 5])) for _ in range(500)]
    cols = [np.array(c, dtype=np.int64) for c in zip(*rows)]
    expr = requests_fit_expr(*cols)
    values, binds = expr.value(), fit_binding(expr)
    for i, r in enumerate(rows):
        assert requests_fit_at(*r) == (int(values[i]), binds[i]), r
