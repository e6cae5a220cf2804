"""The SGLang agreement report, computed by the run (never committed).

Why a separate step: a report written by one test that needs every result in its own process
skips under ``-n 2`` or a random order, and a stale committed report then stands in for it. Here
each ``test_agreement.py::test_profile_agrees`` case writes its own result file (one file per
profile, so xdist workers never share one), and the SGLang group's last step, which
``scripts/test_groups.py`` runs even when pytest failed, merges them::

    python tests/sglang/agreement_report.py --clean   # before pytest: no result of an earlier run
    python tests/sglang/agreement_report.py --merge   # after pytest: book/_static/sglang-agreement.json

``--merge`` exits 1, naming what is missing, when a profile of the matrix has no result (a
skipped or unrun case, a writer that did not write), when fewer than 30 profiles ran, or when a
mismatch is unexplained; it writes the report either way, so the book shows what the run found.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESULTS = Path(os.environ.get("GLM_KV_AGREEMENT_RESULTS", REPO / "_build" / "sglang-agreement" / "results"))
REPORT = REPO / "book" / "_static" / "sglang-agreement.json"
MIN_PROFILES = 30


def write_result(res, started: float, results: Path = RESULTS) -> Path:
    """One profile's result (``compare.ProfileResult``) as its own JSON file, written atomically."""
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{res.pid}.json"
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"pid": res.pid, "seconds": res.seconds, "compared": sorted(res.compared),
                               "sglang_error": res.sglang_error, "engine_error": res.engine_error,
                               "mismatches": res.mismatches, "started": started,
                               "finished": time.time()}, default=str))
    tmp.replace(path)
    return path


def read_results(results: Path = RESULTS) -> dict[str, SimpleNamespace]:
    return {p.stem: SimpleNamespace(**json.loads(p.read_text())) for p in sorted(results.glob("*.json"))}


def missing_results(expected: list[str], results: Path = RESULTS) -> list[str]:
    have = read_results(results)
    return [pid for pid in expected if pid not in have]


def merge(expected: list[str], results: Path = RESULTS, out: Path = REPORT) -> tuple[int, str]:
    """Write the report from the result files; (exit status, one line saying why)."""
    have = read_results(results)
    missing = [pid for pid in expected if pid not in have]
    runs = [have[pid] for pid in expected if pid in have]
    if runs:
        from compare import write_report  # SGLang's venv: the key tables live beside the comparison

        rep = write_report(runs, min(r.started for r in runs), out)
        rep["suite_seconds"] = round(max(r.finished for r in runs) - min(r.started for r in runs), 1)
        out.write_text(json.dumps(rep, indent=1) + "\n")
        unexplained = rep["unexplained_mismatches"]
    else:
        out.unlink(missing_ok=True)  # no report rather than a stale one
        unexplained = 0
    if missing:
        shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        return 1, f"agreement report: {len(missing)} of {len(expected)} profile(s) have no result ({shown})"
    if len(runs) < MIN_PROFILES:
        return 1, f"agreement report: only {len(runs)} profile(s) ran, at least {MIN_PROFILES} are needed"
    if unexplained:
        return 1, f"agreement report: {unexplained} unexplained mismatch(es); see {out}"
    return 0, f"agreement report: {len(runs)} profile(s), written to {out}"


def main(argv: list[str]) -> int:
    if argv == ["--clean"]:
        shutil.rmtree(RESULTS, ignore_errors=True)
        REPORT.unlink(missing_ok=True)
        print(f"agreement report: cleared {RESULTS.relative_to(REPO)} and {REPORT.relative_to(REPO)}")
        return 0
    if argv == ["--merge"]:
        sys.path.insert(0, str(HERE))
        from profiles import matrix

        code, line = merge([m[0] for m in matrix()])
        print(line)
        return code
    print("usage: agreement_report.py --clean | --merge", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
