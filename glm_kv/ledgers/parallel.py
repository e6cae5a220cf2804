"""Parallelism: which TP size splits attention and KDA heads, and requests per DP worker."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ProfileError
from ..inputs.resolve import ServerArgs


@dataclass(frozen=True)
class ParallelLedger:
    attn_dp_size: int
    attn_tp_size: int
    linear_attn_tp_size: int
    max_running_requests_per_worker: int | None


def parallel_ledger(args: ServerArgs) -> ParallelLedger:
    """attn_tp = tp // attn_dp // attn_cp, attn_dp = dp_size only under DP attention."""
    model, p, attn_dp = args.model, args.profile, args.attn_dp_size
    if p.enable_dp_attention and p.tp_size % p.dp_size:
        raise ProfileError("dp_size", f"with enable_dp_attention, tp_size ({p.tp_size}) must be divisible "
                                      f"by dp_size ({p.dp_size})")
    if p.tp_size % (attn_dp * p.attn_cp_size):
        raise ProfileError("attn_cp_size", f"tp_size ({p.tp_size}) must be divisible by attn_dp x attn_cp "
                                           f"({attn_dp} x {p.attn_cp_size})")
    attn_tp = p.tp_size // attn_dp // p.attn_cp_size
    if model.num_attention_heads % attn_tp:
        raise ProfileError("tp_size", f"attention TP {attn_tp} must divide num_attention_heads "
                                      f"({model.num_attention_heads})")
    if model.kda_num_heads % attn_tp:
        raise ProfileError("tp_size", f"linear-attention TP {attn_tp} must divide the {model.kda_num_heads} "
                                      f"KDA heads ({model.kda_proj_size} is not divisible by {attn_tp})")
    return ParallelLedger(attn_dp, attn_tp, attn_tp, args.requests_per_worker)
