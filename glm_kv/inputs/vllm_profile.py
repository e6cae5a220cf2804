"""A vLLM deployment as a YAML file (``glm-kv plan --vllm-profile FILE``): ``model`` and the fields of
``ledgers.vllm.VllmArgs`` (``gpu``, ``tp``, ``kv_cache_memory_bytes``, ...), in those names.

Kept apart from ``profile.py`` (SGLang's profile, whose fields are SGLang's server arguments): the file
becomes the same ``VllmLaunch`` a pasted ``vllm serve`` command gives, so both are checked by one set of
rules (``vllm_launch._check``: vLLM's config refusals, what glm-kv does not size) and planned alike.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ..errors import ProfileError, shown
from .profile import load_yaml_text
from .vllm_launch import MAMBA_DTYPES, MODELLED, VllmLaunch, _check, human_readable_int

FILE_MAX_BYTES = 1 << 20
FIELD_TO_DEST = {field: dest for dest, field in MODELLED.items()}
INT_FIELDS = ("tp", "block_size", "max_num_seqs", "num_gpu_blocks_override", "num_speculative_tokens",
              "decode_context_parallel_size", "cp_kv_cache_interleave_size", "dcp_kv_cache_interleave_size")
SIZE_FIELDS = ("kv_cache_memory_bytes", "max_model_len")   # an integer, or vLLM's suffixed text ("60G", "128k")
BOOL_FIELDS = ("enable_prefix_caching", "disable_hybrid_kv_cache_manager")
STR_FIELDS = ("kv_cache_dtype", "mamba_cache_dtype", "mamba_ssm_cache_dtype")
KEYS = ("model", "gpu", *INT_FIELDS, *SIZE_FIELDS, *BOOL_FIELDS, *STR_FIELDS)


def load_vllm_profile(source: str) -> tuple[VllmLaunch, Optional[str]]:
    """The file's launch and its ``gpu`` (None: not given). Every bad key or value: a ProfileError naming it."""
    path = Path(source)
    try:
        if path.stat().st_size > FILE_MAX_BYTES:
            raise ProfileError("--vllm-profile", f"{shown(source)} is larger than {FILE_MAX_BYTES:,} bytes")
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise ProfileError("--vllm-profile", f"cannot read {shown(source)} ({type(e).__name__})") from None
    data = load_yaml_text(text, shown(source), "--vllm-profile")
    if not isinstance(data, dict):
        raise ProfileError("--vllm-profile", f"{shown(source)} must be a mapping of fields ({', '.join(KEYS)})")
    unknown = [k for k in data if k not in KEYS]
    if unknown:
        raise ProfileError(shown(unknown[0], 40), f"is not a vLLM profile field (fields: {', '.join(KEYS)})")
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ProfileError("model", f"must name the model (a shipped name, Hugging Face id or config folder), "
                                    f"got {shown(model)}")
    gpu = data.get("gpu")
    if gpu is not None and not isinstance(gpu, str):
        raise ProfileError("gpu", f"must be a GPU name such as H200, got {shown(gpu)}")
    engine: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("model", "gpu") or value is None:
            continue
        engine[FIELD_TO_DEST[key]] = _value(key, value)
    if "speculative_config" in engine:
        # the field is the MTP drafter's token count (the only speculative method glm-kv sizes)
        engine["speculative_config"] = {"method": "mtp", "num_speculative_tokens": engine["speculative_config"]}
    _check(engine)
    return VllmLaunch(model=model, engine_args=engine), gpu


def _value(key: str, value: Any) -> Any:
    if key in BOOL_FIELDS:
        if not isinstance(value, bool):
            raise ProfileError(key, f"must be true or false, got {shown(value)}")
        return value
    if key in STR_FIELDS:
        if not isinstance(value, str):
            raise ProfileError(key, f"must be a dtype name, got {shown(value)}")
        if key != "kv_cache_dtype" and value not in MAMBA_DTYPES:
            raise ProfileError(key, f"must be one of {', '.join(MAMBA_DTYPES)} (vLLM's choices), got {shown(value)}")
        return value
    if key in SIZE_FIELDS and isinstance(value, str):
        return human_readable_int(key, value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProfileError(key, f"must be a whole number, got {shown(value)}")
    if value < (0 if key == "num_speculative_tokens" else 1):
        raise ProfileError(key, f"must be at least {0 if key == 'num_speculative_tokens' else 1}, got {value}")
    return value
