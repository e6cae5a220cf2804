"""glm-kv's plan agrees with SGLang 0.5.23's own code, key by key, on every profile of the matrix.

Each case writes its result to its own file (``agreement_report.write_result``); the SGLang
group's last step (``agreement_report.py --merge``, run by scripts/test_groups.py even when
pytest fails) turns them into book/_static/sglang-agreement.json, and fails when a profile of the
matrix has no result. Whatever the order or the number of workers, the report is this run's.
"""

from __future__ import annotations

import time

import pytest

_STARTED = time.time()


def _matrix():
    # Imported lazily: outside the SGLang venv this module must still import cleanly.
    try:
        from profiles import matrix
    except ImportError:
        return [("unavailable", None, {})]
    return matrix()


MATRIX = _matrix()


@pytest.mark.parametrize("pid,base,overrides", MATRIX, ids=[m[0] for m in MATRIX])
def test_profile_agrees(sglang_ready, pid, base, overrides):
    from compare import compare_one

    from agreement_report import write_result

    res = compare_one(pid, base, overrides)
    write_result(res, _STARTED)  # before the assertions: a disagreement is reported too
    assert res.compared, f"{pid}: nothing compared"
    lines = [f"{m['key']}: sglang={m['sglang']!r} engine={m['engine']!r} ({m['explanation']})"
             for m in res.mismatches if m["explanation"].startswith("unexplained")
             or m["key"] == "errors" or m["key"].startswith("sglang-self-check")]
    assert not lines, f"{pid} disagrees with SGLang 0.5.23:\n" + "\n".join(lines)


def test_a_missing_result_fails_the_merge(sglang_ready, tmp_path):
    """A skipped or unrun case (here: its writer never ran) fails the report step, naming it."""
    from types import SimpleNamespace

    from agreement_report import merge, write_result

    ids = [m[0] for m in MATRIX]
    for pid in ids[1:]:
        write_result(SimpleNamespace(pid=pid, seconds=0.1, compared=["token.cell_size_bytes"],
                                     sglang_error=None, engine_error=None, mismatches=[]), 0.0, tmp_path / "r")
    code, line = merge(ids, tmp_path / "r", tmp_path / "report.json")
    assert code == 1 and ids[0] in line and "have no result" in line, line
    write_result(SimpleNamespace(pid=ids[0], seconds=0.1, compared=["token.cell_size_bytes"],
                                 sglang_error=None, engine_error=None, mismatches=[]), 0.0, tmp_path / "r")
    code, line = merge(ids, tmp_path / "r", tmp_path / "report.json")
    assert code == 0, line
    import json
    assert json.loads((tmp_path / "report.json").read_text())["profiles_checked"] == len(ids)
