"""Deployment profiles: SGLang server arguments (underscored) validated into one typed object.

Field names follow ``python -m sglang.launch_server`` so users can copy them from a launch
command. A field the user leaves out takes the value SGLang 0.5.23 resolves when the flag is
absent (``tests/sglang/test_defaults.py`` reads them off the wheel); the source article's example
values live in the shipped ``article`` profiles, stated explicitly.

This is the validation boundary for profiles: YAML files and ``--set`` values are read with
YAML 1.2's core types (no ``010`` -> 8, ``1:30`` -> 90, ``on`` -> true), duplicate keys,
aliases and anchors are refused, and every field is typed strictly (no bool or float taken as an
integer), finite and bounded before any arithmetic sees it. Choice lists are SGLang 0.5.23's own
argparse choices.

Why no pydantic: ``glm-kv plan`` is called in loops, and building a pydantic model cost 161 ms of
a 353 ms start. The fields are one declarative table (``FIELDS``: type, default, bounds, choices),
checked by ``_check_field`` with pydantic's own message wording, so messages did not change.
"""
from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from ..errors import ProfileError, shown
from .model import read_input_file

PACKAGE_DIR = Path(__file__).resolve().parent

DEFAULT_PROFILE = "article"
LAYOUTS = ("article", "0.5.23")
# issue 20: GPU names come from the GPU table (inputs/data/gpus.json, with sources)
from .gpus import GPU_NAMES  # noqa: E402
from .retraction import RETRACTION_BACKUP_CHOICES  # noqa: E402
PROFILE_MAX_BYTES = 256 << 10     # a profile is a few hundred bytes; 256 KiB is generous
PROFILE_MAX_DEPTH = 8            # nesting allowed while reading (no field takes more than a scalar)
PROFILE_MAX_NODES = 4096         # YAML nodes in one profile (a profile has about 60 scalars)
SET_VALUE_MAX_CHARS = 4096       # one --set value (profile and workload alike)
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
KV_CACHE_DTYPE_CHOICES = ("auto", "bfloat16", "fp8_e4m3")          # of SGLang's, the ones glm-kv models
MAMBA_SSM_DTYPE_CHOICES = ("float32", "bfloat16")
SPECULATIVE_ALGORITHM_CHOICES = ("EAGLE", "NEXTN", "DFLASH", "DSPARK")
CUDA_GRAPH_BACKEND_CHOICES = ("full", "breakable", "disabled")   # cuda_graph_config.Backend.ALL
HICACHE_MEM_LAYOUT_CHOICES = ("layer_first", "page_first", "page_first_direct", "page_first_kv_split")
HICACHE_IO_BACKEND_CHOICES = ("kernel", "direct")
HICACHE_HOST_MEMORY_MODE_CHOICES = ("cache", "buffer_only")
# SGLang 0.5.23's --hicache-storage-backend choices (arg_groups/fields/memory.py): where HiCache's L3 lives; no
# pool of glm-kv's moves with it, but --hicache-host-memory-mode buffer_only needs one
HICACHE_STORAGE_BACKEND_CHOICES = ("file", "sim", "mooncake", "npu_memcache", "hf3fs", "nixl", "aibrix", "dynamic",
                                   "eic", "simm", "mori", "shm", "tensorcast", "seaweedfs")
# SGLang accepts these but glm-kv does not model them: refused with that reason, not as unknown.
NOT_MODELLED = {
    "kv_cache_dtype": ("fp8_e5m2", "mxfp8", "nvfp4", "fp4_mx_block16"),
    "mamba_ssm_dtype": ("float16",),
    "hicache_mem_layout": ("page_head",),
    "hicache_io_backend": ("kernel_ascend",),
    "speculative_algorithm": ("UNO", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM"),
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


# ------------------------------------------------------------------------------------------------
# The field table: one line per field (type, default, bounds, choices); Profile is built from it
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Field:
    """One profile field: its type, default and the rule a value must meet.

    ``kind`` is ``int``, ``float``, ``bool``, ``str`` or ``choice``; ``optional`` accepts null
    (SGLang's "not given"). Bounds are inclusive (``ge``/``le``) or strict (``gt``/``lt``).
    ``before`` rewrites a value before it is checked (SGLang's own spellings, e.g. ``bf16``).
    """

    kind: str
    default: Any = None
    optional: bool = False
    ge: Optional[float] = None
    gt: Optional[float] = None
    le: Optional[float] = None
    lt: Optional[float] = None
    choices: tuple = ()
    min_length: Optional[int] = None
    max_length: Optional[int] = None
    before: Optional[Callable[[Any], Any]] = None
    aliases: tuple = ()              # (spelling, choice) pairs SGLang itself accepts (bf16 = bfloat16)
    printable: bool = False          # text fields: one printable line

    @property
    def metadata(self) -> list:
        """pydantic's ``FieldInfo.metadata`` shape (objects with ``ge``/``le``), for old callers."""
        return [self]


def Int(default, *, optional=False, ge=None, le=None) -> Field:  # noqa: N802 - a table constructor
    return Field("int", default, optional, ge=ge, le=le)


def Float(default, *, optional=False, gt=None, le=None, lt=None) -> Field:  # noqa: N802
    return Field("float", default, optional, gt=gt, le=le, lt=lt)


def Bool(default=False) -> Field:  # noqa: N802
    return Field("bool", default)


def Text(default, *, optional=False, min_length=None, max_length=None) -> Field:  # noqa: N802
    return Field("str", default, optional, min_length=min_length, max_length=max_length, printable=True)


def Choice(default, choices, *, optional=False, before=None, aliases=None) -> Field:  # noqa: N802
    return Field("choice", default, optional, choices=tuple(choices), before=before,
                 aliases=tuple((aliases or {}).items()))


def _upper(v: Any) -> Any:
    return v.upper() if isinstance(v, str) else v


def _layout_text(v: Any) -> Any:
    return str(v) if isinstance(v, float) else v   # YAML reads 0.5.23 as a string, 0.5 as a float


FIELDS: dict[str, Field] = {
    "name": Text(None, optional=True, min_length=1, max_length=120),
    "description": Text("", max_length=2000),
    "model": Text("glm-5.3-flash", min_length=1, max_length=4096),
    "sglang_layout": Choice("0.5.23", LAYOUTS, before=_layout_text),   # the release glm-kv models

    "tp_size": Int(1, ge=1, le=4096),
    "dp_size": Int(1, ge=1, le=4096),
    "enable_dp_attention": Bool(),
    "attn_cp_size": Int(1, ge=1, le=4096),

    "kv_cache_dtype": Choice("auto", KV_CACHE_DTYPE_CHOICES, aliases={"bf16": "bfloat16"}),   # SGLang: bf16 = bfloat16
    "dsa_prefill_backend": Choice(None, DSA_PREFILL_CHOICES, optional=True),
    "dsa_decode_backend": Choice(None, DSA_DECODE_CHOICES, optional=True),
    "gpu": Choice("H200", GPU_NAMES, optional=True),
    "memory_bytes": Int(None, optional=True, ge=1 << 30, le=PIB),   # at least 1 GiB: sanity, not SGLang
    "sm": Int(None, optional=True, ge=70, le=1000),

    # SGLang: None -> the model config's mamba_ssm_dtype, else float32 (mamba2_state_dtype); the
    # shipped config has none. TODO: a user's config.json with mamba_ssm_dtype is not read yet.
    "mamba_ssm_dtype": Choice("float32", MAMBA_SSM_DTYPE_CHOICES),
    "linear_attn_backend": Choice("triton", LINEAR_ATTN_BACKEND_CHOICES),
    "mamba_scheduler_strategy": Choice("auto", MAMBA_STRATEGY_CHOICES),
    "mamba_skip_decode_lock": Bool(),    # env SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1
    "disable_overlap_schedule": Bool(),
    "disable_radix_cache": Bool(),
    # --enable-linear-replayssm-spec: a replay ring per KDA state slot replaces the verify scratch
    # (kv_cache_configurator._handle_max_mamba_cache); ring length --linear-replayssm-cache-len
    "enable_linear_replayssm_spec": Bool(),
    "linear_replayssm_cache_len": Int(16, ge=1, le=1 << 16),

    "max_running_requests": Int(None, optional=True, ge=1, le=COUNT_MAX),   # None: SGLang's automatic value
    "max_total_tokens": Int(None, optional=True, ge=1, le=1 << 40),
    "max_mamba_cache_size": Int(None, optional=True, ge=1, le=1 << 24),
    "mamba_full_memory_ratio": Float(0.9, gt=0, le=1000),   # SGLang: None, fallback 0.9
    "context_length": Int(None, optional=True, ge=1, le=COUNT_MAX),   # None: the model's maximum
    "page_size": Int(None, optional=True, ge=1, le=1 << 20),
    # env SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1: context_length may exceed the model's maximum
    "allow_overwrite_longer_context_len": Bool(),

    "speculative_algorithm": Choice(None, SPECULATIVE_ALGORITHM_CHOICES, optional=True, before=_upper),
    "speculative_num_draft_tokens": Int(None, optional=True, ge=1, le=1024),
    "speculative_num_steps": Int(None, optional=True, ge=1, le=1024),
    "speculative_eagle_topk": Int(None, optional=True, ge=1, le=1024),
    "speculative_draft_model_path": Text(None, optional=True, min_length=1, max_length=4096),   # DFLASH draft
    "speculative_dflash_block_size": Int(None, optional=True, ge=1, le=1024),
    "speculative_draft_window_size": Int(None, optional=True, ge=1, le=COUNT_MAX),

    # issue 20: weights from the model when weights_bytes is not given (set by a launch command),
    # and the draft model's weights (0: already inside weights_bytes; None: estimated and said so)
    "weights_estimate": Bool(True),
    "draft_weights_bytes": Int(None, optional=True, ge=0, le=PIB),
    "available_bytes": Int(None, optional=True, ge=1, le=PIB),
    "mem_fraction_static": Float(None, optional=True, gt=0, lt=1),
    "weights_bytes": Int(None, optional=True, ge=0, le=PIB),
    # --language-model-only: SGLang 0.5.23 refuses it for this architecture (see resolve.py)
    "language_model_only": Bool(),
    "language_only": Bool(),             # --language-only (encoder disaggregation: the LM side)
    "pre_model_load_bytes": Int(None, optional=True, ge=1, le=PIB),   # free memory before weights

    # flags that change SGLang's default mem_fraction_static (None: SGLang's own default)
    "chunked_prefill_size": Int(None, optional=True, ge=-1, le=COUNT_MAX),   # -1 disables chunking
    "cuda_graph_max_bs_decode": Int(None, optional=True, ge=1, le=1 << 20),
    # the graph reservation of the default fraction (memory_hook.reserve_for_graph_mb): decode
    # max_bs x 2 and the MLA prefill graph's flat 1.5 GiB drop with their phase's graph
    "disable_cuda_graph": Bool(),           # both phases (the legacy global switch)
    "disable_decode_cuda_graph": Bool(),
    "disable_prefill_cuda_graph": Bool(),
    # --enable-two-batch-overlap: cuda_graph_hook.disable_breakable_cudagraph_if_incompatible turns the
    # breakable prefill graph off before the fraction ("TBO capture is unsupported"), as its model rules do
    "enable_two_batch_overlap": Bool(),
    "moe_a2a_backend": Choice("none", MOE_A2A_BACKEND_CHOICES),
    "max_prefill_tokens": Int(16384, ge=1, le=COUNT_MAX),
    "disaggregation_mode": Choice("null", DISAGGREGATION_MODE_CHOICES),
    "enable_prefill_cp": Bool(),
    "cp_strategy": Choice(None, CP_STRATEGY_CHOICES, optional=True),

    "enable_hierarchical_cache": Bool(),
    "hicache_ratio": Float(2.0, gt=0, le=1000),   # SGLang: None -> 2.0 (handle_hicache_ratio_default)
    "hicache_size": Int(0, ge=0, le=1 << 30),
    "hicache_mem_layout": Choice("page_first", HICACHE_MEM_LAYOUT_CHOICES),
    "hicache_io_backend": Choice("kernel", HICACHE_IO_BACKEND_CHOICES),
    "host_memory_bytes": Int(None, optional=True, ge=1, le=PIB),      # DRAM of one machine
    "ranks_per_host": Int(None, optional=True, ge=1, le=4096),        # GPU ranks on one machine

    # DSPARK: gamma, the proposed tokens (the verify window is gamma + 1); None: the draft config's, else 7
    "speculative_dspark_block_size": Int(None, optional=True, ge=1, le=1023),
    # --cuda-graph-backend-decode / -prefill (cuda_graph_config[phase].backend): they win over the
    # disable_* switches; an explicit prefill backend also skips SGLang's auto-disable cascade
    "cuda_graph_backend_decode": Choice(None, CUDA_GRAPH_BACKEND_CHOICES, optional=True),
    "cuda_graph_backend_prefill": Choice(None, CUDA_GRAPH_BACKEND_CHOICES, optional=True),
    # --nnodes (issue 30): SGLang's ranks per host are its launch world size per node, tp x pp // nnodes
    # (mem_cache/pool_host/base.py ranks_per_host), which splits the host RAM of HiCache's auto-size and
    # of its host-memory check; check_server_args asks tp x pp to be a multiple of it
    "nnodes": Int(1, ge=1, le=4096),
    # --disaggregation-decode-extra-slots: a decode server's pre-allocated request rows (req_to_token and the
    # compress tail); None: SGLang's default (handle_pd_disaggregation); read by no pool elsewhere
    "disaggregation_decode_extra_slots": Int(None, optional=True, ge=0, le=COUNT_MAX),
    # --disaggregation-decode-enable-radix-cache: a decode server keeps the radix cache (handle_pd_disaggregation
    # resolves disable_radix_cache to its negation on a decode server, over --disable-radix-cache); inert elsewhere
    "disaggregation_decode_enable_radix_cache": Bool(),
    # --enable-hisparse (issue 30): hierarchical sparse attention, a device KV pool of tokens / ratio backed by a
    # host copy (HiSparseDSATokenToKVPool, inputs/hisparse.py); --hisparse-config: its JSON (host_to_device_ratio)
    "enable_hisparse": Bool(),
    "hisparse_config": Text(None, optional=True, min_length=1, max_length=4096),
    # --disaggregation-ib-device (issue 30), where SGLang checks it at start-up (Mooncake PD transfer): on the machine
    # it runs on, which glm-kv cannot see; no pool moves, the plan says so (inputs/ib_devices.py)
    "disaggregation_ib_device": Text(None, optional=True, min_length=1, max_length=4096),
    # issue 32, hybrid sliding-window models (gpt-oss): --swa-full-tokens-ratio, the SWA pool's tokens per
    # full-pool token (SGLang: None, fallback 0.8; kv_cache_hook refuses it outside (0, 1.0] for every model),
    # and --disable-hybrid-swa-memory (ModelConfig._derive_hybrid_model: no SWA pool, every layer in the full
    # pool); read by no pool of a model without sliding-window layers
    "swa_full_tokens_ratio": Float(0.8, gt=0, le=1.0),
    "disable_hybrid_swa_memory": Bool(),
    # --hicache-host-memory-mode (issue 30): buffer_only makes host memory a staging buffer in front of a storage
    # backend; SGLang then defaults the ratio to 1.2, not 2.0 (hicache_hook.handle_hicache_ratio_default), and
    # refuses it without --hicache-storage-backend or on a decode server (validate_hicache_host_memory_mode)
    "hicache_host_memory_mode": Choice("cache", HICACHE_HOST_MEMORY_MODE_CHOICES),
    "hicache_storage_backend": Choice(None, HICACHE_STORAGE_BACKEND_CHOICES, optional=True),
    # --hicache-host-memory-fraction: the share of the host's RAM (after SGLang's 10 GiB reserve) that the HiCache
    # host pools of all the machine's ranks may take when auto-sizing (hicache_auto_size; no --hicache-ratio or
    # --hicache-size); SGLang refuses it outside (0, 1]
    "hicache_host_memory_fraction": Float(0.8, gt=0, le=1.0),
    # a PD decode server's retraction backup (issue 30 / 32 follow-up, inputs/retraction.py): None lets SGLang
    # resolve it against the built pools (host_pool for an MHA / hybrid-SWA pool without recurrent state), and
    # host_pool builds HiCache's host pools without --enable-hierarchical-cache; a host receive threshold below 1
    # resolves it to host_pool (SGLang refuses one outside [0, 1], in its words); priority scheduling with
    # preemption keeps it on cpu_tensor
    "disaggregation_decode_retraction_backup": Choice(None, RETRACTION_BACKUP_CHOICES, optional=True),
    "disaggregation_decode_host_receive_threshold": Float(1.0, gt=-1e9, le=1e9),
    "enable_priority_scheduling": Bool(),
    "disable_priority_preemption": Bool(),
}


class _FieldRule(ValueError):
    """A value breaks its field's rule: ``kind`` as pydantic names it, ``msg`` in its words."""

    def __init__(self, kind: str, msg: str, got: Any):
        self.kind, self.msg, self.got = kind, msg, got
        super().__init__(msg)


def _num(x: float) -> str:
    """A bound as pydantic prints it (1000, 0.5)."""
    return str(x)


def _literal_msg(choices: tuple) -> str:
    quoted = [repr(c) for c in choices]
    return "Input should be " + (quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1])


def _check_field(spec: Field, value: Any) -> Any:
    """``value`` checked against ``spec``: the stored value, or _FieldRule (pydantic's wording)."""
    if spec.before is not None:
        value = spec.before(value)
    if spec.aliases and isinstance(value, str):
        value = dict(spec.aliases).get(value, value)
    if value is None and spec.optional:
        return None
    kind = spec.kind
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _FieldRule("int_type", "Input should be a valid integer", value)
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _FieldRule("float_type", "Input should be a valid number", value)
        if value != value or value in (float("inf"), float("-inf")):
            raise _FieldRule("finite_number", "Input should be a finite number", value)
        got, value = value, float(value)
    elif kind == "bool":
        if not isinstance(value, bool):
            raise _FieldRule("bool_type", "Input should be a valid boolean", value)
        return value
    elif kind == "str":
        if not isinstance(value, str) or isinstance(value, YamlDate):
            raise _FieldRule("string_type", "Input should be a valid string", value)
        if spec.min_length is not None and len(value) < spec.min_length:
            s = "" if spec.min_length == 1 else "s"
            raise _FieldRule("string_too_short", f"String should have at least {spec.min_length} character{s}", value)
        if spec.max_length is not None and len(value) > spec.max_length:
            raise _FieldRule("string_too_long", f"String should have at most {spec.max_length} characters", value)
        if spec.printable and not value.isprintable():  # str.isprintable: every character is
            raise _FieldRule("value_error", "must be printable text on one line (no control characters)", value)
        return value
    else:  # choice
        if not isinstance(value, str) or value not in spec.choices:
            raise _FieldRule("literal_error", _literal_msg(spec.choices), value)
        return value
    shown_as = value if kind == "int" else got
    if spec.ge is not None and not value >= spec.ge:
        raise _FieldRule("greater_than_equal", f"Input should be greater than or equal to {_num(spec.ge)}", shown_as)
    if spec.gt is not None and not value > spec.gt:
        raise _FieldRule("greater_than", f"Input should be greater than {_num(spec.gt)}", shown_as)
    if spec.le is not None and not value <= spec.le:
        raise _FieldRule("less_than_equal", f"Input should be less than or equal to {_num(spec.le)}", shown_as)
    if spec.lt is not None and not value < spec.lt:
        raise _FieldRule("less_than", f"Input should be less than {_num(spec.lt)}", shown_as)
    return value


class _ProfileBase:
    """What every Profile has beside its fields: the label and pydantic's names for dump/copy."""

    __slots__ = ()
    model_fields = FIELDS

    @property
    def label(self) -> str:
        return self.name or "custom"

    @property
    def model_fields_set(self) -> frozenset:
        """The fields the user gave (SGLang's "flag present"), as pydantic named it."""
        return self._given

    def model_dump(self, *, exclude=None) -> dict:
        skip = set(exclude or ())
        return {k: getattr(self, k) for k in FIELDS if k not in skip}

    def model_copy(self, *, update: Optional[dict] = None):
        """A copy with ``update`` applied, unchecked (as pydantic's model_copy): callers pass
        values they derived from a valid profile; the updated fields count as given."""
        update = update or {}
        for key in update:
            if key not in FIELDS:
                raise _unknown_field(key)
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__.update(update)
        new.__dict__["_given"] = self._given | frozenset(update)
        return new

    @classmethod
    def model_validate(cls, data: dict):
        return make_profile(data)


def _build_profile_class() -> type:
    fields = [(k, Any, dataclasses.field(default=spec.default)) for k, spec in FIELDS.items()]
    cls = dataclasses.make_dataclass("Profile", fields, bases=(_ProfileBase,), frozen=True, init=False)
    cls.__module__ = __name__   # pickles as glm_kv.inputs.profile.Profile
    cls.__doc__ = "One deployment: the launch flags that decide KV-cache memory on a rank (fields: FIELDS)."
    return cls


Profile = _build_profile_class()


def _got(value: Any) -> str:
    if isinstance(value, (dict, list, tuple, set)):
        return f"got a {type(value).__name__}"
    return f"got {shown(value)}"


def _format_validation_error(loc: str, err: _FieldRule) -> ProfileError:
    """One field's broken rule -> the one line the CLI prints (field, rule, what was given)."""
    kind, msg, got = err.kind, err.msg, err.got
    if kind in ("int_type", "float_type") and isinstance(got, bool):
        msg += " (true/false is not a number)" if kind != "bool_type" else ""
    elif kind == "int_type" and isinstance(got, float):
        msg += " (no decimal point: SGLang parses integers with int())"
    elif kind == "literal_error" and isinstance(got, str):
        if got in NOT_MODELLED.get(loc, ()):
            msg = f"{msg}; SGLang accepts {got!r} but glm-kv does not model it"
    if kind == "string_type" and isinstance(got, (bool, int, float, YamlDate)):
        what = "a date" if isinstance(got, YamlDate) else "true/false" if isinstance(got, bool) else "a number"
        text = str(got).lower() if isinstance(got, bool) else str(got)
        msg += f"; YAML reads this as {what}: quote it ({loc}: \"{text}\") to keep it text"
    return ProfileError(loc, f"{msg} ({_got(got)})")


def _unknown_field(key: str) -> ProfileError:
    close = difflib.get_close_matches(key, list(FIELDS), n=1)
    hint = (f"; did you mean {close[0]!r}?" if close
            else " (glm-kv plan --json lists every field under 'profile')")
    return ProfileError(key, f"unknown field{hint}")


def _profile_init(self, **data: Any) -> None:
    """Check every field in table order (the first broken rule is the one reported), then the
    rules between fields; store the values and which fields were given."""
    values = {}
    for key, spec in FIELDS.items():
        if key in data:
            try:
                values[key] = _check_field(spec, data[key])
            except _FieldRule as e:
                raise _format_validation_error(key, e) from None
        else:
            values[key] = spec.default
    for key in data:   # after the fields, as pydantic reported them
        if key not in FIELDS:
            raise _unknown_field(key)
    if values["gpu"] is None and (values["memory_bytes"] is None or values["sm"] is None):
        raise ProfileError("gpu", f"give a GPU name ({', '.join(GPU_NAMES)}) or both memory_bytes and sm")
    for key, value in values.items():
        object.__setattr__(self, key, value)
    object.__setattr__(self, "_given", frozenset(data))


Profile.__init__ = _profile_init


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
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?"
                      r"(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)?\Z")


class YamlDate(str):
    """A plain scalar YAML 1.1 reads as a date (``2026-01-01``): kept as its text so a text field
    can refuse it with a tip to quote it, and a number field names itself."""


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
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:timestamp", _DATE_RE, list("0123456789"))
StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", lambda loader, node: YamlDate(node.value))
StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
StrictLoader.add_constructor("tag:yaml.org,2002:float", StrictLoader.construct_yaml_float)


def _check_nodes(root: Any, what: str, field: str, text: str = "") -> None:
    """Walk the composed YAML nodes once (no Python objects built yet): refuse aliases, which
    let a few lines expand into billions of values, and bound the nesting and the node count;
    then refuse an anchor (``&name``) left without an alias (the nodes do not keep anchors, so
    ``text``'s events are read, only when it holds a ``&``)."""
    seen: set[int] = set()
    stack = [(root, 0)]
    too_deep = False
    while stack:
        node, level = stack.pop()
        if id(node) in seen:
            raise ProfileError(field, f"{what}: YAML aliases (*name) are not accepted (line "
                                      f"{node.start_mark.line + 1}); write the value out")
        seen.add(id(node))
        if len(seen) > PROFILE_MAX_NODES:
            raise ProfileError(field, f"{what} holds more than {PROFILE_MAX_NODES:,} values")
        if level > PROFILE_MAX_DEPTH:
            too_deep = True   # reported after the walk: an alias (the likelier attack) is named first
            continue
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                stack += ((k, level + 1), (v, level + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack += ((v, level + 1) for v in node.value)
    if too_deep:
        raise ProfileError(field, f"{what} is nested more than {PROFILE_MAX_DEPTH} levels deep")
    if "&" in text:
        for event in yaml.parse(text, Loader=_BaseLoader):
            if getattr(event, "anchor", None) is not None:
                raise ProfileError(field, f"{what}: YAML anchors (&name) are not accepted (line "
                                          f"{event.start_mark.line + 1}); aliases are refused, so remove it")


def load_yaml_text(text: str, what: str, field: str = "profile") -> Any:
    """YAML text -> Python values, every failure a ProfileError naming ``field``."""
    if "\x00" in text:
        raise ProfileError(field, f"{what} contains a NUL byte (not a text file)")
    loader = StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, what, field, text)
        return loader.construct_document(node)
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
        if isinstance(e, ProfileError):
            raise
        raise ProfileError(field, f"{what} holds a value that cannot be read ({type(e).__name__})") from None
    finally:
        loader.dispose()


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
    if data is None or data == {}:
        # an empty or comment-only file is a mistake (a wrong path, an unsaved editor), not a request
        # for SGLang's defaults: those are `--sglang-args "--model-path ..."` or a shipped profile
        raise ProfileError("profile", f"{shown(source, 400)} is empty (no field: value); give at least gpu and "
                                      "tp_size, or name a shipped profile")
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
    if len(raw) > SET_VALUE_MAX_CHARS:
        raise ProfileError(key, f"value is {len(raw)} characters long (at most {SET_VALUE_MAX_CHARS})")
    if "\x00" in raw:
        raise ProfileError(key, "value contains a NUL byte")
    value = raw if key in _TEXT_FIELDS else parse_scalar(raw)
    return key, value


def _plain(value: Any) -> Any:
    """numpy scalars (from sweeps and tests) as the Python values they hold; refuse huge integers."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()
    return value


def check_int_range(key: str, value: Any) -> None:
    """Refuse an integer too long for any field (``OutOfRange`` digits from YAML, or past int64's
    room for products) naming ``key``; any other value passes (its field checks its type)."""
    if isinstance(value, OutOfRange) or (isinstance(value, int) and not isinstance(value, bool)
                                         and value.bit_length() > INT_MAX_BITS):
        digits = len(value.lstrip("+-")) if isinstance(value, OutOfRange) else len(str(abs(value)))
        raise ProfileError(key, f"integer out of range ({digits} digits)")


def check_field(key: str, value: Any) -> Any:
    """``value`` checked against profile field ``key``'s rule (the workload's ``name`` and
    ``description`` take the same): the value, or the one-line ProfileError (with the YAML tip)."""
    try:
        return _check_field(FIELDS[key], value)
    except _FieldRule as e:
        raise _format_validation_error(key, e) from None


def make_profile(data: dict, default_name: Optional[str] = None) -> Profile:
    """Validate a dict of profile fields; raise ProfileError naming the field on bad input."""
    data = {k: _plain(v) for k, v in canonical_fields(data).items()}
    for k, v in data.items():
        check_int_range(k, v)
    if default_name and not data.get("name"):
        data["name"] = default_name
    return Profile(**data)


def load_profile(source: Optional[str] = None, overrides: Optional[dict] = None) -> Profile:
    """A shipped profile name or a YAML path (default: the article's profile), plus overrides."""
    data, stem = _read_yaml(DEFAULT_PROFILE if source is None else source)
    data = canonical_fields(data)
    data.update(canonical_fields(overrides or {}))
    return make_profile(data, default_name=stem[:120])
