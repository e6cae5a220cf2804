"""A reused kernel made to look fresh to the next notebook (``glm-kv book`` shares kernels).

The runner executes many notebooks, of many profiles, in one kernel: starting a kernel and
importing torch, pandas and altair costs seconds, a notebook's own cells often less. ``%reset -f``
clears the notebook's names, but module-level state survives it. Caches keyed by their inputs
(``load_profile``, ``load_model``) cannot change an output; counters can: ``radix_cache``'s node
ids (``_ids = itertools.count()``, SGLang's ``TreeNode.counter``) continue from the previous
notebook, so a page numbered its nodes 1.. in a fresh kernel and 11.. after another chapter.
``fresh`` puts every ``itertools.count`` of every ``glm_kv`` module back where it stood right
after import: every glm_kv module is imported on the kernel's first call (before any notebook
code ran) and the counters' start values recorded. Whether anything else leaks is what
``tests/book/test_book_parallel.py`` checks: one job and two jobs must write the same bytes.
"""
from __future__ import annotations

import gc
import importlib
import itertools
import os
import pkgutil
import re
import sys

_START: dict[tuple[str, str], tuple[int, int]] | None = None
_COUNT = re.compile(r"^count\((-?\d+)(?:, (-?\d+))?\)$")


def _counters() -> dict[tuple[str, str], tuple[int, int]]:
    """(module, name) -> (next value, step) of every ``itertools.count`` global in glm_kv."""
    out = {}
    for name, mod in list(sys.modules.items()):
        if name == "glm_kv" or name.startswith("glm_kv."):
            for attr, value in list(vars(mod).items()):
                if isinstance(value, itertools.count):
                    m = _COUNT.match(repr(value))
                    if m:
                        out[(name, attr)] = (int(m.group(1)), int(m.group(2) or 1))
    return out


def _import_all() -> None:
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # glm_kv/, not imported by name
    for info in pkgutil.walk_packages([package], "glm_kv."):
        if info.name.endswith("__main__") or info.name == "glm_kv.cli":  # above the book; no state
            continue
        try:
            importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - an optional part (e.g. torch missing): nothing to reset there
            pass


def fresh(folder: str) -> None:
    """Called first in every notebook the runner executes: counters as after import, cwd = folder."""
    global _START
    if _START is None:
        from .import_guard import skip
        skip()  # before jsonschema's first import (import_guard says why)
        _import_all()
        _START = _counters()
    else:
        for (name, attr), (start, step) in _START.items():
            mod = sys.modules.get(name)
            if mod is not None:
                setattr(mod, attr, itertools.count(start, step))
    # Everything alive now is modules, their caches and counters: frozen (gc.freeze), a collection
    # no longer walks them. %reset -f and measure's gc.collect() then scan only what the next notebook
    # makes: 0.003 s instead of 0.25-0.3 s per notebook with torch, pandas and altair loaded. The
    # previous notebook's garbage was collected by its %reset -f before this call, so nothing frozen
    # is garbage; later garbage is collected as before (tests/book/test_kernel_state.py).
    gc.freeze()
    os.chdir(folder)
