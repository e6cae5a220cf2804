"""scripts/reader_check.py (issue 21's done-when check) fails a page built to break each check."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")), reason="no chromium")
def test_reader_check_self_test_fires_every_check():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "reader_check.py"), "--self-test"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for check in ("NBVAL marker", "bare assert", "raw dict", "wider than", "console.warning",
                  "lacks the plan's tokens", "lacks the plan's requests", "HybridLinearKVPool without its link",
                  "raw TeX"):
        assert check in proc.stdout, check


def test_scaffolding_and_console_rules_without_a_browser():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import reader_check as rc
    finally:
        sys.path.pop(0)
    cells = [{"i": 0, "src": "# NBVAL_CHECK_OUTPUT\nassert x", "plain": "{'a': 1}"},
             {"i": 1, "src": "show(table)", "plain": ""}]
    assert len(rc.scaffolding(cells)) == 3
    events = [{"method": "Runtime.consoleAPICalled", "params": {"type": "warning", "args": [{"value": "Vega"}]}},
              {"method": "Runtime.consoleAPICalled", "params": {"type": "log", "args": [{"value": "[PST]"}]}}]
    assert rc.console_messages(events) == ["console.warning: Vega"]
    assert rc.wide_tables([{"i": 0, "width": 402, "column": 400, "sticky": False, "head": "x"},
                           {"i": 1, "width": 900, "column": 400, "sticky": True, "head": "y"}]) != []


def test_an_unlinked_sglang_name_is_caught_without_a_browser():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import reader_check as rc
    finally:
        sys.path.pop(0)
    assert rc.unlinked_names(["IndexKeyCache", "page_size", "IndexKeyCache"]) == \
        ["names SGLang's IndexKeyCache without its link"]
    assert rc.unlinked_names(["req_to_token", "tree.evict_host"]) == []


def test_raw_tex_is_caught_without_a_browser():
    """Issue 29: a formula MathJax did not typeset reads as TeX source; typeset math reads as text."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import reader_check as rc
    finally:
        sys.path.pop(0)
    for raw in ("with \\(f\\) = 0.8", "\\[\\text{rest} = 1\\]", "keeps \\text{rest}"):
        assert rc.raw_tex(raw), raw
    assert rc.raw_tex("rest = free after weights - pre-load x (1 - f)") == []
