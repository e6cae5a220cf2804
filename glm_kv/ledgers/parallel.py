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
    linear_tp = attn_tp
    if cp_tp_group_sharing(args):
        linear_tp = p.tp_size
        if model.kda_num_heads % linear_tp:
            raise ProfileError("tp_size", f"num_heads={model.kda_num_heads} must be divisible by "
                                          f"--tp-size={p.tp_size} (CP-TP group sharing)")
    return ParallelLedger(attn_dp, attn_tp, linear_tp, args.requests_per_worker)


CP_TP_SHARING_ARCHS = ("Glm5NextForConditionalGeneration",)


def cp_tp_group_sharing(args: ServerArgs) -> bool:
    """``resolve_cp_tp_group_sharing``: prefill CP over the whole TP group shares it with KDA.

    Then ``linear_attn_tp_size()`` is the TP size, not attn_tp (1); SGLang refuses a CP group
    narrower than TP and any strategy but interleave for this model.
    """
    p, model = args.profile, args.model
    archs = getattr(model, "architectures", ()) or ()
    if not p.enable_prefill_cp or p.attn_cp_size <= 1:
        return False
    if archs and archs[0] not in CP_TP_SHARING_ARCHS:
        return False
    if p.attn_cp_size != p.tp_size:
        raise ProfileError("attn_cp_size", f"CP-TP group sharing requires attn_cp_size == tp_size, got "
                                           f"attn_cp_size={p.attn_cp_size}, tp_size={p.tp_size}")
    if p.cp_strategy != "interleave":
        raise ProfileError("cp_strategy", f"CP-TP group sharing requires cp_strategy interleave for "
                                          f"this model, got {getattr(p, 'cp_strategy', None)!r}")
    return True
