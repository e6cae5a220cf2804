"""The draft model of ``--speculative-algorithm DFLASH`` (``--speculative-draft-model-path``).

DFLASH runs a separate draft checkpoint with its own KV pool. SGLang 0.5.23 reads the draft's
config.json (``speculative/dflash_utils.py`` ``parse_dflash_draft_config``) for

* its layer count (``num_hidden_layers``, of ``text_config`` when present);
* ``block_size`` (``dflash_config.block_size``, else top-level ``block_size``): the verify window,
  which becomes ``speculative_num_draft_tokens`` when no flag gives it (``_handle_dflash``; 16 when the
  config has none);
* its attention geometry for the draft KV bytes per token (``dflash_draft_cell_size_per_token``):
  ``num_kv_heads(attn_tp) x (head_dim + v_head_dim) x layers x dtype bytes``.

A path without a readable config.json is refused naming the path (no network at run time: a Hub id
is not fetched).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import ProfileError

FIELD = "speculative_draft_model_path"
DFLASH_DEFAULT_BLOCK_SIZE = 16   # _handle_dflash: "defaulting speculative_num_draft_tokens to 16"
TORCH_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class DraftConfig:
    path: str
    architectures: tuple[str, ...]
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int            # total, before the attention-TP split
    head_dim: int
    v_head_dim: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    dtype_bytes: int             # the checkpoint's torch_dtype (the KV dtype under --kv-cache-dtype auto)
    block_size: int | None       # None: the config gives none


def _int(cfg: dict, key: str, path: str, *, required: bool = True, minimum: int = 1) -> int | None:
    v = cfg.get(key)
    if v is None and not required:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ProfileError(FIELD, f"{path}/config.json: {key} must be an integer >= {minimum}, got {v!r}")
    return v


def load_draft(path: str) -> DraftConfig:
    """The draft's config.json, read as SGLang reads it; ProfileError naming the path otherwise."""
    folder = Path(path)
    cfg_path = folder / "config.json" if folder.is_dir() else folder
    try:
        raw = json.loads(cfg_path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        raise ProfileError(FIELD, f"{path!r} has no readable config.json (glm-kv reads the draft's layers, KV "
                                  f"heads, head dims and block_size from it; a Hub id is not fetched: "
                                  f"download the draft and give its folder)") from None
    if not isinstance(raw, dict):
        raise ProfileError(FIELD, f"{path}/config.json is not a JSON object")
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    dflash = raw.get("dflash_config") if isinstance(raw.get("dflash_config"), dict) else {}
    heads = _int(text, "num_attention_heads", path)
    kv_heads = _int(text, "num_key_value_heads", path, required=False) or heads
    hidden = _int(text, "hidden_size", path)
    head_dim = _int(text, "head_dim", path, required=False) or hidden // heads
    block = dflash.get("block_size", raw.get("block_size"))
    if block is not None and (isinstance(block, bool) or not isinstance(block, int) or block < 1):
        raise ProfileError(FIELD, f"{path}/config.json: DFLASH block_size must be an integer >= 1, got {block!r}")
    dtype = str(text.get("torch_dtype") or raw.get("torch_dtype") or "bfloat16").replace("torch.", "")
    return DraftConfig(
        path=str(path), architectures=tuple(raw.get("architectures") or ()),
        num_layers=_int(text, "num_hidden_layers", path), num_attention_heads=heads, num_kv_heads=kv_heads,
        head_dim=head_dim, v_head_dim=_int(text, "v_head_dim", path, required=False) or head_dim,
        hidden_size=hidden, intermediate_size=_int(text, "intermediate_size", path, required=False) or 0,
        vocab_size=_int(text, "vocab_size", path, required=False) or 0,
        dtype_bytes=TORCH_DTYPE_BYTES.get(dtype, 2), block_size=block,
    )


def kv_heads_per_rank(draft: DraftConfig, attn_tp: int) -> int:
    """``ModelConfig.get_num_kv_heads``: max(1, total // tp) for a non-MLA draft."""
    return max(1, draft.num_kv_heads // attn_tp)


def draft_kv_bytes_per_token(draft: DraftConfig, attn_tp: int, kv_item_bytes: int) -> int:
    """``dflash_draft_cell_size_per_token``: K and V rows of every draft layer on one rank."""
    return kv_heads_per_rank(draft, attn_tp) * (draft.head_dim + draft.v_head_dim) * draft.num_layers * kv_item_bytes


def estimate_draft_weights(draft: DraftConfig, attn_tp: int) -> int:
    """The draft's own parameters on one rank (an estimate, in its checkpoint dtype): per layer q/k/v/o
    and a gated MLP, split over the attention TP; the target's embedding and head are shared."""
    h, d = draft.hidden_size, draft.head_dim
    attn = h * d * (draft.num_attention_heads * 2 + draft.num_kv_heads * 2)
    mlp = 3 * h * draft.intermediate_size
    return int((attn + mlp) * draft.num_layers * draft.dtype_bytes / attn_tp)
