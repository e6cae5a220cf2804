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
    """``44,097,025,280 B (≈41.07 GiB)``, ``738,099,200 B (≈703.906 MiB)``, ``225,280 B``.

    One byte format for every output, the CLI's and the book's (issue 29): the exact count first,
    then binary units only, because SGLang sizes its pools in GiB and prints its device lines in
    GB-that-are-GiB (the glossary says so once). GiB from one GiB up, MiB below it, bytes alone
    under one MiB. ``unit``: "GiB" or "MiB" forces that unit (a figure compared with a log line).
    """
    if n is None:
        return "-"
    n = int(n)
    if unit is None:
        unit = "GiB" if abs(n) >= GiB else "MiB" if abs(n) >= MiB else None
    if unit not in ("GiB", "MiB"):
        return f"{n:,} B"
    size = GiB if unit == "GiB" else MiB
    return f"{n:,} B (≈{n / size:.{2 if unit == 'GiB' else 3}f} {unit})"


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
