"""The "SGLang or vLLM" page reads the resolution `glm-kv compare` prints (one deployment, one answer).

Each of the page's rows is checked against ``glm-kv compare --json`` for the same two launch commands on the
same GPU and rest, so the page keeps no estimate of its own; planted error: a page that gives vLLM only
SGLang's token pool (not token + state pool) differs from the CLI on the hybrid rows."""
from __future__ import annotations

import json

import pytest

from glm_kv.book import engines
from glm_kv.book.other_models import CONTEXT, REST_BYTES, TP
from glm_kv.cli import main
from glm_kv.inputs.hf_config import SHIPPED

CASES = [("glm-5.3-flash", "H200"), ("qwen3.5-35b-a3b", "B200"), ("deepseek-v3.2", "B200")]


def _cli(capsys, name: str, gpu: str) -> dict:
    repo = SHIPPED[name][1]
    rc = main(["compare", "--sglang-args", f"python -m sglang.launch_server --model-path {repo} --tp {TP}",
               "--vllm-args", f"vllm serve {repo} --tensor-parallel-size {TP}", "--gpu", gpu,
               "--set", f"available_bytes={REST_BYTES[gpu]}", "--context", str(CONTEXT), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


def _agrees(capsys, name: str, gpu: str) -> None:
    cli = _cli(capsys, name, gpu)
    s, v = cli["engines"]
    row = next(r for r in engines.rows() if r["model"] == SHIPPED[name][1] and r["GPU"] == gpu)
    k = f"{CONTEXT // 1024}K requests"
    assert (row["SGLang tokens"], row["vLLM tokens"]) == (s["tokens_per_worker"], v["tokens_per_worker"])
    assert (row[f"SGLang {k}"], row[f"vLLM {k}"]) == (s["requests_total"], v["requests_total"])
    assert (row["SGLang bound by"], row["vLLM bound by"]) == (s["binds"], v["binds"])
    assert row["KV GiB per rank"] == f"{s['kv_bytes_per_rank'] / 2**30:.1f}"


@pytest.mark.parametrize("name, gpu", CASES)
def test_page_rows_are_glm_kv_compare(capsys, name, gpu):
    _agrees(capsys, name, gpu)


def test_planted_token_pool_only_is_caught(capsys, monkeypatch):
    engines.pair.cache_clear()
    monkeypatch.setattr(engines, "sglang_pool_bytes", lambda plan: plan.capacity.token_pool_bytes)
    try:
        with pytest.raises(AssertionError):
            _agrees(capsys, "glm-5.3-flash", "H200")
    finally:
        engines.pair.cache_clear()


def test_reasons_name_each_kind_of_difference():
    """Not vacuous: the hybrids differ by the state reserve, DeepSeek-V3.2 on B200 by its KV dtype, and
    GLM-5.1 on H200 ties."""
    why = {(r["model"], r["GPU"]): r["why"] for r in engines.rows()}
    assert why[SHIPPED["glm-5.3-flash"][1], "H200"].startswith("state reserve")
    assert why[SHIPPED["deepseek-v3.2"][1], "B200"].startswith("bytes per token")
    assert why[SHIPPED["glm-5.1"][1], "H200"].startswith("the same")
