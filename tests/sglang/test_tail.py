"""The compress tail against SGLang 0.5.23's own tail set-up (found by mutation testing).

glm_kv once allocated the tail whenever ``index_kpool_compress`` was on; SGLang 0.5.23 allocates it
only when ``index_kpool > 1`` too (``memory_pool.py``: ``kpool_use_compress``). Here SGLang's
``DSATokenToKVPool._init_kpool_compress_tail_buffers`` decides, on a stand-in pool; it lives in
tests/sglang so that it runs in the SGLang group of ``make test`` (it needs the wheel) instead of
being skipped in the unit group.
"""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from glm_kv.inputs.model import load_model


@pytest.fixture(scope="module")
def glm():
    return load_model()


@pytest.mark.parametrize("kpool", [1, 2, 4])
@pytest.mark.parametrize("compress", [False, True])
def test_tail_allocated_exactly_when_sglang_allocates_it(glm, kpool, compress):
    """SGLang's own tail set-up decides: ``DSATokenToKVPool._init_kpool_compress_tail_buffers``
    from the 0.5.23 wheel, run on a stand-in pool (2 requests, width kpool + 1 draft slot, the
    GLM-5.3-Flash head dim, 3 layers of which the middle one skips the indexer). glm_kv's tail has
    bytes exactly when SGLang's has tensors, of the same width. """
    from sglang.srt.mem_cache import memory_pool

    from glm_kv.ledgers.tail import tail_ledger

    pool = SimpleNamespace(custom_mem_pool=None, _should_allocate_index_layer=lambda i: i != 1)
    memory_pool.DSATokenToKVPool._init_kpool_compress_tail_buffers(
        pool, index_kpool=kpool, index_kpool_compress=compress, tail_extra_slots=1,
        index_head_dim=glm.index_head_dim, layer_num=3, device="cpu", max_running_requests=2)
    ours = tail_ledger(dataclasses.replace(glm, index_kpool=kpool, index_kpool_compress=compress), 2, 1)
    if pool._compress_tail_k is None:
        assert pool._compress_tail_score is None
        assert ours.bytes == 0, f"SGLang allocates no tail at kpool {kpool}, compress {compress}"
    else:
        assert ours.bytes > 0, f"SGLang allocates a tail at kpool {kpool}, compress {compress}"
        assert ours.width == pool._compress_tail_k[0].shape[1]
        assert ours.rows - 1 == pool._compress_tail_k[0].shape[0]  # SGLang: reqs + 1; glm_kv's extra row: +1
