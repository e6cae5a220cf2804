#!/usr/bin/env python3
"""One deployment, one answer (issue 29): every surface against ``glm-kv plan --json``.

For every shipped profile (or those named), the tokens per rank, the requests of the profile's
context that fit and what binds them are read from each surface a reader meets, and compared with
the CLI's plan contract (``capacity.max_total_num_tokens``, ``capacity.requests_fit_at_context``,
``capacity.binds_at_context``), run as a separate process, the way a user runs it:

* the first page (``first_page.first_answer``) and its advice against chapter 7's (same flags);
* chapter 6 (``tables.capacity_plan`` + ``capacity_summary``, the values it glues);
* chapter 7's "profile's own flags" row (``advise_charts.setting_table``);
* the plan page's opening point (``charts.plan_sweep_data`` at ``charts.plan_opening``);
* the calculator's opening state as headless Chromium computes it (profiles its knobs can show);
* with ``--html``: the built pages' text (first page, chapter 6, chapter 7) for the book's profile.

``--self-test`` plants a different weight estimate in the calculator's data and a different dtype on
the plan page's opening point, and fails unless both are caught. Exit 1 on any difference.
"""
from __future__ import annotations

import argparse
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def cli_plan(profile: str) -> dict:
    """``glm-kv plan --json`` in its own process: the answer every surface must give."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "glm_kv.cli", "plan", "--profile", profile, "--json"],
                         capture_output=True, text=True, env=env, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"{profile}: glm-kv plan failed: {out.stderr.strip()}")
    cap = json.loads(out.stdout)["capacity"]
    return {"tokens": cap["max_total_num_tokens"], "requests": cap["requests_fit_at_context"],
            "binds": cap["binds_at_context"]}


def python_surfaces(profile: str, *, plant_dtype: bool = False) -> dict[str, dict]:
    """The figures each book surface computes for ``profile`` (the functions the pages call)."""
    from glm_kv import load_profile
    from glm_kv.book import advise_charts as ac
    from glm_kv.book import charts
    from glm_kv.book.first_page import first_answer, fit_more_sentence
    from glm_kv.book.tables import capacity_plan, capacity_summary
    from glm_kv.ledgers.advise import advise

    prof = load_profile(profile)
    out: dict[str, dict] = {}
    a = first_answer(prof)
    out["first page"] = {"tokens": a.tokens_per_rank, "requests": a.requests_fit, "binds": a.binding}
    sized, how = capacity_plan(prof)
    s = capacity_summary(sized, how)
    out["chapter 6"] = {"tokens": s["cap_tokens"], "requests": s["cap_fit"], "binds": s["cap_binding"]}
    adv = advise(prof, ac.profile_workload(prof))
    own = ac.setting_table(prof, adv).loc["profile's own flags"]
    out["chapter 7 own flags"] = {"tokens": int(own["max_total_num_tokens (per worker)"])}
    df = charts.plan_sweep_data(prof)
    o = charts.plan_opening(df, prof)
    if plant_dtype:
        o["kv dtype"] = next(d for d in df["kv dtype"].unique() if d != o["kv dtype"])
    row = df[(df["gpu"] == o["gpu"]) & (df["kv dtype"] == o["kv dtype"]) & (df["log2 context"] == o["log2 context"])
             & (df["log2 requests"] == o["log2 requests"])]
    if len(row) != 1:
        out["plan page opening"] = {"error": f"{len(row)} points at the opening {o}"}
    else:
        r = row.iloc[0]
        out["plan page opening"] = {"tokens": int(r["tokens per rank"]), "requests": int(r["requests that fit"]),
                                    "binds": r["binds"]}
    # the advice: the first page names chapter 7's flags
    sentence = fit_more_sentence(prof)
    missing = [f for f in adv.flags if f"`{f}`" not in sentence] if "launch with" in sentence else []
    out["first page advice"] = {"advice": "chapter 7's flags" if not missing else f"lacks {', '.join(missing)}"}
    return out


def calculator_opening(browser, rc, profiles: list[str], tmp: Path, *, plant_weights: bool = False) -> dict:
    """{profile: the calculator's opening figures as Chromium computes them, or a reason it is not shown}."""
    from glm_kv.book import calculator as calc

    data = calc.build_data()
    if plant_weights:   # one GiB more weights in every combination: the kind of second estimate issue 29 found
        data["tables"]["mem"] = [row[:4] + [row[4] + (1 << 30)] + row[5:] if row else row
                                 for row in data["tables"]["mem"]]
    out = {}
    for name in profiles:
        _, missing = calc.profile_settings(data, name)
        if missing:
            out[name] = {"skipped": f"the knobs cannot set {', '.join(missing)}"}
            continue
        page = tmp / f"calculator-{name}.html"
        page.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
                        + calc.calculator(data, name).html + "</body></html>", encoding="utf-8")
        target, session = rc._load(browser, page, 1400)
        try:
            shown = rc._eval(browser, session, "glmKvCalculator.get().shown")
        finally:
            browser.send("Target.closeTarget", {"targetId": target})
        out[name] = {"tokens": shown.get("max_total_num_tokens"), "requests": shown.get("requests_at_context"),
                     "binds": shown.get("binds_at_context")}
    return out


def page_text(path: Path) -> str:
    text = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", path.read_text(encoding="utf-8"), flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text)))


def html_surfaces(folder: Path, want: dict) -> list[str]:
    """The built pages of the book's profile say the plan's numbers."""
    bad = []
    pages = {"first page": folder / "book" / "intro.html", "chapter 6": folder / "notebooks" / "06_capacity.html",
             "chapter 7": folder / "notebooks" / "06b_choosing_flags.html"}
    for name, path in pages.items():
        if not path.is_file():
            bad.append(f"{name}: {path} was not built")
            continue
        text = page_text(path)
        for what, n in (("tokens", want["tokens"]), ("requests", want["requests"])):
            if name == "chapter 7" and what == "requests":
                continue   # chapter 7 counts requests of its workload's size, not of the context
            if f"{n:,}" not in text:
                bad.append(f"{name} ({path.name}): the plan's {what} {n:,} is not on the page")
    return bad


def compare(profile: str, want: dict, got: dict[str, dict]) -> list[str]:
    bad = []
    for surface, vals in got.items():
        if "skipped" in vals:
            continue
        if "error" in vals:
            bad.append(f"{profile}: {surface}: {vals['error']}")
            continue
        if "advice" in vals:
            if vals["advice"] != "chapter 7's flags":
                bad.append(f"{profile}: {surface}: {vals['advice']}")
            continue
        for k, v in vals.items():
            if v != want[k]:
                bad.append(f"{profile}: {surface}: {k} {v!r}, glm-kv plan {want[k]!r}")
    return bad


def run(profiles: list[str], html_dir: Path | None, book_profile: str | None, *, plant: bool = False) -> list[str]:
    import tempfile

    import reader_check as rc

    failures: list[str] = []
    wants = {p: cli_plan(p) for p in profiles}
    for p in profiles:
        got = python_surfaces(p, plant_dtype=plant)
        failures += compare(p, wants[p], got)
        print(f"{p}: " + "; ".join(f"{k} {v}" for k, v in got.items()), flush=True)
    chromium = rc.find_chromium()
    if chromium:
        browser = rc.Browser(chromium)
        try:
            browser.send("Browser.getVersion")
            with tempfile.TemporaryDirectory(prefix="glm-kv-consistency-") as tmp:
                calc = calculator_opening(browser, rc, profiles, Path(tmp), plant_weights=plant)
        finally:
            browser.close()
        for p, vals in calc.items():
            print(f"{p}: calculator opening {vals}", flush=True)
            failures += compare(p, wants[p], {"calculator opening": vals})
    elif os.environ.get("CI") == "true":
        failures.append("chromium not found: the calculator's opening state was not checked")
    else:
        print("chromium not found: the calculator's opening state is not checked here")
    if html_dir is not None and book_profile is not None:
        failures += [f"{book_profile}: built page: {b}" for b in html_surfaces(html_dir, wants[book_profile])]
    return failures


def main(argv: list[str] | None = None) -> int:
    from glm_kv import shipped_profiles
    from glm_kv.book.default_profile import BOOK_DEFAULT_PROFILE

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profiles", nargs="*", help="shipped profiles (default: all)")
    ap.add_argument("--html", type=Path, default=None, help="the built book of --book-profile to read as well")
    ap.add_argument("--book-profile", default=BOOK_DEFAULT_PROFILE, help="the profile --html was built for")
    ap.add_argument("--self-test", action="store_true", help="planted differences must be caught")
    args = ap.parse_args(argv)
    if args.self_test:
        failures = run([BOOK_DEFAULT_PROFILE], None, None, plant=True)
        caught = {"calculator": any("calculator opening" in f for f in failures),
                  "plan page": any("plan page opening" in f for f in failures)}
        for f in failures:
            print(f"  (expected) {f}")
        missed = [k for k, v in caught.items() if not v]
        if missed and not (missed == ["calculator"] and not __import__("reader_check").find_chromium()):
            print(f"SELF-TEST FAILED: not caught: {', '.join(missed)}")
            return 1
        print("self-test: every planted difference was caught")
        return 0
    failures = run(args.profiles or shipped_profiles(), args.html, args.book_profile)
    for f in failures:
        print(f"FAIL {f}")
    print(f"consistency check: {len(failures)} difference(s) over {len(args.profiles or shipped_profiles())} profile(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
