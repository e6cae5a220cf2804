"""``python -m benchmarks``: glm-kv's speed targets, measured side by side in one run.

Timings on a shared machine are noisy, so every target that can be is a ratio of two things
measured in the same run (the load moves both): the CLI against a bare Python start, all books
against one book. ``--check`` exits 1 when a measured target is missed (a target that could not be
measured, e.g. without ``benchmarks/cli_startup.py``, is reported as "not measured" and fails
nothing). ``--readme`` rewrites the figures section of ``benchmarks/README.md``. Not part of
``make test``: nothing in ``tests/`` times anything.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = Path(__file__).resolve().with_name("README.md")

# name: (comparison, target, unit, what)
TARGETS = {
    "cli_vs_bare_python": ("<=", 6.0, "x", "`glm-kv plan --json` whole process / bare `python -c 'import json'` "
                                           "(paired medians, benchmarks/cli_startup.py)"),
    "all_books_vs_one_book": ("<=", 6.5, "x", "`glm-kv book` for every shipped profile / one profile's book, "
                                              "HTML included, default --jobs, same run"),
    "one_book_seconds": ("<=", 20.0, "s", "one profile's book (every notebook executed + HTML), default --jobs"),
    "plan_seconds": ("<=", 1e-3, "s", "in-process `build_plan(profile)`, median of 2,000"),
    "sweep_points_per_second": (">=", 1e6, "/s", "`sweep` over 1e6 random points, best of 3"),
    "sweep_vs_loop_ratio": (">=", 100.0, "x", "the same 20,000 points: scalar loop / one sweep (asserted equal)"),
    "allocation_overhead_bytes": ("==", 0, "B", "measured tensor bytes - ledger bytes, every shipped profile"),
}
BOOK_PROFILE = "article"  # the default profile (`make book`)
BEGIN, END = "<!-- figures:begin (python -m benchmarks --readme) -->", "<!-- figures:end -->"


# ------------------------------------------------------------------------------------------------
# Measurements
# ------------------------------------------------------------------------------------------------

def bench_cli() -> dict | None:
    """``benchmarks/cli_startup.py``'s paired medians, when that module exists."""
    try:
        mod = importlib.import_module("benchmarks.cli_startup")
    except ImportError:
        return None
    return mod.measure(repeats=15)


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
    import numpy as np

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
    for _ in range(5):
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


def bench_books(profile: str = BOOK_PROFILE, jobs: int | None = None) -> dict:
    """One profile's book, then every shipped profile's, each into a fresh folder, same run.

    The caches in ``_build/.cache`` (kept between runs) are filled first, so neither side pays a
    one-off: vl-convert's Vega bundle (7-10 s) and the calculator's data (``calculator.build_data``,
    kept under the digest of glm_kv's files: the first book after any change to the package
    computes it). That one-off is measured on its own, in this process, as
    ``calculator_data_seconds`` (a report, no target).
    """
    from glm_kv.book import calculator
    from glm_kv.book.parallel import bundle_cache_dir
    from glm_kv.book.runner import run_book
    from glm_kv.book.sphinx_server import ensure_bundle
    from glm_kv.inputs.profile import shipped_profiles

    ensure_bundle(bundle_cache_dir(ROOT))
    out: dict = {"book_profile": profile, "jobs": jobs or os.cpu_count()}
    t = time.perf_counter()
    data = calculator.compute_data()
    out["calculator_data_seconds"] = time.perf_counter() - t
    calculator.keep(bundle_cache_dir(ROOT).parent, data)
    with tempfile.TemporaryDirectory() as tmp:
        for key, names in (("one_book", [profile]), ("all_books", shipped_profiles())):
            c, t = cpu_seconds(), time.perf_counter()
            run_book(names, Path(tmp) / key, root=ROOT, progress=False, jobs=jobs, log=lambda m: None)
            out[f"{key}_seconds"] = time.perf_counter() - t
            out[f"{key}_cpu_seconds"] = cpu_seconds() - c
        out["profiles"] = len(shipped_profiles())
    out["all_books_vs_one_book"] = out["all_books_seconds"] / out["one_book_seconds"]
    out["all_books_vs_one_book_cpu"] = out["all_books_cpu_seconds"] / out["one_book_cpu_seconds"]
    return out


def cpu_seconds() -> float:
    """CPU seconds of this process and its reaped children (kernels, the Sphinx server and its
    forks): what the books cost whatever else the machine runs."""
    import resource

    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


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


def machine() -> dict:
    """nproc, CPU model, memory, versions, date: what the figures were measured on."""
    model = platform.processor() or platform.machine()
    mem = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.0f} GiB"
    except OSError:
        pass
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"nproc": nproc, "cpu": model, "memory": mem, "python": platform.python_version(),
            "date": _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")}


def load() -> str:
    """The 1/5/15-minute load averages (the figures are only as quiet as the machine)."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------

def verdicts(result: dict) -> dict[str, str]:
    """``ok``, ``MISSED`` or ``not measured`` per target."""
    out = {}
    for key, (op, target, _, _) in TARGETS.items():
        v = result.get(key)
        if v is None:
            out[key] = "not measured"
        else:
            ok = {"<=": v <= target, ">=": v >= target, "==": v == target}[op]
            out[key] = "ok" if ok else "MISSED"
    return out


def _shown(key: str, v) -> str:
    if v is None:
        return "not measured"
    if key == "plan_seconds":
        return f"{v * 1e3:.3f} ms"
    if key == "sweep_points_per_second":
        return f"{v:.3g}"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def table(result: dict) -> str:
    """The figures as a Markdown table (also printed on stderr)."""
    ok = verdicts(result)
    rows = ["| target | measured | goal | verdict | what |", "|---|---|---|---|---|"]
    for key, (op, target, unit, what) in TARGETS.items():
        goal = f"{op} {target * 1e3:g} ms" if key == "plan_seconds" else f"{op} {target:g}{unit if unit != 'B' else ' B'}"
        rows.append(f"| `{key}` | {_shown(key, result.get(key))} | {goal} | {ok[key]} | {what} |")
    return "\n".join(rows)


def write_readme(result: dict, path: Path = README) -> None:
    """Replace the figures section of the README (between the markers) with this run's."""
    m = result["machine"]
    extra = []
    if result.get("one_book_seconds") is not None:
        extra.append(f"Books: one profile (`{result['book_profile']}`) {result['one_book_seconds']:.1f} s "
                     f"({result['one_book_cpu_seconds']:.1f} CPU s), all {result['profiles']} shipped profiles "
                     f"{result['all_books_seconds']:.1f} s ({result['all_books_cpu_seconds']:.1f} CPU s; "
                     f"{result['all_books_vs_one_book_cpu']:.2f} x in CPU), --jobs {result['jobs']}.")
    if result.get("cli") is not None:
        c = result["cli"]
        extra.append(f"CLI: `glm-kv plan --json` {c['cli_s'] * 1e3:.0f} ms, bare Python {c['bare_s'] * 1e3:.0f} ms.")
    block = "\n".join([BEGIN, f"Latest run: {m['date']}, {m['nproc']} cores ({m['cpu']}), {m['memory']}, "
                       f"Python {m['python']}; load average (1/5/15 min) {result['load_before']} before, "
                       f"{result['load_after']} after.", "", table(result), "", *extra, END])
    text = path.read_text() if path.is_file() else ""
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a measured target is missed")
    ap.add_argument("--quick", action="store_true", help="smaller sweep and fewer repeats")
    ap.add_argument("--skip-book", action="store_true", help="leave out the two book builds (minutes)")
    ap.add_argument("--jobs", type=int, default=None, help="--jobs for the books (default: the number of cores)")
    ap.add_argument("--book-profile", default=BOOK_PROFILE, help="the profile of the one-book run")
    ap.add_argument("--readme", action="store_true", help="write the figures into benchmarks/README.md")
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--radix", action="store_true", help="also run benchmarks/radix.py (in .venv-sglang)")
    args = ap.parse_args(argv)
    result: dict = {"machine": machine(), "load_before": load()}
    cli = bench_cli()
    result["cli"] = cli
    result["cli_vs_bare_python"] = None if cli is None else cli["ratio"]
    result["plan_seconds"] = bench_plan(200 if args.quick else 2000)
    pps, ratio = bench_sweep(200_000 if args.quick else 1_000_000, 5_000 if args.quick else 20_000)
    result["sweep_points_per_second"] = pps
    result["sweep_vs_loop_ratio"] = ratio
    result["allocation_overhead_bytes"] = bench_allocation()
    if args.radix:  # a report, not a target row (benchmarks/radix.py, another branch's)
        try:
            from .radix import run_in_sglang_venv
        except ImportError:
            result["radix"] = None
        else:
            result["radix"] = run_in_sglang_venv(args.quick)
    if not args.skip_book:
        result.update(bench_books(args.book_profile, args.jobs))
    result["load_after"] = load()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print("\n" + table(result), file=sys.stderr)
    if args.readme:
        write_readme(result)
    missed = [k for k, v in verdicts(result).items() if v == "MISSED"]
    if missed:
        print(f"missed: {', '.join(missed)}", file=sys.stderr)
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
