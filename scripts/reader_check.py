#!/usr/bin/env python3
"""Open every built page as a new reader would (headless Chromium, 1,400 and 400 px); check issue 21.

Per page and width:

* **first page answers:** the root page (``book/intro.html``) contains the tokens per rank and the
  requests that fit, as ``glm-kv plan --json`` computes them for the book's profile (a separate
  process: the page is checked against the CLI's contract, not against itself);
* **no scaffolding:** no visible cell shows an nbval marker (``NBVAL``), a bare ``assert`` line or
  a raw ``dict``/``list`` repr as its output (folded ``hide-input`` sources are not visible);
* **no table wider than its page:** every table fits the content column, except one in a
  ``glm-kv-table sticky-first`` box (it scrolls under a first column that stays in view);
* **SGLang names linked:** an SGLang class or function of ``glm_kv.book.sources.SOURCES`` shown in
  code type outside a code block is inside a link (to its line in the v0.5.23 source);
* **math rendered:** no raw TeX (``\\[``, ``\\(``, ``\\text{``) in the text a reader sees, once
  MathJax (shipped with the book, ``glm_kv.book.static_assets``) has typeset the page;
* **clean console:** no ``console.warn``/``console.error``, no uncaught exception and no browser
  log entry of level warning or error. ``console.log``/``info`` lines (the theme's own, e.g.
  "[PST]: Changed to light mode") are printed as notes, not failures (``--strict-console``
  fails them too).
* **calculator:** where a page holds the knob calculator (``.glm-kv-calculator``), ``--calculator N``
  drives it over N random knob settings and compares every shown value with ``glm-kv plan``.

The browser and page loading come from ``scripts/screenshot_check.py`` (no network at all).

Usage::

    python scripts/reader_check.py [--html _build/html] [--profile h200-0.5.23] [PAGE ...]
    python scripts/reader_check.py --self-test     # a page made to fail each check must fail it

Exit status 0 when every page passes; 1 with one line per failure; 77 without Chromium.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from screenshot_check import Browser, _eval, _load, book_pages, find_chromium  # noqa: E402

WIDTHS = (1400, 400)
STRICT_CONSOLE = False   # --strict-console: console.log / info count too

# Visible text of each cell part, and every table's width against its column (run in the page).
_PAGE_STATE = r"""
(async () => {
  // MathJax typesets after load (deferred script): wait for it where the page loads it
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    try { await MathJax.startup.promise; } catch (e) { console.error('MathJax: ' + e); }
  }
  const visible = el => el.checkVisibility ? el.checkVisibility({checkVisibilityCSS: true})
                                           : el.offsetParent !== null;
  const cells = [];
  document.querySelectorAll('div.cell').forEach((cell, i) => {
    const src = [...cell.querySelectorAll('.cell_input pre')].filter(visible).map(e => e.innerText).join('\n');
    const plain = [...cell.querySelectorAll('.cell_output .output.text_plain, .cell_output .output.stream')]
      .filter(visible).map(e => e.innerText).join('\n');
    cells.push({i, src, plain});
  });
  const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const col = article.getBoundingClientRect();
  const tables = [...article.querySelectorAll('table')].filter(visible).map((t, i) => {
    const r = t.getBoundingClientRect();
    return {i, width: Math.round(r.width), column: Math.round(col.width),
            sticky: !!t.closest('.glm-kv-table.sticky-first'),
            head: (t.querySelector('th') || {}).innerText || ''};
  });
  const codes = [...article.querySelectorAll('code')]
    .filter(c => visible(c) && !c.closest('a') && !c.closest('pre') && !c.closest('.cell_input'))
    .map(c => c.innerText.trim());
  return {cells, tables, codes, text: article.innerText};
})()
"""


def plan_numbers(profile: str) -> tuple[int, int]:
    """(tokens per rank, requests that fit) from ``glm-kv plan --json``: SGLang's three limits."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "glm_kv.cli", "plan", "--profile", profile, "--json"],
                         capture_output=True, text=True, check=True, env=env, timeout=120)
    cap = json.loads(out.stdout)["capacity"]
    return cap["max_total_num_tokens"], cap["requests_fit_at_context"]


def console_messages(events: list[dict]) -> list[str]:
    """Everything a reader's console would show: any console call, exception, warning or error."""
    out = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append("exception: " + (d.get("exception", {}).get("description") or d.get("text", "")).splitlines()[0])
        elif m == "Runtime.consoleAPICalled" and (STRICT_CONSOLE or p.get("type") in ("warning", "error", "assert")):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            out.append(f"console.{p.get('type')}: {text[:160]}")
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("warning", "error"):
            out.append(f"log {p['entry']['level']}: {p['entry'].get('text', '')[:160]}")
    return list(dict.fromkeys(out))


def scaffolding(cells: list[dict]) -> list[str]:
    import re

    out = []
    for c in cells:
        if "NBVAL" in c["src"]:
            out.append(f"cell {c['i']}: visible NBVAL marker")
        if re.search(r"^\s*assert\b", c["src"], re.M):
            out.append(f"cell {c['i']}: visible bare assert")
        if re.match(r"^\s*[\[{]['\"(\w]", c["plain"] or ""):
            out.append(f"cell {c['i']}: visible raw dict/list {c['plain'][:40]!r}")
    return out


RAW_TEX = ("\\[", "\\(", "\\text{")


def raw_tex(text: str) -> list[str]:
    """TeX a reader sees as source (``\\[\\text{rest} = ...``): MathJax missing or not run."""
    out = []
    for marker in RAW_TEX:
        at = text.find(marker)
        if at >= 0:
            out.append(f"raw TeX {marker!r} in the text: {text[max(0, at - 20):at + 40]!r}")
    return out


def wide_tables(tables: list[dict]) -> list[str]:
    return [f"table {t['i']} ({t['head'][:30]!r}) is {t['width']} px, wider than its {t['column']} px column"
            for t in tables if not t["sticky"] and t["width"] > t["column"] + 1]


def sglang_names() -> frozenset[str]:
    sys.path.insert(0, str(ROOT))
    from glm_kv.book.sources import SOURCES

    return frozenset(SOURCES)


def unlinked_names(codes: list[str], names: frozenset[str] | None = None) -> list[str]:
    """Inline code that names an SGLang object (``SOURCES``) but sits in no link."""
    names = sglang_names() if names is None else names
    return [f"names SGLang's {c} without its link" for c in dict.fromkeys(codes) if c in names]


def check_page(browser: Browser, page: Path, widths, *, expect: tuple[int, int] | None, name: str) -> list[str]:
    failures = []
    for w in widths:
        target, session = _load(browser, page, w)
        try:
            browser.pump(0.5)
            state = _eval(browser, session, _PAGE_STATE) or {}
            found = scaffolding(state.get("cells", [])) + wide_tables(state.get("tables", []))
            found += unlinked_names(state.get("codes", []))
            found += raw_tex(state.get("text", ""))
            found += console_messages(browser.events)
            if expect is not None:
                tokens, requests = expect
                text = state.get("text", "")
                if f"{tokens:,} tokens" not in text:
                    found.append(f"first page lacks the plan's tokens per rank ({tokens:,})")
                if f"{requests:,} requests" not in text:
                    found.append(f"first page lacks the plan's requests that fit ({requests:,})")
        finally:
            browser.send("Target.closeTarget", {"targetId": target})
        print(f"{name} @{w}px: {len(found)} problem(s)")
        failures += [f"{name} @{w}px: {f}" for f in found]
    return failures


BAD_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"></head>
<body><main><article class="bd-article" style="max-width:360px">
<p>A first page that does not say what fits, naming one <code>HybridLinearKVPool</code> unlinked.</p>
<div class="cell"><div class="cell_input"><pre># NBVAL_CHECK_OUTPUT
assert report.ok</pre></div>
<div class="cell_output"><div class="output text_plain"><pre>{'profile': 'article', 'n': 1}</pre></div></div></div>
<table><tr><td style="min-width:900px">a table wider than its page</td></tr></table>
<p>A formula MathJax never saw: \\[\\text{rest} = \\text{free} - f\\]</p>
<script>console.warn("a Vega warning");</script>
</article></main></body></html>
"""

BAD_EXPECTED = ("NBVAL marker", "bare assert", "raw dict", "wider than", "console.warning",
                "lacks the plan's tokens", "lacks the plan's requests", "HybridLinearKVPool without its link",
                "raw TeX")


def self_test(browser: Browser) -> list[str]:
    """Every check must fire on a page built to break it; returns the checks that did NOT fire."""
    folder = Path(tempfile.mkdtemp(prefix="glm-kv-reader-bad-"))
    page = folder / "bad.html"
    page.write_text(BAD_PAGE, encoding="utf-8")
    try:
        failures = check_page(browser, page, (1400,), expect=(3_792_640, 8), name="bad")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for f in failures:
        print(f"  (expected) {f}")
    return [k for k in BAD_EXPECTED if not any(k in f for f in failures)]


# ------------------------------------------------------------------------------------------------
# the knob calculator (issue 21, deliverable 4): the page's figures against glm-kv's plan
# ------------------------------------------------------------------------------------------------

CALC_PROFILE = "h200-0.5.23"   # the calculator's base profile (weights estimated per layout)
# page field -> where the plan-contract JSON holds it
CALC_FIELDS = {
    "max_total_num_tokens": ("capacity", "max_total_num_tokens"),
    "max_mamba_cache_size": ("capacity", "max_mamba_cache_size"),
    "max_running_requests": ("capacity", "max_running_requests"),
    "requested_max_running_requests": ("capacity", "requested_max_running_requests"),
    "binding_limit": ("capacity", "binding_limit"),
    "token_pool_bytes": ("capacity", "token_pool_bytes"),
    "mamba_pool_bytes": ("capacity", "mamba_pool_bytes"),
    "spec_scratch_bytes": ("capacity", "spec_scratch_bytes"),
    "mem_fraction_static": ("capacity", "mem_fraction_static"),
    "rest_bytes": ("capacity", "rest_bytes"),
    "weights_bytes": ("capacity", "weights_bytes"),
    "slots_per_request": ("request", "slots_per_request"),
}
CALC_HOST_FIELDS = {"host_kv_tokens": "kv_tokens", "host_mamba_slots": "mamba_slots",
                    "host_total_bytes": "total_bytes"}


def calculator_settings(rng, axes: dict, ranges: dict) -> dict:
    """One random knob setting: every categorical axis uniformly, the numbers in natural units."""
    s = {name: rng.choice(values) for name, values in axes.items()}
    lo, hi, _ = ranges["mem_fraction_static"]
    s["mem_fraction_static"] = None if rng.random() < 0.3 else round(rng.uniform(lo, hi), 3)
    lo, hi = ranges["max_running_requests"]
    s["max_running_requests"] = None if rng.random() < 0.2 else int(round(lo * (hi / lo) ** rng.random()))
    lo, hi = ranges["context_length"]
    s["context_length"] = max(lo, min(hi, int(round(lo * (hi / lo) ** rng.random()))))
    lo, hi, _ = ranges["hicache_ratio"]
    s["hicache_ratio"] = None if rng.random() < 0.5 else round(rng.uniform(lo, hi), 1)
    return s


def calculator_overrides(s: dict) -> dict:
    """The profile fields of a knob setting, as a user writes them for ``glm-kv plan``."""
    tp, dp, dpa = s["layout"]
    alg, draft = s["speculative"]
    o = {"weights_bytes": None, "weights_estimate": True, "gpu": s["gpu"], "tp_size": tp, "dp_size": dp,
         "enable_dp_attention": dpa, "kv_cache_dtype": s["kv_cache_dtype"], "mamba_ssm_dtype": s["mamba_ssm_dtype"],
         "mamba_scheduler_strategy": s["mamba_scheduler_strategy"], "context_length": s["context_length"],
         "max_running_requests": s["max_running_requests"]}
    if alg is not None:
        o.update(speculative_algorithm=alg, speculative_num_steps=draft - 1, speculative_eagle_topk=1,
                 speculative_num_draft_tokens=draft)
    if s["mem_fraction_static"] is not None:
        o["mem_fraction_static"] = s["mem_fraction_static"]
    if s["hicache_ratio"] is not None:
        o.update(enable_hierarchical_cache=True, hicache_ratio=s["hicache_ratio"])
    return o


def plan_for(overrides: dict) -> dict:
    """``glm-kv plan --json`` for the calculator's profile plus overrides, in process; {"error": field}."""
    sys.path.insert(0, str(ROOT))
    from glm_kv import ProfileError, build_plan
    try:
        return build_plan(CALC_PROFILE, overrides)
    except ProfileError as err:
        return {"error": err.field, "rule": err.rule}


def compare_calculator(shown: dict, plan: dict, ctx: int) -> list[str]:
    """Every figure the page shows against the plan (numbers exactly, the big ones as shown too); a refusal by
    its field, and where the weights leave no rest, by the fraction SGLang asks for (the plan quotes SGLang)."""
    if "error" in plan:
        if shown.get("error") != plan["error"]:
            return [f"plan refuses ({plan['error']}), page shows {shown.get('error', 'figures')}"]
        need = shown.get("fraction_that_would_do")
        said = "Raise --mem-fraction-static above " + ("?" if need is None else f"{need:.3f}") + " "
        if plan["error"] == "weights_bytes" and "SGLang 0.5.23 says" in plan["rule"] and said not in plan["rule"]:
            return [f"page asks for a fraction above {need!r}; the plan quotes SGLang: {plan['rule']}"]
        return []
    if "error" in shown:
        return [f"page refuses ({shown['error']}), plan gives {plan['capacity']['max_total_num_tokens']:,} tokens"]
    bad = []
    for field, (part, key) in CALC_FIELDS.items():
        want = plan[part][key]
        got = shown.get(field)
        if got != want and not (isinstance(want, float) and isinstance(got, float) and got == want):
            bad.append(f"{field}: page {got!r}, plan {want!r}")
    cap = plan["capacity"]
    for field, key in (("requests_at_context", "requests_fit_at_context"), ("binds_at_context", "binds_at_context")):
        if shown.get(field) != cap[key]:
            bad.append(f"{field}: page {shown.get(field)!r}, plan {cap[key]!r}")
    for field, key in CALC_HOST_FIELDS.items():
        want = plan["host"][key]
        if shown.get(field) != want:
            bad.append(f"{field}: page {shown.get(field)!r}, plan {want!r}")
    for field in ("max_total_num_tokens", "max_running_requests", "max_mamba_cache_size"):
        if shown.get(f"{field}__text") != f"{plan['capacity'][field]:,}":
            bad.append(f"{field} shown as {shown.get(field + '__text')!r}, not {plan['capacity'][field]:,}")
    return bad


def calculator_check(browser: Browser, page: Path, n: int, seed: int, width: int = 1400) -> tuple[list[str], dict]:
    """Drive the page's calculator (``window.glmKvCalculator.set``) over ``n`` random settings and
    compare each with the plan; returns (failures, counts). The seed is in every failure line."""
    import random

    rng = random.Random(seed)
    target, session = _load(browser, page, width)
    failures: list[str] = []
    counts = {"settings": 0, "plans": 0, "refusals": 0, "hicache": 0, "speculative": 0}
    try:
        meta = _eval(browser, session, "({axes: glmKvCalculator.data.axes, ranges: glmKvCalculator.data.ranges})")
        for i in range(n):
            s = calculator_settings(rng, meta["axes"], meta["ranges"])
            shown = _eval(browser, session, f"glmKvCalculator.set({json.dumps(s)})")
            back = _eval(browser, session, "glmKvCalculator.get().settings")
            if back != s:
                failures.append(f"seed {seed} #{i}: the page's knobs read back {back}, not {s}")
                continue
            plan = plan_for(calculator_overrides(s))
            counts["settings"] += 1
            counts["refusals" if "error" in plan else "plans"] += 1
            counts["hicache"] += s["hicache_ratio"] is not None and "error" not in plan
            counts["speculative"] += s["speculative"][0] is not None and "error" not in plan
            if "error" not in plan:
                key = "binding " + plan["capacity"]["binding_limit"]
                counts[key] = counts.get(key, 0) + 1
            failures += [f"seed {seed} #{i} {json.dumps(s)}: {b}" for b in compare_calculator(shown, plan, s["context_length"])]
        failures += [f"console: {m}" for m in console_messages(browser.events)]
    finally:
        browser.send("Target.closeTarget", {"targetId": target})
    return failures, counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("pages", nargs="*", type=Path, help="HTML pages (default: every page of the book)")
    ap.add_argument("--html", type=Path, default=ROOT / "_build" / "html", help="built book folder")
    ap.add_argument("--profile", default=None, help="the profile the book was built for (default: the book's)")
    ap.add_argument("--width", type=int, action="append", help="viewport width(s) (default 1400 and 400)")
    ap.add_argument("--self-test", action="store_true", help="a page made to fail each check must fail it")
    ap.add_argument("--strict-console", action="store_true", help="console.log / info lines fail too")
    ap.add_argument("--calculator", type=int, default=0, metavar="N",
                    help="drive the knob calculator (pages holding one) over N random settings against glm-kv plan")
    args = ap.parse_args(argv)
    global STRICT_CONSOLE
    STRICT_CONSOLE = args.strict_console

    chromium = find_chromium()
    if not chromium:
        print("chromium not found: apt-get install -y chromium", file=sys.stderr)
        return 77
    browser = Browser(chromium)
    failures: list[str] = []
    try:
        browser.send("Browser.getVersion")
        if args.self_test:
            missed = self_test(browser)
            if missed:
                print(f"SELF-TEST FAILED: no failure reported for: {', '.join(missed)}")
                return 1
            print("self-test: every check fired on the page made to fail")
            return 0
        if args.profile is None:
            sys.path.insert(0, str(ROOT))
            from glm_kv.book.default_profile import BOOK_DEFAULT_PROFILE
            args.profile = BOOK_DEFAULT_PROFILE
        expect = plan_numbers(args.profile)
        pages = args.pages or book_pages(args.html)
        first = (args.html / "book" / "intro.html").resolve()
        for page in pages:
            name = str(page.resolve().relative_to(args.html.resolve()).with_suffix("")) \
                if page.resolve().is_relative_to(args.html.resolve()) else page.stem
            try:
                failures += check_page(browser, page, tuple(args.width or WIDTHS), name=name,
                                       expect=expect if page.resolve() == first else None)
            except (RuntimeError, TimeoutError) as err:
                failures.append(f"{name}: {err}")
            if args.calculator and 'glm-kv-calculator' in page.read_text(encoding="utf-8", errors="replace"):
                seed = int(os.environ.get("GLM_KV_SEED") or int.from_bytes(os.urandom(4), "little"))
                found, counts = calculator_check(browser, page, args.calculator, seed)
                print(f"{name}: calculator, seed {seed}: {counts}, {len(found)} disagreement(s)")
                failures += [f"{name}: calculator {f}" for f in found]
    finally:
        browser.close()
    for f in failures:
        print(f"FAIL {f}")
    print(f"reader check: {len(failures)} problem(s) on {len(pages)} page(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
