"""GPUs a profile can name (``data/gpus.json``, each with its source), or any GPU by memory + SM.

SGLang 0.5.23 resolves its device defaults (KV dtype, DSA backends, graph sizes, the default
``mem_fraction_static``) from the SM and the total memory CUDA reports; a GPU outside the table is
given as ``memory_bytes`` + ``sm`` and takes part in every one of them the same way.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import ProfileError
from ..units import MiB


@dataclass(frozen=True)
class Gpu:
    name: str
    sm: int
    memory_bytes: int
    memory_source: str
    nominal: bool = False        # memory is a datasheet figure, not a CUDA reading
    integrated: bool = False     # unified memory (GB10): SGLang reads free memory from the OS


def _load() -> dict[str, Gpu]:
    data = json.loads((Path(__file__).resolve().parent / "data" / "gpus.json").read_text())["gpus"]
    out = {}
    for name, g in data.items():
        mem = g.get("memory_bytes") or g["memory_mib"] * MiB
        out[name] = Gpu(name, g["sm"], int(mem), g["source"], bool(g.get("nominal")), bool(g.get("integrated")))
    return out


# Total device memory as CUDA reports it, except where ``nominal``.
GPUS: dict[str, Gpu] = _load()
GPU_NAMES: tuple[str, ...] = tuple(GPUS)


def resolve_gpu(profile) -> Gpu:
    """The profile's GPU, with ``memory_bytes`` / ``sm`` overriding the named one's."""
    base = GPUS.get(profile.gpu) if profile.gpu else None
    if base is None and (profile.memory_bytes is None or profile.sm is None):
        raise ProfileError("gpu", f"give a GPU name ({', '.join(GPU_NAMES)}) or both memory_bytes and sm")
    return Gpu(
        name=profile.gpu or f"sm{profile.sm}",
        sm=profile.sm if profile.sm is not None else base.sm,
        memory_bytes=profile.memory_bytes if profile.memory_bytes is not None else base.memory_bytes,
        memory_source="memory_bytes from the profile" if profile.memory_bytes is not None else base.memory_source,
        nominal=profile.memory_bytes is None and base is not None and base.nominal,
        integrated=base is not None and base.integrated,
    )
