"""Units, dtype sizes and the small counting rules every layer shares (a leaf: imports nothing).

One place for each: a second copy of any of these is how two layers drift apart.
"""
from __future__ import annotations

from typing import Any

MiB = 1 << 20
GiB = 1 << 30
GB = 10 ** 9           # SGLang's host-side "GB" (hicache_size, host pool log lines)

# Bytes per element of the dtypes the pools use (SGLang stores fp8 KV as uint8).
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8_e4m3": 1, "uint8": 1,
               "int32": 4, "int64": 8}
KV_STORE_DTYPE = {"bfloat16": "bfloat16", "fp8_e4m3": "uint8"}

# One 4-byte fp32 scale per 128 fp8 elements: the MLA fp8 row's scale group and the DSA indexer's
# quant block (DSATokenToKVPool.quant_block_size) are the same 128.
FP8_SCALE_GROUP = 128
FP8_SCALE_BYTES = 4


def fmt_bytes(n: int | float | None, unit: str | None = None) -> str:
    """``738,099,200 B (≈738.1 MB)``: exact bytes first, then a rounded unit.

    ``unit``: None picks a decimal unit (GB/MB/KB, the article's); "GiB" or "MiB" force a binary
    one (SGLang's device log lines).
    """
    if n is None:
        return "-"
    n = int(n)
    if unit in ("GiB", "MiB"):
        size = GiB if unit == "GiB" else MiB
        return f"{n:,} B (≈{n / size:.{2 if unit == 'GiB' else 3}f} {unit})"
    for size, name in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if abs(n) >= size:
            return f"{n:,} B (≈{n / size:.{3 if name == 'KB' else 1}f} {name})"
    return f"{n:,} B"


def dotted(d: Any, path: str, default: Any = None) -> Any:
    """``dotted(plan_dict, "token.kv_bytes_per_token")``; ``default`` when a part is missing."""
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return default
        d = d[part]
    return d


def index_page_count(size_tokens: int, page_size: int) -> int:
    """IndexKeyCache pages SGLang allocates for ``size`` tokens: (size + page_size + 1) // page_size."""
    return (size_tokens + page_size + 1) // page_size


def requests_per_worker(max_running_requests_global: int, attn_dp_size: int) -> int:
    """``resolve_max_num_reqs``: a global --max-running-requests split over DP-attention workers."""
    q = max_running_requests_global // attn_dp_size
    if isinstance(q, int):
        return max(1, q)
    import numpy as np  # the sweep passes arrays

    return np.maximum(1, q)
