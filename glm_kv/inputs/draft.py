"""The draft model of ``--speculative-algorithm DFLASH`` / ``DSPARK`` (``--speculative-draft-model-path``).

DFLASH and DSPARK (SGLang's "DFLASH family", ``SpeculativeAlgorithm.is_dflash_family``) run a
separate draft checkpoint with its own KV pool, sized the same way. SGLang 0.5.23 reads the draft's
config.json (``speculative/dflash_utils.py`` ``parse_dflash_draft_config``) for

* its layer count (``num_hidden_layers``, of ``text_config`` when present);
* ``block_size`` (``dflash_config.block_size``, else top-level ``block_size``): the verify window,
  which becomes ``speculative_num_draft_tokens`` when no flag gives it (``_handle_dflash``; 16 when the
  config has none);
* its attention geometry for the draft KV bytes per token (``dflash_draft_cell_size_per_token``):
  ``num_kv_heads(attn_tp) x (head_dim + v_head_dim) x layers x dtype bytes``.

DSPARK reads the same config through ``parse_dspark_draft_config`` (speculative/dspark_components/
dspark_config.py) for what differs (``dspark_fields``): gamma, the number of proposed tokens
(top-level ``dspark_block_size``, else the DFLASH ``block_size``), whose verify window
``gamma + 1`` becomes ``speculative_num_draft_tokens`` (``_handle_dspark``; gamma 7 when nothing
gives it); the Markov head it requires (``markov_rank`` > 0, ``markov_head_type``); the mask token.
The draft's KV per token, its device pool and its layer count are the DFLASH ones.

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
DSPARK_DEFAULT_GAMMA = 7         # dspark_config.DEFAULT_DSPARK_GAMMA ("DSpark gamma is not set; defaulting to 7")
DSPARK_MARKOV_HEAD_TYPES = ("vanilla", "gated", "rnn")   # SUPPORTED_DSPARK_MARKOV_HEAD_TYPES
DSPARK_SUBFOLDER = "dspark"      # speculative_hook._DSPARK_DRAFT_SUBFOLDER: a draft shipped inside the target
# keys on the TARGET config that mark a bundled DSpark head (dspark_config.checkpoint_bundles_dspark_draft)
DSPARK_BUNDLE_KEYS = ("dspark_block_size", "dspark_markov_rank", "dspark_noise_token_id", "dspark_target_layer_ids")
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


def read_config(path: str) -> dict:
    """A draft's config.json as a dict; ProfileError naming the path when it is not readable."""
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
    return raw


def load_draft(path: str) -> DraftConfig:
    """The draft's config.json, read as SGLang reads it; ProfileError naming the path otherwise."""
    raw = read_config(path)
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


# ----------------------------------------------------------------------------- DSPARK


@dataclass(frozen=True)
class DSparkFields:
    """What ``parse_dspark_draft_config`` reads beyond the DFLASH fields."""

    gamma: int | None            # proposed tokens; None: the config gives none
    markov_rank: int
    markov_head_type: str | None
    mask_token_id: int | None


def _optional_int(value, path: str, key: str, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ProfileError(FIELD, f"{path}/config.json: DSpark {key} must be an integer >= {minimum}, got {value!r}")
    return value


def dspark_fields(path: str) -> DSparkFields:
    """``parse_dspark_draft_config`` on the draft's config.json, with its refusals in SGLang's words.

    Top-level ``dspark_*`` keys win; else ``dspark_config`` over ``dflash_config`` (both merged), then
    the text config, then the top level. Gamma is ``dspark_block_size``, else the DFLASH block_size
    (``dflash_config.block_size``, else top-level ``block_size``: ``dspark_config`` is not read for it).
    """
    raw = read_config(path)
    nested = {**(raw.get("dflash_config") if isinstance(raw.get("dflash_config"), dict) else {}),
              **(raw.get("dspark_config") if isinstance(raw.get("dspark_config"), dict) else {})}
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    prefixed = any(raw.get(k) is not None for k in DSPARK_BUNDLE_KEYS)

    def pick(prefixed_key: str, key: str):
        if raw.get(prefixed_key) is not None:
            return raw[prefixed_key]
        return nested.get(key, text.get(key, raw.get(key)))

    rank = pick("dspark_markov_rank", "markov_rank") or 0
    rank = _optional_int(rank, path, "markov_rank", 0)
    head = pick("dspark_markov_head_type", "markov_head_type")
    if rank > 0 and head is None and not prefixed:
        raise ProfileError(FIELD, f"{path}/config.json: SGLang 0.5.23 refuses it: \"DSpark requires "
                                  f"markov_head_type when markov_rank > 0, got None.\"")
    if head is not None and str(head).lower() not in DSPARK_MARKOV_HEAD_TYPES:
        raise ProfileError(FIELD, f"{path}/config.json: SGLang 0.5.23 refuses it: \"Unsupported DSpark "
                                  f"markov_head_type={str(head).lower()!r}. Supported: {DSPARK_MARKOV_HEAD_TYPES}.\"")
    mask = pick("dspark_noise_token_id", "mask_token_id")
    dflash = raw.get("dflash_config") if isinstance(raw.get("dflash_config"), dict) else {}
    block = raw.get("dspark_block_size", dflash.get("block_size", raw.get("block_size")))
    return DSparkFields(gamma=_optional_int(block, path, "block_size", 1), markov_rank=rank,
                        markov_head_type=None if head is None else str(head).lower(),
                        mask_token_id=_optional_int(mask, path, "mask_token_id", 0))


def check_dspark_draft(d: DSparkFields, target_vocab_size: int) -> None:
    """The DSpark draft refusals at start-up, SGLang's words: ``_resolve_dflash_aux_hidden_state``
    (markov head required) and the worker's ``resolve_runtime_config`` (mask token in the vocab)."""
    if d.markov_rank <= 0:
        raise ProfileError(FIELD, f"SGLang 0.5.23 refuses the draft: \"DSPARK requires markov_rank > 0 in the "
                                  f"draft config, got markov_rank={d.markov_rank}.\"")
    if d.mask_token_id is None:
        raise ProfileError(FIELD, "SGLang 0.5.23 refuses the draft: \"DSpark requires mask_token_id to be set "
                                  "in the draft model config.\"")
    if d.mask_token_id >= target_vocab_size:
        raise ProfileError(FIELD, f"SGLang 0.5.23 refuses the draft: \"DSpark mask_token_id={d.mask_token_id} "
                                  f"is outside the target vocab size {target_vocab_size}.\"")


def dspark_draft_path(model_path: str, raw_model: dict | None) -> str | None:
    """``_handle_dspark`` without --speculative-draft-model-path: a ``dspark/`` subfolder of a local
    target checkpoint holding a config.json; None when there is none. A draft bundled in the target's
    own config (``dspark_*`` keys) is refused: glm-kv does not model its layers."""
    if raw_model and any(raw_model.get(k) is not None for k in DSPARK_BUNDLE_KEYS):
        raise ProfileError(FIELD, "not modelled by glm-kv: the target config carries a bundled DSpark draft "
                                  "(dspark_* keys; SGLang defaults the draft path to --model-path), whose layers "
                                  "glm-kv does not read; give the draft's own folder")
    folder = Path(model_path) / DSPARK_SUBFOLDER
    try:
        return str(folder) if (folder / "config.json").is_file() else None
    except OSError:
        return None
