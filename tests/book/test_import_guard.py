"""The book's processes skip ``rfc3987_syntax`` (issue 23: ~2.8 CPU s per process), and skipping it
changes no validation: no schema the book's libraries validate against uses the two formats that
module checks."""
from __future__ import annotations

import importlib.util
import inspect
import json
import subprocess
import sys
from pathlib import Path

from glm_kv.book import import_guard, runner, sphinx_server


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    return Path(spec.origin).parent if spec and spec.origin else None


def _formats(node, out: set) -> set:
    if isinstance(node, dict):
        fmt = node.get("format")
        if isinstance(fmt, str):
            out.add(fmt)
        for v in node.values():
            _formats(v, out)
    elif isinstance(node, list):
        for v in node:
            _formats(v, out)
    return out


def test_no_shipped_schema_uses_the_lost_formats():
    seen, formats = 0, set()
    for name in ("altair", "nbformat", "papermill", "jupyter_book", "myst_nb", "myst_parser", "jupyter_cache",
                 "sphinx_external_toc", "nbclient", "jupyter_client"):
        folder = _package_dir(name)
        if folder is None:
            continue
        for path in folder.rglob("*.json"):
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(doc, dict) and ("$schema" in doc or "definitions" in doc or "properties" in doc):
                seen += 1
                formats |= _formats(doc, set())
    assert seen >= 3, "found no schema: the scan itself is broken"
    assert "uri" in formats           # the scan does see formats (altair's Vega-Lite schema)
    assert not formats & set(import_guard.FORMATS_LOST), formats & set(import_guard.FORMATS_LOST)


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout


def test_skipped_module_is_absent_and_jsonschema_still_checks_formats():
    out = _run("from glm_kv.book.import_guard import skip; print(skip());"
               "import jsonschema, sys; fc = jsonschema.FormatChecker();"
               "print(sys.modules['rfc3987_syntax'] is None, 'iri' in fc.checkers, 'email' in fc.checkers)")
    assert out.split("\n")[:2] == ["['rfc3987_syntax']", "True False True"]


def test_a_kernel_skips_it_before_importing_the_book():
    """kernel_state.fresh runs first in every notebook the runner executes; the notebook's own cells
    then import altair (and with it jsonschema): the skipped module must not be loaded."""
    out = _run("import sys, os, tempfile; from glm_kv.book.kernel_state import fresh;"
               "fresh(tempfile.gettempdir()); import altair;"
               "print('jsonschema' in sys.modules, sys.modules.get('rfc3987_syntax', 0))")
    assert out.strip() == "True None"


def test_runner_and_sphinx_server_skip_it_before_their_imports():
    src = inspect.getsource(runner.run_book)
    assert "skip()" in src and src.index("skip()") < src.index("run_jobs(")
    serve = inspect.getsource(sphinx_server.serve)
    assert "skip()" in serve and serve.index("skip()") < serve.index("PRELOAD")
