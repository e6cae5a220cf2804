"""``python -m benchmarks``: print one JSON object with the five targets, and a short table.

Targets (2-core, 24 GiB machine): plan < 1 ms per profile; sweep >= 1e6 points/s and >= 100x a
plain loop over the scalar plan on the same points; book re-run <= 30 s per profile (all
chapters, kernel start-up included); allocation overhead (measured - ledger bytes) == 0.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np

TARGETS = {"plan_seconds": ("<=", 1e-3), "sweep_points_per_second": (">=", 1e6),
           "sweep_vs_loop_ratio": (">=", 100.0), "book_rerun_seconds_per_profile": ("<=", 30.0),
           "allocation_overhead_bytes": ("==", 0)}


def bench_plan(repeats: int = 2000) -> float:
    """Median seconds of build_plan for the default profile (validation + every ledger)."""
    from glm_kv import build_plan, load_profile

    profile = load_profile("article")
    build_plan(profile)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        build_plan(profile)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _points(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return dict(context_length=rng.integers(1_024, 1_048_577, n),
                max_running_requests=rng.integers(1, 512, n),
                available_bytes=rng.integers(20 * 10**9, 200 * 10**9, n))


def bench_sweep(n: int = 1_000_000, loop_n: int = 20_000) -> tuple[float, float]:
    """Points/s of the sweep on n points; and sweep vs scalar loop on the same loop_n points."""
    from glm_kv import compute_plan, load_profile
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.sweep import sweep

    base = load_profile("worked-example-0.5.23")
    sweep(base, **_points(1000))  # warm-up
    pts = _points(n)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        sweep(base, **pts)
        best = min(best, time.perf_counter() - t)
    pps = n / best
    small = _points(loop_n, seed=1)
    t_sweep = float("inf")
    for _ in range(5):  # best of 5, like the loop's single long run it is warm
        t = time.perf_counter()
        swept = sweep(base, **small)
        t_sweep = min(t_sweep, time.perf_counter() - t)
    d = base.model_dump()
    t = time.perf_counter()
    tokens = []
    for c, m, a in zip(*(small[k].tolist() for k in ("context_length", "max_running_requests", "available_bytes"))):
        plan = compute_plan(make_profile({**d, "context_length": c, "max_running_requests": m,
                                          "available_bytes": a}))
        tokens.append(plan.capacity.max_total_num_tokens)
    t_loop = time.perf_counter() - t
    assert tokens == swept["max_total_num_tokens"].tolist(), "sweep and loop disagree"
    return pps, t_loop / t_sweep


def bench_book(profile: str = "b200-0.5.23") -> float | None:
    """Seconds to execute every chapter for one profile with papermill (kernel start-ups included)."""
    try:
        from glm_kv.book.runner import run_book
    except ImportError:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        run_book([profile], tmp, html=False, progress=False, log=lambda m: None)
        return time.perf_counter() - t


def bench_allocation() -> int | None:
    """Sum over shipped profiles of measured tensor bytes minus ledger bytes (must be 0)."""
    try:
        from glm_kv.tensors.measure import measure_profile
    except ImportError:
        return None
    from glm_kv import load_plan, shipped_profiles

    total = 0
    for name in shipped_profiles():
        report = measure_profile(load_plan(name), device="cpu", full=False)
        for alloc in report.allocations:
            for row in alloc.rows:
                if row.ledger_bytes is not None:
                    total += row.measured_bytes - row.ledger_bytes
    return total


def machine() -> str:
    import torch  # noqa: F401  (the measured path needs it; name its version)

    return (f"{platform.node() or 'host'}: {os.cpu_count()} cores, {platform.machine()}, "
            f"Python {platform.python_version()}, numpy {np.__version__}, torch {torch.__version__}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sweep and fewer repeats")
    ap.add_argument("--skip-book", action="store_true")
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--radix", action="store_true", help="also run benchmarks/radix.py (in .venv-sglang)")
    args = ap.parse_args(argv)
    result: dict = {
        "plan_seconds": bench_plan(200 if args.quick else 2000),
    }
    pps, ratio = bench_sweep(200_000 if args.quick else 1_000_000, 5_000 if args.quick else 20_000)
    result["sweep_points_per_second"] = pps
    result["sweep_vs_loop_ratio"] = ratio
    result["book_rerun_seconds_per_profile"] = None if args.skip_book else bench_book()
    result["allocation_overhead_bytes"] = bench_allocation()
    if args.radix:  # a report, not a target row: see benchmarks/README.md
        from .radix import run_in_sglang_venv
        result["radix"] = run_in_sglang_venv(args.quick)
    result["machine"] = machine()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(f"\n{'metric':34s} {'value':>14s}  target", file=sys.stderr)
    failed = False
    for key, (op, target) in TARGETS.items():
        v = result[key]
        ok = v is not None and {"<=": v <= target, ">=": v >= target, "==": v == target}[op]
        failed |= v is not None and not ok
        shown = "n/a" if v is None else (f"{v:.3g}" if isinstance(v, float) else str(v))
        print(f"{key:34s} {shown:>14s}  {op} {target:g} {'ok' if ok else ('skipped' if v is None else 'MISSED')}",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
