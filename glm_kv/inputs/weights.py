"""The weights of a checkpoint: exactly from its safetensors headers, or estimated from its config.

A launch command names the model but not how much memory its weights take. When ``--model-path``
is a local folder, the ``*.safetensors`` headers give every tensor's dtype and shape: their byte
total is exact (``safetensors_bytes``). Otherwise the bytes per parameter follow the checkpoint's
quantization (``quantization_config`` in its config.json): bf16 2 B; fp8 with 128 x 128 block scales
1 B + 4 B per 16,384 weights; NVFP4 (modelopt) 0.5 B + one fp8 scale per 16 weights.
"""
from __future__ import annotations

import json
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


def local_config(model: str) -> dict | None:
    """The raw config.json of a local model folder (None for the shipped model or a repo id)."""
    p = Path(model)
    try:
        cfg = p / "config.json" if p.is_dir() else (p if p.is_file() else None)
        return json.loads(cfg.read_text()) if cfg is not None else None
    except (OSError, ValueError):
        return None
