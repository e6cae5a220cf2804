"""GLM-5.3-Flash's memory-relevant config, shipped with the package (no network at run time).

A user's own ``config.json`` with the same fields (under ``text_config``) loads the same way.
Full-attention vs KDA layers are read from ``linear_attn_config`` / ``layer_types``; nothing
assumes "every 4th layer".
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import ProfileError

PACKAGE_DIR = Path(__file__).resolve().parent

SHIPPED_MODEL = "glm-5.3-flash"
FULL_LAYER_TYPES = {"deepseek_sparse_attention", "full_attention", "full"}
LINEAR_LAYER_TYPES = {"linear_attention", "kda"}


@dataclass(frozen=True)
class ModelConfig:
    """The config fields that decide KV-cache memory (names as in config.json)."""

    name: str
    source: str
    num_hidden_layers: int
    full_attention_layers: tuple[int, ...]
    linear_attention_layers: tuple[int, ...]
    kv_lora_rank: int
    qk_rope_head_dim: int
    num_attention_heads: int
    kda_num_heads: int
    kda_head_dim: int
    short_conv_kernel_size: int
    index_head_dim: int
    index_n_heads: int
    index_topk: int
    index_kpool: int
    index_kpool_compress: bool
    indexer_types: tuple[str, ...]
    num_nextn_predict_layers: int
    max_position_embeddings: int
    hidden_size: int
    vocab_size: int
    intermediate_size: int
    moe_intermediate_size: int
    first_k_dense_replace: int
    n_routed_experts: int
    n_shared_experts: int

    @property
    def num_full_layers(self) -> int:
        return len(self.full_attention_layers)

    @property
    def num_linear_layers(self) -> int:
        return len(self.linear_attention_layers)

    @property
    def kda_proj_size(self) -> int:
        """KimiLinearStateShape's projection size: heads x head_dim (k heads default the same)."""
        return self.kda_num_heads * self.kda_head_dim

    @property
    def dsa_indexed_layers(self) -> tuple[int, ...]:
        """Full layers whose indexer runs top-k (``indexer_types`` 'full'); all of them here."""
        return tuple(i for i in self.full_attention_layers
                     if i >= len(self.indexer_types) or self.indexer_types[i] == "full")


def _split_layers(text: dict, where: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    n = text.get("num_hidden_layers")
    lac = text.get("linear_attn_config") or {}
    full = lac.get("full_attn_layers")
    kda = lac.get("kda_layers")
    types = text.get("layer_types")
    from_types = None
    if types is not None:
        if len(types) != n:
            raise ProfileError(f"{where}.layer_types",
                               f"has {len(types)} entries but num_hidden_layers is {n}")
        unknown = sorted({t for t in types} - FULL_LAYER_TYPES - LINEAR_LAYER_TYPES)
        if unknown:
            raise ProfileError(f"{where}.layer_types", f"unknown layer type(s) {unknown}")
        from_types = (tuple(i for i, t in enumerate(types) if t in FULL_LAYER_TYPES),
                      tuple(i for i, t in enumerate(types) if t in LINEAR_LAYER_TYPES))
    if full is not None and kda is not None:
        from_lac = (tuple(sorted(full)), tuple(sorted(kda)))
        if from_types is not None and from_types != from_lac:
            raise ProfileError(f"{where}.linear_attn_config",
                               "full_attn_layers / kda_layers disagree with layer_types")
        result = from_lac
    elif from_types is not None:
        result = from_types
    else:
        raise ProfileError(f"{where}", "needs linear_attn_config.full_attn_layers/kda_layers "
                                       "or layer_types to tell full-attention from KDA layers")
    f, k = result
    if sorted(f + k) != list(range(n)):
        raise ProfileError(f"{where}.linear_attn_config",
                           f"full + KDA layers must cover 0..{n - 1} exactly once")
    return result


def _need(text: dict, key: str, where: str, kind: type = int):
    if key not in text:
        raise ProfileError(f"{where}.{key}", "missing from config")
    value = text[key]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ProfileError(f"{where}.{key}", f"must be an integer, got {value!r}")
    if kind is int and value < 0:
        raise ProfileError(f"{where}.{key}", f"must be >= 0, got {value}")
    return value


def model_from_dict(cfg: dict, name: str, source: str) -> ModelConfig:
    """Build a ModelConfig from a config.json dict (text fields at top level or under text_config)."""
    text = cfg.get("text_config", cfg)
    where = "model(text_config)" if "text_config" in cfg else "model"
    full, kda = _split_layers(text, where)
    lac = text.get("linear_attn_config") or {}
    for key in ("num_heads", "head_dim", "short_conv_kernel_size"):
        _need(lac, key, f"{where}.linear_attn_config")
    n_layers = _need(text, "num_hidden_layers", where)
    m = ModelConfig(
        name=name, source=source,
        num_hidden_layers=n_layers,
        full_attention_layers=full, linear_attention_layers=kda,
        kv_lora_rank=_need(text, "kv_lora_rank", where),
        qk_rope_head_dim=_need(text, "qk_rope_head_dim", where),
        num_attention_heads=_need(text, "num_attention_heads", where),
        kda_num_heads=lac["num_heads"], kda_head_dim=lac["head_dim"],
        short_conv_kernel_size=lac["short_conv_kernel_size"],
        index_head_dim=_need(text, "index_head_dim", where),
        index_n_heads=text.get("index_n_heads", 0),
        index_topk=_need(text, "index_topk", where),
        index_kpool=text.get("index_kpool", 1),
        index_kpool_compress=bool(text.get("index_kpool_compress", False)),
        indexer_types=tuple(text.get("indexer_types", ["full"] * n_layers)),
        num_nextn_predict_layers=text.get("num_nextn_predict_layers", 0),
        max_position_embeddings=_need(text, "max_position_embeddings", where),
        hidden_size=text.get("hidden_size", 0), vocab_size=text.get("vocab_size", 0),
        intermediate_size=text.get("intermediate_size", 0),
        moe_intermediate_size=text.get("moe_intermediate_size", 0),
        first_k_dense_replace=text.get("first_k_dense_replace", 0),
        n_routed_experts=text.get("n_routed_experts", 0),
        n_shared_experts=text.get("n_shared_experts", 0),
    )
    if not isinstance(m.index_kpool, int) or m.index_kpool < 1:
        raise ProfileError(f"{where}.index_kpool", f"must be a positive integer, got {m.index_kpool!r}")
    if m.index_head_dim % 128:
        raise ProfileError(f"{where}.index_head_dim",
                           f"must be a multiple of 128 (one 4-byte scale per 128), got {m.index_head_dim}")
    return m


@lru_cache(maxsize=16)
def load_model(model: str = SHIPPED_MODEL) -> ModelConfig:
    """The shipped GLM-5.3-Flash config, or a path to a config.json (or a folder holding one)."""
    if model == SHIPPED_MODEL or model.lower() in {"zai-org/glm-5.3-flash", "glm-5.3-flash"}:
        text = (PACKAGE_DIR / "data" / "glm-5.3-flash.json").read_text()
        return model_from_dict(json.loads(text), SHIPPED_MODEL, "shipped with glm_kv")
    path = Path(model)
    if path.is_dir():
        path = path / "config.json"
    try:
        cfg = json.loads(path.read_text())
    except FileNotFoundError:
        raise ProfileError("model", f"config file {str(path)!r} does not exist "
                                    f"(use '{SHIPPED_MODEL}' or a path to a config.json)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProfileError("model", f"config file {str(path)!r} is unreadable ({e.__class__.__name__})") from None
    except json.JSONDecodeError as e:
        raise ProfileError("model", f"config file {str(path)!r} is not valid JSON (line {e.lineno})") from None
    if not isinstance(cfg, dict):
        raise ProfileError("model", f"config file {str(path)!r} must hold a JSON object")
    return model_from_dict(cfg, path.parent.name or str(path), str(path))
