"""DeepSeek-V4's parameter count against the published totals, and the per-rank estimate's shape.

The byte-exact check of ``ledgers.dsv4_weights`` is tests/sglang/test_dsv4_weights.py (SGLang's own model
classes on meta). Here: the config is read as DeepSeek counts it. Published totals (rounded as published;
they exclude the MTP layer, as DeepSeek-V3's 671B did):

* DeepSeek-V4-Flash: "284B total parameters and 13B activated parameters" (OpenRouter's model page,
  https://openrouter.ai/deepseek/deepseek-v4-flash/api; also https://docs.venice.ai/models/deepseek-v4-flash-0423);
* DeepSeek-V4-Pro: "1.6 trillion total parameters ... 49 billion activate" (https://agentrq.com/blog/deepseek-v4-pro.md;
  the DeepSeek API release note as quoted by https://thedailyscout.com/s/DCOsxWNPKMI).
"""
from __future__ import annotations

import pytest

from glm_kv.inputs.hf_config import load_dsv4_config
from glm_kv.ledgers.dsv4_weights import dsv4_draft_weight_bytes, dsv4_param_count, dsv4_weight_bytes


def test_flash_total_is_the_published_284b():
    n = dsv4_param_count(load_dsv4_config("deepseek-v4-flash"), nextn=False)
    assert round(n / 1e9) == 284, n


def test_pro_total_is_the_published_1_6t():
    n = dsv4_param_count(load_dsv4_config("deepseek-v4-pro"), nextn=False)
    assert round(n / 1e12, 1) == 1.6, n


@pytest.mark.parametrize("name", ["deepseek-v4-flash", "deepseek-v4-pro"])
def test_per_rank_bytes_shrink_with_tp_and_grow_with_dp_attention(name):
    cfg = load_dsv4_config(name)
    by_tp = [dsv4_weight_bytes(cfg, tp, tp, False) for tp in (1, 2, 4, 8)]
    assert by_tp == sorted(by_tp, reverse=True)
    assert dsv4_weight_bytes(cfg, 8, 1, True) > dsv4_weight_bytes(cfg, 8, 8, False)
    assert dsv4_weight_bytes(cfg, 8, 8, False, wo_a_fp8=True) < dsv4_weight_bytes(cfg, 8, 8, False)
    assert 0 < dsv4_draft_weight_bytes(cfg, 8, 8, False) < dsv4_weight_bytes(cfg, 8, 8, False) / 5
