"""Files the built book ships so that it reads offline: MathJax, and a CJK web font subset.

* **MathJax** (issue 29, item 4): SGLang's formulas are written in TeX (``$$ ... $$`` in the
  chapters); with no MathJax a reader sees ``\\[\\text{rest} = ...\\]``. Sphinx loads MathJax from a
  CDN by default, which an offline reader cannot reach, so the book ships MathJax 3's
  ``tex-svg.js`` (one self-contained file: TeX in, SVG out, no font files to fetch) copied from the
  ``django-static-mathjax`` wheel on PyPI (MathJax 3.2.2, Apache-2.0, no dependencies: the project
  installs it with the ``book`` extra) next to its licence, and points ``mathjax_path`` at it.
* **CJK font** (issue 29, item 9): the title and some terms are the article's Chinese. A machine
  without a CJK font draws boxes, so the book ships a subset of Noto Sans CJK SC (SIL OFL 1.1) holding
  exactly the CJK characters the book uses, as ``book/_static/fonts/glm-kv-cjk.woff2`` with its
  licence, loaded by the book's CSS (``@font-face``). ``scripts/cjk_subset.py`` re-makes it from
  Debian's ``fonts-noto-cjk`` when text with new characters is added; tests/book/test_cjk_font.py
  fails until it is.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

MATHJAX_DIR = "mathjax"                # inside the book's _static/
MATHJAX_FILE = "tex-svg.js"
CJK_FONT_DIR = Path("book") / "_static" / "fonts"   # in the book's sources
CJK_FONT_FILE = "glm-kv-cjk.woff2"
CJK_FONT_LICENSE = "OFL.txt"
CJK_FAMILY = "glm-kv CJK"

# CJK Unified Ideographs (+ extension A), CJK punctuation, full-width forms: what a Latin font lacks.
CJK_RE = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


def mathjax_source() -> Path:
    """The folder of the MathJax 3 distribution installed by ``django-static-mathjax``."""
    try:
        import mathjax  # the django-static-mathjax wheel's package: static files only, no code
    except ImportError as err:  # pragma: no cover - the book extra installs it
        raise RuntimeError("MathJax is missing: install the book extra (pip install -e '.[book]'), "
                           "which brings django-static-mathjax") from err
    root = Path(mathjax.__file__).resolve().parent / "static" / "mathjax"
    if not (root / "es5" / MATHJAX_FILE).is_file():  # pragma: no cover
        raise RuntimeError(f"{root}/es5/{MATHJAX_FILE} not found: reinstall django-static-mathjax")
    return root


def write_mathjax(static: Path) -> str:
    """Copy ``tex-svg.js`` and MathJax's licence into ``static/mathjax/``; return the path Sphinx's
    ``mathjax_path`` takes (relative to ``_static``). Reused when already there."""
    src = mathjax_source()
    dest = Path(static) / MATHJAX_DIR
    dest.mkdir(parents=True, exist_ok=True)
    for name, origin in ((MATHJAX_FILE, src / "es5" / MATHJAX_FILE), ("LICENSE", src / "LICENSE")):
        target = dest / name
        if not target.is_file() or target.stat().st_size != origin.stat().st_size:
            shutil.copyfile(origin, target)
    return f"{MATHJAX_DIR}/{MATHJAX_FILE}"


def write_cjk_font(static: Path, srcdir: Path) -> bool:
    """Copy the CJK subset and its OFL licence from the book's sources into ``static``; False when
    the sources hold no font (a book without Chinese then falls back to the system's fonts)."""
    folder = Path(srcdir) / CJK_FONT_DIR
    if not (folder / CJK_FONT_FILE).is_file():
        return False
    Path(static).mkdir(parents=True, exist_ok=True)
    for name in (CJK_FONT_FILE, CJK_FONT_LICENSE):
        shutil.copyfile(folder / name, Path(static) / name)
    return True


def font_face_css() -> str:
    """The ``@font-face`` rule for the shipped subset (the CSS file sits beside the font)."""
    return (f'@font-face {{ font-family: "{CJK_FAMILY}"; src: url("{CJK_FONT_FILE}") format("woff2");\n'
            "  font-weight: 100 900; font-style: normal; font-display: block; }\n")


def cjk_characters(text: str) -> set[str]:
    """The CJK characters in ``text`` (what the font subset must cover)."""
    return set(CJK_RE.findall(text))
