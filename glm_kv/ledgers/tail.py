"""The compress tail: a per-request HBM buffer outside the three ledgers and outside HiCache."""
from __future__ import annotations

from dataclasses import dataclass

from typing import Protocol

from ..units import DTYPE_BYTES
from .layers import DsaIndexerK
from .model_layers import ModelLayers

TAIL_DTYPE = "bfloat16"
TAIL_COPIES = 2       # _compress_tail_k and _compress_tail_score
TAIL_EXTRA_ROWS = 2   # req_to_token rows (max_reqs + 1) + 1


class IndexedModel(Protocol):
    """What the tail reads of a model: its indexer's pooling and the layers the indexer runs in
    (``IndexedLayers`` from the layer specs; GLM-5.3-Flash's ``ModelConfig`` has the same names)."""

    index_kpool: int
    index_kpool_compress: bool
    index_head_dim: int
    dsa_indexed_layers: tuple[int, ...]


@dataclass(frozen=True)
class IndexedLayers:
    index_kpool: int
    index_kpool_compress: bool
    index_head_dim: int
    dsa_indexed_layers: tuple[int, ...]


def indexed_layers(layers: ModelLayers) -> IndexedLayers:
    """The DSA indexer's facts from a model's specs (kpool 1, no layer, for a model without one)."""
    ids = layers.layer_ids(DsaIndexerK)
    specs = layers.specs((DsaIndexerK,))
    if not specs:
        return IndexedLayers(1, False, 0, ())
    s = specs[0]
    return IndexedLayers(s.index_kpool, s.kpool_compress, s.index_head_dim, ids)


@dataclass(frozen=True)
class TailLedger:
    rows: int
    width: int
    head_dim: int
    dtype: str
    num_layers: int
    bytes_per_row: int
    bytes: int


def kpool_use_compress(model: IndexedModel) -> bool:
    """SGLang 0.5.23 ``DSATokenToKVPool._init_kpool_compress_tail_buffers``:
    ``kpool_use_compress = index_kpool > 1 and index_kpool_compress``. A kpool of 1 pools nothing,
    so SGLang allocates no tail even when the config's compress flag is set."""
    return model.index_kpool > 1 and model.index_kpool_compress


def tail_bytes_per_row(model: IndexedModel, draft_tokens: int) -> int:
    """One request's row over every indexed layer, both tensors; 0 without kpool compression."""
    if not kpool_use_compress(model):
        return 0
    width = model.index_kpool + draft_tokens
    return (width * model.index_head_dim * DTYPE_BYTES[TAIL_DTYPE] * TAIL_COPIES
            * len(model.dsa_indexed_layers))


def tail_ledger(model: IndexedModel, requests_per_worker: int, draft_tokens: int,
                decode_extra_slots: int = 0) -> TailLedger:
    """rows = req_to_token rows + 1 = per-worker requests + 2 (+ a decode server's pre-allocation
    rows, ``ServerArgs.decode_extra_slots``); width = index_kpool + draft tokens."""
    if not kpool_use_compress(model):
        return TailLedger(0, 0, model.index_head_dim, TAIL_DTYPE, 0, 0, 0)
    rows = requests_per_worker + decode_extra_slots + TAIL_EXTRA_ROWS
    per_row = tail_bytes_per_row(model, draft_tokens)
    return TailLedger(rows, model.index_kpool + draft_tokens, model.index_head_dim, TAIL_DTYPE,
                      len(model.dsa_indexed_layers), per_row, rows * per_row)
