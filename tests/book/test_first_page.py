"""Page one answers: the committed first page carries the plan's tokens and requests per rank, its
waterfall adds up to the GPU's memory, and no reader page shows a check (issue 21, items 2 and 5).

The reference side is ``glm-kv plan --json`` run as a separate process (the CLI's contract), not
the book module under test; planted errors show each check can fail."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from glm_kv.book.default_profile import BOOK_DEFAULT_PROFILE

ROOT = Path(__file__).resolve().parents[2]
nbformat = pytest.importorskip("nbformat")


def plan_json(profile: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "glm_kv.cli", "plan", "--profile", profile, "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT, timeout=120)
    return json.loads(out.stdout)


def glued(nb) -> dict[str, str]:
    vals = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            meta = out.get("metadata", {}).get("scrapbook")
            if meta:
                data = out.get("data", {})
                vals[meta["name"]] = data.get("text/markdown") or data.get(
                    "application/papermill.record/text/markdown") or data.get(
                    "application/papermill.record/text/plain", "")
    return vals


def expected_requests(cap: dict, context: int, slots_per_request: int) -> int:
    """SGLang's three limits, read off the plan contract: asked for, token slots, state slots."""
    return min(cap["max_running_requests"], cap["max_total_num_tokens"] // context,
               cap["max_mamba_cache_size"] // slots_per_request)


def test_first_page_glues_the_plans_tokens_and_requests():
    plan = plan_json(BOOK_DEFAULT_PROFILE)
    cap = plan["capacity"]
    nb = nbformat.read(ROOT / "book" / "intro.ipynb", as_version=4)
    g = glued(nb)
    n_req = expected_requests(cap, plan["profile"]["context_length"], plan["request"]["slots_per_request"])
    assert g["tokens_per_rank"] == str(cap["max_total_num_tokens"])
    assert g["requests_fit"] == str(n_req)
    sentence = g["answer_sentence"]
    assert f"**{cap['max_total_num_tokens']:,} tokens**" in sentence and f"**{n_req:,} requests**" in sentence
    assert "advise" in g["fit_more"] and "--max-running-requests" in g["fit_more"]
    # the first page opens with the answer: the question, then the sentence, before any prose
    assert "{glue:md}`answer_sentence`" in nb.cells[0].source


@pytest.mark.parametrize("profile", ["h200-0.5.23", "article", "worked-example-0.5.23", "mtp"])
def test_waterfall_adds_up_and_matches_the_plan(profile):
    from glm_kv.book.first_page import first_answer

    plan = plan_json(profile)
    cap = plan["capacity"]
    a = first_answer(profile)
    steps = {s.label: s.bytes for s in a.steps}
    total = a.steps[0].bytes
    assert sum(s.bytes for s in a.steps[1:]) == total, "the bars do not add up to the first one"
    assert all(s.bytes >= 0 for s in a.steps)
    if cap.get("weights_bytes") is not None:
        assert total == plan["gpu"]["memory_bytes"] and steps["weights"] == cap["weights_bytes"]
        assert steps["left"] == cap["rest_bytes"] - cap["token_pool_bytes"] - cap["mamba_pool_bytes"] - cap["spec_scratch_bytes"]
    assert steps["KV pool"] == cap["max_total_num_tokens"] * plan["token"]["cell_size_bytes"] \
        or steps["KV pool"] == cap["token_pool_bytes"]
    assert a.tokens_per_rank == cap["max_total_num_tokens"]


def test_each_binding_limit_has_its_own_words():
    from glm_kv.book.first_page import answer_sentence, first_answer

    from glm_kv.inputs.profile import load_profile

    seen = {}
    # one deployment per limit: 8 requests per rank asked for at 128K (requested), the article's
    # long requests (tokens), a small context with many requests asked for (state slots)
    for profile, overrides in (("h200-0.5.23", {"context_length": 131072}), ("article", {}),
                               ("h200-0.5.23", {"context_length": 4096, "max_running_requests": 4096})):
        a = first_answer(load_profile(profile, overrides))
        seen[a.binding] = answer_sentence(a)
    assert set(seen) == {"requested", "tokens", "mamba"}, seen.keys()
    assert "`max_running_requests`" in seen["requested"]
    assert "`max_total_num_tokens`" in seen["tokens"]
    assert "`max_mamba_cache_size`" in seen["mamba"]


def test_planted_waterfall_errors_are_caught(monkeypatch):
    """A waterfall that forgets the state pool, or a page glued from another profile, fails."""
    import dataclasses

    from glm_kv.book import first_page

    a = first_page.first_answer(BOOK_DEFAULT_PROFILE)
    steps = [s for s in a.steps if s.label != "state pool"]
    assert sum(s.bytes for s in steps[1:]) != steps[0].bytes, "the add-up check would miss a dropped pool"
    # a first answer built from a plan whose pools are one token short: the plan comparison fails
    cap = plan_json(BOOK_DEFAULT_PROFILE)["capacity"]
    short = dataclasses.replace(a, tokens_per_rank=a.tokens_per_rank - 1)
    assert short.tokens_per_rank != cap["max_total_num_tokens"]
    assert f"{cap['max_total_num_tokens']:,}" not in first_page.answer_sentence(short)


# ------------------------------------------------------------------------------------------------
# scaffolding out of sight (item 5)
# ------------------------------------------------------------------------------------------------

def reader_notebooks():
    from glm_kv.book.runner import toc_notebooks

    return list(toc_notebooks(ROOT))   # the agreement page too: its code cells are removed or hidden


@pytest.mark.parametrize("rel", reader_notebooks(), ids=str)
def test_no_reader_page_shows_a_check(rel):
    from glm_kv.book.hygiene import visible_scaffolding

    found = visible_scaffolding(nbformat.read(ROOT / rel, as_version=4))
    assert not found, f"{rel}: tag these remove-cell (glm_kv.book.hygiene.hide_scaffolding): {found}"


def test_the_scaffolding_check_fails_a_bad_notebook():
    from glm_kv.book.hygiene import hide_scaffolding, visible_scaffolding

    v4 = nbformat.v4
    dict_out = v4.new_output("execute_result", data={"text/plain": "{'profile': 'x', 'n': 1}"}, execution_count=1)
    nb = v4.new_notebook(cells=[
        v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nx = 1"),
        v4.new_code_cell("y = 2\nassert y == 2"),
        v4.new_code_cell("{'profile': 'x'}", outputs=[dict_out]),
        v4.new_code_cell("show(table)"),
        v4.new_code_cell('profile = "a"', metadata={"tags": ["parameters"]}),
    ])
    found = visible_scaffolding(nb)
    assert any("nbval" in f for f in found) and any("assert" in f for f in found) and any("raw dict" in f for f in found)
    hide_scaffolding(nb)
    assert visible_scaffolding(nb) == []
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    assert tags[:3] == [["remove-cell"]] * 3 and tags[3] == ["hide-input"] and tags[4] == ["parameters"]
    # nbval still runs them: tags only keep them off the page, nothing is deleted
    assert len(nb.cells) == 5
