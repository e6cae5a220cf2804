"""The compress tail: a per-request HBM buffer outside the three ledgers and outside HiCache."""
from __future__ import annotations

from dataclasses import dataclass

from ..inputs.model import ModelConfig
from ..units import DTYPE_BYTES

TAIL_DTYPE = "bfloat16"
TAIL_COPIES = 2       # _compress_tail_k and _compress_tail_score
TAIL_EXTRA_ROWS = 2   # req_to_token rows (max_reqs + 1) + 1


@dataclass(frozen=True)
class TailLedger:
    rows: int
    width: int
    head_dim: int
    dtype: str
    num_layers: int
    bytes_per_row: int
    bytes: int


def kpool_use_compress(model: ModelConfig) -> bool:
    """SGLang 0.5.23 ``DSATokenToKVPool._init_kpool_compress_tail_buffers``:
    ``kpool_use_compress = index_kpool > 1 and index_kpool_compress``. A kpool of 1 pools nothing,
    so SGLang allocates no tail even when the config's compress flag is set."""
    return model.index_kpool > 1 and model.index_kpool_compress


def tail_bytes_per_row(model: ModelConfig, draft_tokens: int) -> int:
    """One request's row over every indexed layer, both tensors; 0 without kpool compression."""
    if not kpool_use_compress(model):
        return 0
    width = model.index_kpool + draft_tokens
    return (width * model.index_head_dim * DTYPE_BYTES[TAIL_DTYPE] * TAIL_COPIES
            * len(model.dsa_indexed_layers))


def tail_ledger(model: ModelConfig, requests_per_worker: int, draft_tokens: int,
                decode_extra_slots: int = 0) -> TailLedger:
    """rows = req_to_token rows + 1 = per-worker requests + 2 (+ a decode server's pre-allocation
    rows, ``ServerArgs.decode_extra_slots``); width = index_kpool + draft tokens."""
    if not kpool_use_compress(model):
        return TailLedger(0, 0, model.index_head_dim, TAIL_DTYPE, 0, 0, 0)
    rows = requests_per_worker + decode_extra_slots + TAIL_EXTRA_ROWS
    per_row = tail_bytes_per_row(model, draft_tokens)
    return TailLedger(rows, model.index_kpool + draft_tokens, model.index_head_dim, TAIL_DTYPE,
                      len(model.dsa_indexed_layers), per_row, rows * per_row)
