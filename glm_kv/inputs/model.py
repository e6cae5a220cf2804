"""GLM-5.3-Flash's memory-relevant config, shipped with the package (no network at run time).

A user's own ``config.json`` with the same fields (under ``text_config``) loads the same way.
Full-attention vs KDA layers are read from ``linear_attn_config`` / ``layer_types``; nothing
assumes "every 4th layer".
"""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import ProfileError, shown

PACKAGE_DIR = Path(__file__).resolve().parent
CONFIG_MAX_BYTES = 2 << 20       # a config.json is a few KiB; 2 MiB bounds what a read may take
PATH_MAX_CHARS, NAME_MAX_BYTES = 4096, 255

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
    # what SGLang reads besides the KV shapes: the architecture (multimodal or not), the vision
    # tower's size for adjust_mem_fraction_for_vlm, and the MLA widths for the weight estimate
    architectures: tuple[str, ...] = ()
    has_vision_config: bool = False
    vision_num_hidden_layers: int | None = None   # SGLang reads num_hidden_layers (default 24)
    vision_hidden_size: int | None = None         # default 1024
    q_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0

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


DIM_MAX = 1 << 20
# config key -> (minimum, maximum); required ones first. Bounds are sanity, not SGLang's: they keep
# every product the ledgers form inside int64 and refuse degenerate shapes (zero heads, zero layers).
REQUIRED_INTS = {"num_hidden_layers": (1, 4096), "kv_lora_rank": (1, DIM_MAX), "qk_rope_head_dim": (0, DIM_MAX),
                 "num_attention_heads": (1, DIM_MAX), "index_head_dim": (128, DIM_MAX),
                 "index_topk": (1, 1 << 31), "max_position_embeddings": (1, 1 << 31)}
# Optional ones: absent means 0 (or 1); given, a dimension (heads, widths, sizes) is at least 1: a
# zero there is a degenerate model, refused by name. Counts (layers, experts) may be 0.
OPTIONAL_INTS = {"index_n_heads": (1, DIM_MAX), "index_kpool": (1, 1024), "num_nextn_predict_layers": (0, 64),
                 "hidden_size": (1, DIM_MAX), "vocab_size": (1, 1 << 26), "intermediate_size": (1, 1 << 24),
                 "moe_intermediate_size": (1, 1 << 24), "first_k_dense_replace": (0, 4096),
                 "n_routed_experts": (0, 1 << 16), "n_shared_experts": (0, 1 << 16),
                 "qk_nope_head_dim": (1, DIM_MAX), "v_head_dim": (1, DIM_MAX)}
LAC_INTS = {"num_heads": (1, 1 << 12), "head_dim": (1, 1 << 12), "short_conv_kernel_size": (2, 1024)}


def _int_in(value: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProfileError(field, f"must be an integer, got {shown(value)}")
    if not lo <= value <= hi:
        raise ProfileError(field, f"must be between {lo:,} and {hi:,}, got {shown(value)}")
    return value


def _list_of(value: Any, field: str, kind: type, max_len: int = 4096) -> list:
    if not isinstance(value, list):
        raise ProfileError(field, f"must be a list, got {shown(value)}")
    if len(value) > max_len:
        raise ProfileError(field, f"has {len(value):,} entries (at most {max_len:,})")
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, kind):
            raise ProfileError(f"{field}[{i}]", f"must be {'an integer' if kind is int else 'text'}, got {shown(v)}")
        if kind is str and (not v or len(v) > 200 or not v.isprintable()):
            raise ProfileError(f"{field}[{i}]", f"must be a printable name on one line (no control characters), "
                                                f"got {shown(v)}")
    return value


def validate_config(cfg: Any) -> tuple[dict, str]:
    """Type- and range-check every config.json field the ledgers read, before any arithmetic.

    Returns the text config and its label. A malformed or degenerate config (``text_config: null``,
    a string where a list belongs, zero layers, no KDA or no full-attention layer, a conv kernel
    shorter than 2, ``max_position_embeddings: 0``) is refused naming the field.
    """
    if not isinstance(cfg, dict):
        raise ProfileError("model", f"config must be a JSON object, got {shown(cfg)}")
    where = "model(text_config)" if "text_config" in cfg else "model"
    text = cfg.get("text_config", cfg)
    if not isinstance(text, dict):
        raise ProfileError("model.text_config", f"must be a JSON object, got {shown(text)}")
    for key, (lo, hi) in REQUIRED_INTS.items():
        if key not in text:
            raise ProfileError(f"{where}.{key}", "missing from config")
        _int_in(text[key], f"{where}.{key}", lo, hi)
    n = text["num_hidden_layers"]
    if text["index_head_dim"] % 128:
        raise ProfileError(f"{where}.index_head_dim",
                           f"must be a multiple of 128 (one 4-byte scale per 128), got {text['index_head_dim']}")
    for key, (lo, hi) in OPTIONAL_INTS.items():
        if key in text:  # absent means 0 (or 1); null is not a number
            _int_in(text[key], f"{where}.{key}", lo, hi)
    if "q_lora_rank" in text and text["q_lora_rank"] is not None:
        _int_in(text["q_lora_rank"], f"{where}.q_lora_rank", 1, DIM_MAX)   # null: no query LoRA
    if text.get("first_k_dense_replace", 0) > n:
        raise ProfileError(f"{where}.first_k_dense_replace", f"exceeds num_hidden_layers ({n})")
    if "index_kpool_compress" in text and not isinstance(text["index_kpool_compress"], bool):
        raise ProfileError(f"{where}.index_kpool_compress", f"must be true or false, got {shown(text['index_kpool_compress'])}")
    lac = text.get("linear_attn_config")
    if not isinstance(lac, dict):
        raise ProfileError(f"{where}.linear_attn_config", f"must be a JSON object with num_heads, head_dim and "
                                                          f"short_conv_kernel_size, got {shown(lac)}")
    for key, (lo, hi) in LAC_INTS.items():
        if key not in lac:
            raise ProfileError(f"{where}.linear_attn_config.{key}", "missing from config")
        _int_in(lac[key], f"{where}.linear_attn_config.{key}", lo, hi)
    for key in ("full_attn_layers", "kda_layers"):
        if lac.get(key) is not None:
            for i, v in enumerate(_list_of(lac[key], f"{where}.linear_attn_config.{key}", int)):
                if not 0 <= v < n:
                    raise ProfileError(f"{where}.linear_attn_config.{key}[{i}]",
                                       f"layer {shown(v)} is outside 0..{n - 1} (num_hidden_layers {n})")
    if text.get("layer_types") is not None:
        _list_of(text["layer_types"], f"{where}.layer_types", str)
    if text.get("indexer_types") is not None:
        types = _list_of(text["indexer_types"], f"{where}.indexer_types", str)
        if len(types) != n:
            raise ProfileError(f"{where}.indexer_types", f"has {len(types)} entries but num_hidden_layers is {n}")
    for key in ("architectures",):
        for owner in (cfg, text):
            if owner.get(key) is not None:
                _list_of(owner[key], f"model.{key}", str, max_len=64)
    vision = cfg.get("vision_config")
    if vision is not None:
        if not isinstance(vision, dict):
            raise ProfileError("model.vision_config", f"must be a JSON object, got {shown(vision)}")
        for key in ("num_hidden_layers", "depth", "hidden_size"):
            if vision.get(key) is not None:
                _int_in(vision[key], f"model.vision_config.{key}", 1, DIM_MAX)
    full, kda = _split_layers(text, where)
    if not full:
        raise ProfileError(f"{where}.linear_attn_config", "has no full-attention (DSA) layer: the KV pool would be empty")
    if not kda:
        raise ProfileError(f"{where}.linear_attn_config", "has no KDA (linear-attention) layer: this is not a hybrid model")
    return text, where


def model_from_dict(cfg: dict, name: str, source: str) -> ModelConfig:
    """Build a ModelConfig from a config.json dict (text fields at top level or under text_config)."""
    text, where = validate_config(cfg)
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
        architectures=tuple(cfg.get("architectures") or text.get("architectures") or ()),
        has_vision_config=isinstance(cfg.get("vision_config"), dict),
        vision_num_hidden_layers=(cfg.get("vision_config") or {}).get("num_hidden_layers"),
        vision_hidden_size=(cfg.get("vision_config") or {}).get("hidden_size"),
        q_lora_rank=text.get("q_lora_rank") or 0,
        qk_nope_head_dim=text.get("qk_nope_head_dim", 0),
        v_head_dim=text.get("v_head_dim", 0),
    )
    if not isinstance(m.index_kpool, int) or m.index_kpool < 1:
        raise ProfileError(f"{where}.index_kpool", f"must be a positive integer, got {m.index_kpool!r}")
    if m.index_head_dim % 128:
        raise ProfileError(f"{where}.index_head_dim",
                           f"must be a multiple of 128 (one 4-byte scale per 128), got {m.index_head_dim}")
    return m


def _check_path_text(source: str, field: str) -> None:
    """Refuse path text no file system would take (NUL, over-long) before asking the OS."""
    if "\x00" in source:
        raise ProfileError(field, f"path {shown(source)} contains a NUL byte")
    if len(source) > PATH_MAX_CHARS:
        raise ProfileError(field, f"path is {len(source):,} characters long (at most {PATH_MAX_CHARS:,})")
    for part in Path(source).parts:
        if len(part.encode("utf-8", "surrogateescape")) > NAME_MAX_BYTES:
            raise ProfileError(field, f"path component {shown(part)} is longer than {NAME_MAX_BYTES} bytes")


def read_input_file(source: str, field: str, limit: int, *, kind: str, hint: str) -> tuple[str, str]:
    """(text, stem) of a regular file of at most ``limit`` bytes; a FIFO, a device (``/dev/zero``),
    a folder, a missing or an over-long path, or a binary file is refused naming ``field``."""
    _check_path_text(source, field)
    try:
        st = os.stat(source)
    except FileNotFoundError:
        raise ProfileError(field, f"{shown(source)}: {hint}") from None
    except (OSError, ValueError) as e:
        raise ProfileError(field, f"{shown(source)} cannot be opened ({type(e).__name__}: "
                                  f"{getattr(e, 'strerror', None) or 'invalid path'})") from None
    if not stat.S_ISREG(st.st_mode):
        what = ("a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a special file")
        raise ProfileError(field, f"{shown(source)} is {what}, not a regular {kind} file")
    if st.st_size > limit:
        raise ProfileError(field, f"{shown(source)} is {st.st_size:,} bytes (a {kind} file is at most {limit:,})")
    try:
        fd = os.open(source, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ProfileError(field, f"{shown(source)} is not a regular {kind} file")
            raw = f.read(limit + 1)
    except OSError as e:
        raise ProfileError(field, f"{shown(source)} is unreadable ({type(e).__name__}: {e.strerror})") from None
    if len(raw) > limit:
        raise ProfileError(field, f"{shown(source)} is more than {limit:,} bytes")
    if b"\x00" in raw:
        raise ProfileError(field, f"{shown(source)} contains NUL bytes (not a text {kind} file)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ProfileError(field, f"{shown(source)} is not UTF-8 text (byte {e.start})") from None
    return text, Path(source).stem


def parse_json_text(text: str, what: str, field: str) -> Any:
    """Strict JSON: no NaN/Infinity, no duplicate keys, no huge integers, bounded nesting."""
    def pairs(items: list) -> dict:
        out: dict = {}
        for k, v in items:
            if k in out:
                raise ProfileError(field, f"{what}: key {shown(k)} is given twice")
            out[k] = v
        return out

    def bad_constant(name: str):
        raise ProfileError(field, f"{what}: {name} is not a JSON number")

    def bounded_int(s: str) -> int:
        if len(s) > 40:
            raise ProfileError(field, f"{what}: integer with {len(s)} digits")
        return int(s)

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=bad_constant, parse_int=bounded_int)
    except json.JSONDecodeError as e:
        raise ProfileError(field, f"{what} is not valid JSON (line {e.lineno}: {e.msg})") from None
    except (RecursionError, MemoryError):
        raise ProfileError(field, f"{what} is nested too deeply") from None
    except (ValueError, OverflowError) as e:
        if isinstance(e, ProfileError):
            raise
        raise ProfileError(field, f"{what} holds a value that cannot be read ({type(e).__name__})") from None


@lru_cache(maxsize=16)
def load_model(model: str = SHIPPED_MODEL) -> ModelConfig:
    """The shipped GLM-5.3-Flash config, or a path to a config.json (or a folder holding one)."""
    if model == SHIPPED_MODEL or model.lower() in {"zai-org/glm-5.3-flash", "glm-5.3-flash"}:
        text = (PACKAGE_DIR / "data" / "glm-5.3-flash.json").read_text()
        return model_from_dict(json.loads(text), SHIPPED_MODEL, "shipped with glm_kv")
    if not isinstance(model, str) or not model.strip():
        raise ProfileError("model", f"must be '{SHIPPED_MODEL}' or a path to a config.json, got {shown(model)}")
    path = Path(model)
    _check_path_text(model, "model")
    try:
        if path.is_dir():
            path = path / "config.json"
    except OSError:
        pass  # read_input_file names the problem
    text, _ = read_input_file(str(path), "model", CONFIG_MAX_BYTES, kind="config.json",
                              hint=f"no such config file (use '{SHIPPED_MODEL}' or a path to a config.json)")
    cfg = parse_json_text(text, f"config file {shown(str(path))}", "model")
    return model_from_dict(cfg, path.parent.name or str(path), str(path))
