"""``kernel_state.fresh`` freezes what is alive after a notebook's reset (issue 23: a collection then
walks only the new notebook's objects), and garbage made afterwards is still collected."""
from __future__ import annotations

import subprocess
import sys

CODE = r"""
import gc, tempfile, weakref
from glm_kv.book.kernel_state import fresh
gc.unfreeze()
fresh(tempfile.gettempdir())
frozen = gc.get_freeze_count()

class Node:
    pass

a, b = Node(), Node()
a.other, b.other = b, a            # a reference cycle: only the collector frees it
gone = weakref.ref(a)
del a, b
gc.collect()
print(frozen > 10000, gone() is None)
fresh(tempfile.gettempdir())       # the second notebook: counters reset, frozen again
print(gc.get_freeze_count() >= frozen)
"""


def test_fresh_freezes_survivors_and_later_garbage_is_collected():
    out = subprocess.run([sys.executable, "-c", CODE], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["True", "True", "True"]
