"""Hybrid sliding-window (SWA) models under SGLang 0.5.23: how glm-kv sizes their pools and flags (issue 32).

SGLang sizes a hybrid-SWA model (``is_hybrid_swa_model``: gpt-oss, Gemma-4, MiMo-V2-Flash, ...) with
``HybridSWAPoolConfigurator``: a full pool for the full-attention layers and an SWA pool beside it holding
``swa_full_tokens_ratio`` x the full pool's tokens for the sliding-window layers. glm-kv sizes that path at the
ratio ``--swa-full-tokens-ratio`` gives (SGLang's fallback 0.8 without it), ``SWARequestCapPoolConfigurator``
(a given ``--max-running-requests`` with ``--disable-radix-cache`` and a chunked prefill: the SWA pool sized from
the request cap, ``ledgers.capacity.swa_request_cap``), and ``--disable-hybrid-swa-memory`` (``ModelConfig``'s
``is_hybrid_swa`` false: no SWA pool, every layer's K and V in the one full pool, ``DefaultPoolConfigurator``).
``--swa-prefix-tails`` is read by DeepSeek-V4's configurator only: inert for these models, refused below zero
in SGLang's words as for every model (``refuse_swa_flags``).

HiCache builds the SWA host pool beside the KV one (``_SwaStrategy``: ``ledgers.host``); a DFLASH / DSPARK
draft's own pool joins the cell (``_draft_cell_size``) and the request cap counts its draft tokens; a PD decode
server's request cap holds its pre-allocated rows. EAGLE / NEXTN without a draft checkpoint are refused as for
every model whose config names no MTP layer (gpt-oss names none; SGLang would load the target as its draft).
"""
from __future__ import annotations

from ..errors import ProfileError

# arg_groups/fields/schedule.py: swa_full_tokens_ratio's fallback when --swa-full-tokens-ratio is not given
SWA_FULL_TOKENS_RATIO = 0.8
SWA_FAMILIES = ("gqa_swa",)


def swa_full_tokens_ratio(p) -> float:
    """``get_schedule().swa_full_tokens_ratio``: ``--swa-full-tokens-ratio``, else its fallback (the profile's
    default, ``SWA_FULL_TOKENS_RATIO``); no model override applies to the models glm-kv sizes (DeepSeek-V4's
    and Inkling's 0.1, Step-3.5's 1.0 under HiCache are theirs)."""
    return float(p.swa_full_tokens_ratio)


def refuse_swa_flags(model: str | None, inert: list[str]) -> None:
    """A launch command's inert ``--swa-prefix-tails`` (``"flag value ..."``): inert for every model glm-kv
    sizes, but SGLang 0.5.23 refuses a negative count at start-up (``kv_cache_hook``), for any model."""
    for item in inert:
        flag, *values = item.split()
        if flag == "--swa-prefix-tails" and values and values[0].lstrip("-").isdigit() and int(values[0]) < 0:
            raise ProfileError(flag, "SGLang 0.5.23 refuses it: \"--swa-prefix-tails should be a non-negative "
                                     "integer.\" (arg_groups/kv_cache_hook.py)")
