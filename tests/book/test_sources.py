"""Links to SGLang's source (issue 21, item 8): each SGLang class or function the book names in prose
links to its line in the v0.5.23 source.

* the line numbers in ``glm_kv.book.sources.SOURCES`` are re-read from the 0.5.23 wheel (the
  ``.venv-sglang`` next to the checkout, or an importable ``sglang``): a stale line fails;
* no chapter or book page names one of them in plain backticks (it must use ``{sglang}``);
* the ``{sglang}`` role renders a link in a real Sphinx build of a tiny page; an unknown name fails
  the build; the pitfall sections link the names they mention.
"""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from glm_kv.book.sources import SOURCES, link_md, link_names, source_md, source_url

ROOT = Path(__file__).resolve().parents[2]


def sglang_root() -> Path | None:
    for site in sorted(ROOT.glob(".venv-sglang/lib/python3*/site-packages/sglang")):
        return site
    spec = importlib.util.find_spec("sglang")
    return Path(spec.origin).parent if spec and spec.origin else None


def test_every_line_is_the_one_named_in_the_wheel():
    root = sglang_root()
    if root is None:
        pytest.skip("no sglang 0.5.23 source (.venv-sglang) to read")
    stale = []
    for name, (path, line, starts) in SOURCES.items():
        lines = (root / path).read_text(encoding="utf-8").splitlines()
        if len(lines) < line or not lines[line - 1].startswith(starts):
            stale.append(f"{name}: {path}:{line} is not {starts!r}")
    assert not stale, stale


def test_each_entry_names_itself_on_its_line():
    """Cheap and wheel-free: the text a line starts with names the entry (its last part)."""
    for name, (path, line, starts) in SOURCES.items():
        assert path.startswith("srt/") and path.endswith(".py") and line > 0, name
        assert re.search(rf"\b{re.escape(name.split('.')[-1])}\b", starts), (name, starts)


def prose_texts() -> list[tuple[str, str]]:
    """(file, Markdown) for every chapter and book page: markdown cells and glued Markdown, code fences dropped."""
    nbformat = pytest.importorskip("nbformat")
    out = []
    files = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "book").glob("*.ipynb")) \
        + sorted((ROOT / "book").glob("*.md"))
    for f in files:
        if f.suffix == ".ipynb":
            cells = nbformat.read(f, as_version=4).cells
            texts = [c.source for c in cells if c.cell_type == "markdown"]
            texts += [o["data"][k] for c in cells for o in c.get("outputs", [])     # glued Markdown
                      for k in ("application/papermill.record/text/markdown",) if k in o.get("data", {})]
        else:
            texts = [f.read_text(encoding="utf-8")]
        out += [(f.name, re.sub(r"```(?!\{).*?```", "", t, flags=re.S)) for t in texts]
    return out


UNLINKED = re.compile(r"(?<![}\[\w])`(" + "|".join(sorted(map(re.escape, SOURCES), key=len, reverse=True)) + r")`")


def unlinked(texts) -> list[str]:
    return [f"{name}: `{m.group(1)}`" for name, t in texts for m in UNLINKED.finditer(t)]


def test_no_prose_names_an_sglang_object_without_its_link():
    assert not unlinked(prose_texts())


def test_a_plain_name_planted_in_prose_is_caught():
    texts = prose_texts()
    assert unlinked(texts + [("planted.md", "SGLang builds one `HybridLinearKVPool` here.")]) == \
        ["planted.md: `HybridLinearKVPool`"]
    # the role and a glued link are not plain names
    assert not unlinked([("ok.md", "one {sglang}`HybridLinearKVPool`, " + source_md("MambaPool"))])


def test_every_role_in_prose_names_a_known_object():
    used = {m.group(1) for _, t in prose_texts() for m in re.finditer(r"\{sglang\}`(?:[^`<]*<)?([^`>]+)>?`", t)}
    assert used and used <= set(SOURCES), used - set(SOURCES)


def test_link_names_links_only_whole_sglang_names():
    out = link_names("IndexKeyCache and IndexKeyCache._buffer_shape, not tree.evict_host or MambaPoolHostX <b>")
    assert f'<a href="{source_url("IndexKeyCache")}"><code>IndexKeyCache</code></a>' in out
    assert f'<a href="{source_url("IndexKeyCache._buffer_shape")}">' in out
    assert "tree.evict_host" in out and "MambaPoolHostX" in out and "&lt;b&gt;" in out
    assert out.count("<a ") == 2


def test_the_pitfall_sections_link_the_names_they_mention():
    pytest.importorskip("pandas")
    from glm_kv.book.pitfalls import pitfall_sections

    page = pitfall_sections("h200-0.5.23").html
    assert f'<a href="{source_url("calculate_mla_kv_cache_dim")}"><code>calculate_mla_kv_cache_dim</code></a>' in page
    assert not re.search(r"(?<![>\w])HybridLinearKVPool(?![<\w])", page)  # every mention is inside a link


@pytest.mark.skipif(importlib.util.find_spec("sphinx") is None, reason="no sphinx")
def test_the_role_renders_a_link_and_refuses_an_unknown_name(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text("extensions = ['myst_parser', 'glm_kv.book.sources']\n")
    (src / "index.md").write_text("# t\n\nOne {sglang}`HybridLinearKVPool` and {sglang}`its sub-pool <MambaPool>`.\n")
    cmd = [sys.executable, "-m", "sphinx", "-q", "-b", "html", str(src), str(tmp_path / "out")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert re.search(rf'<a class="[^"]*glm-kv-sglang[^"]*" href="{re.escape(source_url("HybridLinearKVPool"))}">'
                     r'<code[^>]*><span class="pre">HybridLinearKVPool</span></code></a>', page), page[-2000:]
    assert '<span class="pre">sub-pool</span>' in page and source_url("MambaPool") in page
    (src / "index.md").write_text("# t\n\nOne {sglang}`NoSuchPool`.\n")
    proc = subprocess.run(cmd + ["-W"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode != 0 and "NoSuchPool" in proc.stderr


def test_glued_markdown_links_sglang_names():
    out = link_md("How many `IndexKeyCache` pages, `index_kpool` and [`MambaPool`](x)?")
    assert out == f"How many [`IndexKeyCache`]({source_url('IndexKeyCache')}) pages, `index_kpool` and [`MambaPool`](x)?"
    assert not unlinked([("glued.md", out)])


def test_definition_lists_link_the_names_they_mention():
    pytest.importorskip("pandas")
    from glm_kv.book.tables import definitions

    out = definitions([("compress tail (_compress_tail_k)", "not a HostPoolGroup entry <b>")]).html
    assert f'<a href="{source_url("_compress_tail_k")}"><code>_compress_tail_k</code></a>' in out
    assert f'<a href="{source_url("HostPoolGroup")}"><code>HostPoolGroup</code></a>' in out and "&lt;b&gt;" in out
