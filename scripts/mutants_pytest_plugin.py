"""pytest plugin loaded only by `make mutants` (``-p scripts.mutants_pytest_plugin`` in [tool.mutmut]).

Why: mutmut 3 runs pytest several times in one process (list the tests, collect the stats, run
the clean tests, warm the fork server). pytest 9 escapes the ``ids=`` it reads from a test
module's parametrize marks in place, so a second collection of the same, cached module sees
``\\\\d`` where the first saw ``\\d`` and the node ids mutmut recorded are "not found" (exit 4:
``tests/ledgers/test_verify.py::test_corrupted_number_disagrees``). Forgetting the test modules
at the end of each session makes every session import them afresh, as a new process would.
Nothing else changes: no test is skipped, reordered or altered.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path


def pytest_unconfigure(config) -> None:  # noqa: ANN001
    tests_dir = Path(str(config.rootpath)) / "tests"
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) or ""
        if os.path.basename(path).startswith("test_") and Path(path).resolve().is_relative_to(tests_dir.resolve()):
            del sys.modules[name]
