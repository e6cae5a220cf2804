"""Deployment profiles: SGLang server arguments (underscored) validated into one typed object.

Field names follow ``python -m sglang.launch_server`` so users can copy them from a launch
command. Defaults are what SGLang 0.5.23 resolves when a flag is absent, except where the
source article fixes an example value (``max_running_requests: 64``, ``context_length: 131072``).

This is the validation boundary for profiles: YAML files and ``--set`` values are read with
YAML 1.2's core types (no ``010`` -> 8, ``1:30`` -> 90, ``on`` -> true), duplicate keys are
refused, and every field is typed strictly (no bool or float taken as an integer), finite and
bounded before any arithmetic sees it. Choice lists are SGLang 0.5.23's own argparse choices.
"""
from __future__ import annotations

import difflib
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ProfileError, shown
from .model import read_input_file

PACKAGE_DIR = Path(__file__).resolve().parent

DEFAULT_PROFILE = "article"
Layout = Literal["article", "0.5.23"]
# --- issue 20 (helper h-flags): GPU names come from the GPU table (inputs/data/gpus.json) ---
from .gpus import GPU_NAMES  # noqa: E402

GpuName = Literal[GPU_NAMES]  # type: ignore[valid-type]
# --- end issue 20 block ---
PROFILE_MAX_BYTES = 256 << 10     # a profile is a few hundred bytes; 256 KiB is generous
PROFILE_MAX_DEPTH = 8            # nesting allowed while reading (no field takes more than a scalar)
INT_MAX_BITS = 62                # every integer field fits int64 with room for products

# SGLang 0.5.23's argparse choices (sglang/srt/server_args.py, ServerArgs.add_cli_args), read off the wheel.
DSA_PREFILL_CHOICES = ("flashmla_sparse", "flashmla_sparse_q8", "flashmla_kv", "flashmla_auto",
                       "flashinfer_sparse_mla", "triton_sparse_mla", "fa3", "tilelang", "triton", "aiter",
                       "trtllm", "intel_xpu")
DSA_DECODE_CHOICES = ("flashmla_sparse", "flashmla_sparse_q8", "flashmla_kv", "flashmla_auto",
                      "flashinfer_sparse_mla", "fa3", "tilelang", "triton", "aiter", "trtllm", "intel_xpu")
LINEAR_ATTN_BACKEND_CHOICES = ("triton", "cutedsl", "flashinfer", "flashkda", "nvidia_kda", "ptx_kda",
                               "helion", "intel_xpu")
MAMBA_STRATEGY_CHOICES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")
MOE_A2A_BACKEND_CHOICES = ("none", "deepep", "mooncake", "nixl", "mori", "ascend_fuseep", "flashinfer",
                           "megamoe", "deepep_v2", "pplx", "ascend_tp", "flashinfer_megamoe")
DISAGGREGATION_MODE_CHOICES = ("null", "prefill", "decode")
CP_STRATEGY_CHOICES = ("zigzag", "interleave")
# SGLang accepts these but glm-kv does not model them: refused with that reason, not as unknown.
NOT_MODELLED = {
    "kv_cache_dtype": ("fp8_e5m2", "mxfp8", "nvfp4", "fp4_mx_block16"),
    "mamba_ssm_dtype": ("float16",),
    "hicache_mem_layout": ("page_head",),
    "hicache_io_backend": ("kernel_ascend",),
}

# Field aliases SGLang itself accepts (old and new flag names) -> our canonical field.
FIELD_ALIASES = {
    "mamba_radix_cache_strategy": "mamba_scheduler_strategy",
    "nsa_prefill_backend": "dsa_prefill_backend",
    "nsa_decode_backend": "dsa_decode_backend",
    "tp": "tp_size",
    "dp": "dp_size",
}

PIB = 1 << 50
COUNT_MAX = 1 << 31


class Profile(BaseModel):
    """One deployment: the launch flags that decide KV-cache memory on a rank."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    name: Optional[str] = Field(None, min_length=1, max_length=120)
    description: str = Field("", max_length=2000)
    model: str = Field("glm-5.3-flash", min_length=1, max_length=4096)
    sglang_layout: Layout = "article"

    tp_size: int = Field(1, ge=1, le=4096)
    dp_size: int = Field(1, ge=1, le=4096)
    enable_dp_attention: bool = False
    attn_cp_size: int = Field(1, ge=1, le=4096)

    kv_cache_dtype: Literal["auto", "bfloat16", "fp8_e4m3"] = "auto"
    dsa_prefill_backend: Optional[Literal[DSA_PREFILL_CHOICES]] = None
    dsa_decode_backend: Optional[Literal[DSA_DECODE_CHOICES]] = None
    gpu: Optional[GpuName] = "H200"
    memory_bytes: Optional[int] = Field(None, ge=1 << 30, le=PIB)  # at least 1 GiB: sanity, not SGLang
    sm: Optional[int] = Field(None, ge=70, le=1000)

    mamba_ssm_dtype: Literal["float32", "bfloat16"] = "float32"
    linear_attn_backend: Literal[LINEAR_ATTN_BACKEND_CHOICES] = "triton"
    mamba_scheduler_strategy: Literal[MAMBA_STRATEGY_CHOICES] = "auto"
    mamba_skip_decode_lock: bool = False  # env SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1
    disable_overlap_schedule: bool = False
    disable_radix_cache: bool = False

    max_running_requests: Optional[int] = Field(64, ge=1, le=COUNT_MAX)
    max_total_tokens: Optional[int] = Field(None, ge=1, le=1 << 40)
    max_mamba_cache_size: Optional[int] = Field(None, ge=1, le=1 << 24)
    mamba_full_memory_ratio: float = Field(0.9, gt=0, le=1000)
    context_length: Optional[int] = Field(131072, ge=1, le=COUNT_MAX)  # None: the model's maximum
    page_size: Optional[int] = Field(None, ge=1, le=1 << 20)
    # env SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1: context_length may exceed the model's maximum
    allow_overwrite_longer_context_len: bool = False

    speculative_algorithm: Optional[Literal["EAGLE", "NEXTN"]] = None
    speculative_num_draft_tokens: Optional[int] = Field(None, ge=1, le=1024)
    speculative_num_steps: Optional[int] = Field(None, ge=1, le=1024)
    speculative_eagle_topk: Optional[int] = Field(None, ge=1, le=1024)

    # --- issue 20 (helper h-flags): weights from the model, the draft's weights ---
    weights_estimate: bool = False   # no weights_bytes: take them from the model (set by a launch command)
    draft_weights_bytes: Optional[int] = Field(None, ge=0, le=PIB)  # the draft's; 0 = inside weights_bytes
    # --- end issue 20 block ---
    available_bytes: Optional[int] = Field(None, ge=1, le=PIB)
    mem_fraction_static: Optional[float] = Field(None, gt=0, lt=1)
    weights_bytes: Optional[int] = Field(None, ge=0, le=PIB)
    # --language-model-only: SGLang 0.5.23 refuses it for this architecture (see resolve.py)
    language_model_only: bool = False
    language_only: bool = False            # --language-only (encoder disaggregation: the LM side)
    pre_model_load_bytes: Optional[int] = Field(None, ge=1, le=PIB)   # free memory before weights

    # flags that change SGLang's default mem_fraction_static (None: SGLang's own default)
    chunked_prefill_size: Optional[int] = Field(None, ge=-1, le=COUNT_MAX)  # -1 disables chunking
    cuda_graph_max_bs_decode: Optional[int] = Field(None, ge=1, le=1 << 20)
    moe_a2a_backend: Literal[MOE_A2A_BACKEND_CHOICES] = "none"
    max_prefill_tokens: int = Field(16384, ge=1, le=COUNT_MAX)
    disaggregation_mode: Literal[DISAGGREGATION_MODE_CHOICES] = "null"
    enable_prefill_cp: bool = False
    cp_strategy: Optional[Literal[CP_STRATEGY_CHOICES]] = None

    enable_hierarchical_cache: bool = False
    hicache_ratio: float = Field(2.0, gt=0, le=1000)
    hicache_size: int = Field(0, ge=0, le=1 << 30)
    hicache_mem_layout: Literal["layer_first", "page_first", "page_first_direct", "page_first_kv_split"] = "page_first"
    hicache_io_backend: Literal["kernel", "direct"] = "kernel"
    host_memory_bytes: Optional[int] = Field(None, ge=1, le=PIB)   # DRAM of one machine
    ranks_per_host: Optional[int] = Field(None, ge=1, le=4096)     # GPU ranks on one machine

    @field_validator("kv_cache_dtype", mode="before")
    @classmethod
    def _dtype_alias(cls, v: Any) -> Any:
        return {"bf16": "bfloat16", "fp8": "fp8_e4m3"}.get(v, v) if isinstance(v, str) else v

    @field_validator("mamba_ssm_dtype", mode="before")
    @classmethod
    def _ssm_alias(cls, v: Any) -> Any:
        return {"bf16": "bfloat16", "fp32": "float32"}.get(v, v) if isinstance(v, str) else v

    @field_validator("speculative_algorithm", mode="before")
    @classmethod
    def _spec_upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    @field_validator("sglang_layout", mode="before")
    @classmethod
    def _layout_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, float) else v  # YAML reads 0.5.23 as a string, 0.5 as float

    @field_validator("name", "description", "model")
    @classmethod
    def _printable(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and any(not c.isprintable() for c in v):
            raise ValueError("must be printable text on one line (no control characters)")
        return v

    @model_validator(mode="after")
    def _needs_gpu(self) -> "Profile":
        if self.gpu is None and (self.memory_bytes is None or self.sm is None):
            raise ValueError(f"gpu: give a GPU name ({', '.join(GPU_NAMES)}) or both memory_bytes and sm")  # issue 20
        return self

    @property
    def label(self) -> str:
        return self.name or "custom"


def _got(value: Any) -> str:
    if isinstance(value, (dict, list, tuple, set)):
        return f"got a {type(value).__name__}"
    return f"got {shown(value)}"


def _format_validation_error(err: ValidationError) -> ProfileError:
    e = err.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in e.get("loc", ())) or "profile"
    kind = e.get("type", "")
    got = e.get("input")
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(str(loc), list(Profile.model_fields), n=1)
        hint = (f"; did you mean {close[0]!r}?" if close
                else " (glm-kv plan --json lists every field under 'profile')")
        return ProfileError(loc, f"unknown field{hint}")
    msg = e.get("msg", "invalid value")
    if kind == "value_error":
        msg = msg.removeprefix("Value error, ")
        if ":" in msg and not e.get("loc"):
            field, _, rule = msg.partition(":")
            return ProfileError(field.strip(), rule.strip())
    if kind in ("int_type", "float_type", "bool_type", "string_type") and isinstance(got, bool):
        msg += " (true/false is not a number)" if kind != "bool_type" else ""
    elif kind == "int_type" and isinstance(got, float):
        msg += " (no decimal point: SGLang parses integers with int())"
    elif kind == "literal_error" and isinstance(got, str):
        for field, values in NOT_MODELLED.items():
            if loc == field and got in values:
                msg = f"{msg}; SGLang accepts {got!r} but glm-kv does not model it"
    if kind != "missing":
        msg = f"{msg} ({_got(got)})"
    return ProfileError(loc, msg)


def shipped_profiles() -> list[str]:
    """Names of the profiles that ship in glm_kv/profiles, default first."""
    folder = PACKAGE_DIR / "profiles"
    names = sorted(p.stem for p in folder.glob("*.yaml"))
    return sorted(names, key=lambda n: (n != DEFAULT_PROFILE, n))


# ------------------------------------------------------------------------------------------------
# YAML 1.2 core schema, C loader when available, duplicate keys refused
# ------------------------------------------------------------------------------------------------

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_INT_RE = re.compile(r"[-+]?[0-9]+\Z")
_FLOAT_RE = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z|[-+]?\.(inf|Inf|INF)\Z|\.(nan|NaN|NAN)\Z")
_BOOL_RE = re.compile(r"(?:true|True|TRUE|false|False|FALSE)\Z")
_NULL_RE = re.compile(r"(?:~|null|Null|NULL|)\Z")


class OutOfRange(str):
    """An integer too long to be any field's value (kept as its digits so the field can be named)."""


class DuplicateKey(yaml.YAMLError):
    def __init__(self, key: str, line: int):
        self.key, self.line = key, line
        super().__init__(f"duplicate key {key!r}")


class StrictLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    """SafeLoader with YAML 1.2 core scalars, no merge keys or timestamps, duplicate keys refused."""

    def construct_mapping(self, node, deep=False):
        seen: set = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                k = (key_node.tag, key_node.value)
                if k in seen:
                    raise DuplicateKey(key_node.value, key_node.start_mark.line + 1)
                seen.add(k)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node):
        value = self.construct_scalar(node)
        if not _INT_RE.match(value.strip()):
            raise yaml.constructor.ConstructorError(None, None, f"not a decimal integer: {value[:40]!r}",
                                                    node.start_mark)
        if len(value) > 40:
            return OutOfRange(value)  # make_profile refuses it naming the field
        return int(value)

    def construct_yaml_float(self, node):
        value = self.construct_scalar(node).strip()
        low = value.lower()
        if low.endswith(".inf"):
            return float("-inf") if low.startswith("-") else float("inf")
        if low == ".nan":
            return float("nan")
        if len(value) > 400:
            raise yaml.constructor.ConstructorError(None, None, "number with more than 400 characters",
                                                    node.start_mark)
        return float(value)


StrictLoader.yaml_implicit_resolvers = {}
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL_RE, list("tTfF"))
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INT_RE, list("-+0123456789"))
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_RE, list("-+0123456789."))
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:null", _NULL_RE, ["~", "n", "N", ""])
StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
StrictLoader.add_constructor("tag:yaml.org,2002:float", StrictLoader.construct_yaml_float)


def _depth(value: Any, limit: int, level: int = 0) -> int:
    if level > limit:
        return level
    if isinstance(value, dict):
        return max([_depth(v, limit, level + 1) for v in value.values()] + [level])
    if isinstance(value, list):
        return max([_depth(v, limit, level + 1) for v in value] + [level])
    return level


def load_yaml_text(text: str, what: str, field: str = "profile") -> Any:
    """YAML text -> Python values, every failure a ProfileError naming ``field``."""
    if "\x00" in text:
        raise ProfileError(field, f"{what} contains a NUL byte (not a text file)")
    try:
        data = yaml.load(text, Loader=StrictLoader)  # noqa: S506 - StrictLoader is a SafeLoader
    except DuplicateKey as e:
        raise ProfileError(field, f"{what}: key {shown(e.key)} is given twice (line {e.line})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(e, "problem", None) or getattr(e, "context", None) or ""
        raise ProfileError(field, f"{what} is not valid YAML{where}" + (f" ({problem})" if problem else "")) from None
    except (RecursionError, MemoryError):
        raise ProfileError(field, f"{what} is nested too deeply") from None
    except (ValueError, OverflowError) as e:
        raise ProfileError(field, f"{what} holds a value that cannot be read ({type(e).__name__})") from None
    if _depth(data, PROFILE_MAX_DEPTH) > PROFILE_MAX_DEPTH:
        raise ProfileError(field, f"{what} is nested more than {PROFILE_MAX_DEPTH} levels deep")
    return data


@lru_cache(maxsize=64)
def _parse_shipped(name: str, mtime_ns: int) -> dict:
    """Shipped profiles are parsed once per file version (planning a name stays under 1 ms)."""
    return load_yaml_text((PACKAGE_DIR / "profiles" / f"{name}.yaml").read_text(), f"shipped profile {name!r}") or {}


def _read_yaml(source: str) -> tuple[dict, str]:
    if not isinstance(source, str) or not source.strip():
        raise ProfileError("profile", f"must name a shipped profile ({', '.join(shipped_profiles())}) "
                                      f"or a YAML file, got {shown(source)}")
    folder = PACKAGE_DIR / "profiles"
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,80}", source) and not source.endswith((".yaml", ".yml")):
        shipped = folder.joinpath(f"{source}.yaml")
        if shipped.is_file():
            return dict(_parse_shipped(source, shipped.stat().st_mtime_ns)), source
    text, stem = read_input_file(source, "profile", PROFILE_MAX_BYTES, kind="YAML profile",
                                 hint=f"neither a shipped profile ({', '.join(shipped_profiles())}) nor a "
                                      f"readable YAML file")
    data = load_yaml_text(text, f"{shown(source)}")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ProfileError("profile", f"{shown(source)} must be a YAML mapping of field: value")
    return data, stem


def canonical_fields(data: dict) -> dict:
    """Rename SGLang's alternative flag names (and dashes) to our field names."""
    out: dict = {}
    for key, value in data.items():
        if not isinstance(key, str):
            raise ProfileError(shown(key), "field names must be text")
        k = key.replace("-", "_")
        k = FIELD_ALIASES.get(k, k)
        if k in out:
            raise ProfileError(k, f"given twice (as {shown(key)} and an alias)")
        out[k] = value
    return out


# ``--set`` values: YAML 1.2 core scalars only (no flow collections, no YAML 1.1 surprises)
_TEXT_FIELDS = ("sglang_layout", "name", "description", "model")


def parse_scalar(raw: str) -> Any:
    """A ``--set`` value as YAML 1.2's core schema reads a plain scalar; anything else stays text."""
    s = raw.strip()
    if _NULL_RE.fullmatch(s):
        return None
    if _BOOL_RE.fullmatch(s):
        return s.lower() == "true"
    if _INT_RE.fullmatch(s):
        return OutOfRange(s) if len(s) > 40 else int(s)
    if _FLOAT_RE.fullmatch(s):
        low = s.lower()
        if low.endswith(".inf"):
            return float("-inf") if low.startswith("-") else float("inf")
        if low == ".nan":
            return float("nan")
        return float(s)
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1]  # quoted: text as given
    return s


def parse_override(item: str) -> tuple[str, Any]:
    """``key=value`` from ``--set``; numbers, booleans and null type as YAML 1.2 reads them."""
    key, sep, raw = item.partition("=")
    key = key.strip(" ")
    if not sep or not key:
        raise ProfileError("--set", f"{shown(item)} must look like key=value")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]{0,80}", key):
        raise ProfileError("--set", f"{shown(key)} is not a field name (letters, digits, _ and -)")
    if len(raw) > 4096:
        raise ProfileError(key, f"value is {len(raw)} characters long (at most 4096)")
    if "\x00" in raw:
        raise ProfileError(key, "value contains a NUL byte")
    value = raw if key in _TEXT_FIELDS else parse_scalar(raw)
    return key, value


def _plain(value: Any) -> Any:
    """numpy scalars (from sweeps and tests) as the Python values they hold; refuse huge integers."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()
    return value


def make_profile(data: dict, default_name: Optional[str] = None) -> Profile:
    """Validate a dict of profile fields; raise ProfileError naming the field on bad input."""
    data = {k: _plain(v) for k, v in canonical_fields(data).items()}
    for k, v in data.items():
        if isinstance(v, OutOfRange) or (isinstance(v, int) and not isinstance(v, bool)
                                         and v.bit_length() > INT_MAX_BITS):
            digits = len(v.lstrip("+-")) if isinstance(v, OutOfRange) else len(str(abs(v)))
            raise ProfileError(k, f"integer out of range ({digits} digits)")
    if default_name and not data.get("name"):
        data["name"] = default_name
    try:
        return Profile.model_validate(data)
    except ValidationError as err:
        raise _format_validation_error(err) from None


def load_profile(source: Optional[str] = None, overrides: Optional[dict] = None) -> Profile:
    """A shipped profile name or a YAML path (default: the article's profile), plus overrides."""
    data, stem = _read_yaml(DEFAULT_PROFILE if source is None else source)
    data = canonical_fields(data)
    data.update(canonical_fields(overrides or {}))
    return make_profile(data, default_name=stem[:120])
