#!/usr/bin/env python3
"""``make test``: run every test group, even after one fails, and report each one.

A user who sees one failure must also learn what else is broken, so no group stops the others.
Each group gets the run's seed (``GLM_KV_SEED``: drawn fresh unless ``--seed``/``SEED=`` is
given), printed at the top and in the summary. The summary has one line per group::

    PASS  sglang      412 passed, 3 skipped                   96.1 s
    PASS  vllm        23 passed, 1 xfailed                     310.4 s
    FAIL  unit        1,210 passed, 1 failed                   402.7 s

and the exit status is non-zero when any group failed.

Usage: python scripts/test_groups.py [--seed N] [--only GROUP ...] [--list]
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(os.environ.get("GLM_KV_VENV", ROOT / ".venv")) / "bin"
SGLANG_BIN = ROOT / ".venv-sglang" / "bin"
JOBS = os.environ.get("GLM_KV_TEST_JOBS", str(max(1, min(2, os.cpu_count() or 1))))


@dataclass(frozen=True)
class Group:
    name: str
    what: str
    steps: tuple[tuple[str, ...], ...]  # commands run in order; the group stops at its first failing step
    always: tuple[tuple[str, ...], ...] = ()  # run after the steps even when one failed (reports)
    failure: list[str] = field(default_factory=list)  # the first failing step and its last lines (summary)


def groups() -> list[Group]:
    py, sg = str(VENV_BIN / "python"), str(SGLANG_BIN / "python")
    xdist = ("-n", JOBS) if JOBS != "1" else ()
    return [
        Group("sglang", "SGLang 0.5.23's own classes against glm-kv (its own venv)", (
            # no result of an earlier run may reach this run's report (plain Python: before the venv)
            (sys.executable, "tests/sglang/agreement_report.py", "--clean"),
            ("bash", "scripts/sglang-env.sh"),
            ("env", "GLM_KV_SGLANG=1", sg, "-m", "pytest", "-q", *xdist, "tests/sglang"),
        ), always=(
            # the book's agreement page: this run's per-profile results merged; fails on a missing one
            (sg, "tests/sglang/agreement_report.py", "--merge"),
        )),
        Group("vllm", "vLLM 0.33.0's own KV sizing on the CPU for six models (its own venv)", (
            ("bash", "scripts/vllm-env.sh"),
            # no xdist: the suite runs its launches two at a time itself (forks of one warm vLLM per GPU)
            (py, "-m", "pytest", "-q", "tests/vllm"),
        )),
        Group("book", "the book builds with warnings as errors; every page in headless Chromium", (
            ("make", "--no-print-directory", "html", "chromium"),
            (py, "scripts/screenshot_check.py", "--self-test", "--out", "_build/screenshots-self-test"),
            (py, "scripts/screenshot_check.py", "--html", "_build/html", "--out", "_build/screenshots"),
            # a book for another model than GLM-5.3-Flash (issue 31), looked at the same way
            (py, "-m", "glm_kv", "book", "--profile", "tests/book/profiles/qwen3.5-h200.yaml", "--out",
             "_build/model-book"),
            (py, "scripts/screenshot_check.py", "--html", "_build/model-book/qwen3.5-h200/html", "--out",
             "_build/screenshots-model-book"),
            # the reader's view: page one answers, no scaffolding, tables fit, console empty, and the
            # knob calculator against glm-kv plan on 200 random settings
            (py, "scripts/reader_check.py", "--self-test"),
            (py, "scripts/reader_check.py", "--html", "_build/html", "--calculator", "200"),
            # one deployment, one answer: every surface of every shipped profile against glm-kv plan
            (py, "scripts/consistency_check.py", "--self-test"),
            (py, "scripts/consistency_check.py", "--html", "_build/html"),
        )),
        Group("unit", "unit tests (the package, the CLI, the book's code)", (
            # GLM_KV_SGLANG=1: the unit tests that ask SGLang's own parser/pools in .venv-sglang run too
            ("env", "GLM_KV_SGLANG=1", py, "-m", "pytest", "-q", *xdist, "--ignore=tests/sglang", "--ignore=tests/vllm",
             "tests"),
        )),
        Group("notebooks", "every committed notebook re-executed and compared (nbval)", (
            (py, "-m", "pytest", "-q", *xdist, *(("--dist", "loadscope") if xdist else ()),
             "--nbval-lax", "notebooks", "book"),
        )),
    ]


_PYTEST_COUNTS = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")
_PAGES = re.compile(r"screenshot check: (\d+) page\(s\) ok, (\d+) with problems")
_READER = re.compile(r"reader check: (\d+) problem\(s\) on (\d+) page\(s\)")


def summarise(output: str) -> tuple[str, dict[str, int]]:
    """The counts of the last pytest summary line (or of the screenshot check) in ``output``."""
    counts: dict[str, int] = {}
    for line in output.splitlines()[::-1]:
        found = _PYTEST_COUNTS.findall(line)
        if found and ("passed" in line or "failed" in line or "error" in line) and " in " in line:
            for n, kind in found:
                counts[kind.rstrip("s") if kind.startswith("error") else kind] = int(n)
            break
    pages = _PAGES.findall(output)
    parts = [f"{counts[k]:,} {k}" for k in ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
             if counts.get(k)]
    if pages:
        # every screenshot check of the group (the book, then a model book), summed
        ok, bad = sum(int(p[0]) for p in pages), sum(int(p[1]) for p in pages)
        parts.append(f"{ok:,} page(s) ok, {bad:,} with problems")
    reader = _READER.findall(output)
    if reader:
        bad, n = reader[-1]
        parts.append(f"reader: {int(bad):,} problem(s) on {int(n):,} page(s)")
    return ", ".join(parts) or "no count reported", counts


# pip's warnings about the machine's own find-links folders say nothing about a failure
# What a run puts on the disk: a group's venv when it is not there yet (du -sh of a fresh build,
# 2026-12-06), and what the tests write to the temp dir (tmp_path, pytest's basetemps, book builds).
# A full disk fails tests far from the cause (CI of 2026-12-05: tmp_path, a copied package, a truncated
# notebook), so the run says up front what it needs and what is free, and says it again on failure.
VENV_GIB = {"sglang": (".venv-sglang", 6.1), "vllm": (".venv-vllm", 8.2), "unit": (".venv", 1.6)}
TMP_GIB = 1.0


def free_gib(path: str | Path) -> float:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / 2**30


def disk_check(chosen: list[Group]) -> tuple[str, bool]:
    """One line on the disk (free here and in the temp dir, and what this run needs) and whether it
    is enough. Venvs that exist already cost nothing; when the temp dir shares the disk, one sum."""
    venvs = sum(gib for g in chosen if g.name in VENV_GIB
                for rel, gib in [VENV_GIB[g.name]] if not (ROOT / rel).exists())
    tmp = tempfile.gettempdir()
    here, there = free_gib(ROOT), free_gib(tmp)
    same = os.stat(ROOT).st_dev == os.stat(tmp).st_dev
    enough = (here >= venvs + TMP_GIB) if same else (here >= venvs and there >= TMP_GIB)
    line = (f"disk: {here:.1f} GiB free at {ROOT}" + ("" if same else f", {there:.1f} GiB in {tmp}")
            + f"; this run needs about {venvs + TMP_GIB:.1f} GiB ({venvs:.1f} for venvs not built yet, "
            f"{TMP_GIB:.1f} in {tmp})")
    if not enough:
        line += "\nWARNING: not enough free disk: expect 'No space left on device' failures; free some space first"
    return line, enough


_NOISE = re.compile(r"^WARNING: Location '.*' is ignored|^\s*$")


def failure_tail(step: tuple[str, ...], code: int, lines: list[str], keep: int = 12) -> list[str]:
    """Why a step failed, in a few lines for the summary: CI's log keeps only its head and its tail,
    so a failure in the middle (a group's set-up step, say) is read here or nowhere. A negative
    code is the signal that killed the step (-9: the kernel's out-of-memory killer, or a timeout)."""
    told = [ln.rstrip("\n") for ln in lines if not _NOISE.search(ln)][-keep:]
    why = f"signal {-code}" if code < 0 else f"exit {code}"
    try:
        st = os.statvfs(ROOT)
        disk = f"; {st.f_bavail * st.f_frsize / 2**30:.1f} GiB free on the disk"
    except OSError:
        disk = ""
    return [f"failed step ({why}{disk}): {shlex.join(step)}", *("    | " + t[:200] for t in told)]


def run_group(group: Group, env: dict[str, str]) -> tuple[bool, tuple[str, dict[str, int]], float]:
    start = time.monotonic()
    output: list[str] = []
    ok = True
    failed_at = None
    group.failure.clear()
    for step in (*group.steps, *group.always):
        if failed_at is not None and step not in group.always:
            continue
        print(f"\n=== [{group.name}] $ {shlex.join(step)}", flush=True)
        step_lines: list[str] = []
        with subprocess.Popen(step, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, bufsize=1, stdin=subprocess.DEVNULL) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(line)
                output.append(line)
                step_lines.append(line)
            code = proc.wait()
        if code != 0:
            ok = False
            output.append(f"(exit {code})\n")
            if failed_at is None:
                group.failure.extend(failure_tail(step, code, step_lines))
            failed_at = failed_at or step
    return ok, summarise("".join(output)), time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", default=os.environ.get("SEED") or os.environ.get("GLM_KV_SEED") or "",
                    help="the run's seed (default: a fresh one)")
    ap.add_argument("--only", action="append", help="run only these groups")
    ap.add_argument("--list", action="store_true", help="list the groups and exit")
    args = ap.parse_args(argv)
    all_groups = groups()
    if args.list:
        for g in all_groups:
            print(f"{g.name:10s} {g.what}")
        return 0
    names = {g.name for g in all_groups}
    unknown = sorted(set(args.only or ()) - names)
    if unknown:
        print(f"test_groups: unknown group(s) {', '.join(unknown)}: choose from {', '.join(sorted(names))}",
              file=sys.stderr)
        return 2
    seed = int(args.seed) if str(args.seed).strip() else random.SystemRandom().randrange(1, 2**31)
    chosen = [g for g in all_groups if not args.only or g.name in args.only]
    env = {**os.environ, "GLM_KV_SEED": str(seed), "PYTHONUNBUFFERED": "1"}
    print(f"glm-kv test groups: {', '.join(g.name for g in chosen)}; seed {seed} "
          f"(reproduce: make test SEED={seed}); {JOBS} job(s) per group", flush=True)
    disk, enough = disk_check(chosen)
    print(disk, flush=True)
    results = []
    for g in chosen:
        results.append((g, *run_group(g, env)))
    print("\n" + "=" * 78)
    print(f"glm-kv test summary (seed {seed}; reproduce: make test SEED={seed})")
    for g, ok, (counts, _), secs in results:
        print(f"{'PASS' if ok else 'FAIL'}  {g.name:10s} {counts:52s} {secs:8.1f} s")
        for line in g.failure:
            print(f"      {line}")
    total = sum(r[3] for r in results)
    failed = [g.name for g, ok, *_ in results if not ok]
    print(f"{'FAILED: ' + ', '.join(failed) if failed else 'all groups passed'} in {total:.0f} s")
    if failed and not enough:
        print("(the run began short of disk: " + disk.splitlines()[0] + ")")
    print("=" * 78)
    passed = sum(c.get("passed", 0) for _, _, (_, c), _ in results)
    broken = sum(c.get("failed", 0) + c.get("error", 0) for _, _, (_, c), _ in results)
    broken += sum(1 for _, ok, (_, c), _ in results if not ok and not (c.get("failed") or c.get("error")))
    print(f"{passed} passed, {broken} failed")  # the plain closing line CI reads
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
