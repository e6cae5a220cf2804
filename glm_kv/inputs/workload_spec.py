"""Workloads for ``glm-kv advise``: what the server must hold at once, validated into one typed object.

A workload is the demand side of a plan: how many requests run at once (global, over every
DP-attention worker), how many tokens each keeps resident (prompt + output so far, one number or
percentiles), how much prefix the radix cache should keep beyond the running requests, and the host
DRAM HiCache may use. YAML file or shipped name (``glm_kv/inputs/workloads``), plus ``--set``
overrides (``tokens_per_request.p99=65536`` reaches into the percentiles). Unknown fields, wrong
types and impossible values are refused with one line naming the field.

Files and ``--set`` values are read by the profile's guarded YAML loader (``profile.load_yaml_text``:
YAML 1.2 core scalars, no aliases or anchors, bounded nodes and depth, duplicate keys refused), and
``name`` / ``description`` follow the profile's text rule (one printable line; a date or number YAML
read is refused with the tip to quote it).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import ProfileError, shown
from .model import read_input_file
from .profile import PROFILE_MAX_BYTES, SET_VALUE_MAX_CHARS, check_field, check_int_range, load_yaml_text

WORKLOAD_DIR = Path(__file__).resolve().parent / "workloads"

PositiveInt = Annotated[int, Field(strict=True, ge=1)]
NonNegativeInt = Annotated[int, Field(strict=True, ge=0)]


class TokenPercentiles(BaseModel):
    """Resident tokens per request as percentiles: the pools are sized for p99, p50 is reported."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    p50: PositiveInt
    p99: PositiveInt

    @model_validator(mode="after")
    def _ordered(self) -> "TokenPercentiles":
        if self.p99 < self.p50:
            raise ValueError(f"tokens_per_request.p99: must be at least p50 ({self.p50}) (got {self.p99})")
        return self


class WorkloadSpec(BaseModel):
    """What must be resident at once on the deployment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Optional[str] = None
    description: str = ""
    concurrent_requests: PositiveInt               # global, over all DP-attention workers
    tokens_per_request: Union[PositiveInt, TokenPercentiles]
    prefix_cache_tokens: NonNegativeInt = 0        # per worker: each DP worker has its own radix tree
    host_memory_bytes: Optional[PositiveInt] = None  # DRAM per machine for HiCache

    @property
    def label(self) -> str:
        return self.name or "custom"

    @property
    def sizing_tokens(self) -> int:
        """Tokens per request the pools are sized for: the number, or the p99."""
        t = self.tokens_per_request
        return t if isinstance(t, int) else t.p99

    @property
    def typical_tokens(self) -> int:
        """The p50 (equal to ``sizing_tokens`` for a single number)."""
        t = self.tokens_per_request
        return t if isinstance(t, int) else t.p50


def _format(err: ValidationError, data: dict) -> ProfileError:
    errors = err.errors()
    if isinstance(data.get("tokens_per_request"), dict):
        # the percentiles branch is the one the user meant: report its error, not the int branch's
        errors = [x for x in errors if "TokenPercentiles" in "".join(map(str, x.get("loc", ())))] or errors
    e = errors[0]
    loc = [str(p) for p in e.get("loc", ())]
    # a Union reports the branch it tried ("int", "TokenPercentiles"): keep the field path only
    loc = [p for p in loc if p != "constrained-int" and "TokenPercentiles" not in p]
    field = ".".join(loc) or "workload"
    kind, msg = e.get("type", ""), e.get("msg", "invalid value")
    if kind == "extra_forbidden":
        allowed = (", ".join(sorted(TokenPercentiles.model_fields)) if field.startswith("tokens_per_request.")
                   else ", ".join(sorted(WorkloadSpec.model_fields)))
        return ProfileError(field, f"unknown field (allowed: {allowed})")
    if kind == "missing":
        return ProfileError(field, "is required")
    if kind == "value_error":
        text = msg.removeprefix("Value error, ")
        name, sep, rule = text.partition(": ")
        return ProfileError(name, rule) if sep else ProfileError(field, text)
    got = e.get("input")
    if field == "tokens_per_request" and not isinstance(got, (int, dict)) or isinstance(got, bool):
        msg = "must be a positive integer or {p50: .., p99: ..}" if field == "tokens_per_request" else \
            "must be an integer"
    return ProfileError(field, f"{msg} (got {got!r})")


def make_workload(data: dict, default_name: Optional[str] = None) -> WorkloadSpec:
    """Validate a dict of workload fields; ProfileError naming the field on bad input."""
    data = {str(k).replace("-", "_"): v for k, v in data.items()}
    for key in ("name", "description"):   # the profile's text rule, before pydantic takes any str
        if data.get(key) is not None:
            check_field(key, data[key])
    for key, value in data.items():   # 41+ digits (kept as text by the loader) or past int64: by name
        check_int_range(key, value)
        for k, v in value.items() if isinstance(value, dict) else ():
            check_int_range(f"{key}.{k}", v)
    if default_name and not data.get("name"):
        data["name"] = default_name
    tpr = data.get("tokens_per_request")
    if isinstance(tpr, bool):
        raise ProfileError("tokens_per_request", f"must be a positive integer or {{p50: .., p99: ..}} (got {tpr!r})")
    try:
        return WorkloadSpec.model_validate(data)
    except ValidationError as err:
        raise _format(err, data) from None


def shipped_workloads() -> list[str]:
    """Names of the example workloads in glm_kv/inputs/workloads."""
    return sorted(p.stem for p in WORKLOAD_DIR.glob("*.yaml"))


def _read(source: str) -> tuple[dict, str]:
    shipped = WORKLOAD_DIR / f"{source}.yaml"
    if "/" not in source and not source.endswith((".yaml", ".yml")) and shipped.is_file():
        path = shipped
    else:
        path = Path(source)
        if not path.is_file():
            raise ProfileError("workload", f"{shown(source)} is neither a shipped workload "
                                           f"({', '.join(shipped_workloads())}) nor a readable YAML file")
    text, _ = read_input_file(str(path), "workload", PROFILE_MAX_BYTES, kind="YAML workload",
                              hint="not a readable YAML file")
    data = load_yaml_text(text, shown(source), field="workload")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ProfileError("workload", f"{shown(source)} must be a YAML mapping of field: value")
    return data, path.stem


def apply_overrides(data: dict, overrides: dict[str, Any]) -> dict:
    """``--set`` values onto a workload dict; ``a.b`` sets a key inside a mapping (the percentiles)."""
    out = {str(k).replace("-", "_"): v for k, v in data.items()}
    for key, value in overrides.items():
        key = key.replace("-", "_")
        head, dot, tail = key.partition(".")
        if not dot:
            out[head] = value
            continue
        inner = out.get(head)
        if not isinstance(inner, dict):
            inner = {}  # a number replaced by percentiles: the other percentile must be set too
        out[head] = {**inner, tail: value}
    return out


def load_workload(source: Optional[str], overrides: Optional[dict[str, Any]] = None) -> WorkloadSpec:
    """A shipped workload name or a YAML path (or nothing: overrides only), plus ``--set`` overrides."""
    if not source and not overrides:
        # nothing to size: say where workloads come from instead of naming the first missing field
        raise ProfileError("--workload", f"is required: a shipped workload ({', '.join(shipped_workloads())}), "
                                         "a YAML file, or every field with --set (concurrent_requests=..., "
                                         "tokens_per_request=...)")
    data, stem = _read(source) if source else ({}, None)
    return make_workload(apply_overrides(data, overrides or {}), default_name=stem)


WORKLOAD_FIELDS = tuple(WorkloadSpec.model_fields)


def parse_workload_override(item: str) -> tuple[str, Any]:
    """``key=value`` from ``--set`` for a workload field; the value is read as YAML (numbers type)
    by the profile's guarded loader (an alias or an anchor is refused naming the key)."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ProfileError("--set", f"{shown(item)} must look like key=value")
    if len(raw) > SET_VALUE_MAX_CHARS:
        raise ProfileError(key, f"value is {len(raw)} characters long (at most {SET_VALUE_MAX_CHARS})")
    value = load_yaml_text(raw, "the --set value", field=key) if raw.strip() else None
    return key, value


def is_workload_key(item: str) -> bool:
    """Whether a ``--set key=value`` names a workload field (the rest go to the profile)."""
    key = item.partition("=")[0].strip().replace("-", "_")
    return key.partition(".")[0] in WORKLOAD_FIELDS and key not in ("name", "description")
