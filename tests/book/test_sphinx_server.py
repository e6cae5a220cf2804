"""The Sphinx server (one process that imports once, a forked child per book) writes what a
``jupyter-book build`` in a fresh interpreter writes: its preloaded modules (issue 23: altair,
myst-nb's Sphinx side, jupyter-cache, Sphinx's built-in extensions, ...) change no byte."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from glm_kv.book import runner
from glm_kv.book.parallel import SphinxBuilder, bundle_cache_dir
from glm_kv.book.sphinx_server import build_command, ensure_bundle, seed_static

from test_book_parallel import differing_files  # noqa: E402 (tests/book is on sys.path)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="the server forks (POSIX)")


def test_server_build_equals_a_fresh_jupyter_book_build_slow(tmp_path):
    """The committed book (the default profile's executed notebooks), built both ways."""
    cache = bundle_cache_dir(ROOT)
    ensure_bundle(cache)
    a, b = (runner._stage(ROOT, tmp_path / k) for k in ("server", "fresh"))
    with SphinxBuilder(cache) as builder:
        assert builder.submit(a, tmp_path / "server", strict=True).result() == 0, \
            (tmp_path / "server" / "sphinx.log").read_text()[-3000:]
    seed_static(cache, tmp_path / "fresh")
    cmd = [sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; sys.exit(main())",
           *build_command(b, tmp_path / "fresh", True)]
    done = subprocess.run(cmd, cwd=b, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    html_a, html_b = tmp_path / "server" / "_build" / "html", tmp_path / "fresh" / "_build" / "html"
    assert (html_a / "index.html").is_file()
    # .buildinfo hashes the configuration, whose static path the server writes relative to the
    # sources (sphinx_server._relative_static) and a plain build absolute: the only file allowed to differ
    diff = [d for d in differing_files(html_a, html_b) if not d.startswith(".buildinfo")]
    assert diff == [], diff[:5]
