"""HiCache's host (DRAM) side: which HostPoolGroup entries exist, their rows and sizes."""
from __future__ import annotations

from dataclasses import dataclass

from ..inputs.model import ModelConfig
from ..units import GB, index_page_count
from .token import TokenLedger


@dataclass(frozen=True)
class HostLedger:
    enabled: bool
    entries: tuple[str, ...]
    entry_classes: tuple[str, ...]
    kv_row_bytes: int            # one full layer, one token
    kv_bytes_per_token: int
    kv_page_size: int
    indexer_bytes_per_token: int
    mamba_slot_bytes: int
    mamba_page_size: int
    mem_layout: str
    kv_host_tokens: int | None = None
    kv_host_bytes: int | None = None
    indexer_host_bytes: int | None = None
    mamba_host_slots: int | None = None
    mamba_host_bytes: int | None = None
    total_host_bytes: int | None = None


HOST_POOL_CLASSES = {"kv": "MLATokenToKVPoolHost", "indexer": "DSAIndexerPoolHost",
                     "mamba": "MambaPoolHost"}


def host_entries(layout: str) -> tuple[str, ...]:
    """article: _MambaStrategy builds KV + MAMBA; 0.5.23 adds the INDEXER sidecar of KV."""
    return ("kv", "mamba") if layout == "article" else ("kv", "indexer", "mamba")


def host_size(device_capacity: int, page_size: int, ratio: float, size_gb: int, per_unit: int) -> int:
    """``HostKVCache`` sizing: hicache_size (GB) wins over hicache_ratio; one extra page."""
    if size_gb > 0:
        size = int(size_gb * GB // per_unit)
    else:
        size = int(device_capacity * ratio)
    return (size // page_size + 1) * page_size


def host_ledger(model: ModelConfig, p, token: TokenLedger, slot_bytes: int,
                device_tokens: int | None, device_slots: int | None) -> HostLedger:
    entries = host_entries(p.sglang_layout)
    if p.sglang_layout == "article":
        # build_kv_host_pool passes no override_kv_cache_dim: 512 elements even for a 528 device row.
        row = (model.kv_lora_rank + model.qk_rope_head_dim) * token.kv_item_bytes
        indexer = 0
    else:
        row = token.kv_row_bytes
        indexer = token.indexer_bytes_per_token
    kv_per_token = row * token.num_full_layers
    ledger = dict(enabled=p.enable_hierarchical_cache, entries=entries,
                  entry_classes=tuple(HOST_POOL_CLASSES[e] for e in entries), kv_row_bytes=row,
                  kv_bytes_per_token=kv_per_token, kv_page_size=token.page_size,
                  indexer_bytes_per_token=indexer, mamba_slot_bytes=slot_bytes, mamba_page_size=1,
                  mem_layout=p.hicache_mem_layout)
    if p.enable_hierarchical_cache and device_tokens is not None:
        tokens = host_size(device_tokens, token.page_size, p.hicache_ratio, p.hicache_size, kv_per_token)
        slots = host_size(device_slots, 1, p.hicache_ratio, p.hicache_size, slot_bytes)
        kv_b, mamba_b = tokens * kv_per_token, slots * slot_bytes
        # DSAIndexerPoolHost allocates (size + page + 1) // page pages of page_size // kpool rows.
        idx_pages = index_page_count(tokens, token.page_size)
        idx_b = idx_pages * token.indexer_page_bytes * len(model.dsa_indexed_layers) if indexer else 0
        ledger.update(kv_host_tokens=tokens, kv_host_bytes=kv_b, indexer_host_bytes=idx_b,
                      mamba_host_slots=slots, mamba_host_bytes=mamba_b,
                      total_host_bytes=kv_b + idx_b + mamba_b)
    return HostLedger(**ledger)
