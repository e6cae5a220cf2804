"""One process that imports Jupyter Book and Sphinx once and builds every book of a run.

A ``jupyter-book build`` in a fresh interpreter spends seconds importing (Sphinx, MyST-NB, the
theme, jsonschema's grammar compilation) and seconds more asking vl-convert for the Vega bundle
(``charts.javascript_bundle``, the same 0.9 MB for every profile). Here the imports happen once,
in this server; each build runs in a child forked from it, so builds still share no Sphinx state
(a fork gets a fresh copy of the imported modules, never a previous build's application) and the
output is what a build in a fresh process writes. The Vega bundle is written once into a cache
folder (version-stamped by ``charts.write_javascript_bundle``) and copied where the build's
``setup`` hook looks for it, so the hook reuses it instead of regenerating it.

Protocol (text lines on stdin/stdout): the client sends ``{"id", "src", "out", "strict", "log"}``
and receives ``{"id", "rc"}`` when that build's child has exited; builds run concurrently. EOF on
stdin ends the server after the running builds. POSIX only (``os.fork``); ``SphinxBuilder`` falls
back to one ``jupyter-book`` process per build elsewhere.
"""
from __future__ import annotations

import importlib
import json
import os
import select
import shutil
import sys
import traceback
from pathlib import Path

PRELOAD = ("jupyter_book.cli.main", "jupyter_book.sphinx", "jupyter_book.config", "sphinx.application",
           "sphinx.builders.html", "myst_nb", "myst_parser", "sphinx_book_theme", "pydata_sphinx_theme",
           "sphinx_togglebutton", "sphinx_copybutton", "sphinx_thebe", "sphinx_comments",
           "sphinx_external_toc", "sphinx_multitoc_numbering", "sphinx_design", "sphinx_jupyterbook_latex",
           "glm_kv.book.charts", "glm_kv.book.sources",
           # what a build's Sphinx(...) imports on top (about 660 modules, 1.5-2 s per book when each
           # forked child imported them itself): myst-nb's Sphinx side and its jupyter-cache /
           # SQLAlchemy, the charts' altair and vl-convert, nbclient and IPython, the lexers and
           # Babel that the write phase loads, and Sphinx's built-in extensions (added in serve)
           "myst_nb.sphinx_ext", "myst_nb.sphinx_", "jupyter_cache.cache.db", "altair", "vl_convert",
           "nbclient", "IPython", "ipython_pygments_lexers", "babel.numbers", "linkify_it",
           "mdit_py_plugins", "fastjsonschema", "alabaster")
STATIC = "glm_kv_static"  # charts.setup: Path(app.doctreedir).parent / "glm_kv_static"


def build_command(src: str | Path, out: str | Path, strict: bool) -> list[str]:
    """The ``jupyter-book build`` arguments (without the program) for the staged sources."""
    args = ["build", str(src), "--path-output", str(out), "--builder", "html", "--quiet"]
    if strict:
        args += ["-W", "-n", "--keep-going"]
    return args


def ensure_bundle(cache: Path) -> None:
    """The Vega bundle in ``cache`` (written once; later runs and other servers reuse it)."""
    import fcntl

    from .charts import write_javascript_bundle

    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two servers at once: the second waits, then reuses
        write_javascript_bundle(cache)


def seed_static(cache: Path, out: Path) -> None:
    """Copy the cached bundle (and its stamp) where the build's ``charts.setup`` hook reuses it."""
    static = out / "_build" / STATIC
    static.mkdir(parents=True, exist_ok=True)
    for f in cache.iterdir():
        if f.is_file() and not f.name.startswith("."):
            shutil.copyfile(f, static / f.name)


def _relative_static(out: str) -> None:
    """Give Sphinx the build's own static folder relative to the sources, not absolute.

    ``charts.setup`` appends ``<output>/_build/glm_kv_static`` to ``html_static_path`` as an
    absolute path; Sphinx hashes that value into ``html/.buildinfo``, so the same book built into
    two output folders differed in that hash alone. Relative to the sources (``../_build/...``)
    it is the same for every output folder; the files copied are the same either way.
    """
    from . import charts

    original = charts.setup
    root = os.path.realpath(out)

    def relativise(app, config) -> None:
        config.html_static_path = [
            os.path.relpath(p, app.confdir) if os.path.isabs(p) and os.path.realpath(p).startswith(root + os.sep) else p
            for p in config.html_static_path]

    def setup(app):
        meta = original(app)
        app.connect("config-inited", relativise, priority=900)  # after charts' own listener (500)
        return meta

    charts.setup = setup


def _child(req: dict) -> None:
    """In the forked child: the build, its output to the request's log, never returning."""
    code = 1
    try:
        fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.chdir(req["src"])
        _relative_static(req["out"])
        from jupyter_book.cli.main import main

        try:
            main(build_command(req["src"], req["out"], req["strict"]))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported in the log, the exit code says it failed
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(cache: str | None) -> int:
    """Read requests until EOF; fork one child per request; answer each when its child exits."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)  # answers; fd 1 itself goes to stderr
    os.dup2(2, 1)
    from .import_guard import skip
    skip()  # before jsonschema's first import (import_guard says why)
    from sphinx.application import builtin_extensions

    for mod in (*PRELOAD, *builtin_extensions):
        try:
            importlib.import_module(mod)
        except Exception:  # noqa: BLE001 - an extension that is missing is reported by the build
            pass
    cache_dir = Path(cache) if cache else None
    if cache_dir is not None:
        try:
            ensure_bundle(cache_dir)
        except Exception:  # noqa: BLE001 - then each build writes the bundle itself
            cache_dir = None
    running: dict[int, str] = {}
    stdin = sys.stdin.buffer
    buf = b""
    eof = False
    while not eof or running:
        for pid in list(running):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
                proto.write(json.dumps({"id": running.pop(pid), "rc": rc}) + "\n")
        if eof:
            select.select([], [], [], 0.05)  # wait for the running builds
            continue
        ready, _, _ = select.select([stdin], [], [], 0.05)
        if not ready:
            continue
        chunk = os.read(stdin.fileno(), 65536)
        if not chunk:
            eof = True
            continue
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not line.strip():
                continue
            req = json.loads(line)
            try:
                if cache_dir is not None:
                    seed_static(cache_dir, Path(req["out"]))
            except OSError:
                pass
            pid = os.fork()
            if pid == 0:
                proto.close()
                _child(req)
            running[pid] = req["id"]
    proto.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(serve(sys.argv[1] if len(sys.argv) > 1 else None))
