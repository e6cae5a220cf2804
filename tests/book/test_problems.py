"""Worked problems (issue 21, item 7): each chapter's answer agrees with ``glm-kv plan --json``
(a separate process) and sits folded under its question."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from glm_kv.book.default_profile import BOOK_DEFAULT_PROFILE

ROOT = Path(__file__).resolve().parents[2]
nbformat = pytest.importorskip("nbformat")


@pytest.fixture(scope="module")
def contract() -> dict:
    out = subprocess.run([sys.executable, "-m", "glm_kv.cli", "plan", "--profile", BOOK_DEFAULT_PROFILE, "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT, timeout=120)
    return json.loads(out.stdout)


def bold(md: str) -> str:
    return re.search(r"\*\*([^*]+)\*\*", md).group(1)


def quarter(d: dict) -> int:
    page = d["token"]["page_size"]
    return max(page, (d["profile"]["context_length"] // 4) // page * page)


def test_answers_agree_with_the_plan_contract(contract):
    from glm_kv.book.problems import capacity_problem, request_problem, token_problem
    from glm_kv.book.tables import capacity_plan

    plan = capacity_plan(BOOK_DEFAULT_PROFILE)[0]
    n = quarter(contract)
    assert bold(token_problem(plan).answer).startswith(f"{n * contract['token']['cell_size_bytes']:,} B")
    per_rank = contract["capacity"]["requested_max_running_requests"] // 2
    assert bold(request_problem(plan).answer).startswith(
        f"{per_rank * contract['request']['state_bytes_per_request']:,} B")
    cap = contract["capacity"]
    fit = min(cap["requested_max_running_requests"], cap["max_total_num_tokens"] // n,
              cap["max_mamba_cache_size"] // contract["request"]["slots_per_request"])
    assert bold(capacity_problem(plan).answer) == f"{fit:,} requests"


@pytest.mark.parametrize("chapter", ["01_token", "02_request", "06_capacity"])
def test_each_chapter_ends_with_a_folded_answer(chapter):
    nb = nbformat.read(ROOT / "notebooks" / f"{chapter}.ipynb", as_version=4)
    md = nb.cells[-2].source
    assert md.startswith("## Worked problem") and "{glue:md}`problem_q`" in md
    assert re.search(r":::\{admonition\} Answer.*\n:class: dropdown\n\{glue:md\}`problem_a`", md)
    glued = {o["metadata"]["scrapbook"]["name"] for c in nb.cells for o in c.get("outputs", [])
             if o.get("metadata", {}).get("scrapbook")}
    assert {"problem_q", "problem_a"} <= glued


def test_a_planted_wrong_answer_is_caught(contract):
    """A problem that forgot the indexer (KV bytes only) no longer matches the contract."""
    import dataclasses

    from glm_kv.book.problems import token_problem
    from glm_kv.book.tables import capacity_plan

    plan = capacity_plan(BOOK_DEFAULT_PROFILE)[0]
    wrong = dataclasses.replace(plan, token=dataclasses.replace(plan.token,
                                                                 cell_size_bytes=plan.token.kv_bytes_per_token))
    n = quarter(contract)
    assert not bold(token_problem(wrong).answer).startswith(f"{n * contract['token']['cell_size_bytes']:,} B")
