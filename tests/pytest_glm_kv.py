"""The suite's own pytest plugin (loaded with ``-p tests.pytest_glm_kv`` from pyproject's addopts).

Why a plugin and not ``tests/conftest.py``: its hooks must also see the notebooks collected by
nbval from ``notebooks/`` and ``book/``, which no conftest under ``tests/`` reaches.

* **One seed per run.** Every randomised test reads ``GLM_KV_SEED``. Unless the caller gives one
  (``make test SEED=N``, ``GLM_KV_SEED=N`` or ``-p randomly --randomly-seed=N``; both with different
  values is a usage error naming both), a fresh seed is
  drawn for each run, handed to pytest-randomly (test order, ``random``/``numpy`` reseeding) and
  exported, so subprocesses and xdist workers see the same value. It is printed in the header
  and again at the end of the run, next to the failures: ``make test SEED=N`` reproduces it.
* **Notebook cells in order.** pytest-randomly shuffles the items inside a module; an nbval
  notebook is a module whose cells must run top to bottom (pytest-randomly issue 495). The
  notebooks are still shuffled against each other and against the other test files; within a
  notebook the cells are put back in their order.
* **Leaks are errors.** ``filterwarnings`` in pyproject turns ``ResourceWarning`` (an unclosed
  socket, file or subprocess) and unraisable exceptions into errors. A leaked object usually
  warns when it is garbage-collected, which may be several tests later; ``collect_garbage`` runs
  the collector after each test so that the warning lands in the test that leaked.
"""
from __future__ import annotations

import gc
import os
import random

import pytest

SEED_ENV = "GLM_KV_SEED"


def _draw_seed() -> int:
    return random.SystemRandom().randrange(1, 2**31)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Fix the run's seed before pytest-randomly reads its own option."""
    given = os.environ.get(SEED_ENV, "").strip()
    randomly = getattr(config.option, "randomly_seed", None)
    if given and not given.isdigit():
        raise pytest.UsageError(f"{SEED_ENV}={given!r}: the seed must be a whole number")
    if given and isinstance(randomly, int) and int(given) != randomly:
        # one seed per run: the order would follow one and the data the other, and the printed
        # seed would not reproduce the run
        raise pytest.UsageError(f"{SEED_ENV}={given} and --randomly-seed={randomly} disagree: give one seed "
                                f"(or the same value to both)")
    if given:
        seed = int(given)
    elif isinstance(randomly, int):
        seed = randomly
    elif hasattr(config, "workerinput"):
        return  # an xdist worker: the controller exported the seed before starting it
    else:
        seed = _draw_seed()
    if randomly is not None and not isinstance(randomly, int) and randomly in ("default", None):
        config.option.randomly_seed = seed
    os.environ[SEED_ENV] = str(seed)
    config._glm_kv_seed = seed  # type: ignore[attr-defined]


def run_seed() -> int:
    """The seed of this run (what every randomised test uses)."""
    return int(os.environ[SEED_ENV])


def pytest_report_header(config: pytest.Config) -> str:
    seed = os.environ.get(SEED_ENV, "?")
    return f"glm-kv seed: {seed}  (reproduce: make test SEED={seed}, or GLM_KV_SEED={seed} pytest ...)"


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ANN001
    seed = os.environ.get(SEED_ENV, "?")
    terminalreporter.write_line(f"glm-kv seed: {seed}  (reproduce: make test SEED={seed})")


def _is_nbval_cell(item: pytest.Item) -> bool:
    return type(item).__name__ == "IPyNbCell" and hasattr(item, "cell_num")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items: list[pytest.Item]) -> None:  # noqa: ANN001
    """Put each notebook's cells back in order, in the slots the shuffle gave that notebook."""
    slots: dict[object, list[int]] = {}
    for i, item in enumerate(items):
        if _is_nbval_cell(item):
            slots.setdefault(item.parent, []).append(i)
    for positions in slots.values():
        cells = sorted((items[i] for i in positions), key=lambda it: it.cell_num)
        for i, cell in zip(positions, cells):
            items[i] = cell


_last_module: list[object] = [None]


@pytest.fixture(autouse=True)
def collect_garbage(request: pytest.FixtureRequest):
    """Run the collector after each test, so a leaked socket or file warns in the test that leaked it.

    nbval cells share one kernel per notebook: collecting after each cell would only cost time.

    Why ``gc.freeze()``: a full collection walks every live object (torch, SGLang's modules, the
    suite's caches), about 0.1 s per test on the CI machine, which was most of the unit group's CPU
    time (497 flag-table tests: 61 s of CPU with a full walk each, 5 s with the freeze). What a test
    leaves alive after its own collection is frozen, so the next test's collection walks only what
    that test made. The first test of each module unfreezes and collects everything, so a leak of a
    module-scoped fixture (finalised after its module's last test) still warns, in the next test as
    it did before.
    """
    node = request.node
    if _is_nbval_cell(node):
        yield
        return
    module = getattr(node, "module", None)
    if module is not _last_module[0]:
        _last_module[0] = module
        gc.unfreeze()
        gc.collect()
    yield
    # pytest drops the test's fixture values only after the teardown phase, so an object that a
    # fixture leaked would be freed (and warn) during the next test. Every other fixture of this
    # test is finalised by now (this autouse one was set up first, so it is torn down last):
    # dropping the test's references here makes the collector free the leak in this test.
    funcargs = getattr(node, "funcargs", None)
    if isinstance(funcargs, dict):
        for name in [n for n in funcargs if n != request.fixturename]:
            del funcargs[name]
    gc.collect()
    gc.freeze()


def skip_folder_unless(ready: bool, reason: str, folder, items) -> None:
    """A test group with its own venv (tests/sglang, tests/vllm): when that venv is not ``ready``,
    every test collected under ``folder`` is skipped with ``reason`` (the conftests' one hook)."""
    from pathlib import Path

    if ready:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(folder):
            item.add_marker(skip)
