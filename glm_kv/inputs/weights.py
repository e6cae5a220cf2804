"""The weights of a checkpoint: exactly from its safetensors headers, or estimated from its config.

A launch command names the model but not how much memory its weights take. When ``--model-path``
is a local folder, the ``*.safetensors`` headers give every tensor's dtype and shape: their byte
total is exact (``safetensors_bytes``). Otherwise the bytes per parameter follow the checkpoint's
quantization (``quantization_config`` in its config.json): bf16 2 B; fp8 with 128 x 128 block scales
1 B + 4 B per 16,384 weights; NVFP4 (modelopt) 0.5 B + one fp8 scale per 16 weights.
"""
from __future__ import annotations

import json
import re
import struct
from pathlib import Path

from ..errors import ProfileError

HEADER_MAX_BYTES = 100 << 20   # safetensors' own limit on the JSON header
DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2,
               "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1, "F4": 0.5}
# bytes per parameter of the quantized linear weights, scales included
# fp8_tensor: ModelOpt FP8 (one fp32 scale per tensor); mxfp4: compressed-tensors MXFP4 (e2m1 in
# groups of 32, one uint8 / e8m0 scale per group: Kimi-K3's routed experts)
BYTES_PER_PARAM = {"bf16": 2.0, "fp8": 1.0 + 4 / (128 * 128), "nvfp4": 0.5 + 1 / 16, "fp8_tensor": 1.0,
                   "mxfp4": 0.5 + 1 / 32}


def safetensors_bytes(folder: str) -> int | None:
    """Sum of every tensor's bytes over the folder's ``*.safetensors`` headers; None without any."""
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    total = 0.0
    for f in files:
        try:
            with f.open("rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                if n > HEADER_MAX_BYTES:
                    raise ProfileError("model", f"{f.name}: safetensors header of {n:,} bytes is not plausible")
                header = json.loads(fh.read(n))
        except (OSError, struct.error, ValueError, UnicodeDecodeError) as e:
            raise ProfileError("model", f"{f.name}: not a readable safetensors file ({type(e).__name__})") from None
        for name, t in header.items():
            if name == "__metadata__":
                continue
            try:
                count = 1
                for d in t["shape"]:
                    count *= int(d)
                total += count * DTYPE_BYTES[t["dtype"]]
            except (KeyError, TypeError, ValueError):
                raise ProfileError("model", f"{f.name}: tensor {name[:80]!r} has no readable dtype/shape") from None
    return int(total)


def quantization_of(config: dict) -> str:
    """'bf16', 'fp8' or 'nvfp4' from a config.json's ``quantization_config`` (fp8 when it has none:
    the checkpoint glm-kv ships the config of is the FP8 one)."""
    text = config.get("text_config") or {}
    q = config.get("quantization_config") or text.get("quantization_config")
    if q is None:
        return "fp8"
    method = str(q.get("quant_method", "")).lower()
    algo = str(q.get("quant_algo", "") or (q.get("quantization") or {}).get("quant_algo", "")).lower()
    if "fp4" in method or "fp4" in algo:
        return "nvfp4"
    if "fp8" in method or "fp8" in algo:
        return "fp8"
    raise ProfileError("model", f"quantization_config {method or algo!r} is not modelled (bf16, fp8 blocks, "
                                f"NVFP4/modelopt are)")


# ModelOpt MIXED_PRECISION (SGLang 0.5.23 ModelOptMixedPrecisionConfig.get_quant_method): each Linear takes
# the quant_algo its name has in ``quantized_layers``; a Linear not listed there (or excluded) is unquantized
# (bf16). The algos SGLang builds a Linear method for, as glm-kv's width keys:
MIXED_ALGOS = {"FP8": "fp8_tensor", "NVFP4": "nvfp4", "W4A16_NVFP4": "nvfp4",
               "FP8_PB_WO": "fp8", "FP8_BLOCK_SCALES": "fp8"}
# the weight groups the estimate counts, by module name (Qwen3.5/3.6: self_attn / linear_attn / mlp;
# Nemotron-H: every layer's block is ``mixer``: q/k/v/o attention, in/out_proj Mamba-2, experts / up / down MLP)
MIXED_GROUPS: tuple[tuple[str, re.Pattern], ...] = (
    ("lm_head", re.compile(r"(^|\.)lm_head$")),
    ("attention", re.compile(r"\.(self_attn\.|mixer\.[qkvo]_proj$)")),
    ("linear_attention", re.compile(r"\.(linear_attn\.|mixer\.(in_proj|out_proj)$)")),
    ("mlp", re.compile(r"\.(mlp\.|mixer\.(experts\.|shared_experts\.|up_proj$|down_proj$))")),
)


def mixed_precision_section(top: dict, text: dict, quant_file: dict | None) -> dict | None:
    """The ModelOpt MIXED_PRECISION section SGLang reads, or None: config.json's ``quantization_config``
    when it carries one (``_parse_quant_hf_config`` reads it first; ``get_quant_config`` uses it when it
    holds ``quantized_layers``), else ``hf_quant_config.json``'s ``quantization``."""
    q = top.get("quantization_config") or text.get("quantization_config")
    if isinstance(q, dict):
        return q if str(q.get("quant_algo", "")).upper() == "MIXED_PRECISION" else None
    section = (quant_file or {}).get("quantization")
    if isinstance(section, dict) and str(section.get("quant_algo", "")).upper() == "MIXED_PRECISION":
        return section
    return None


def mixed_precision_widths(section: dict) -> dict[str, str]:
    """Weight group -> its width key (``BYTES_PER_PARAM``; "bf16" when no Linear of it is listed), read
    from ``quantized_layers`` as ``ModelOptMixedPrecisionConfig`` resolves each Linear. Refused, naming the
    module: an algo glm-kv does not size, a module in no group, one group under two algos, and a
    MIXED_PRECISION checkpoint without NVFP4 layers (SGLang reads that as ``w4afp8``)."""
    layers = section.get("quantized_layers")
    if not isinstance(layers, dict) or not layers:
        raise ProfileError("model", "MIXED_PRECISION quantization requires a non-empty quantized_layers map. "
                                    "(SGLang 0.5.23 ModelOptMixedPrecisionConfig)")
    found: dict[str, set[str]] = {}
    for name, info in layers.items():
        algo = str((info or {}).get("quant_algo", "") if isinstance(info, dict) else "").upper()
        if str(name).startswith("mtp"):
            continue   # the MTP draft's layers: not the target's weights
        if algo not in MIXED_ALGOS:
            raise ProfileError("model", f"MIXED_PRECISION layer {str(name)[:80]!r}: quant_algo {algo!r} is not "
                                        f"modelled ({', '.join(MIXED_ALGOS)} are)")
        if MIXED_ALGOS[algo] == "fp8" and info.get("group_size", 128) != 128:
            raise ProfileError("model", f"MIXED_PRECISION layer {str(name)[:80]!r}: block-FP8 group_size "
                                        f"{info.get('group_size')!r} is not modelled (128 is)")
        group = next((g for g, rx in MIXED_GROUPS if rx.search(str(name))), None)
        if group is None:
            raise ProfileError("model", f"MIXED_PRECISION layer {str(name)[:80]!r} is in no weight group glm-kv "
                                        f"counts (attention, linear attention, MLP, lm_head)")
        found.setdefault(group, set()).add(MIXED_ALGOS[algo])
    if not any("nvfp4" in widths for widths in found.values()):
        raise ProfileError("model", "MIXED_PRECISION without NVFP4 layers is SGLang's w4afp8, not modelled")
    for group, widths in found.items():
        if len(widths) > 1:
            raise ProfileError("model", f"MIXED_PRECISION: the {group} layers mix {sorted(widths)}; one width per "
                                        f"group is modelled")
    return {g: (found[g].pop() if g in found else "bf16") for g, _rx in MIXED_GROUPS}


def local_config(model: str) -> dict | None:
    """The raw config.json of a local model folder (None for the shipped model or a repo id)."""
    p = Path(model)
    try:
        cfg = p / "config.json" if p.is_dir() else (p if p.is_file() else None)
        return json.loads(cfg.read_text()) if cfg is not None else None
    except (OSError, ValueError):
        return None
