"""`glm-kv book --profile` for a model other than GLM-5.3-Flash (issue 31): a book of the pages that read the
same for every model, rooted at "Your model, layer by layer", and no GLM-5.3-Flash chapter in it.

The page's numbers are checked against `glm-kv plan --json` run as a user runs it (one deployment, one
answer: the page keeps no estimate of its own), for a model with per-request state (Qwen3.5: Gated DeltaNet)
and one without (DeepSeek-V3.2: MLA + the DSA indexer only, where the flags chapter, which sizes the state
pool, is left out).
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from glm_kv.cli import main

HERE = Path(__file__).parent
QWEN = HERE / "profiles" / "qwen3.5-h200.yaml"


def _plan_json(capsys, profile: str) -> dict:
    assert main(["plan", "--profile", profile, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _text(page: Path) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page.read_text())))


def test_the_documents_follow_the_model():
    from glm_kv.book.runner import model_book

    assert model_book("h200-0.5.23") is None                       # GLM-5.3-Flash: the whole book (_toc.yml)
    name, docs = model_book(str(QWEN))
    assert name == "qwen3.5-35b-a3b" and docs[0] == "book/model" and "notebooks/06b_choosing_flags" in docs
    assert not any(d.startswith("notebooks/0") and d != "notebooks/06b_choosing_flags" for d in docs), docs


def test_a_model_without_state_leaves_the_state_pool_chapter_out(tmp_path):
    from glm_kv.book.runner import model_book

    prof = tmp_path / "ds.yaml"
    prof.write_text("model: deepseek-v3.2\ngpu: H200\ntp_size: 8\n")
    name, docs = model_book(str(prof))
    assert name == "deepseek-v3.2" and "notebooks/06b_choosing_flags" not in docs and docs[0] == "book/model"


def test_a_model_book_builds_and_answers_as_glm_kv_plan(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["book", "--profile", str(QWEN), "--out", str(out), "--jobs", "1"]) == 0
    capsys.readouterr()
    html_dir = out / QWEN.stem / "html"
    pages = {p.relative_to(html_dir).as_posix() for p in html_dir.rglob("*.html")}
    assert "book/model.html" in pages and "book/calculator.html" in pages, sorted(pages)
    assert not any(p.startswith("notebooks/0") and "06b" not in p for p in pages), sorted(pages)  # no GLM chapter
    page = _text(html_dir / "book" / "model.html")
    assert "qwen3.5-35b-a3b: its KV cache under SGLang 0.5.23" in (html_dir / "book" / "model.html").read_text()
    plan = _plan_json(capsys, str(QWEN))
    cap = plan["capacity"]
    assert f"holds {cap['max_total_num_tokens']:,} tokens" in page, page[:2000]
    assert f"{cap['max_mamba_cache_size']:,}" in page
    for kind, d in plan["layers"].items():
        assert f"{d['bytes']:,} B/" in page, (kind, d)
    assert "Three ledgers" not in page and "ledgers by name" in page
