"""scripts/mutants.py's sampling and interval arithmetic (the numbers benchmarks/mutants.md reports).

Expected intervals are the published ones: Newcombe (1998), "Two-sided confidence intervals for
the single proportion", Statistics in Medicine 17:857-872, Table I, method 3 (Wilson score interval
without continuity correction). The stratified examples are worked by hand in the docstrings.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mutants():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import mutants as m
    finally:
        sys.path.pop(0)
    return m


@pytest.mark.parametrize("k,n,lo,hi", [
    (81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718),
])
def test_wilson_matches_newcombe_table(mutants, k, n, lo, hi):
    got = mutants.wilson(k, n)
    assert (round(got[0], 4), round(got[1], 4)) == (lo, hi)


def test_stratified_weights_modules_by_size(mutants):
    """Module A: 100 mutants, 10 tried, 9 killed; module B: 1,000 mutants, 10 tried, all killed.
    Estimate = 100/1100 x 0.9 + 1000/1100 x 1 = 1090/1100 = 0.990909; variance: only A's stratum,
    (1/11)^2 x 0.9 x 0.1 / 9 x (1 - 10/100) = 7.438e-5, half width 1.96 x 0.008624 = 0.0169; the
    pooled Wilson interval of 19/20 (0.7639, 0.9911) is wider below, so it sets the low end; the high
    end is capped at 1. A module with nothing tried is left out of the weights."""
    est, lo, hi = mutants.stratified([(100, 10, 9), (1000, 10, 10), (5000, 0, 0)])
    assert round(est, 6) == 0.990909
    assert (round(lo, 4), hi) == (0.7639, 1.0)
    assert mutants.stratified([(10, 0, 0)]) is None
    # All strata tried in full: no sampling error left beyond the pooled Wilson bound.
    est, lo, hi = mutants.stratified([(4, 4, 2), (4, 4, 4)])
    assert est == 0.75 and (round(lo, 4), round(hi, 4)) == tuple(round(x, 4) for x in mutants.wilson(6, 8))


def test_stratified_variance_sets_the_low_end(mutants):
    """A big module sampled thinly next to a small one tried in full: A 10,000 mutants, 20 tried,
    15 killed; B 20 of 20 killed. W_A = 10,000/10,020 = 0.998004; estimate 0.998004 x 0.75 +
    0.001996 x 1 = 0.750499; variance W_A^2 x 0.75 x 0.25 / 19 x (1 - 20/10,000) = 0.0098094, half
    width 1.96 x 0.099043 = 0.194123: (0.556376, 0.944622). The pooled 35/40 Wilson interval
    (0.738876, 0.945406) would hide A's sampling error below, so the low end is the stratified one
    and the high end the Wilson one."""
    est, lo, hi = mutants.stratified([(10_000, 20, 15), (20, 20, 20)])
    assert (round(est, 6), round(lo, 6), round(hi, 6)) == (0.750499, 0.556376, 0.945406)


def test_sample_is_stratified_and_a_larger_one_extends_it(mutants, monkeypatch):
    """Shares proportional to module size (1,000 vs 100 mutants: 100 -> 91 and 9), at least
    ``floor`` each; the same seed draws the same names, and a larger sample keeps the smaller
    one as a prefix per module (so a round cut short can be extended)."""
    names = {"ledgers.big": [f"b{i}" for i in range(1000)], "ledgers.small": [f"s{i}" for i in range(100)]}
    monkeypatch.setattr(mutants, "all_mutants", lambda modules: {m: names[m] for m in modules})
    small = mutants.draw_sample(list(names), 100, seed=7, floor=4)
    assert {m: len(v) for m, v in small.items()} == {"ledgers.big": 91, "ledgers.small": 9}
    assert {m: len(v) for m, v in mutants.draw_sample(list(names), 20, 7, floor=4).items()} == {
        "ledgers.big": 18, "ledgers.small": 4}
    big = mutants.draw_sample(list(names), 300, seed=7, floor=8)
    assert small == mutants.draw_sample(list(names), 100, seed=7, floor=4)
    for m in names:
        assert big[m][:len(small[m])] == small[m] and len(set(big[m])) == len(big[m])
    assert mutants.draw_sample(list(names), 100, seed=8, floor=4) != small


def test_all_modules_covers_every_module_of_inputs_and_ledgers(mutants):
    """`make mutants SAMPLE=...` samples "all": every .py of glm_kv/inputs and glm_kv/ledgers but the
    package __init__s, listed from the file system (not from the script), each once."""
    files = {f"{pkg}.{p.stem}" for pkg in ("inputs", "ledgers")
             for p in (ROOT / "glm_kv" / pkg).glob("*.py") if p.stem != "__init__"}
    assert len(mutants.ALL_MODULES) == len(set(mutants.ALL_MODULES))
    assert set(mutants.ALL_MODULES) == files
    assert {mutants._module(m.split(".")[1]) for m in files} == files
