"""Read a pasted ``python -m sglang.launch_server ...`` command into profile fields."""
from __future__ import annotations

import shlex
from typing import Any

from ..errors import ProfileError

# flag -> (profile field, kind). kind: "int", "float", "str", "flag" (store_true), "gb".
FLAGS: dict[str, tuple[str, str]] = {
    "--tp": ("tp_size", "int"), "--tp-size": ("tp_size", "int"),
    "--tensor-parallel-size": ("tp_size", "int"),
    "--dp": ("dp_size", "int"), "--dp-size": ("dp_size", "int"),
    "--data-parallel-size": ("dp_size", "int"),
    "--enable-dp-attention": ("enable_dp_attention", "flag"),
    "--attn-cp-size": ("attn_cp_size", "int"),
    "--kv-cache-dtype": ("kv_cache_dtype", "str"),
    "--dsa-prefill-backend": ("dsa_prefill_backend", "str"),
    "--dsa-decode-backend": ("dsa_decode_backend", "str"),
    "--nsa-prefill-backend": ("dsa_prefill_backend", "str"),
    "--nsa-decode-backend": ("dsa_decode_backend", "str"),
    "--mamba-ssm-dtype": ("mamba_ssm_dtype", "str"),
    "--linear-attn-backend": ("linear_attn_backend", "str"),
    "--mamba-radix-cache-strategy": ("mamba_scheduler_strategy", "str"),
    "--mamba-scheduler-strategy": ("mamba_scheduler_strategy", "str"),
    "--disable-overlap-schedule": ("disable_overlap_schedule", "flag"),
    "--disable-radix-cache": ("disable_radix_cache", "flag"),
    "--max-running-requests": ("max_running_requests", "int"),
    "--max-total-tokens": ("max_total_tokens", "int"),
    "--max-mamba-cache-size": ("max_mamba_cache_size", "int"),
    "--mamba-full-memory-ratio": ("mamba_full_memory_ratio", "float"),
    "--context-length": ("context_length", "int"),
    "--page-size": ("page_size", "int"),
    "--speculative-algorithm": ("speculative_algorithm", "str"),
    "--speculative-num-draft-tokens": ("speculative_num_draft_tokens", "int"),
    "--speculative-num-steps": ("speculative_num_steps", "int"),
    "--speculative-eagle-topk": ("speculative_eagle_topk", "int"),
    "--mem-fraction-static": ("mem_fraction_static", "float"),
    "--language-model-only": ("language_model_only", "flag"),
    "--enable-hierarchical-cache": ("enable_hierarchical_cache", "flag"),
    "--hicache-ratio": ("hicache_ratio", "float"),
    "--hicache-size": ("hicache_size", "int"),
    "--hicache-mem-layout": ("hicache_mem_layout", "str"),
    "--hicache-io-backend": ("hicache_io_backend", "str"),
}
ENV_VARS = {
    "SGLANG_MAMBA_SSM_DTYPE": ("mamba_ssm_dtype", "str"),
    "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK": ("mamba_skip_decode_lock", "bool"),
}
ENTRY_POINTS = ("sglang.launch_server", "sglang serve", "sglang.launch_server.py")


def _convert(flag: str, kind: str, raw: str) -> Any:
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "bool":
            return raw.strip().lower() in ("1", "true", "yes", "on")
    except ValueError:
        raise ProfileError(flag, f"expects {'an integer' if kind == 'int' else 'a number'}, got {raw!r}") from None
    return raw


def parse_launch_command(command: str) -> tuple[dict, list[str]]:
    """Profile fields from a launch command, and the flags ignored as not affecting memory."""
    try:
        words = shlex.split(command.replace("\\\n", " "))
    except ValueError as e:
        raise ProfileError("--sglang-args", f"cannot split the command ({e})") from None
    joined = " ".join(words)
    if not any(e in joined for e in ENTRY_POINTS):
        raise ProfileError("--sglang-args", "expects a launch command such as "
                                            "'python -m sglang.launch_server --model-path ... --tp 8'")
    fields: dict[str, Any] = {}
    ignored: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        i += 1
        if "=" in w and not w.startswith("-") and w.split("=", 1)[0] in ENV_VARS:
            name, raw = w.split("=", 1)
            field, kind = ENV_VARS[name]
            fields[field] = _convert(name, kind, raw)
            continue
        if not w.startswith("--"):
            continue
        flag, eq, inline = w.partition("=")
        takes_value = flag not in FLAGS or FLAGS[flag][1] != "flag"
        value = inline if eq else None
        if takes_value and value is None and i < len(words) and not words[i].startswith("--"):
            value = words[i]
            i += 1
        if flag in ("--model-path", "--model"):
            if value is None:
                raise ProfileError(flag, "needs a value")
            fields["model"] = value
            continue
        if flag not in FLAGS:
            ignored.append(flag if value is None else f"{flag} {value}")
            continue
        field, kind = FLAGS[flag]
        if kind == "flag":
            fields[field] = True
            continue
        if value is None:
            raise ProfileError(flag, "needs a value")
        fields[field] = _convert(flag, kind, value)
    if "model" in fields and fields["model"].rstrip("/").lower().endswith("glm-5.3-flash"):
        fields["model"] = "glm-5.3-flash"
    return fields, ignored
