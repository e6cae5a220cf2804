"""Issue 32: DeepSeek-V4's pools (glm_kv/ledgers/dsv4.py) against numbers SGLang 0.5.23's classes produced.

The numbers below were read off SGLang 0.5.23 on the CPU (tests/sglang/test_dsv4_pools.py drives the same
classes on random launches): ``DSV4PoolConfigurator(kvc)`` for DeepSeek-V4-Flash at page 256, 256 requests,
chunked prefill 8192, overlap on, radix on, no --swa-full-tokens-ratio, 60e9 bytes: its
``bytes_per_swa_token``, ``bytes_per_full_token``, ``swa_cap_tokens`` and the ``MemoryPoolConfig`` after
``calculate_pool_sizes`` + ``finalize_with_max_running_requests``; and ``DeepSeekV4TokenToKVPool`` built
(device cpu) at swa 1,536, full 10,240 (c4 2,560, c128 80), c4 state 48, c128 state 512, 3 requests: the
bytes of its tensors. They are SGLang's answers, not a copy of glm-kv's formula, so this runs in CI
without SGLang. Each number has a planted error that moves it.
"""
from __future__ import annotations

import pytest

from glm_kv.errors import ProfileError
from glm_kv.inputs.hf_config import DSV4_SHIPPED, load_dsv4_config
import glm_kv.ledgers.dsv4 as D

# DSV4PoolConfigurator, DeepSeek-V4-Flash, page 256, 256 requests, chunk 8192, 60e9 B
SGLANG_FLASH = {"bytes_per_swa_token": 31875.0, "bytes_per_full_token": 3899.25, "swa_cap_tokens": 606464,
                "full_max_total_num_tokens": 9733376, "swa_max_total_num_tokens": 606464,
                "c4_max_total_num_tokens": 2433344, "c128_max_total_num_tokens": 76042,
                "c4_state_pool_size": 18952, "c128_state_pool_size": 32896}
# DeepSeekV4TokenToKVPool(device="cpu"), Flash, page 256: bytes of each pool's tensors
SGLANG_FLASH_POOL = {"swa_kv": 45077760, "c4_kv": 34594560, "c4_indexer_k": 7805952, "c128_kv": 5806080,
                     "c4_state": 12902400, "c128_state": 62914560}


def flash() -> D.Dsv4Model:
    return D.dsv4_model(load_dsv4_config("deepseek-v4-flash"))


def sizes() -> D.Dsv4Sizes:
    return D.dsv4_pool_sizes(flash(), available_bytes=int(60e9), page_size=256, max_running_requests=256,
                             chunked_prefill_size=8192)


def flash_pool() -> dict:
    return D.pool_bytes(flash(), page_size=256, swa=1536, c4=2560, c128=80, c4_state=48, c128_state=512,
                        num_req_slots=4)


def test_both_vendored_configs_load_with_their_layers():
    for name in DSV4_SHIPPED:
        m = D.dsv4_model(load_dsv4_config(name))
        assert m.num_layers == load_dsv4_config(name).text["num_hidden_layers"]   # the MTP entry is not the target's
        assert m.latent.row_bytes == 584 and m.indexer.row_bytes == 132   # the V4 layout's assert in create_buffer
    assert (flash().layers_of(0), flash().layers_of(4), flash().layers_of(128)) == (2, 21, 20)


def test_flash_sizes_equal_sglangs():
    s = sizes()
    assert flash().swa_bytes_per_token(256) == SGLANG_FLASH["bytes_per_swa_token"]
    assert s.bytes_per_full_token == SGLANG_FLASH["bytes_per_full_token"]
    assert s.swa_mode == "cap"
    got = {k: getattr(s, k) for k in SGLANG_FLASH if hasattr(s, k)}
    assert got == {k: v for k, v in SGLANG_FLASH.items() if k in got}


def test_flash_pool_bytes_equal_sglangs():
    assert flash_pool() == SGLANG_FLASH_POOL


@pytest.mark.parametrize("plant", ["page_align", "rope_fp8", "ring4", "state_dtype", "indexer_scale"])
def test_planted_errors_are_caught(monkeypatch, plant):
    setting = {"page_align": ("V4_PAGE_ALIGN", 512),
               "state_dtype": ("STATE_ITEM_BYTES", 2), "indexer_scale": ("INDEXER_QUANT_BLOCK", 64)}
    if plant == "rope_fp8":   # the V4 layout keeps rope in bf16 (rope_storage_dtype)
        monkeypatch.setattr(D.Dsv4LatentKv, "row_bytes",
                            property(lambda k: k.qk_nope_head_dim + k.qk_rope_head_dim + k.qk_nope_head_dim // 64 + 1))
    elif plant == "ring4":
        monkeypatch.setitem(D.RING_SIZES, 4, 16)
    else:
        monkeypatch.setattr(D, *setting[plant])
    s = sizes()
    moved = ({k: getattr(s, k) for k in SGLANG_FLASH if hasattr(s, k)} != {k: v for k, v in SGLANG_FLASH.items()
                                                                         if hasattr(s, k)})
    assert moved or flash_pool() != SGLANG_FLASH_POOL


def test_refusals_name_the_field():
    with pytest.raises(ProfileError, match="page_size.*multiple of 128"):
        D.dsv4_pool_sizes(flash(), available_bytes=10 << 30, page_size=64, max_running_requests=8,
                          chunked_prefill_size=8192)
    with pytest.raises(ProfileError, match="max_running_requests.*SWA pool cap"):
        D.dsv4_pool_sizes(flash(), available_bytes=1 << 30, page_size=256, max_running_requests=256,
                          chunked_prefill_size=8192)
    cfg = load_dsv4_config("deepseek-v4-flash")
    bad = type(cfg)(**{**{f: getattr(cfg, f) for f in ("name", "source", "model_type", "family", "architectures")},
                       "top": cfg.top, "text": {**cfg.text, "compress_ratios": [2] * 44}})
    with pytest.raises(ProfileError, match="compress_ratios.*not sized"):
        D.dsv4_model(bad)
