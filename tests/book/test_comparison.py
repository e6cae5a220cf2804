"""The comparison that chooses (issue 21, item 6): profiles sorted by the requests that fit, the best
per question marked, a narrow answer table; the reference is ``glm-kv plan --json`` per profile.

Like with like (issue 29, item 7): the ranking is at one stated context (128K tokens per request),
not at each profile's own; a one-profile comparison says it needs two."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ["article", "h200-0.5.23", "b200-0.5.23", "worked-example-0.5.23", "mtp"]   # each gives memory


def plan_json(profile: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "glm_kv.cli", "plan", "--profile", profile, "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT, timeout=120)
    return json.loads(out.stdout)


CONTEXT = 131072   # the one context the page ranks every profile at (128K), stated on the page


def _fit(d: dict, context: int) -> int:
    cap = d["capacity"]
    return min(cap["max_running_requests"], cap["max_total_num_tokens"] // context,
               cap["max_mamba_cache_size"] // d["request"]["slots_per_request"])


@pytest.fixture(scope="module")
def plans() -> dict[str, dict]:
    return {p: plan_json(p) for p in PROFILES}


@pytest.fixture(scope="module")
def reference(plans) -> dict[str, tuple[int, int]]:
    """(requests of 128K tokens that fit, tokens per rank) per profile, from the CLI's plan contract."""
    return {p: (_fit(d, CONTEXT), d["capacity"]["max_total_num_tokens"]) for p, d in plans.items()}


def sorted_like_the_page(ref):
    return sorted(ref, key=lambda p: (-ref[p][0], -ref[p][1], p))


def test_rows_are_sorted_by_what_fits(reference):
    from glm_kv.book.comparison import profile_rows

    rows, refused = profile_rows(PROFILES)
    assert not refused
    assert [r.profile for r in rows] == sorted_like_the_page(reference)
    assert {r.profile: (r.requests_at_compare, r.tokens_per_rank) for r in rows} == reference


def test_each_profiles_own_context_is_kept_beside_the_ranking(plans):
    from glm_kv.book.comparison import COMPARE_CONTEXT, profile_rows

    assert COMPARE_CONTEXT == CONTEXT
    rows, _ = profile_rows(PROFILES)
    own = {p: _fit(d, d["profile"]["context_length"]) for p, d in plans.items()}
    assert {r.profile: r.requests_fit for r in rows} == own
    contexts = {d["profile"]["context_length"] for d in plans.values()}
    assert len(contexts) > 1, "the shipped profiles run at different contexts (128K and 1M): why one is stated"


def test_one_profile_says_a_comparison_needs_two():
    from glm_kv.book.comparison import BEST, answer_table, best_list, comparison_intro, profile_rows

    rows, _ = profile_rows(["h200-0.5.23"])
    html = answer_table(rows)._repr_html_()
    assert "needs two" in html and BEST not in html and "<table" not in html
    assert best_list(rows)._repr_html_() == ""
    assert "compares" not in comparison_intro(rows, "h200-0.5.23")
    two, _ = profile_rows(["h200-0.5.23", "article"])
    assert "needs two" not in answer_table(two)._repr_html_() and BEST in answer_table(two)._repr_html_()


def test_best_per_question_is_marked(reference):
    from glm_kv.book.comparison import BEST, answer_table, best_per_question, profile_rows

    rows, _ = profile_rows(PROFILES)
    best = best_per_question(rows)
    most_req = max(v[0] for v in reference.values())
    most_tok = max(v[1] for v in reference.values())
    assert {r.profile for r in best["Most requests of 128K tokens at once, per rank"]} == \
        {p for p, v in reference.items() if v[0] == most_req}
    assert {r.profile for r in best["Most tokens of KV cache per rank (longest contexts)"]} == \
        {p for p, v in reference.items() if v[1] == most_tok}
    html = answer_table(rows)._repr_html_()
    assert f"{most_req:,} {BEST}" in html and f"{most_tok:,} {BEST}" in html
    assert html.count(BEST) == len(best["Most requests of 128K tokens at once, per rank"]) + \
        len(best["Most tokens of KV cache per rank (longest contexts)"])
    assert html.count("<th>") == 4, "the answer table stays four columns (it fits 400 px)"


def test_planted_sort_error_is_caught(reference, monkeypatch):
    """Sorting by tokens instead of requests reorders the rows: the order check fails."""
    from glm_kv.book import comparison

    rows, _ = comparison.profile_rows(PROFILES)
    by_tokens = sorted(rows, key=lambda r: -r.tokens_per_rank)
    assert [r.profile for r in by_tokens] != sorted_like_the_page(reference)


def test_committed_page_shows_the_answer_table_first():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(ROOT / "book" / "profiles.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", [])]
    assert code[1].source.strip() == "answer_table(rows)"
    html = "".join(o.get("data", {}).get("text/html", "") for o in code[1].outputs)
    assert 'class="glm-kv-table wrap"' in html


@pytest.fixture(scope="module")
def index_page(tmp_path_factory) -> Path:
    """The ``glm-kv book`` index for every shipped profile, the article's book marked built."""
    from glm_kv.book.runner import write_index

    out = tmp_path_factory.mktemp("index")
    (out / "article" / "html").mkdir(parents=True)
    (out / "article" / "html" / "index.html").write_text("<html></html>")
    return write_index(out, ["article"])


def answer_rows(page: str) -> list[tuple[str, str, str]]:
    """(profile, requests that fit, tokens per rank) per row of the page's answer table."""
    import re

    body = page.split('<table class="answer">')[1].split("</table>")[0].split("<tbody>")[1]
    rows = []
    for tr in re.findall(r"<tr>(.*?)</tr>", body):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
        rows.append((cells[0].split()[0], cells[1], cells[2]))
    return rows


def test_index_is_sorted_by_what_fits_and_marks_the_best(index_page, reference):
    from glm_kv.book.comparison import BEST

    rows = answer_rows(index_page.read_text())
    shown = [p for p, _, _ in rows if p in reference]
    assert shown == sorted_like_the_page(reference), "the CLI's requests that fit, then tokens, order the rows"
    for p, req, tok in rows:
        if p in reference:
            assert (req.replace(BEST, "").strip(), tok.replace(BEST, "").strip()) == \
                (f"{reference[p][0]:,}", f"{reference[p][1]:,}"), p
    req = [int(r.replace(BEST, "").replace(",", "")) for _, r, _ in rows]
    assert req == sorted(req, reverse=True)
    assert [r for _, r, _ in rows if BEST in r] == [r for _, r, _ in rows if r.startswith(f"{max(req):,} ")]
    assert sum(BEST in t for _, _, t in rows) >= 1


def test_planted_unsorted_index_is_caught(reference, monkeypatch):
    """An index left in shipped order (the old page) fails the order check."""
    from glm_kv.book import comparison

    real = comparison.profile_rows

    def unsorted(profiles):
        rows, refused = real(profiles)
        return sorted(rows, key=lambda r: r.profile), refused

    monkeypatch.setattr(comparison, "profile_rows", unsorted)
    page = comparison.index_page(PROFILES, {})
    shown = [p for p, _, _ in answer_rows(page) if p in reference]
    assert shown != sorted_like_the_page(reference)


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")), reason="no chromium")
def test_index_fits_1400_and_400_px_with_a_clean_console(index_page):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "reader_check.py"), str(index_page),
                           "--html", str(index_page.parent)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "index @1400px: 0 problem(s)" in proc.stdout and "index @400px: 0 problem(s)" in proc.stdout


def test_index_ships_and_loads_the_cjk_subset(index_page):
    """Its title is Chinese (三本账): the subset sits beside the page and its CSS loads it."""
    from glm_kv.book.static_assets import CJK_FONT_FILE, CJK_FONT_LICENSE

    page = index_page.read_text()
    assert "三本账" in page and f'url("{CJK_FONT_FILE}")' in page and '"glm-kv CJK"' in page
    assert (index_page.parent / CJK_FONT_FILE).is_file() and (index_page.parent / CJK_FONT_LICENSE).is_file()
