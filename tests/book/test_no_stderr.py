"""No committed notebook carries a stderr stream or an error output: the book build treats a stderr
cell output as a warning and fails (``--warningiserror``), so a RuntimeWarning a refresh recorded
(a NaN cast over refused sweep points, issue 29) must fail here, in seconds, not in the book group."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted([*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("book/*.ipynb")])


def stderr_outputs(nb: dict) -> list[str]:
    found = []
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            if out["output_type"] == "error" or (out["output_type"] == "stream" and out["name"] == "stderr"):
                found.append(f"cell {i}: {out['output_type']} {''.join(out.get('text', out.get('evalue', '')))[:120]!r}")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_notebook_has_no_stderr(path):
    assert not stderr_outputs(json.loads(path.read_text(encoding="utf-8")))


def test_the_check_sees_a_recorded_warning():
    nb = {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "stream", "name": "stderr", "text": ["RuntimeWarning: invalid value encountered in cast\n"]}]}]}
    assert stderr_outputs(nb) and len(NOTEBOOKS) >= 15
