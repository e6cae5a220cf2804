"""A glued string must render as written: myst-nb reads a glued text/plain value as a Python literal,
so "1,152" would be shown as "(1, 152)". Numbers are glued as numbers and formatted in the role."""
from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

from glm_kv.book.runner import toc_notebooks

ROOT = Path(__file__).resolve().parents[2]


def _glued(nb):
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            meta = out.get("metadata", {}).get("scrapbook")
            if meta:
                text = out.get("data", {}).get("application/papermill.record/text/plain")
                if text is not None:
                    yield meta["name"], text


def misread(text: str) -> bool:
    """True when myst-nb would show ``text`` as something else (a tuple where none was written)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return False
    return isinstance(value, tuple) and not text.strip().startswith("(")


@pytest.mark.parametrize("rel", toc_notebooks(ROOT), ids=str)
def test_glued_strings_render_as_written(rel):
    bad = [(name, text) for name, text in _glued(nbformat.read(ROOT / rel, as_version=4)) if misread(text)]
    assert not bad, f"glue these as numbers and format in the role ({{glue:text}}`name:,`): {bad}"


def test_the_check_sees_a_thousands_separator_string():
    assert misread("1,152") and not misread("(3, 24576)") and not misread("951,582,720 B (≈951.6 MB)")


def test_a_refused_variant_shows_glm_kvs_words_without_sglangs_quote():
    """A table cell keeps the refusal's own words; the SGLang message the CLI quotes whole is left out."""
    from glm_kv.book.tables import plan_variants
    from glm_kv.inputs.profile import load_profile

    df = plan_variants(load_profile("h200-0.5.23"), {"fits": {}, "too heavy": {"weights_bytes": 200 * 2**30}},
                       {"tokens": "capacity.max_total_num_tokens"})
    cell = df.loc["too heavy", "refused"]
    assert cell.startswith("weights_bytes: weights (214,748,364,800 B per rank, profile) leave no memory")
    assert "no fraction fits" in cell and "SGLang 0.5.23 says" not in cell and "Loaded weights" not in cell
    assert df.loc["fits", "refused"] == ""
