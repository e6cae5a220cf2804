"""A model of torch's CUDA caching allocator (torch 2.13.0, the version the Makefile pins).

Why: ``torch.cuda.memory_allocated()`` does not grow by a tensor's storage bytes. The caching
allocator hands out *blocks*: it rounds every request, takes a block from a free pool or a new
segment (``cudaMalloc``), and splits that block only under a rule, so a 125,165,568 B
IndexKeyCache buffer takes a whole 125,829,120 B segment. A measurement that expects
``memory_allocated()`` to grow by the storage bytes fails on a real GPU. This module predicts
the allocated and reserved bytes from the allocator's rules, so ``measure`` can show the
overhead beside the ledger and check the prediction against the real allocator.

The rules, read from torch's source (``c10/core/AllocatorConfig.h`` as shipped in the 2.13.0
wheel's headers for the constants, ``c10/cuda/CUDACachingAllocator.cpp`` for the functions):

- ``round_size``: below ``kMinBlockSize`` (512) a request takes 512 B, else it is rounded up to
  a multiple of 512 (``roundup_power2_divisions`` changes this; it is not modelled and refused).
- ``get_pool``: a rounded size ``<= kSmallSize`` (1 MiB) goes to the small pool, else the large.
- ``get_allocation_size`` (a new segment): ``<= kSmallSize`` -> ``kSmallBuffer`` (2 MiB);
  ``< kMinLargeAlloc`` (10 MiB) -> ``large_segment_size`` (``kLargeBuffer``, 20 MiB unless
  ``large_segment_size_mb`` says otherwise); else rounded up to ``kRoundLarge`` (2 MiB).
- ``get_free_block``: best fit, the smallest free block of the pool (same stream) with
  ``size >= request``, lowest address on a tie; with ``max_split_size_mb`` a request below it
  never takes a block at or above it, and a request at or above it takes a block only when the
  block is below ``request + max_non_split_rounding``.
- ``should_split``: ``remaining = block.size - request``; small pool or expandable segments:
  split when ``remaining >= kMinBlockSize``; large pool: split when ``request < max_split_size``
  and ``remaining > kSmallSize``. An unsplit block is allocated whole, and
  ``memory_allocated()`` counts the whole block.
- expandable segments (``expandable_segments:True``): one segment per pool that grows by
  mapping pages of 2 MiB (small pool) or ``large_segment_size`` (large pool); a request that no
  free block fits takes the free tail of the segment plus as many new pages as it needs.
- a request of 0 bytes allocates nothing (``malloc`` is not called for an empty storage).

The configuration comes from ``PYTORCH_CUDA_ALLOC_CONF`` (then ``PYTORCH_HIP_ALLOC_CONF``, then
``PYTORCH_ALLOC_CONF``), as ``CUDAAllocatorConfig::instance`` reads it.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional

# c10/core/AllocatorConfig.h (torch 2.13.0 wheel headers)
kMinBlockSize = 512           # "all sizes are rounded to at least 512 bytes"
kSmallSize = 1048576          # "largest 'small' allocation is 1 MiB"
kSmallBuffer = 2097152        # "'small' allocations are packed in 2 MiB blocks"
kMinLargeAlloc = 10485760     # "allocations between 1 and 10 MiB may use kLargeBuffer"
kRoundLarge = 2097152         # "round up large allocations to 2 MiB"
kLargeBuffer = 20971520       # large_segment_size_ default: "20 MB by default"
MiB = 1 << 20
UNLIMITED = (1 << 64) - 1     # std::numeric_limits<size_t>::max(): max_split_size's default

ENV_NAMES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
# keys that do not change where a block lands or how big it is
_INERT_KEYS = {"garbage_collection_threshold", "release_lock_on_cudamalloc", "pinned_use_cuda_host_register",
               "pinned_num_register_threads", "pinned_use_background_threads", "pinned_reserve_segment_size_mb",
               "pinned_max_register_threads", "pinned_free_catch_all", "graph_capture_record_stream_reuse",
               "per_process_memory_fraction"}


class NotModelled(ValueError):
    """An allocator setting this model does not reproduce (the prediction would be a guess)."""


@dataclass(frozen=True)
class AllocatorConfig:
    """The settings of the caching allocator that decide block sizes."""

    expandable_segments: bool = False
    max_split_size: int = UNLIMITED
    max_non_split_rounding: int = kLargeBuffer
    large_segment_size: int = kLargeBuffer
    source: str = "torch defaults"

    @classmethod
    def parse(cls, text: str, source: str = "PYTORCH_CUDA_ALLOC_CONF") -> "AllocatorConfig":
        """Parse ``key:value,key:value`` as the allocator does; refuse what the model cannot reproduce."""
        kw: dict = {}
        for part in filter(None, (p.strip() for p in re.split(r",(?![^\[]*\])", text))):
            key, _, value = part.partition(":")
            key, value = key.strip(), value.strip()
            if key == "expandable_segments":
                kw["expandable_segments"] = value.lower() == "true"
            elif key == "max_split_size_mb":
                if int(value) <= kLargeBuffer // MiB:  # torch refuses it: "must be > 20"
                    raise ValueError(f"{source}: max_split_size_mb too small, must be > {kLargeBuffer // MiB}")
                kw["max_split_size"] = int(value) * MiB
            elif key == "max_non_split_rounding_mb":
                kw["max_non_split_rounding"] = int(value) * MiB
            elif key == "large_segment_size_mb":
                kw["large_segment_size"] = int(value) * MiB
            elif key == "backend" and value == "native":
                pass
            elif key in _INERT_KEYS:
                pass
            else:
                raise NotModelled(f"{source}: {part!r} is not modelled (roundup_power2_divisions, "
                                  f"backend:cudaMallocAsync and unknown keys change block sizes)")
        return cls(source=f"{source}={text}", **kw)

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> "AllocatorConfig":
        """The configuration the process's allocator reads (first of the three variables that is set)."""
        env = os.environ if env is None else env
        for name in ENV_NAMES:
            if env.get(name):
                return cls.parse(env[name], name)
        return cls()


def round_size(size: int) -> int:
    """CUDACachingAllocator.cpp ``round_size`` without power-of-2 divisions."""
    if size < kMinBlockSize:
        return kMinBlockSize
    return kMinBlockSize * ((size + kMinBlockSize - 1) // kMinBlockSize)


def is_small(rounded: int) -> bool:
    """``get_pool``: the small pool takes rounded sizes up to kSmallSize."""
    return rounded <= kSmallSize


def allocation_size(rounded: int, config: AllocatorConfig = AllocatorConfig()) -> int:
    """``get_allocation_size``: the segment a request opens when no free block fits."""
    if rounded <= kSmallSize:
        return kSmallBuffer
    if rounded < kMinLargeAlloc:
        return config.large_segment_size
    return kRoundLarge * ((rounded + kRoundLarge - 1) // kRoundLarge)


def should_split(block_size: int, rounded: int, small: bool, config: AllocatorConfig = AllocatorConfig()) -> bool:
    """``should_split``: whether the rest of a block goes back to the pool or is handed out with it."""
    remaining = block_size - rounded
    if small or config.expandable_segments:
        return remaining >= kMinBlockSize
    return rounded < config.max_split_size and remaining > kSmallSize


@dataclass
class FreeBlock:
    size: int
    address: int
    small: bool
    tail: bool = False  # the free end of an expandable segment (may grow by mapping pages)


@dataclass
class Step:
    """What one request did: the block it was given and the segment bytes it added."""

    requested: int
    rounded: int
    pool: str
    allocated: int          # bytes memory_allocated() grows by
    reserved: int           # bytes memory_reserved() grows by (a new segment or mapped pages)
    reused: bool            # taken from a cached free block

    @property
    def overhead(self) -> int:
        return self.allocated - self.requested


@dataclass
class CachingAllocatorModel:
    """Replays a sequence of allocations (no frees) on one stream and predicts the allocator's deltas."""

    config: AllocatorConfig = field(default_factory=AllocatorConfig)
    free: list[FreeBlock] = field(default_factory=list)
    _next_address: int = 1 << 40
    allocated_added: int = 0      # what memory_allocated() has grown by since the model started
    reserved_added: int = 0       # what memory_reserved() has grown by

    @classmethod
    def from_snapshot(cls, segments: Iterable[dict], config: AllocatorConfig,
                      stream: Optional[int] = None, device: Optional[int] = None) -> "CachingAllocatorModel":
        """Start from the allocator's real state (``torch.cuda.memory_snapshot()``): its free blocks
        on this device and stream (blocks of other streams are never handed to this one)."""
        free = []
        segments = [s for s in segments if device is None or s.get("device") in (None, device)]
        for seg in segments:
            if stream is not None and seg.get("stream") not in (None, stream):
                continue
            small = seg.get("segment_type") == "small"
            addr = int(seg.get("address", 0))
            blocks = seg.get("blocks", [])
            for i, b in enumerate(blocks):
                if b.get("state") == "inactive":
                    free.append(FreeBlock(int(b["size"]), addr, small,
                                          tail=bool(seg.get("is_expandable")) and i == len(blocks) - 1))
                addr += int(b["size"])
        top = max((int(s.get("address", 0)) + int(s.get("total_size", 0)) for s in segments), default=0)
        return cls(config, free, max(top, 1 << 40))

    def _best_fit(self, rounded: int, small: bool) -> Optional[FreeBlock]:
        c = self.config
        fits = [b for b in self.free if b.small == small and b.size >= rounded]
        if not fits:
            return None
        b = min(fits, key=lambda x: (x.size, x.address))
        if rounded < c.max_split_size and b.size >= c.max_split_size:
            return None
        if rounded >= c.max_split_size and b.size >= rounded + c.max_non_split_rounding:
            return None
        return b

    def malloc(self, nbytes: int) -> Step:
        """One request of ``nbytes`` (a storage's bytes)."""
        if nbytes == 0:
            return Step(0, 0, "-", 0, 0, False)
        c = self.config
        rounded = round_size(nbytes)
        small = is_small(rounded)
        pool = "small" if small else "large"
        block = self._best_fit(rounded, small)
        reserved, reused = 0, block is not None
        if block is None and c.expandable_segments:
            page = kSmallBuffer if small else c.large_segment_size
            tail = next((b for b in self.free if b.small == small and b.tail), None)
            have = tail.size if tail else 0
            reserved = -(-(rounded - have) // page) * page if rounded > have else 0
            if tail is None:
                tail = FreeBlock(0, self._next_address, small, tail=True)
                self._next_address += 1 << 40
                self.free.append(tail)
            tail.size += reserved
            block = tail
        elif block is None:
            reserved = allocation_size(rounded, c)
            block = FreeBlock(reserved, self._next_address, small)
            self._next_address += reserved
            self.free.append(block)
        if should_split(block.size, rounded, small, c):
            allocated = rounded
            block.size -= rounded
            block.address += rounded
            if block.size == 0 and not block.tail:
                self.free.remove(block)
        else:
            allocated = block.size
            if block.tail:
                block.size = 0
            else:
                self.free.remove(block)
        self.allocated_added += allocated
        self.reserved_added += reserved
        return Step(nbytes, rounded, pool, allocated, reserved, reused)

    def replay(self, sizes: Iterable[int]) -> list[Step]:
        return [self.malloc(s) for s in sizes]


def predict(sizes: Iterable[int], config: Optional[AllocatorConfig] = None) -> list[Step]:
    """Steps of a fresh allocator (empty cache) given ``sizes`` in allocation order."""
    return CachingAllocatorModel(config or AllocatorConfig()).replay(sizes)


def live_model(device) -> CachingAllocatorModel:
    """A model started from the device's allocator as it is now (its cached free blocks)."""
    import torch

    dev = torch.device(device)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    stream = torch.cuda.current_stream(index).cuda_stream
    return CachingAllocatorModel.from_snapshot(torch.cuda.memory_snapshot(), AllocatorConfig.from_env(),
                                               stream, index)
