"""The allocation guard: refuse before allocating what the budget or the device cannot hold.

A leaf of the tensors layer (torch only when asked about CUDA), so every pool can call it.
"""
from __future__ import annotations

import os
from typing import Iterable, Optional

from ..units import GiB, fmt_bytes

DEFAULT_BUDGET_BYTES = 4 * GiB


class AllocationRefused(RuntimeError):
    """Raised before allocating when the request exceeds the budget or the free memory."""


def free_memory_bytes(device: str) -> int:
    """Free memory of the device: cudaMemGetInfo on CUDA, MemAvailable on CPU."""
    if device.startswith("cuda"):
        import torch
        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


BUDGET_MAX_BYTES = 1 << 50


def parse_budget_bytes(text: str, name: str) -> int:
    """A budget in bytes: a positive whole number (``4294967296`` or ``4e9``), finite, at most 1 PiB."""
    import math
    import re

    from ..errors import ProfileError, shown

    s = text.strip()
    if re.fullmatch(r"\+?[0-9]{1,20}", s):
        value = int(s)
    elif re.fullmatch(r"[-+]?[0-9]{1,20}", s) or (len(s) <= 40 and re.fullmatch(r"[-+]?[0-9.]+([eE][-+]?[0-9]+)?", s)):
        try:
            f = float(s)
        except ValueError:
            raise ProfileError(name, f"must be a whole number of bytes, got {shown(text)}") from None
        if not math.isfinite(f) or f != int(f):
            raise ProfileError(name, f"must be a whole number of bytes, got {shown(text)}")
        value = int(f)
    else:
        raise ProfileError(name, f"must be a whole number of bytes, got {shown(text)}")
    if not 1 <= value <= BUDGET_MAX_BYTES:
        raise ProfileError(name, f"must be between 1 and {BUDGET_MAX_BYTES:,} bytes, got {shown(text)}")
    return value


def default_budget_bytes() -> int:
    """``GLM_KV_BUDGET_BYTES`` when set (validated: a malformed value is refused naming it), else 4 GiB."""
    env = os.environ.get("GLM_KV_BUDGET_BYTES")
    return parse_budget_bytes(env, "GLM_KV_BUDGET_BYTES") if env and env.strip() else DEFAULT_BUDGET_BYTES


def check_budget(asked: int, device: str, budget: Optional[int] = None, what: str = "pools") -> None:
    """Refuse (one line) when ``asked`` bytes exceed the budget or the device's free memory."""
    budget = default_budget_bytes() if budget is None else budget
    free = free_memory_bytes(device)
    if asked > free:
        raise AllocationRefused(f"refusing to allocate {what} on {device}: asked {fmt_bytes(asked, 'GiB')}, "
                                f"free {fmt_bytes(free, 'GiB')}")
    if asked > budget:
        raise AllocationRefused(f"refusing to allocate {what} on {device}: asked {fmt_bytes(asked, 'GiB')}, "
                                f"budget {fmt_bytes(budget, 'GiB')} (free {fmt_bytes(free, 'GiB')})")


def storage_key(t) -> tuple[str, int]:
    return (str(t.device), t.untyped_storage().data_ptr())


def storage_bytes(tensors: Iterable) -> int:
    """Bytes of the distinct storages behind ``tensors`` (views of one storage count once)."""
    seen: dict[tuple[str, int], int] = {}
    for t in tensors:
        seen.setdefault(storage_key(t), t.untyped_storage().nbytes())
    return sum(seen.values())
