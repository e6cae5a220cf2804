"""pytest plugin loaded only by `make mutants` (``-p scripts.mutants_pytest_plugin`` in [tool.mutmut]).

Three things, none of which skips or alters a test:

* **Fresh test modules per session.** mutmut 3 runs pytest several times in one process (list
  the tests, collect the stats, run the clean tests, warm the fork server). pytest 9 escapes the
  ``ids=`` it reads from a test module's parametrize marks in place, so a second collection of
  the same, cached module sees ``\\\\d`` where the first saw ``\\d`` and the node ids mutmut
  recorded are "not found" (exit 4: ``tests/ledgers/test_verify.py::test_corrupted_number_disagrees``).
  Forgetting the test modules at the end of each session makes every session import them afresh,
  as a new process would.
* **A frozen heap.** The suite's autouse ``collect_garbage`` fixture (tests/pytest_glm_kv.py) runs
  a full ``gc.collect()`` after every test so that a leak warns in the test that leaked. A full
  collection walks every object the session holds (torch, numpy, every imported module): 0.5-1.5 s
  per test on the 2-core box, which was most of a surviving mutant's 130-170 s (measured:
  tests/inputs/test_launch_flag_table.py, 499 tests, 243 s without, 4 s with). ``gc.freeze()`` at
  the start of each session moves what exists then into the permanent generation, which the
  collector skips; everything a test allocates is still collected after it, so a leak still warns
  in its own test.
* **Cheapest tests first.** mutmut runs a mutant's tests with ``-x``, so the first failing test
  ends the run. Ordering them by the duration mutmut's stats run recorded
  (mutants/mutmut-stats.json, ``duration_by_test``) makes a killed mutant cost the cheapest test
  that kills it; a file's tests stay together (its module-scoped fixtures are built once), the
  file with the cheapest test first. Only under a mutant (``MUTANT_UNDER_TEST`` names one); the stats, clean and
  forced-fail runs keep pytest's order.
"""
from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    gc.freeze()


def _durations(rootpath: Path) -> dict[str, float]:
    stats = rootpath / "mutmut-stats.json"  # pytest's rootdir is mutants/ under mutmut
    try:
        return json.loads(stats.read_text()).get("duration_by_test", {})
    except (OSError, ValueError):
        return {}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items: list[pytest.Item]) -> None:  # noqa: ANN001
    if "__mutmut_" not in os.environ.get("MUTANT_UNDER_TEST", ""):
        return
    durations = _durations(Path(str(config.rootpath)))
    unknown = max(durations.values(), default=0.0)  # a test without a recorded time goes last
    order = {id(item): i for i, item in enumerate(items)}
    cost = {id(it): durations.get(it.nodeid, unknown) for it in items}
    # Files stay together (a module-scoped fixture is built once), cheapest first file first.
    first: dict[str, float] = {}
    for it in items:
        first[it.path] = min(first.get(it.path, unknown), cost[id(it)])
    items.sort(key=lambda it: (first[it.path], str(it.path), cost[id(it)], order[id(it)]))


def pytest_unconfigure(config) -> None:  # noqa: ANN001
    tests_dir = Path(str(config.rootpath)) / "tests"
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) or ""
        if os.path.basename(path).startswith("test_") and Path(path).resolve().is_relative_to(tests_dir.resolve()):
            del sys.modules[name]
