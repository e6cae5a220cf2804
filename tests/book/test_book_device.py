"""Every chapter measures on the device ``device="auto"`` resolves to, and says so.

On a machine with CUDA the measured cells must have run on CUDA: the GPU workflow sets
``GLM_KV_REQUIRE_CUDA=1``, and then a chapter that measured on the CPU (or a machine where torch
sees no GPU) fails here. On the CPU the same test checks that the chapters say "cpu".
The outputs nbval compares (``# NBVAL_CHECK_OUTPUT`` cells) never name the device.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytest.importorskip("papermill")
torch = pytest.importorskip("torch")
nbformat = pytest.importorskip("nbformat")

from glm_kv.book.runner import chapter_notebooks, find_root, run_book  # noqa: E402
from glm_kv.book.tables import resolve_device  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS_THAT_MEASURE = ["01_token", "02_request", "03_hbm_pool", "04_radix_tree", "05_dram", "06_capacity",
                         "07_pitfalls", "08_what_changed"]
DEVICE = re.compile(r'class="glm-kv-measured" data-device="([^"]+)"')


def devices_in(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    found = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            found += DEVICE.findall(o.get("data", {}).get("text/html", "") if "data" in o else "")
    return found


def test_checked_outputs_do_not_name_the_device():
    for nb in chapter_notebooks(find_root(ROOT)):
        for c in nbformat.read(ROOT / nb, as_version=4).cells:
            if c.cell_type == "code" and c.source.startswith("# NBVAL_CHECK_OUTPUT"):
                text = "".join(str(o.get("data", o.get("text", ""))) for o in c.outputs)
                assert not re.search(r"\b(cpu|cuda)\b", text), f"{nb}: a compared output names the device"


def test_every_measuring_chapter_says_where_it_measured_slow(tmp_path):
    want = resolve_device("auto")
    if os.environ.get("GLM_KV_REQUIRE_CUDA") == "1":
        assert torch.cuda.is_available(), "GLM_KV_REQUIRE_CUDA=1 but torch sees no CUDA device"
        assert want.startswith("cuda")
    res = run_book(["article"], tmp_path, html=False, progress=False, log=lambda m: None)
    src = res.books[0].src
    measured = {nb.stem: devices_in(nb) for nb in sorted((src / "notebooks").glob("*.ipynb"))}
    # the article's eight chapters all allocate tensors; each says where (a chapter added later
    # that measures should call glm_kv.book.tables.measured_on / on_device too)
    silent = [c for c in CHAPTERS_THAT_MEASURE if not measured.get(c)]
    assert not silent, f"measuring chapters that do not say where: {silent}"
    wrong = {k: v for k, v in measured.items() if any(not d.startswith(want.split(":")[0]) for d in v)}
    assert not wrong, f"measured off {want}: {wrong}"
