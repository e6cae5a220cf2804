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


def mimo_layer_types(t: dict) -> list[str]:
    """MiMo-V2-Flash's layers as ``get_hybrid_layer_ids`` splits them (``MIMO_V2_MODEL_ARCHS``): 1 in
    ``hybrid_layer_pattern`` is a sliding-window layer, 0 a full-attention one, one entry per layer of
    ``num_hidden_layers`` (transformers' own ``layer_types`` default is not what SGLang reads). Anything else
    is refused: SGLang would put that layer in neither pool, and without the pattern it fails at start-up."""
    pattern, n = t.get("hybrid_layer_pattern"), t.get("num_hidden_layers")
    where = "model.hybrid_layer_pattern"
    if (not isinstance(pattern, list) or not pattern or len(pattern) > 4096
            or not all(type(x) is int and x in (0, 1) for x in pattern)):
        raise ProfileError(where, f"must be a list of 0 (full attention) and 1 (sliding window), one per layer; "
                                  f"got {str(pattern)[:60]}")
    if type(n) is not int or len(pattern) < n:
        raise ProfileError(where, f"must name every one of the num_hidden_layers ({n}) layers, got {len(pattern)}")
    return ["sliding_attention" if x == 1 else "full_attention" for x in pattern[:n]]


def llama4_layer_types(t: dict) -> list[str]:
    """Llama-4's layers as ``get_hybrid_layer_ids`` splits them for ``Llama4ForConditionalGeneration``: every 4th
    layer (``(i + 1) % 4 == 0``) full attention, the rest chunked attention in the SWA pool; the config's own
    fields (``no_rope_layers``, ``layer_types``) are not read for the split."""
    n = t.get("num_hidden_layers")
    if type(n) is not int or not 1 <= n <= 4096:
        raise ProfileError("model.num_hidden_layers", f"must be an integer in [1, 4096], got {str(n)[:40]}")
    return ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(n)]


def sglang_swa_view(cfg):
    """The hybrid-SWA config as SGLang 0.5.23's ``ModelConfig`` reads it: a copy of ``cfg`` whose text part
    states the full-attention shapes in ``head_dim`` / ``num_key_value_heads`` and the sliding-window ones in
    ``swa_head_dim`` / ``swa_v_head_dim`` / ``swa_num_key_value_heads`` (gpt-oss: unchanged, it names none).

    Why: Gemma-4 states its shapes SWA-first (``head_dim``, ``num_key_value_heads`` are the sliding layers';
    ``global_head_dim``, ``num_global_key_value_heads`` the full ones), and SGLang flips them at load
    (``hf_transformers/config.py`` ``_apply_gemma4_attention_overrides`` over transformers'
    ``Gemma4TextConfig.__post_init__``): the full layers take ``global_head_dim`` (512 when absent) and,
    when ``attention_k_eq_v``, ``num_global_key_value_heads``; the last layer is forced to full attention;
    ``use_bidirectional_attention: "all"`` halves the window (``sliding_window // 2 + 1``). KV-shared layers
    (``num_kv_shared_layers``) still get their own rows: SWAKVPool allocates every layer id it is given."""
    import dataclasses

    if cfg.model_type == "mimo_v2_flash":
        return dataclasses.replace(cfg, text={**cfg.text, "layer_types": mimo_layer_types(cfg.text)})
    if cfg.model_type == "llama4":
        return dataclasses.replace(cfg, text={**cfg.text, "layer_types": llama4_layer_types(cfg.text)})
    if cfg.model_type != "gemma4":
        return cfg
    t = dict(cfg.text)
    full_hd = t.get("global_head_dim", 512)
    full_kv = t.get("num_global_key_value_heads") if t.get("attention_k_eq_v", False) else None
    swa_hd, swa_kv = t.get("head_dim"), t.get("num_key_value_heads")
    types = t.get("layer_types")
    if isinstance(types, list) and types:
        t["layer_types"] = [*types[:-1], "full_attention"]
    if t.get("use_bidirectional_attention") == "all" and isinstance(t.get("sliding_window"), int):
        t["sliding_window"] = t["sliding_window"] // 2 + 1
    t.update(head_dim=full_hd, v_head_dim=None, swa_head_dim=swa_hd, swa_v_head_dim=swa_hd)
    if swa_kv is not None:
        t["swa_num_key_value_heads"] = swa_kv
    if full_kv is not None:
        t["num_key_value_heads"] = full_kv
    return dataclasses.replace(cfg, text=t)
