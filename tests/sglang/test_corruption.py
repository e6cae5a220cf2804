"""The agreement check has teeth: a deliberately wrong engine fails it."""

from __future__ import annotations

import pytest

GiB = 1 << 30
WORKED = ("worked-example", None, {"sglang_layout": "0.5.23", "kv_cache_dtype": "fp8_e4m3",
                                   "max_running_requests": None, "available_bytes": 100 * GiB})
DPATTN = ("tp8-dp4", None, {"sglang_layout": "0.5.23", "tp_size": 8, "dp_size": 4,
                            "enable_dp_attention": True, "available_bytes": 60 * GiB})


def _failing_keys(res):
    return {m["key"] for m in res.mismatches}


@pytest.mark.parametrize("case", [WORKED, DPATTN], ids=lambda c: c[0])
def test_wrong_indexer_bytes_fail(sglang_ready, monkeypatch, case):
    """Forget the indexer's fp8 scales (128 instead of 132 B per token and layer)."""
    import glm_kv.ledgers.token
    from compare import compare_one

    honest = compare_one(*case)
    assert not honest.mismatches, honest.mismatches

    monkeypatch.setattr(glm_kv.ledgers.token, "indexer_unpooled_bytes", lambda model: 128)
    res = compare_one(*case)
    keys = _failing_keys(res)
    assert {"token.indexer_bytes_per_token", "token.indexer_page_bytes",
            "token.cell_size_bytes", "capacity.max_total_num_tokens"} <= keys, keys
    assert all(m["explanation"] == "unexplained" for m in res.mismatches)


def test_wrong_tail_rows_fail(sglang_ready):
    """An engine that allocates the compress tail for requests + 1 rows instead of + 2."""
    from compare import compare_one, engine_plan

    def off_by_one(raw, pid):
        inputs, plan, err = engine_plan(raw, pid)
        plan["tail"]["rows"] -= 1
        plan["tail"]["bytes"] -= plan["tail"]["bytes_per_row"]
        return inputs, plan, err

    res = compare_one(*WORKED, engine=off_by_one)
    assert {"tail.rows", "tail.bytes"} <= _failing_keys(res)


def test_refusal_mismatch_fails(sglang_ready):
    """An engine that accepts a profile SGLang refuses (no_buffer needs page_size 1)."""
    from compare import compare_one, engine_plan

    case = ("no-buffer", None, {"sglang_layout": "0.5.23", "mamba_scheduler_strategy": "no_buffer"})

    def accepts_everything(raw, pid):
        fixed = dict(raw, mamba_scheduler_strategy="extra_buffer")
        inputs, plan, _ = engine_plan(fixed, pid)
        return dict(inputs, mamba_scheduler_strategy="no_buffer"), plan, None

    res = compare_one(*case, engine=accepts_everything)
    assert _failing_keys(res) == {"errors"}, res.mismatches
    assert "page_size=1" in res.mismatches[0]["sglang"]["message"]
