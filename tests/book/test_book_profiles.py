"""Every chapter executes for every shipped profile (what `glm-kv book` does, without HTML).

Slow (every profile's notebooks, spread over one kernel per core by ``--jobs``) but it is the
only check that a profile with, say, MTP or a known capacity does not break a chapter's
measured == ledger assertion.
"""
import pytest

pytest.importorskip("papermill")

from glm_kv import shipped_profiles  # noqa: E402
from glm_kv.book.runner import run_book  # noqa: E402


def test_every_chapter_runs_for_every_shipped_profile(tmp_path):
    res = run_book(shipped_profiles(), tmp_path, html=False, progress=False, log=lambda m: None)
    assert [b.slug for b in res.books] == [p for p in shipped_profiles()]
    assert all(b.seconds_execute > 0 and (b.src / "notebooks").is_dir() for b in res.books)
    assert res.index.is_file() and not (tmp_path / ".staging").exists()
