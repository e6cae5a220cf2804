"""Deployment profiles: SGLang server arguments (underscored) validated into one typed object.

Field names follow ``python -m sglang.launch_server`` so users can copy them from a launch
command. Defaults are what SGLang 0.5.23 resolves when a flag is absent, except where the
source article fixes an example value (``max_running_requests: 64``, ``context_length: 131072``).
"""
from __future__ import annotations

from pathlib import Path
from functools import lru_cache
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ProfileError

PACKAGE_DIR = Path(__file__).resolve().parent

DEFAULT_PROFILE = "article"
Layout = Literal["article", "0.5.23"]
GpuName = Literal["H100", "H200", "B200", "B300"]

# Field aliases SGLang itself accepts (old and new flag names) -> our canonical field.
FIELD_ALIASES = {
    "mamba_radix_cache_strategy": "mamba_scheduler_strategy",
    "nsa_prefill_backend": "dsa_prefill_backend",
    "nsa_decode_backend": "dsa_decode_backend",
    "tp": "tp_size",
    "dp": "dp_size",
}


class Profile(BaseModel):
    """One deployment: the launch flags that decide KV-cache memory on a rank."""

    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)

    name: Optional[str] = None
    description: str = ""
    model: str = "glm-5.3-flash"
    sglang_layout: Layout = "article"

    tp_size: int = Field(1, ge=1)
    dp_size: int = Field(1, ge=1)
    enable_dp_attention: bool = False
    attn_cp_size: int = Field(1, ge=1)

    kv_cache_dtype: Literal["auto", "bfloat16", "fp8_e4m3"] = "auto"
    dsa_prefill_backend: Optional[str] = None
    dsa_decode_backend: Optional[str] = None
    gpu: Optional[GpuName] = "H200"
    memory_bytes: Optional[int] = Field(None, ge=1)
    sm: Optional[int] = Field(None, ge=70)

    mamba_ssm_dtype: Literal["float32", "bfloat16"] = "float32"
    linear_attn_backend: str = "triton"
    mamba_scheduler_strategy: Literal["auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"] = "auto"
    mamba_skip_decode_lock: bool = False  # env SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1
    disable_overlap_schedule: bool = False
    disable_radix_cache: bool = False

    max_running_requests: Optional[int] = Field(64, ge=1)
    max_total_tokens: Optional[int] = Field(None, ge=1)
    max_mamba_cache_size: Optional[int] = Field(None, ge=1)
    mamba_full_memory_ratio: float = Field(0.9, gt=0)
    context_length: Optional[int] = Field(131072, ge=1)  # None: the model's max_position_embeddings
    page_size: Optional[int] = Field(None, ge=1)

    speculative_algorithm: Optional[Literal["EAGLE", "NEXTN"]] = None
    speculative_num_draft_tokens: Optional[int] = Field(None, ge=1)
    speculative_num_steps: Optional[int] = Field(None, ge=1)
    speculative_eagle_topk: Optional[int] = Field(None, ge=1)

    available_bytes: Optional[int] = Field(None, ge=1)
    mem_fraction_static: Optional[float] = Field(None, gt=0, lt=1)
    weights_bytes: Optional[int] = Field(None, ge=0)
    language_model_only: bool = False  # --language-model-only: no 100 MiB VLM cache reservation

    enable_hierarchical_cache: bool = False
    hicache_ratio: float = Field(2.0, gt=0)
    hicache_size: int = Field(0, ge=0)
    hicache_mem_layout: Literal["layer_first", "page_first", "page_first_direct", "page_first_kv_split"] = "page_first"
    hicache_io_backend: Literal["kernel", "direct"] = "kernel"

    @field_validator("kv_cache_dtype", mode="before")
    @classmethod
    def _dtype_alias(cls, v: Any) -> Any:
        return {"bf16": "bfloat16", "fp8": "fp8_e4m3"}.get(v, v)

    @field_validator("mamba_ssm_dtype", mode="before")
    @classmethod
    def _ssm_alias(cls, v: Any) -> Any:
        return {"bf16": "bfloat16", "fp32": "float32"}.get(v, v)

    @field_validator("speculative_algorithm", mode="before")
    @classmethod
    def _spec_upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    @field_validator("sglang_layout", mode="before")
    @classmethod
    def _layout_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, float) else v  # YAML reads 0.5.23 as a string, 0.5 as float

    @model_validator(mode="after")
    def _needs_gpu(self) -> "Profile":
        if self.gpu is None and (self.memory_bytes is None or self.sm is None):
            raise ValueError("gpu: give a GPU name (H100, H200, B200, B300) or both memory_bytes and sm")
        return self

    @property
    def label(self) -> str:
        return self.name or "custom"


def _format_validation_error(err: ValidationError) -> ProfileError:
    e = err.errors()[0]
    loc = ".".join(str(p) for p in e.get("loc", ())) or "profile"
    kind = e.get("type", "")
    if kind == "extra_forbidden":
        allowed = ", ".join(sorted(Profile.model_fields))
        return ProfileError(loc, f"unknown field (allowed: {allowed})")
    msg = e.get("msg", "invalid value")
    if kind == "value_error":
        msg = msg.removeprefix("Value error, ")
        if ":" in msg and not e.get("loc"):
            field, _, rule = msg.partition(":")
            return ProfileError(field.strip(), rule.strip())
    got = e.get("input")
    if kind not in ("missing",) and not isinstance(got, (dict, list)):
        msg = f"{msg} (got {got!r})"
    return ProfileError(loc, msg)


def shipped_profiles() -> list[str]:
    """Names of the profiles that ship in glm_kv/profiles, default first."""
    folder = PACKAGE_DIR / "profiles"
    names = sorted(p.stem for p in folder.glob("*.yaml"))
    return sorted(names, key=lambda n: (n != DEFAULT_PROFILE, n))


@lru_cache(maxsize=64)
def _parse_shipped(name: str, mtime_ns: int) -> dict:
    """Shipped profiles are parsed once per file version (planning a name stays under 1 ms)."""
    return yaml.safe_load((PACKAGE_DIR / "profiles" / f"{name}.yaml").read_text()) or {}


def _read_yaml(source: str) -> tuple[dict, str]:
    folder = PACKAGE_DIR / "profiles"
    shipped = folder.joinpath(f"{source}.yaml")
    if "/" not in source and not source.endswith((".yaml", ".yml")) and shipped.is_file():
        return dict(_parse_shipped(source, shipped.stat().st_mtime_ns)), source
    else:
        path = Path(source)
        if not path.is_file():
            raise ProfileError("profile", f"{source!r} is neither a shipped profile "
                                          f"({', '.join(shipped_profiles())}) nor a readable YAML file")
        try:
            text, stem = path.read_text(), path.stem
        except (OSError, UnicodeDecodeError) as e:
            raise ProfileError("profile", f"{source!r} is unreadable ({e.__class__.__name__})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ProfileError("profile", f"{source!r} is not valid YAML{where}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ProfileError("profile", f"{source!r} must be a YAML mapping of field: value")
    return data, stem


def canonical_fields(data: dict) -> dict:
    """Rename SGLang's alternative flag names (and dashes) to our field names."""
    out: dict = {}
    for key, value in data.items():
        k = str(key).replace("-", "_")
        k = FIELD_ALIASES.get(k, k)
        if k in out:
            raise ProfileError(k, f"given twice (as {key!r} and an alias)")
        out[k] = value
    return out


def parse_override(item: str) -> tuple[str, Any]:
    """``key=value`` from ``--set``; the value is read as YAML so numbers and booleans type."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ProfileError("--set", f"{item!r} must look like key=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    if key.strip() in ("sglang_layout", "name", "description", "model"):
        value = raw  # keep '0.5.23' a string
    return key.strip(), value


def make_profile(data: dict, default_name: Optional[str] = None) -> Profile:
    """Validate a dict of profile fields; raise ProfileError naming the field on bad input."""
    data = canonical_fields(data)
    if default_name and not data.get("name"):
        data["name"] = default_name
    try:
        return Profile.model_validate(data)
    except ValidationError as err:
        raise _format_validation_error(err) from None


def load_profile(source: Optional[str] = None, overrides: Optional[dict] = None) -> Profile:
    """A shipped profile name or a YAML path (default: the article's profile), plus overrides."""
    data, stem = _read_yaml(source or DEFAULT_PROFILE)
    data = canonical_fields(data)
    data.update(canonical_fields(overrides or {}))
    return make_profile(data, default_name=stem)
