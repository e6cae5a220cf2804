"""Every profile's book at once: one queue of (profile, notebook) steps, ``jobs`` kernels, one builder.

Where one profile's book spent its time (2 shared cores, 28-36 s before): the 12 notebooks in one
kernel (about 3 s of kernel start-up and torch/pandas/altair imports, then 11-13 CPU s of cells:
the radix-tree, DRAM and pool chapters most), and 7-15 s for the HTML (a fresh interpreter
importing Sphinx and Jupyter Book, then 7-10 s of vl-convert producing the same Vega bundle for
every profile, then about 2.3 CPU s of Sphinx). Profiles ran one after another, each with its own
kernels and its own HTML process.

Here:

* **Kernels are per worker, not per profile.** ``jobs`` threads each own one kernel and take the
  next step from one queue ordered profile by profile, so one profile's notebooks spread over
  every kernel and the kernels never restart between profiles. Each notebook starts with
  ``%reset -f``, ``kernel_state.fresh`` (module counters back to their values after import) and a
  ``chdir`` to its own folder (``runner._setup_cell``), so it sees none of the previous
  notebook's names or counters; what survives is imported modules and their input-keyed caches.
  ``tests/book/test_book_parallel.py`` shows that this leaks nothing into any output: the same
  two profiles with 1 job (one kernel runs everything in book order) and 2 jobs (notebooks
  interleaved over two kernels) write byte-identical notebooks and HTML.
* **One Sphinx builder per run** (``sphinx_server``): imports once, forks one child per book, and
  the Vega bundle is made once and cached. HTML builds run beside the kernels (submitted, not
  waited for), so a worker goes on to the next notebook while a finished profile's book builds.
* **What a kernel repeats per notebook is cheap** (issue 23, second round): the notebook's
  ``%reset -f`` and ``measure``'s collections walk only its own objects (``kernel_state.fresh``
  freezes the survivors: 0.25-0.3 s -> 0.003 s per notebook), one kernel client serves all of a
  kernel's notebooks (``kernels.quiet_kernel_manager``: a new client waits 0.2 s or more to be
  ready), ``rfc3987_syntax`` is not imported (``import_guard``: 2.8 CPU s per process), and the
  calculator's profile-independent data is kept in ``_build/.cache`` under glm_kv's digest.
* A profile's staged result replaces ``OUT/<slug>/`` as soon as its book is built; the first
  failure (in profile, then notebook order) stops new steps and is raised once the running ones end.
"""
from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence


@dataclass
class ProfileJob:
    """One profile's book in the making."""

    index: int               # position in the run (errors are raised in this order)
    profile: str
    slug: str
    label: str
    staging: Path            # OUT/.staging/<slug>
    parameters: dict
    notebooks: Sequence[Path]
    src: Path                # the staged sources the notebooks run in (staging/src)
    left: int = 0            # notebooks not yet executed
    started: float | None = None
    seconds_execute: float = 0.0
    seconds_html: float = 0.0


# ------------------------------------------------------------------------------------------------
# The Sphinx builder: one server process per run (POSIX), else one jupyter-book process per book
# ------------------------------------------------------------------------------------------------

def close_thread_event_loop() -> None:
    """Close the event loop that jupyter_core's ``run_sync`` (papermill, nbclient, the kernel
    manager) created for this thread and never closes: an open loop holds its self-pipe (two
    Unix sockets), which the test suite reports as a leak."""
    import asyncio

    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        return
    if not loop.is_running() and not loop.is_closed():
        loop.close()
    asyncio.set_event_loop(None)


def bundle_cache_dir(root: Path) -> Path:
    """Where the Vega bundle is kept between builds and runs (inside the book's ``_build``)."""
    return root / "_build" / ".cache" / "glm_kv_static"


class SphinxBuilder:
    """Builds staged books in a ``sphinx_server`` process; ``submit`` returns a Future of the log."""

    def __init__(self, cache: Path | None = None):
        self._lock = threading.Lock()
        self._waiting: dict[str, Future] = {}
        self._next = 0
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._cache = cache

    def start(self) -> "SphinxBuilder":
        """Start the server now, so that its imports overlap the kernels' start-up."""
        if self._proc is None and hasattr(os, "fork"):
            args = [sys.executable, "-m", "glm_kv.book.sphinx_server"]
            if self._cache is not None:
                args.append(str(self._cache))
            self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL)
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            msg = json.loads(line)
            with self._lock:
                fut = self._waiting.pop(msg["id"], None)
            if fut is not None:
                fut.set_result(int(msg["rc"]))
        with self._lock:  # the server died: every build still waiting failed
            waiting, self._waiting = self._waiting, {}
        for fut in waiting.values():
            fut.set_result(-1)

    def submit(self, src: Path, out: Path, strict: bool) -> "Future[int]":
        """Build ``src`` into ``out/_build/html``; the Future's result is the exit code."""
        from .sphinx_server import build_command

        log = out / "sphinx.log"
        out.mkdir(parents=True, exist_ok=True)
        self.start()
        fut: Future = Future()
        if self._proc is None:  # no fork: one jupyter-book process, as before
            from .sphinx_server import ensure_bundle, seed_static

            if self._cache is not None:
                try:
                    ensure_bundle(self._cache)
                    seed_static(self._cache, out)
                except (OSError, ImportError):
                    pass
            cmd = [sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; sys.exit(main())",
                   *build_command(src, out, strict)]
            with open(log, "w") as f:
                fut.set_result(subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=src).returncode)
            return fut
        with self._lock:
            key = str(self._next)
            self._next += 1
            self._waiting[key] = fut
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.write((json.dumps({"id": key, "src": str(src), "out": str(out),
                                                    "strict": strict, "log": str(log)}) + "\n").encode())
                self._proc.stdin.flush()
            except OSError:
                self._waiting.pop(key, None)
                fut.set_result(-1)
        return fut

    def close(self) -> None:
        """End the server after its running builds (EOF on its stdin), and reap it."""
        if self._proc is None:
            return
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        finally:
            if self._reader is not None:
                self._reader.join(timeout=5)
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None

    def __enter__(self) -> "SphinxBuilder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def html_failure(out: Path, label: str) -> str:
    """The BookError message for a failed build: its warnings and errors, else its last lines."""
    log = out / "sphinx.log"
    text = log.read_text(errors="replace") if log.is_file() else ""
    lines = [l for l in text.splitlines() if "WARNING" in l or "ERROR" in l or "Error" in l] or text.splitlines()[-5:]
    return f"profile {label}: HTML build failed:\n  " + "\n  ".join(lines[:20])


# ------------------------------------------------------------------------------------------------
# The scheduler
# ------------------------------------------------------------------------------------------------

@dataclass
class _State:
    steps: "collections.deque[tuple[ProfileJob, int]]"
    in_flight: int = 0
    errors: dict = field(default_factory=dict)  # (profile index, step index) -> BaseException
    stop: bool = False


def longest_first(notebooks: Sequence[Path], seconds: dict[str, float]) -> list[int]:
    """Indices of ``notebooks`` by the seconds they took last time, longest first (unknown first,
    in book order): the longest chapter no longer starts last on a kernel while the other idles.
    The order changes no output (the byte comparison of --jobs 1 and 2 holds for any order)."""
    inf = float("inf")
    return sorted(range(len(notebooks)), key=lambda i: (-seconds.get(str(notebooks[i]), inf), i))


def load_seconds(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
        return {str(k): float(v) for k, v in data.items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def save_seconds(path: Path, seconds: dict[str, list[float]]) -> None:
    """The mean seconds per notebook of this run (what ``longest_first`` orders the next run by)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        old = load_seconds(path)
        old.update({k: sum(v) / len(v) for k, v in seconds.items() if v})
        tmp = path.with_name(path.name + f".{os.getpid()}")
        tmp.write_text(json.dumps(old, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:
        pass


def run_jobs(jobs: Sequence[ProfileJob], *, workers: int, html: bool, strict: bool, kernel_name: str,
             timeout: int, builder: SphinxBuilder | None, execute: Callable, finish: Callable[[ProfileJob], None],
             bar=None, order: Callable[[ProfileJob], Sequence[int]] | None = None) -> None:
    """Execute every job's notebooks on ``workers`` kernels, build each book, ``finish`` each job.

    ``order``: a job's notebooks' indices in the order they are taken (default: book order; a model book has
    fewer notebooks than GLM-5.3-Flash's, so the order is per job).
    ``execute(job, rel, km)`` runs one notebook (raising BookError); ``finish(job)`` moves a
    complete job into place (called once per job, from whichever thread completed it). Raises the
    first failure in (profile, notebook) order after every running step has ended.
    """
    from jupyter_core.utils import run_sync

    from .kernels import BookError, quiet_kernel_manager as _quiet_kernel_manager

    cond = threading.Condition()
    state = _State(collections.deque((j, i) for j in jobs
                                     for i in (order(j) if order is not None else range(len(j.notebooks)))))
    for j in jobs:
        j.left = len(j.notebooks)

    def fail(key: tuple, err: BaseException) -> None:
        with cond:
            state.errors[key] = err
            state.stop = True
            cond.notify_all()

    def complete(job: ProfileJob) -> None:
        try:
            finish(job)
        except BaseException as e:  # noqa: BLE001 - raised in order below
            fail((job.index, len(job.notebooks) + 1), e)
            return
        if bar is not None and html:
            bar.update(1)  # the HTML step

    def built(job: ProfileJob, t0: float, fut: Future) -> None:
        job.seconds_html = time.perf_counter() - t0
        out = job.staging
        rc = fut.result()
        html_dir = out / "_build" / "html"
        if rc != 0 or not (html_dir / "index.html").is_file():
            fail((job.index, len(job.notebooks)), BookError(html_failure(out, job.label)))
            return
        html_dir.rename(out / "html")
        shutil.rmtree(out / "_build", ignore_errors=True)
        (out / "sphinx.log").unlink(missing_ok=True)
        complete(job)

    def notebook_done(job: ProfileJob) -> None:
        job.seconds_execute = time.perf_counter() - (job.started or time.perf_counter())
        if not html:
            complete(job)
            return
        if bar is not None:
            bar.set_description_str(f"{job.slug} · HTML")
        t0 = time.perf_counter()
        assert builder is not None, "html=True needs a SphinxBuilder"
        fut = builder.submit(job.src, job.staging, strict)
        fut.add_done_callback(lambda f, job=job, t0=t0: built(job, t0, f))

    def worker() -> None:
        km = None
        try:
            while True:
                with cond:
                    if state.stop or not state.steps:
                        return
                    job, i = state.steps.popleft()
                    if job.started is None:
                        job.started = time.perf_counter()
                    state.in_flight += 1
                rel = job.notebooks[i]
                if bar is not None:
                    bar.set_description_str(f"{job.slug} · {rel.stem}")
                if km is None:
                    km = _quiet_kernel_manager()(kernel_name=kernel_name)
                try:
                    execute(job, rel, km)
                except BaseException as e:  # noqa: BLE001 - raised in book order below
                    fail((job.index, i), e)
                    return
                finally:
                    with cond:
                        state.in_flight -= 1
                if bar is not None:
                    bar.update(1)
                with cond:
                    job.left -= 1
                    last = job.left == 0
                if last:
                    notebook_done(job)
        finally:
            if km is not None:
                try:
                    km.close_client()
                except Exception:  # noqa: BLE001 - its sockets go with the context below
                    pass
                try:
                    if run_sync(km.is_alive)():
                        run_sync(km.shutdown_kernel)(now=True)
                except Exception:  # noqa: BLE001 - the kernel may already be gone
                    pass
                if getattr(km, "_created_context", False):
                    km.context.destroy(linger=0)  # its own ZMQ context (its sockets are closed)
            close_thread_event_loop()

    n = max(1, min(workers, len(state.steps) or 1))
    threads = [threading.Thread(target=worker, daemon=True, name=f"glm-kv-book-{k}") for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if builder is not None:
        builder.close()  # waits for the builds still running; their callbacks have run on return
    if state.errors:
        raise state.errors[min(state.errors)]
