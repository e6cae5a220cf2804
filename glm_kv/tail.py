"""The compress tail: a per-request HBM buffer outside the three ledgers and outside HiCache."""
from __future__ import annotations

from dataclasses import dataclass

from .model import ModelConfig

TAIL_DTYPE_BYTES = 2  # bf16
TAIL_COPIES = 2       # _compress_tail_k and _compress_tail_score


@dataclass(frozen=True)
class TailLedger:
    rows: int
    width: int
    head_dim: int
    dtype: str
    num_layers: int
    bytes_per_row: int
    bytes: int


def tail_ledger(model: ModelConfig, requests_per_worker: int, draft_tokens: int) -> TailLedger:
    """rows = req_to_token rows + 1 = per-worker requests + 2; width = index_kpool + draft tokens."""
    if not model.index_kpool_compress:
        return TailLedger(0, 0, model.index_head_dim, "bfloat16", 0, 0, 0)
    rows = requests_per_worker + 2
    width = model.index_kpool + draft_tokens
    layers = len(model.dsa_indexed_layers)
    per_row = width * model.index_head_dim * TAIL_DTYPE_BYTES * TAIL_COPIES * layers
    return TailLedger(rows, width, model.index_head_dim, "bfloat16", layers, per_row, rows * per_row)
