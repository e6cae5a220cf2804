"""One vocabulary (issue 21, item 3): the glossary defines each word beside SGLang's name, every
chapter that uses a word links it, and no chapter says a retired word."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from glm_kv.book.vocabulary import RETIRED, TERMS, linked_terms, prose, retired_words

ROOT = Path(__file__).resolve().parents[2]
nbformat = pytest.importorskip("nbformat")
NOTATION = (ROOT / "book" / "notation.md").read_text()


def chapters():
    from glm_kv.book.runner import toc_notebooks

    return [p for p in toc_notebooks(ROOT) if p.as_posix() != "book/sglang_agreement.ipynb"]


def markdown(rel: Path) -> str:
    return "\n".join(c.source for c in nbformat.read(ROOT / rel, as_version=4).cells if c.cell_type == "markdown")


def test_glossary_defines_every_word_beside_sglangs_name():
    table = NOTATION.split("```{glossary}")[0]
    glossary = NOTATION.split("```{glossary}")[1].split("```")[0]
    for term in TERMS:
        row = next((line for line in table.splitlines() if f"{{term}}`{term}`" in line), None)
        assert row is not None, f"{term!r}: no row in the glossary table"
        assert row.count("|") >= 3 and row.split("|")[2].strip(), f"{term!r}: no SGLang name beside it"
        assert re.search(rf"^{re.escape(term)}$", glossary, re.M), f"{term!r}: not defined in the glossary"


@pytest.mark.parametrize("rel", chapters(), ids=str)
def test_chapters_use_one_word_and_link_it(rel):
    md = markdown(rel)
    assert not retired_words(md), f"{rel}: {retired_words(md)}"
    words = prose(md).lower()
    used = {t for t in TERMS if t in ("token slots", "state slots", "state pool", "KV pool", "requests that fit")
            and re.search(rf"(?<!\w){re.escape(t.lower())}(?!\w)", words)}
    missing = used - linked_terms(md)
    assert not missing, f"{rel}: uses {sorted(missing)} without linking the glossary ({{term}})"


def test_the_checks_catch_a_planted_page():
    bad = "SGLang gives the mamba pool its share, then the token slots follow."
    assert retired_words(bad) == [f"{'mamba pool'!r} (say {RETIRED['mamba pool']!r})"]
    assert "token slots" not in linked_terms(bad)
    good = "the {term}`state pool` and {term}`Token slots <token slots>`; `mamba_pool` is code"
    assert retired_words(good) == [] and linked_terms(good) == {"state pool", "token slots"}
