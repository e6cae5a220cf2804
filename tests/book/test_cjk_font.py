"""Issue 29 item 9: the book's CJK web font subset covers every CJK character the book shows.

The subset (``book/_static/fonts/glm-kv-cjk.woff2``, Noto Sans CJK SC under the SIL OFL) holds
only the characters the book's sources use. Adding Chinese text without re-making it
(``make cjk-font``) fails here, before a reader on a machine without a CJK font sees a box.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from glm_kv.book.static_assets import CJK_FONT_DIR, CJK_FONT_FILE, CJK_FONT_LICENSE, cjk_characters

ROOT = Path(__file__).resolve().parents[2]
FONT = ROOT / CJK_FONT_DIR / CJK_FONT_FILE

pytest.importorskip("fontTools")
pytest.importorskip("brotli")  # WOFF2


def _subset_script():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import cjk_subset
    finally:
        sys.path.pop(0)
    return cjk_subset


def test_the_subset_ships_with_its_ofl_licence():
    assert FONT.is_file() and FONT.stat().st_size < 200_000, "a subset, not the whole font"
    licence = (ROOT / CJK_FONT_DIR / CJK_FONT_LICENSE).read_text(encoding="utf-8")
    assert "SIL OPEN FONT LICENSE Version 1.1" in licence and "Copyright" in licence


def test_every_cjk_character_of_the_sources_is_in_the_subset():
    cs = _subset_script()
    used = cs.source_characters()
    assert "账" in used and "三" in used, "the title's 三本账 is found in the sources"
    missing = used - cs.font_characters(FONT)
    assert not missing, f"{CJK_FONT_FILE} lacks {''.join(sorted(missing))}: run `make cjk-font`"


def test_a_character_added_without_re_subsetting_is_caught(tmp_path):
    """Plant a new Chinese word in a copy of the sources: the same comparison must name it."""
    cs = _subset_script()
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "new.md").write_text("# 显存\n", encoding="utf-8")
    missing = cs.source_characters(tmp_path) - cs.font_characters(FONT)
    assert missing == {"显", "存"} - cs.font_characters(FONT) and "显" in missing


def test_the_stored_pages_show_only_characters_of_the_subset():
    """The stored notebook outputs (what the built pages show) against the font's cmap."""
    import nbformat

    have = _subset_script().font_characters(FONT)
    shown: set[str] = set()
    for path in [*ROOT.joinpath("notebooks").glob("*.ipynb"), *ROOT.joinpath("book").glob("*.ipynb")]:
        for cell in nbformat.read(path, as_version=4).cells:
            shown |= cjk_characters(cell.source)
            for out in (cell["outputs"] if "outputs" in cell else []):
                for value in out.get("data", {}).values():
                    shown |= cjk_characters(value if isinstance(value, str) else "".join(value)
                                            if isinstance(value, list) else "")
                shown |= cjk_characters("".join(out.get("text", "")))
    assert shown, "the book shows Chinese (the title, 三本账)"
    assert not shown - have, f"shown but not in the subset: {''.join(sorted(shown - have))}"
