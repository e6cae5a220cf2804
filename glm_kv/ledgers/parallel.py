"""Parallelism: which TP size splits attention and the state heads, and requests per DP worker."""
from __future__ import annotations

from dataclasses import dataclass

from ..inputs.resolve import ServerArgs


@dataclass(frozen=True)
class ParallelLedger:
    attn_dp_size: int
    attn_tp_size: int
    linear_attn_tp_size: int
    max_running_requests_per_worker: int | None


def parallel_ledger(args: ServerArgs) -> ParallelLedger:
    """attn_tp = tp // attn_dp // attn_cp, attn_dp = dp_size only under DP attention, the state heads
    over attn_tp (or the whole TP under CP-TP group sharing): resolved once in ``inputs.resolve``."""
    return ParallelLedger(args.attn_dp_size, args.attn_tp_size, args.linear_attn_tp_size, args.requests_per_worker)
