"""Read a pasted ``vllm serve <model> --flag ...`` command into a model and ``VllmArgs`` (issue 33).

Read the way vLLM 0.33.0's own parser reads it (``FlexibleArgumentParser`` with
``make_arg_parser``: ``vllm/utils/argparse_utils.py``, ``vllm/engine/arg_utils.py``), so that a command
vLLM's parser refuses is refused here too, with the flag named:

* underscores in a flag's name are dashes (``--max_model_len`` is ``--max-model-len``), ``--flag=value``
  works, unique prefixes are the flag (argparse's ``allow_abbrev``: ``--max-model`` is
  ``--max-model-len``, ``-t`` is ``-tp``; an ambiguous one is refused), the last of a repeated flag wins;
  argparse's other single-dash forms (``-n5``) and the ``--`` separator are not read (not modelled);
* ``--max-model-len`` and ``--kv-cache-memory-bytes`` take vLLM's ``human_readable_int``: ``k m g t``
  are powers of 1000 (decimals allowed, truncated as ``int(float(n) * 1000**i)``), ``K M G T`` powers
  of 1024 (no decimals); ``--max-model-len`` also takes ``auto`` / ``-1`` (vLLM fits it to the memory:
  not modelled here);
* the model is ``serve``'s one positional word (wherever it stands) or ``--model X`` (vLLM moves
  ``--model`` to the front; both is refused, as vLLM refuses it);
* switches (``--enable-prefix-caching`` / ``--no-enable-prefix-caching`` / ``--disable-prefix-caching``,
  ``--disable-hybrid-kv-cache-manager`` / ``--enable-hybrid-kv-cache-manager``) take no value.

Every flag vLLM 0.33.0 has is in ``data/vllm-0.33.0-flags.json`` (generated from its parser;
tests/vllm/test_vllm_launch.py checks the file against the installed parser). Flags that move the KV
plan are read; a few frontend-only flags are inert (``INERT``: they are not ``EngineArgs`` fields, so
vLLM's sizing, a function of ``EngineArgs`` and the GPU, cannot see them: the same test shows
``EngineArgs.from_cli_args`` equal with and without them); every other flag is refused by name as not
modelled: a planner that drops a flag gives a wrong number with a straight face.

vLLM has no GPU flag: the GPU is glm-kv's own option (``--gpu``), given by the caller.
"""
from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from ..errors import ProfileError, shown

COMMAND_MAX_CHARS = 100_000
WHERE = "--vllm-args"

# vLLM flag dest -> the ledgers.vllm.VllmArgs field it fills (the flags that move memory, issue 33)
MODELLED: dict[str, str] = {
    "tensor_parallel_size": "tp",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
    "kv_cache_dtype": "kv_cache_dtype",
    "mamba_cache_dtype": "mamba_cache_dtype",
    "mamba_ssm_cache_dtype": "mamba_ssm_cache_dtype",
    "enable_prefix_caching": "enable_prefix_caching",
    "block_size": "block_size",
    "max_model_len": "max_model_len",
    "max_num_seqs": "max_num_seqs",
    "disable_hybrid_kv_cache_manager": "disable_hybrid_kv_cache_manager",
    "num_gpu_blocks_override": "num_gpu_blocks_override",
    "speculative_config": "num_speculative_tokens",
    # decode context parallelism (ledgers/vllm_dcp.py): shards attention tokens across the TP ranks
    "decode_context_parallel_size": "decode_context_parallel_size",
    "cp_kv_cache_interleave_size": "cp_kv_cache_interleave_size",
    "dcp_kv_cache_interleave_size": "dcp_kv_cache_interleave_size",
}
# read and checked, but no VllmArgs field: with --kv-cache-memory-bytes vLLM takes that figure and
# skips the memory profile that reads it (v1/worker/gpu_worker.py determine_available_memory)
READ_ONLY = ("gpu_memory_utilization",)
# frontend-only flags (the API server's, not EngineArgs fields): proven inert by
# tests/vllm/test_vllm_launch.py (EngineArgs.from_cli_args equal with and without each)
INERT = ("host", "port", "uvicorn_log_level", "disable_uvicorn_access_log", "api_key", "disable_fastapi_docs",
         "enable_log_outputs")
# config/cache.py CacheDType (vLLM 0.33.0): any other value vLLM refuses when it builds CacheConfig
VLLM_CACHE_DTYPES = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
                     "nvfp4_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc",
                     "turboquant_3bit_nc", "octave_k3v4", "octave_k3v3", "octave_k3v3_compact", "ultraquant_4bit",
                     "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6")
# the ones glm_kv/ledgers/vllm.py derives (the others: NotModelled)
MODELLED_CACHE_DTYPES = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_ds_mla")
MAMBA_DTYPES = ("auto", "bfloat16", "float16", "float32")   # argparse choices (MambaDType)


class VllmNotModelled(ProfileError):
    """A command vLLM 0.33.0 takes whose effect on the KV plan glm-kv does not compute (exit 2, named)."""


class VllmRefuses(ProfileError):
    """A command vLLM 0.33.0 itself refuses; ``stage``: "argparse" (its parser, before anything runs) or
    "config" (its engine config's validation, e.g. CacheConfig's field checks)."""

    def __init__(self, flag: str, rule: str, stage: str = "argparse"):
        super().__init__(flag, rule)
        self.stage = stage


@dataclass(frozen=True)
class VllmLaunch:
    """A parsed ``vllm serve`` command: the model as typed, the EngineArgs values it sets (vLLM's names
    and types, only those given: the rest are vLLM's defaults), the inert flags as typed."""

    model: str
    engine_args: dict = field(default_factory=dict)
    inert: tuple = ()

    def vllm_fields(self, kv_cache_memory_bytes: Optional[int] = None) -> dict:
        """The ``ledgers.vllm.VllmArgs`` fields this command sets (its names: ``tp``, ``num_speculative_tokens``,
        ...), with ``kv_cache_memory_bytes`` from the caller when the command gives none (the caller says
        where it came from). Refuses what ``vllm_plan`` cannot size (named). The GPU is the caller's."""
        e = self.engine_args
        mem = e.get("kv_cache_memory_bytes") or kv_cache_memory_bytes
        if not mem:
            raise VllmNotModelled("--kv-cache-memory-bytes", "is needed: without it vLLM sizes its KV budget "
                                  "from a memory profile on the GPU (--gpu-memory-utilization x total memory, "
                                  "less weights and activations), which glm-kv does not model; give the per-rank "
                                  "KV bytes (e.g. --kv-cache-memory-bytes 60G)")
        kw: dict[str, Any] = {"kv_cache_memory_bytes": int(mem)}
        for dest, name in MODELLED.items():
            if dest in e and dest not in ("kv_cache_memory_bytes", "speculative_config") and e[dest] is not None:
                kw[name] = e[dest]
        spec = e.get("speculative_config")
        if spec is not None:
            n = spec.get("num_speculative_tokens")
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise VllmNotModelled("--speculative-config", "without a positive num_speculative_tokens vLLM "
                                      "takes the drafter's own count, which glm-kv does not read")
            # glm-kv sizes the checkpoint's own MTP layers as the drafter (ledgers/vllm.py); another method
            # (ngram, eagle, a draft model, ...) or any other key of the config would be sized wrong
            others = sorted(set(spec) - {"method", "num_speculative_tokens"})
            if spec.get("method") != "mtp" or others:
                raise VllmNotModelled("--speculative-config", f"glm-kv sizes only {{\"method\": \"mtp\", "
                                      f"\"num_speculative_tokens\": N}} (the checkpoint's MTP layers), got "
                                      f"{shown(json.dumps(spec))}")
            kw["num_speculative_tokens"] = n
        return kw


@lru_cache(maxsize=1)
def vllm_flags() -> dict[str, tuple[str, Any]]:
    """vLLM 0.33.0's ``vllm serve`` option strings -> (dest, nargs), from its parser."""
    path = Path(__file__).resolve().parent / "data" / "vllm-0.33.0-flags.json"
    return {k: (v[0], v[1]) for k, v in json.loads(path.read_text()).items()}


# ------------------------------------------------------------------------------------------------------
# vLLM's value types
# ------------------------------------------------------------------------------------------------------

def human_readable_int(flag: str, raw: str) -> int:
    """vllm/utils/argparse_utils.py ``human_readable_int``: k/m/g/t x 1000^i (decimals allowed, truncated
    after a float product), K/M/G/T x 1024^i (no decimals), else ``int()``."""
    value = raw.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if m and len(value) <= 40:
        number, suffix = m.groups()
        if suffix in "kmgt":
            return int(float(number) * 1000 ** ("kmgt".index(suffix) + 1))
        if "." in number:
            raise VllmRefuses(flag, f"vLLM refuses {shown(raw)}: decimals are not allowed with binary "
                                    f"suffixes like {suffix} (did you mean {number}{suffix.lower()}?)")
        return int(number) * 1024 ** ("KMGT".index(suffix) + 1)
    return _int(flag, value)


def _int(flag: str, raw: str) -> int:
    """argparse's ``type=int`` (so ' 8', '+8' and '8_000' pass, '8.0' does not)."""
    if len(raw) > 40:
        raise VllmRefuses(flag, f"vLLM's parser refuses it: expects an integer, got {shown(raw)}")
    try:
        return int(raw)
    except ValueError:
        raise VllmRefuses(flag, f"vLLM's parser refuses it: expects an integer, got {shown(raw)}") from None


def _optional(raw: str) -> bool:
    """vLLM's ``optional_type``: '' and 'None' mean the default (None)."""
    return raw in ("", "None")


def _value(flag: str, dest: str, raw: str) -> Any:
    """One flag's value as vLLM's parser types it (and the config checks glm-kv relies on)."""
    if dest in ("tensor_parallel_size", "block_size", "max_num_seqs", "decode_context_parallel_size",
                "dcp_kv_cache_interleave_size", "cp_kv_cache_interleave_size"):
        return _int(flag, raw)
    if dest == "num_gpu_blocks_override":
        return None if _optional(raw) else _int(flag, raw)
    if dest == "kv_cache_memory_bytes":
        return None if _optional(raw) else human_readable_int(flag, raw)
    if dest == "max_model_len":   # human_readable_int_or_auto
        s = raw.strip()
        return -1 if s == "-1" or s.lower() == "auto" else human_readable_int(flag, raw)
    if dest == "kv_cache_dtype":
        return raw
    if dest in ("mamba_cache_dtype", "mamba_ssm_cache_dtype"):
        if raw not in MAMBA_DTYPES:
            raise VllmRefuses(flag, f"vLLM's parser refuses it: invalid choice {shown(raw)} "
                                    f"(choose from {', '.join(MAMBA_DTYPES)})")
        return raw
    if dest == "speculative_config":
        if _optional(raw):
            return None
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise VllmRefuses(flag, f"vLLM's parser refuses it: not JSON, got {shown(raw)}") from None
    if dest == "gpu_memory_utilization":
        try:
            return float(raw)
        except ValueError:
            raise VllmRefuses(flag, f"vLLM's parser refuses it: expects a number, got {shown(raw)}") from None
    return raw


def _check(engine: dict) -> None:
    """What vLLM's config refuses later (stage "config") and what glm-kv does not size (not modelled)."""
    kvd = engine.get("kv_cache_dtype")
    if kvd is not None and kvd not in VLLM_CACHE_DTYPES:
        raise VllmRefuses("--kv-cache-dtype", f"vLLM refuses {shown(kvd)} (CacheConfig: one of "
                                              f"{', '.join(VLLM_CACHE_DTYPES)})", stage="config")
    util = engine.get("gpu_memory_utilization")
    if util is not None and not 0 < util <= 1:
        raise VllmRefuses("--gpu-memory-utilization", f"vLLM refuses {util!r} (CacheConfig: greater than 0, "
                                                      f"at most 1)", stage="config")
    if kvd is not None and kvd not in MODELLED_CACHE_DTYPES:
        raise VllmNotModelled("--kv-cache-dtype", f"vLLM serves {kvd!r} but glm-kv derives only "
                                                  f"{', '.join(MODELLED_CACHE_DTYPES)}")
    spec = engine.get("speculative_config")
    if spec is not None and not isinstance(spec, dict):
        raise VllmNotModelled("--speculative-config", f"expects a JSON object, got {shown(spec)}")
    if engine.get("max_model_len") == -1:
        raise VllmNotModelled("--max-model-len", "auto / -1: vLLM fits the length to the GPU's memory profile, "
                                                 "which glm-kv does not model; give a length")
    for dest, lo in (("tensor_parallel_size", 1), ("block_size", 1), ("max_num_seqs", 1),
                     ("max_model_len", 1), ("num_gpu_blocks_override", 1), ("kv_cache_memory_bytes", 1),
                     ("decode_context_parallel_size", 1), ("cp_kv_cache_interleave_size", 1),
                     ("dcp_kv_cache_interleave_size", 1)):
        v = engine.get(dest)
        if v is not None and v < lo:
            raise VllmNotModelled("--" + dest.replace("_", "-"), f"{v} (below {lo}) is not sized by glm-kv")


# ------------------------------------------------------------------------------------------------------
# the command line
# ------------------------------------------------------------------------------------------------------

def _split(command: str) -> list[str]:
    if not isinstance(command, str) or not command.strip():
        raise ProfileError(WHERE, "is empty: paste a command such as 'vllm serve zai-org/GLM-5.3-Flash -tp 8 "
                                  "--kv-cache-memory-bytes 60G'")
    if len(command) > COMMAND_MAX_CHARS:
        raise ProfileError(WHERE, f"is {len(command):,} characters long (at most {COMMAND_MAX_CHARS:,})")
    if "\x00" in command:
        raise ProfileError(WHERE, "contains a NUL byte")
    try:
        return shlex.split(re.sub(r"\\\r?\n", " ", command))
    except ValueError as e:
        raise ProfileError(WHERE, f"cannot split the command ({e})") from None


def _entry(words: list[str]) -> tuple[int, bool]:
    """Index of the first word after the entry point, and whether it is ``vllm serve`` (positional model)."""
    for i, w in enumerate(words):
        if w == "serve" and i > 0 and words[i - 1].rsplit("/", 1)[-1] == "vllm":
            return i + 1, True
        if w in ("vllm.entrypoints.openai.api_server",):
            return i + 1, False
    raise ProfileError(WHERE, "expects a command such as 'vllm serve zai-org/GLM-5.3-Flash -tp 8 "
                              "--kv-cache-memory-bytes 60G' (or python -m vllm.entrypoints.openai.api_server "
                              "--model ...)")


_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _resolve(flag: str) -> str:
    """argparse's option lookup: exact, else a unique prefix of a long option (allow_abbrev)."""
    flags = vllm_flags()
    if flag in flags:
        return flag
    if not flag.startswith("--") and len(flag) > 1 and flag[:2] not in flags:
        hits = sorted(o for o in flags if o.startswith(flag))
        if len(hits) == 1:      # argparse's single-dash prefix (-t is -tp)
            return hits[0]
    if not flag.startswith("--") or flag == "--":
        # argparse's other single-dash forms (-n5: -n with 5; ambiguous prefixes) and '--' (end of options)
        raise VllmNotModelled(flag, "glm-kv reads single-dash options only as vLLM spells them (-tp, -sc, ...), "
                                    "and no '--' separator")
    if flag.startswith("--") and len(flag) > 2:
        hits = sorted({o for o in flags if o.startswith(flag) and o.startswith("--")})
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise VllmRefuses(flag, f"vLLM's parser refuses it: ambiguous option (could match "
                                    f"{', '.join(hits[:6])}{', ...' if len(hits) > 6 else ''})")
    raise VllmRefuses(flag, "vLLM 0.33.0's parser refuses it: unrecognized argument")


def _dashes(word: str) -> str:
    """FlexibleArgumentParser: underscores become dashes in a flag's name (up to its first '.')."""
    if not word.startswith("--"):
        return word
    key, eq, value = word.partition("=")
    head, dot, tail = key[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + tail + eq + value


def parse_vllm_command(command: str) -> VllmLaunch:
    """A ``vllm serve`` command -> ``VllmLaunch`` (model, EngineArgs values given, inert flags).

    Raises ``VllmRefuses`` for what vLLM's parser (or config) refuses and ``VllmNotModelled`` for what
    vLLM takes but glm-kv does not size; both are ProfileErrors (one line, exit 2)."""
    words = _split(command)
    start, serve = _entry(words)
    model: Optional[str] = None
    if serve and start < len(words) and not words[start].startswith("-"):
        model, start = words[start], start + 1
    rest = words[start:]
    if (serve and model is None and rest and not any(re.match(r"^--model(=.+|$)", w) for w in rest)
            and not any(re.match(r"^--config(=.+|$)", w) for w in rest)
            and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", w) for w in rest)):
        # FlexibleArgumentParser.parse_args refuses this before argparse runs (vllm/utils/argparse_utils.py)
        raise VllmRefuses("--served-model-name", "vLLM refuses it: `model` should be provided as the first "
                                                 "positional argument when using `vllm serve`")
    engine: dict[str, Any] = {}
    inert: list[str] = []
    pending: Optional[VllmNotModelled] = None
    flags = vllm_flags()
    i = start
    while i < len(words):
        w = _dashes(words[i])
        i += 1
        if not w.startswith("-") or w == "-" or _NEGATIVE_NUMBER.match(w):
            if serve and model is None and "model" not in engine:
                model = words[i - 1]   # serve's positional model_tag, wherever it stands
                continue
            raise VllmRefuses(shown(w, 40), "vLLM's parser refuses it: unrecognized argument (a stray word; "
                                            "the model goes right after 'serve')")
        name, eq, inline = w.partition("=")
        if "." in name and name.startswith("--"):
            raise VllmNotModelled(name, "vLLM's dotted JSON form is not read by glm-kv: give the whole JSON "
                                        "(e.g. --speculative-config '{\"num_speculative_tokens\": 3}')")
        if name.startswith("-O") and not name.startswith("--"):
            raise VllmNotModelled(name, "vLLM's -O optimization level is not read by glm-kv")
        canonical = _resolve(name)
        dest, nargs = flags[canonical]
        if dest == "help":
            raise VllmRefuses(name, "asks vLLM for its help text; the server would not start")
        values: list[str] = []
        if eq:
            if nargs == 0:
                raise VllmRefuses(name, f"vLLM's parser refuses it: a switch, it takes no value "
                                        f"(got {shown(inline)}; use the --no-/--disable- spelling to turn it off)")
            values = [inline]
        elif nargs != 0:
            while i < len(words) and (not words[i].startswith("-") or _NEGATIVE_NUMBER.match(words[i])):
                values.append(words[i])
                i += 1
                if nargs in (None, 1, "?"):
                    break
            if nargs in (None, 1, "+") and not values:
                raise VllmRefuses(name, "vLLM's parser refuses it: expected one argument" if nargs != "+"
                                  else "vLLM's parser refuses it: expected at least one argument")
        if dest == "model":
            if serve and model is not None:
                raise VllmRefuses(name, "vLLM's parser refuses it: the model is given twice (positional and "
                                        "--model)")
            if "model" in engine:
                raise VllmNotModelled(name, "is given twice; glm-kv reads one --model")
            engine["model"] = values[0]
            continue
        if dest in MODELLED or dest in READ_ONLY:
            if nargs == 0:
                engine[dest] = _switch(canonical, dest)
            else:
                engine[dest] = _value(name, dest, values[0])
            continue
        if dest in INERT:
            if dest == "port":
                _port(name, values[0])
            inert.append(" ".join([name, *values]))
            continue
        pending = pending or VllmNotModelled(name, "vLLM 0.33.0 takes it but glm-kv does not model its effect "
                                                   "on the KV cache (not proven inert), so no plan is given")
    model = engine.pop("model", None) or model
    if model is None:
        raise VllmNotModelled(WHERE, "names no model (vLLM would serve its default, Qwen/Qwen3-0.6B, which glm-kv "
                                     "does not ship): vllm serve <model> ... (or --model <model>)")
    _check(engine)
    if pending is not None:
        raise pending
    return VllmLaunch(model=model, engine_args=engine, inert=tuple(inert))


def _switch(option: str, dest: str) -> bool:
    """EnableDisableAction (vllm/utils/argparse_utils.py): --enable-x / --no-disable-x -> True for
    enable_x; --disable-x / --no-enable-x -> False (and the other way round for a disable_x dest)."""
    negative = option.startswith("--no-")
    base = option[5:] if negative else option[2:]
    positive = base == dest.replace("_", "-")
    return positive != negative


def _port(flag: str, raw: str) -> None:
    """``--port``: argparse's int (vLLM's only check at parse time)."""
    _int(flag, raw)


def resolve_model(model: str) -> str:
    """The model as ``load_hf_config`` takes it: a shipped name / Hugging Face id, or a config folder;
    a folder whose name ends in GLM-5.3-Flash is GLM-5.3-Flash (the SGLang path's rule, launch.py)."""
    if model.rstrip("/").lower().endswith("glm-5.3-flash"):
        return "glm-5.3-flash"
    return model
