"""Worked problems (issue 21, item 7): every chapter ends with one, its answer folded under its
question. Each answer is checked against a value worked here by hand from SGLang-side facts and the
article's figures (``/work/shared/reference``: sglang-0.5.23.md, article-figures.md) or from
``glm-kv plan --json`` (a separate process), never from ``glm_kv.book.problems`` itself; each check
is shown to catch a planted error."""
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


CHAPTERS = ["01_token", "02_request", "03_hbm_pool", "04_radix_tree", "05_dram", "06_capacity",
            "06b_choosing_flags", "07_pitfalls", "08_what_changed"]


def test_every_chapter_of_the_toc_has_a_problem():
    from glm_kv.book.problems import PROBLEMS

    chapters = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert chapters == sorted(CHAPTERS) == sorted(PROBLEMS)


@pytest.mark.parametrize("chapter", CHAPTERS)
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


# --- Chapters 3 to 8: the expected bold text, worked by hand --------------------------------------
# SGLang 0.5.23 facts for GLM-5.3-Flash (sglang-0.5.23.md; article-figures.md for the article):
FULL_LAYERS, KDA_LAYERS = 11, 34                 # config: layers 3, 7, ..., 43 are full attention
KV_BF16 = 512 * 2                                # kv_lora_rank 512, no RoPE part, bf16: B/layer/token
IDX_ROW = 128 + 128 // 128 * 4                   # IndexKeyCache key: 128 fp8 + one fp32 scale = 132 B
PAGE_0523 = 64 * 4                               # _deepseek_family_overrides: 64 x index_kpool
IDX_PAGE_0523 = PAGE_0523 // 4 * IDX_ROW         # _buffer_shape: page // kpool pooled keys = 8,448 B
CELL_0523 = FULL_LAYERS * (KV_BF16 + IDX_ROW // 4)             # 11,627 (sglang-0.5.23.md item 3)
SLOT = KDA_LAYERS * (3 * 24_576 * 2 + 64 * 128 * 128 * 4)      # mamba_cache_per_req: 147,619,840
ARTICLE_CELL_BF16, ARTICLE_PAGE = 11_264 + 1_452, 64           # article figures 9 and 10
DEFAULT_CONTEXT, ARTICLE_CONTEXT = 1_048_576, 131_072          # the two profiles' context_length


def test_hand_figures_are_the_published_ones():
    assert (IDX_PAGE_0523, CELL_0523, SLOT, ARTICLE_CELL_BF16) == (8_448, 11_627, 147_619_840, 12_716)


def _plan(profile: str = BOOK_DEFAULT_PROFILE):
    from glm_kv.book.tables import capacity_plan

    return capacity_plan(profile)[0]


def expected(chapter: str, profile: str, contract: dict) -> str:
    """The bold part of ``chapter``'s answer for ``profile``, worked by hand."""
    q = (DEFAULT_CONTEXT if profile == BOOK_DEFAULT_PROFILE else ARTICLE_CONTEXT) // 4
    if profile == "article":          # the article's example: scaled fp8, 64-token pages
        return {"03_hbm_pool": f"{q // ARTICLE_PAGE * 8_448 * FULL_LAYERS:,} B",         # figure 10
                "04_radix_tree": f"{8 * ARTICLE_PAGE * 7_260 + SLOT:,} B",               # figures 7, 16
                "05_dram": f"{q * 5_632 + SLOT:,} B"}[chapter]   # figure 28: host row 512, no indexer
    cap = contract["capacity"]
    budget = cap["token_pool_budget_bytes"]
    whole = lambda cell, page: budget // cell // page * page          # noqa: E731  SGLang: rest // cell_size
    by_state = cap["max_mamba_cache_size"] // 5                       # 5 state slots: extra_buffer + overlap
    return {
        "03_hbm_pool": f"{q // PAGE_0523 * IDX_PAGE_0523 * FULL_LAYERS:,} B",
        "04_radix_tree": f"{8 * PAGE_0523 * CELL_0523 + SLOT:,} B",
        "05_dram": f"{q * CELL_0523 + SLOT:,} B",                     # host KV row = device row, + INDEXER
        "06b_choosing_flags": f"{cap['max_total_num_tokens'] // by_state // PAGE_0523 * PAGE_0523:,} tokens",
        "07_pitfalls": (f"{whole(FULL_LAYERS * KV_BF16, PAGE_0523) - cap['max_total_num_tokens']:,}"
                        f" tokens too many"),
        "08_what_changed": f"0.5.23 holds {whole(CELL_0523, PAGE_0523) - whole(ARTICLE_CELL_BF16, ARTICLE_PAGE):,}"
                           f" more tokens",
    }[chapter]


def answer_agrees(chapter: str, plan, profile: str, contract: dict) -> bool:
    from glm_kv.book.problems import PROBLEMS

    return bold(PROBLEMS[chapter](plan).answer).startswith(expected(chapter, profile, contract))


CASES = [(c, BOOK_DEFAULT_PROFILE) for c in ("03_hbm_pool", "04_radix_tree", "05_dram", "06b_choosing_flags",
                                             "07_pitfalls", "08_what_changed")]
CASES += [(c, "article") for c in ("03_hbm_pool", "04_radix_tree", "05_dram")]


@pytest.mark.parametrize(("chapter", "profile"), CASES)
def test_answer_matches_hand_arithmetic(chapter, profile, contract):
    assert answer_agrees(chapter, _plan(profile), profile, contract), (chapter, profile)


def test_the_contract_divides_by_the_hand_cell_size(contract):
    """The budget rule the hand answers of chapters 7 and 8 use reproduces the plan's token slots."""
    cap = contract["capacity"]
    assert cap["token_pool_budget_bytes"] // CELL_0523 // PAGE_0523 * PAGE_0523 == cap["max_total_num_tokens"]


def _replace(plan, part: str, **fields):
    import dataclasses

    return dataclasses.replace(plan, **{part: dataclasses.replace(getattr(plan, part), **fields)})


PLANTED = {
    # the article's one-key-per-token row carried over to 0.5.23 (pitfall 3)
    "03_hbm_pool": lambda p: _replace(p, "token", indexer_page_bytes=PAGE_0523 * IDX_ROW),
    # a bf16 KDA state slot where the profile keeps fp32
    "04_radix_tree": lambda p: _replace(p, "request", state_slot_bytes=76_316_672),
    # the article's host entries under 0.5.23 (pitfall 6)
    "05_dram": lambda p: _replace(p, "host", entries=("kv", "mamba")),
    # --disable-overlap-schedule's 4 slots per request where the profile has 5
    "06b_choosing_flags": lambda p: _replace(p, "request", slots_per_request=4),
}


@pytest.mark.parametrize("chapter", sorted(PLANTED))
def test_a_planted_wrong_plan_is_caught(chapter, contract):
    plan = _plan()
    assert answer_agrees(chapter, plan, BOOK_DEFAULT_PROFILE, contract)
    assert not answer_agrees(chapter, PLANTED[chapter](plan), BOOK_DEFAULT_PROFILE, contract)


def test_a_budget_without_page_rounding_is_caught(contract, monkeypatch):
    import glm_kv.book.problems as problems

    plan = _plan()
    monkeypatch.setattr(problems, "tokens_in_budget", lambda budget, cell, page: budget // cell)
    assert not answer_agrees("07_pitfalls", plan, BOOK_DEFAULT_PROFILE, contract)
    assert not answer_agrees("08_what_changed", plan, BOOK_DEFAULT_PROFILE, contract)


def test_a_layout_switch_that_does_nothing_is_caught(contract, monkeypatch):
    import glm_kv.book.problems as problems

    plan = _plan()
    monkeypatch.setattr(problems, "_layout_plan", lambda p, layout: p)
    assert not answer_agrees("08_what_changed", plan, BOOK_DEFAULT_PROFILE, contract)
