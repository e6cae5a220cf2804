"""Public anchor (issue 20): the MTP draft layer of article-era SGLang builds on 4 x B200, fp8 KV.

caiovicentino/glm-5.3-flash-sglang-4x-b200, docs/memory-budget.md (boot logs of an article-era build,
not 0.5.23): the draft KV pool is 3.80 GiB for 6,327,680 tokens = 644 B/token, exactly one target
full-attention layer (7,084 B/token over 11 layers). 0.5.23 pools the indexer row (33 B): 545 B/token
(reference sglang-0.5.23.md: cell 6,540 with MTP vs 5,995 without, raw fp8).
"""
from __future__ import annotations

import pytest

from glm_kv.inputs.profile import load_profile
from glm_kv.ledgers.plan import compute_plan

ANCHOR_TOKENS, ANCHOR_GIB = 6_327_680, 3.80


def _tok(layout: str):
    p = load_profile("article", {"sglang_layout": layout, "gpu": "B200", "tp_size": 4, "dp_size": 4,
                                 "enable_dp_attention": True, "kv_cache_dtype": "fp8_e4m3",
                                 "dsa_prefill_backend": "trtllm", "dsa_decode_backend": "trtllm",
                                 "speculative_algorithm": "EAGLE"})
    return compute_plan(p).token


def draft_pool_gib(tok) -> float:
    """The draft KV pool the boot log prints (GiB, 2 decimals) for the anchor's token count."""
    return round(ANCHOR_TOKENS * tok.draft_bytes_per_token / 2**30, 2)


def test_article_layout_draft_is_one_target_layer_644():
    tok = _tok("article")
    assert tok.kv_row_bytes == 512
    # the public figures: 644 B/token draft, 7,084 B/token target over 11 full-attention layers
    assert tok.draft_bytes_per_token == 644
    assert tok.target_cell_size_bytes == 7_084
    assert tok.draft_bytes_per_token * tok.num_full_layers == tok.target_cell_size_bytes
    assert draft_pool_gib(tok) == ANCHOR_GIB


def test_0523_layout_draft_pools_the_indexer_545():
    tok = _tok("0.5.23")
    assert tok.draft_bytes_per_token == 545 and tok.target_cell_size_bytes + 545 == 6_540


def test_the_old_545_misses_the_anchor():
    """Planted error: the article layout given 0.5.23's pooled draft term (512 + 33 = 545) prints
    3.22 GiB, not the logged 3.80: the anchor check fails on the engine's own figure."""
    import dataclasses

    wrong = dataclasses.replace(_tok("article"), draft_bytes_per_token=_tok("0.5.23").draft_bytes_per_token)
    assert wrong.draft_bytes_per_token == 545
    assert draft_pool_gib(wrong) != ANCHOR_GIB
    assert draft_pool_gib(_tok("article")) == ANCHOR_GIB
