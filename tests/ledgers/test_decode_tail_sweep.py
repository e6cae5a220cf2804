"""Issue 30 item 5 in the sweep: a PD decode server's compress-tail rows in ``sweep`` are the scalar plan's
(which tests/sglang/test_decode_extra_slots.py checks against SGLang 0.5.23's own decode pools), on per-worker
caps on both sides of 32, DP attention, replicas and an automatic cap. Planted error: the sweep without the
decode extra slots (the old +2 rows) fails it.
"""
from __future__ import annotations

from glm_kv.inputs.profile import load_profile
from glm_kv.ledgers.plan import compute_plan
from glm_kv.ledgers.sweep import sweep

POINTS = {"max_running_requests": [8, 32, 33, 64, 64, 64, None],
          "tp_size": [2, 2, 2, 2, 4, 2, 2],
          "dp_size": [1, 1, 1, 1, 2, 2, 1],
          "enable_dp_attention": [False, False, False, False, True, False, False]}


def _mismatches(**given) -> list:
    base = load_profile("h200-0.5.23").model_copy(update={"disaggregation_mode": "decode",
                                                          "available_bytes": 60 << 30, **given})
    df = sweep(base, **POINTS)
    out = []
    for i in range(len(df)):
        p = base.model_copy(update={k: v[i] for k, v in POINTS.items()})
        plan = compute_plan(p)
        if int(df["tail_rows"].iloc[i]) != plan.tail.rows:
            out.append((i, int(df["tail_rows"].iloc[i]), plan.tail.rows))
    return out


def test_sweep_decode_tail_rows_are_the_plans():
    assert _mismatches() == []


def test_sweep_decode_points_reserve_extra_slots():
    base = load_profile("h200-0.5.23").model_copy(update={"disaggregation_mode": "decode",
                                                          "available_bytes": 60 << 30})
    extra = [compute_plan(base.model_copy(update={k: v[i] for k, v in POINTS.items()})).args.decode_extra_slots
             for i in range(len(POINTS["tp_size"]))]
    assert extra == [16, 64, 0, 0, 64, 64, 0]   # 2 x per worker at <= 32 per worker (pd_disaggregation_hook)


def test_planted_sweep_without_extra_slots_fails(monkeypatch):
    import glm_kv.ledgers.sweep as sw

    monkeypatch.setattr(sw, "DECODE_EXTRA_SLOTS_PER_REQUEST", 0)   # the old rule: + 2 rows only
    assert _mismatches() != []


GIVEN = ({"disaggregation_decode_extra_slots": 5}, {"disaggregation_decode_extra_slots": 0},
         {"disaggregation_decode_extra_slots": 100})


def test_sweep_takes_a_given_extra_slots_value():
    """--disaggregation-decode-extra-slots N in the profile (issue 30): every point reserves N rows, as the plan."""
    for given in GIVEN:
        assert _mismatches(**given) == [], given


def test_planted_sweep_ignoring_the_given_extra_slots_fails(monkeypatch):
    import glm_kv.ledgers.sweep as sw

    real = sw._combo_row
    monkeypatch.setattr(sw, "_combo_row", lambda base, combo: {**real(base, combo), "_extra_given": -1})
    assert all(_mismatches(**given) != [] for given in GIVEN)
