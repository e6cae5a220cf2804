"""The vectorised sweep equals the scalar plan at every point of a large random sample."""

import numpy as np
import pandas as pd
import pytest

from glm_kv import ProfileError, compute_plan, load_profile
from glm_kv.inputs.profile import make_profile
from glm_kv.ledgers.sweep import sweep
from tests.pytest_glm_kv import run_seed

COLUMNS = ("cell_size_bytes", "state_slot_bytes", "slots_per_request", "tail_bytes",
           "max_mamba_cache_size_resolved", "max_total_num_tokens", "max_running_requests_resolved",
           "binding_limit")


def _random_points(rng, n):
    pick = lambda xs: [xs[i] for i in rng.integers(0, len(xs), n)]  # noqa: E731
    return dict(
        sglang_layout=pick(["article", "0.5.23"]),
        gpu=pick(["H100", "H200", "B200", "B300"]),
        kv_cache_dtype=pick(["auto", "bfloat16", "fp8_e4m3"]),
        dsa_decode_backend=pick([None, None, "trtllm", "flashmla_kv", "tilelang"]),
        mamba_ssm_dtype=pick(["float32", "bfloat16"]),
        tp_size=pick([1, 2, 4, 8, 3, 16]),
        dp_size=pick([1, 2, 4, 8]),
        enable_dp_attention=pick([False, True]),
        disable_overlap_schedule=pick([False, True]),
        disable_radix_cache=pick([False, False, False, True]),
        speculative_algorithm=pick([None, None, "EAGLE"]),
        max_mamba_cache_size=pick([None, None, None, 200, 1000]),
        max_total_tokens=pick([None, None, 500_000]),
        weights_bytes=pick([None, 40_000_000_000]),
        context_length=pick([4096, 32768, 131072, 1048576]),
        max_running_requests=pick([None, 1, 8, 64, 200, 3000]),
        available_bytes=pick([None] + list(rng.integers(1, 300, 20) * 10**9)),
    )


def _scalar(base, point):
    try:
        plan = compute_plan(make_profile({**base, **point}))
    except ProfileError as e:
        return str(e)
    cap = plan.capacity
    return {"cell_size_bytes": plan.token.cell_size_bytes, "state_slot_bytes": plan.request.state_slot_bytes,
            "slots_per_request": plan.request.slots_per_request, "tail_bytes": plan.tail.bytes,
            "max_mamba_cache_size_resolved": cap.max_mamba_cache_size if cap else None,
            "max_total_num_tokens": cap.max_total_num_tokens if cap else None,
            "max_running_requests_resolved": cap.max_running_requests_per_worker if cap else None,
            "binding_limit": cap.binding_limit if cap else None}


def test_sweep_equals_scalar_plan_on_random_sample():
    seed = run_seed()
    rng = np.random.default_rng(seed)
    n = 3000
    params = _random_points(rng, n)
    df = sweep("article", **params)
    base = load_profile("article").model_dump()
    checked = errors = 0
    for i in range(n):
        point = {k: (v[i].item() if isinstance(v[i], np.generic) else v[i]) for k, v in params.items()}
        expect = _scalar(base, point)
        row = df.iloc[i]
        if isinstance(expect, str):
            # one kernel, one text: the sweep refuses with the scalar plan's own words
            assert row["error"] == expect, (point, row["error"], expect)
            errors += 1
            continue
        assert pd.isna(row["error"]), (point, row["error"])
        for col in COLUMNS:
            got = row[col]
            got = None if pd.isna(got) else (got if col == "binding_limit" else int(got))
            assert got == expect[col], (col, point, got, expect[col])
        checked += 1
    assert checked > n // 4 and errors > 0  # both valid and refused points were exercised


def test_grid_and_zip():
    g = sweep("article", grid=True, context_length=[1024, 2048], tp_size=[1, 2, 4])
    assert len(g) == 6
    z = sweep("article", context_length=[1024, 2048, 4096], max_running_requests=8)
    assert len(z) == 3 and (z["requests_per_worker"] == 8).all()
    assert list(z["token_ledger_bytes_per_request"]) == [7260 * 1024, 7260 * 2048, 7260 * 4096]


def test_bad_sweep_axis():
    with pytest.raises(ProfileError):
        sweep("article", frobnicate=[1, 2])
    with pytest.raises(ProfileError):
        sweep("article", context_length=[1, 2], tp_size=[1, 2, 4])


def test_fits_and_limit():
    df = sweep("worked-example-0.5.23", grid=True, max_running_requests=[8, 64, 128],
               context_length=[8_192, 131_072, 1_048_576])
    by = {(r.max_running_requests, r.context_length): r.limit for r in df.itertuples()}
    # 343 slots // 5 = 68 requests at most; 9,170,688 tokens in the pool (sglang-0.5.23.md)
    assert by[(8, 8_192)] == "fits" and by[(64, 131_072)] == "fits" and by[(64, 1_048_576)] == "tokens"
    assert by[(128, 8_192)] == "mamba" and by[(8, 1_048_576)] == "fits"
    assert (df["fits"] == (df["limit"] == "fits")).all()


def test_nothing_left_after_the_mamba_pool_is_refused_alike_with_sglangs_words():
    """max_mamba_cache_size too large for the rest: refusal 3. Where the rest comes from the weights the plan and
    the sweep quote SGLang's "Loaded weights" message with the same readings; where available_bytes is given (weights too),
    SGLang never reads the GPU, so neither quotes it."""
    base = load_profile("article").model_dump()
    points = dict(sglang_layout=["0.5.23"] * 3, gpu=["H200"] * 3, max_mamba_cache_size=[50_000, 60_000, 50_000],
                  weights_bytes=[40_000_000_000, 40_000_000_000, 40_000_000_000],
                  available_bytes=[None, None, 100_000_000_000])
    df = sweep("article", **points)
    said = []
    for i in range(3):
        expect = _scalar(base, {k: v[i] for k, v in points.items()})
        assert isinstance(expect, str) and expect.startswith("max_mamba_cache_size: its state slots leave nothing")
        assert df.iloc[i]["error"] == expect, (i, df.iloc[i]["error"], expect)
        said.append("SGLang 0.5.23 says: \"Loaded weights leave no GPU memory" in expect)
    assert said == [True, True, False]
