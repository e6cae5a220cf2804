"""The calculator's data kept between book runs (issue 23): keyed by glm_kv's own files, so a kept
result is never served to other code; a broken cache file is computed again."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from glm_kv.book import calculator as calc

PACKAGE = Path(calc.__file__).resolve().parents[1]


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """No in-process copy, the cache folder in tmp_path, compute_data counted and small."""
    calls = []

    def compute():
        calls.append(1)
        return {"tables": {"err": [["gpu", "rule"]]}, "n": len(calls)}

    monkeypatch.setattr(calc, "compute_data", compute)
    monkeypatch.setenv(calc.CACHE_ENV, str(tmp_path / "cache"))
    calc._build_data_once.cache_clear()
    yield calls, tmp_path / "cache"
    calc._build_data_once.cache_clear()


def test_kept_result_is_read_back_not_computed(fresh):
    calls, folder = fresh
    first = calc.build_data()
    assert calls == [1]
    kept = list(folder.glob("calculator-*.json"))
    assert [p.name for p in kept] == [calc.cache_path(folder).name]
    calc._build_data_once.cache_clear()
    assert calc.build_data() == first and calls == [1]   # read back, not computed again


def test_other_code_is_another_key(fresh, monkeypatch):
    calls, folder = fresh
    calc.build_data()
    calc._build_data_once.cache_clear()
    monkeypatch.setattr(calc, "package_digest", lambda package=None: "f" * 64)
    assert calc.build_data()["n"] == 2 and calls == [1, 1]
    assert len(list(folder.glob("calculator-*.json"))) == 2


def test_broken_file_is_computed_again(fresh):
    calls, folder = fresh
    calc.build_data()
    calc.cache_path(folder).write_text("{not json")
    calc._build_data_once.cache_clear()
    assert calc.build_data()["n"] == 2
    assert json.loads(calc.cache_path(folder).read_text())["n"] == 2


def test_no_folder_no_file(fresh, monkeypatch):
    calls, folder = fresh
    monkeypatch.delenv(calc.CACHE_ENV)
    calc.build_data()
    calc._build_data_once.cache_clear()
    calc.build_data()
    assert calls == [1, 1] and not folder.exists()


def test_digest_follows_every_file_of_the_package(tmp_path):
    copy = tmp_path / "glm_kv"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = calc.package_digest(copy)
    assert before == calc.package_digest(PACKAGE)
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert calc.package_digest(copy) == before          # caches are not code
    for rel in ("ledgers/token.py", "inputs/models/kimi-k3.json" if (copy / "inputs/models/kimi-k3.json").exists()
                else next(str(p.relative_to(copy)) for p in copy.rglob("*.json"))):
        target = copy / rel
        original = target.read_bytes()
        target.write_bytes(original + b" ")
        assert calc.package_digest(copy) != before, rel
        target.write_bytes(original)
    (copy / "ledgers" / "token.py").rename(copy / "ledgers" / "token2.py")
    assert calc.package_digest(copy) != before           # a renamed file is other code too


def test_kept_data_is_what_the_page_gets():
    """The cache holds JSON: the real data survives the round trip unchanged (same page)."""
    data = calc.compute_data()
    back = json.loads(json.dumps(data))
    assert back == data
    assert calc.calculator_fragment(back) == calc.calculator_fragment(data)
