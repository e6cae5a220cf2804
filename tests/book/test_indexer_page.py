"""Issue 29 item 6: chapter 3's figure, text, formula and takeaway describe the page SGLang allocates.

The reference is the allocated pool (``DevicePools`` on the CPU, shapes from the config and the
resolved arguments): its page size and its ``IndexKeyCache`` row, not the plan's byte fields.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("torch")


def _allocated(plan) -> tuple[int, int]:
    """(tokens in one allocated page, indexer keys its IndexKeyCache row holds), from the tensors."""
    from glm_kv.tensors.memory_pool import DevicePools, pool_geometry

    pools = DevicePools(pool_geometry(plan.args, max_running_requests_per_worker=plan.requests_per_worker),
                        device="cpu")
    row = pools.full_kv_pool.index_key_cache.buffer[0].shape[-1]
    return pools.full_kv_pool.page_size, row // plan.token.indexer_unpooled_bytes_per_token_per_layer


@pytest.mark.parametrize("profile", ["h200-0.5.23", "article", "b200-0.5.23"])
def test_page_facts_figure_and_formula_agree_with_the_allocated_page(profile):
    from glm_kv import load_plan
    from glm_kv.book.figures import indexer_page_facts, indexer_page_figure
    from glm_kv.ledgers.derivations import derivation

    plan = load_plan(profile)
    page_tokens, keys = _allocated(plan)
    facts = indexer_page_facts(plan)
    kpool = plan.token.index_kpool
    assert facts["idx_page_tokens"] == page_tokens
    assert facts["groups_per_page"] * kpool == page_tokens, "groups of index_kpool tokens fill the page"
    assert facts["keys_per_page"] == keys
    assert int(derivation(plan, "index_groups_per_page").value) == facts["groups_per_page"]
    svg = indexer_page_figure(plan).html
    assert f"{page_tokens} tokens" in svg and f"{facts['groups_per_page']} index_kpool" in svg
    assert f"{facts['groups_per_page']} groups" in svg and f"{keys} keys" in svg
    # reserved against written: one pooled key per group means the budget reserves what is written
    per_token_row = keys * plan.token.indexer_unpooled_bytes_per_token_per_layer / page_tokens
    pooled = keys * kpool == page_tokens
    if pooled:
        assert facts["reserved_layer"] == facts["written_layer"] >= per_token_row
        assert "reserves what is written" in facts["takeaway_indexer"]
        assert "reserves exactly what it writes" in facts["reserve_sentence"]
    else:
        assert facts["reserved_layer"] == per_token_row > facts["written_layer"]
        assert "while" in facts["takeaway_indexer"] and "but pooling writes only" in facts["reserve_sentence"]


def test_the_stored_chapter_glues_the_allocated_page():
    """The committed chapter 3 (default profile) shows the allocated page's groups, in text and takeaway."""
    nbformat = pytest.importorskip("nbformat")
    from glm_kv import load_plan
    from glm_kv.book.default_profile import BOOK_DEFAULT_PROFILE

    nb = nbformat.read(ROOT / "notebooks" / "03_hbm_pool.ipynb", as_version=4)
    glued = {}
    for cell in nb.cells:
        for o in (cell["outputs"] if "outputs" in cell else []):
            meta = o.get("metadata", {}).get("scrapbook", {})
            if meta.get("name"):
                data, prefix = o.get("data", {}), meta.get("mime_prefix", "")
                glued[meta["name"]] = data.get(prefix + "text/markdown") or data.get(prefix + "text/plain", "")
    plan = load_plan(BOOK_DEFAULT_PROFILE)
    page_tokens, keys = _allocated(plan)
    assert glued["groups_per_page"] == str(page_tokens // plan.token.index_kpool)
    assert glued["idx_page_tokens"] == str(page_tokens)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    takeaway = nb.cells[-1].source
    assert "{glue:text}`groups_per_page`" in takeaway and "{glue:md}`takeaway_indexer`" in takeaway
    assert re.search(r"reserved and written indexer bytes are different", text) is None
