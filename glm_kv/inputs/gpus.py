"""GPUs a profile can name, and SGLang's per-GPU defaults that change the KV ledgers."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ProfileError
from ..units import MiB


@dataclass(frozen=True)
class Gpu:
    name: str
    sm: int
    memory_bytes: int
    memory_source: str


# Total device memory as CUDA reports it (nvidia-smi MiB), except where marked nominal.
GPUS: dict[str, Gpu] = {
    "H100": Gpu("H100", 90, 81_559 * MiB, "H100 SXM 80GB as CUDA reports it (81,559 MiB)"),
    "H200": Gpu("H200", 90, 143_771 * MiB, "H200 141GB as CUDA reports it (143,771 MiB)"),
    "B200": Gpu("B200", 100, 183_359 * MiB, "B200 as CUDA reports it (183,359 MiB)"),
    "B300": Gpu("B300", 103, 275_040 * MiB, "B300 SXM6 as CUDA reports it (275,040 MiB; nominal 288 GB)"),
}


def resolve_gpu(profile) -> Gpu:
    """The profile's GPU, with ``memory_bytes`` / ``sm`` overriding the named one's."""
    base = GPUS.get(profile.gpu) if profile.gpu else None
    if base is None and (profile.memory_bytes is None or profile.sm is None):
        raise ProfileError("gpu", "give a GPU name (H100, H200, B200, B300) or both memory_bytes and sm")
    return Gpu(
        name=profile.gpu or f"sm{profile.sm}",
        sm=profile.sm if profile.sm is not None else base.sm,
        memory_bytes=profile.memory_bytes if profile.memory_bytes is not None else base.memory_bytes,
        memory_source="memory_bytes from the profile" if profile.memory_bytes is not None else base.memory_source,
    )
