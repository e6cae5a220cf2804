#!/usr/bin/env python3
"""Re-make the book's CJK web font subset (``book/_static/fonts/glm-kv-cjk.woff2``).

The book ships only the CJK characters its sources use (the article's title and terms), cut from
Noto Sans CJK SC (SIL OFL 1.1, Debian's ``fonts-noto-cjk``) with fontTools' ``pyftsubset`` into
WOFF2, next to the OFL licence. Run it after adding Chinese text (``make cjk-font``);
tests/book/test_cjk_font.py fails while a character of the built book or of its sources is missing.

Usage::

    python scripts/cjk_subset.py [--font /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc]
    python scripts/cjk_subset.py --check     # exit 1 when the sources use a character the subset lacks
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from glm_kv.book.static_assets import CJK_FONT_DIR, CJK_FONT_FILE, CJK_FONT_LICENSE, cjk_characters  # noqa: E402

# Where the book's text comes from: its configuration, pages, chapters and the package that glues
# text into them (profile descriptions, glossary terms, table headings).
SOURCES = ("_config.yml", "_toc.yml", "book", "notebooks", "glm_kv")
SUFFIXES = {".yml", ".yaml", ".md", ".ipynb", ".py", ".json", ".txt"}
FONT = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
FONT_NUMBER_SC = 2      # the .ttc's faces: JP, KR, SC, TC, HK (fc-query lists them)
LICENSE = Path("/usr/share/doc/fonts-noto-cjk/copyright")


def source_characters(root: Path = ROOT) -> set[str]:
    """Every CJK character in the book's sources (a superset of what the built pages show)."""
    chars: set[str] = set()
    for name in SOURCES:
        top = root / name
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in files:
            if path.suffix in SUFFIXES and "_static" not in path.parts and "__pycache__" not in path.parts:
                chars |= cjk_characters(path.read_text(encoding="utf-8", errors="replace"))
    return chars


def font_characters(path: Path) -> set[str]:
    """The characters a font file maps (its best cmap)."""
    from fontTools.ttLib import TTFont

    with TTFont(path) as font:
        return {chr(c) for c in font.getBestCmap()}


def subset(font: Path, chars: set[str], out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "chars.txt"
        text.write_text("".join(sorted(chars)), encoding="utf-8")
        subprocess.run([sys.executable, "-m", "fontTools.subset", str(font), f"--font-number={FONT_NUMBER_SC}",
                        f"--text-file={text}", "--flavor=woff2", "--layout-features=*", "--no-hinting",
                        "--desubroutinize", f"--output-file={out}"], check=True)


def font_copyright(font: Path) -> str:
    """The font's own copyright notice (name ID 0 of the SC face)."""
    from fontTools.ttLib import TTFont

    with TTFont(font, fontNumber=FONT_NUMBER_SC) as f:
        return str(f["name"].getDebugName(0) or "")


def ofl_text(copyright_file: Path, notice: str) -> str | None:
    """The font's copyright line and the SIL OFL 1.1 text, from Debian's ``copyright`` file."""
    if not copyright_file.is_file():
        return None
    lines = copyright_file.read_text(encoding="utf-8").splitlines()
    # the stand-alone licence paragraph (the "Files: *" stanza names it too, without its text)
    start = max(i for i, line in enumerate(lines) if line == "License: SIL-1.1")
    body = []
    for line in lines[start + 1:]:
        if line and not line.startswith(" "):
            break
        body.append("" if line.strip() == "." else line[1:])
    return ("Noto Sans CJK SC, subset for this book (glyphs unchanged; only the characters the book uses).\n"
            f"{notice}\n"
            "Subset of Debian's fonts-noto-cjk (NotoSansCJK-Regular.ttc, face SC) by scripts/cjk_subset.py.\n\n"
            + "\n".join(body).strip() + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--font", type=Path, default=FONT, help="Noto Sans CJK .ttc (fonts-noto-cjk)")
    ap.add_argument("--license", type=Path, default=LICENSE, help="Debian's copyright file of fonts-noto-cjk")
    ap.add_argument("--check", action="store_true", help="only check that the subset covers the sources")
    args = ap.parse_args(argv)
    folder = ROOT / CJK_FONT_DIR
    chars = source_characters()
    if args.check:
        missing = chars - font_characters(folder / CJK_FONT_FILE)
        if missing:
            print(f"{CJK_FONT_DIR / CJK_FONT_FILE} lacks {''.join(sorted(missing))}: run `make cjk-font`")
            return 1
        print(f"{CJK_FONT_DIR / CJK_FONT_FILE}: all {len(chars)} CJK characters of the sources")
        return 0
    if not args.font.is_file():
        print(f"{args.font} not found: apt-get install fonts-noto-cjk (or give --font)", file=sys.stderr)
        return 2
    folder.mkdir(parents=True, exist_ok=True)
    subset(args.font, chars, folder / CJK_FONT_FILE)
    license_text = ofl_text(args.license, font_copyright(args.font))
    if license_text:
        (folder / CJK_FONT_LICENSE).write_text(license_text, encoding="utf-8")
    print(f"{CJK_FONT_DIR / CJK_FONT_FILE}: {len(chars)} characters, {(folder / CJK_FONT_FILE).stat().st_size:,} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
