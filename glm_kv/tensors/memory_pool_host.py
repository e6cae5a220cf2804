"""HiCache host pools: a ``HostPoolGroup`` whose entries copy real bytes to and from the device pools.

Names follow SGLang (``sglang/srt/mem_cache/pool_host/``: ``group.py`` HostPoolGroup/PoolEntry,
``mla.py`` MLATokenToKVPoolHost, ``dsa.py`` DSAIndexerPoolHost, ``mamba.py`` MambaPoolHost).

Entries per layout, for GLM-5.3-Flash's hybrid (DSA + KDA) path on CUDA:

* ``article`` (upstream f4de6abee6): KV + MAMBA. ``build_kv_host_pool`` passes no
  ``override_kv_cache_dim``, so the host KV row is kv_lora_rank + qk_rope_head_dim = 512
  elements even when the device row is 528 (scaled FP8): the 16 scale bytes per row are not
  backed up. The indexer has no host entry (page_first has no index_k_buffer).
* ``0.5.23`` (PyPI release): KV + INDEXER + MAMBA. The host KV row equals the device row; the
  INDEXER entry (DSAIndexerPoolHost) is a sidecar of KV: its host pages follow the KV host indices,
  and its own free list (``size`` slots, as SGLang's) is never allocated from.

Never on host, in either layout: the compress tail (``_compress_tail_k`` / ``_compress_tail_score``,
per-request HBM buffers that are not on the tree) and ``req_to_token``.

Host buffers live in CPU memory (pinned when CUDA is present). Layout is ``page_first``:
KV ``(host_size, layers, 1, row)``, indexer ``(pages, layers, 1, page_bytes)``, mamba
``(slots, layers, 1, *state_shape)``. Sizes follow SGLang: host tokens =
(int(device_tokens x hicache_ratio) // page_size + 1) x page_size; host mamba slots =
int(device_mamba_slots x hicache_ratio) + 1; host indices start at 0 (no padding slot on host).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Optional

import torch

from ..units import index_page_count
from .model_pools import ModelHostPools
from .pool_objects import DSATokenToKVPool, MambaPool, PagedTokenToKVPoolAllocator, host_pool_size, torch_dtype

if TYPE_CHECKING:
    from .model_pools import DevicePools, PoolGeometry


class PoolName(str, enum.Enum):
    KV = "kv"
    INDEXER = "indexer"
    MAMBA = "mamba"


class _PagedHostFreeList(PagedTokenToKVPoolAllocator):
    """Host slots 0 .. size - 1 handed out in whole pages (no padding page on the host)."""

    first_page = 0


class MLATokenToKVPoolHost:
    """Host copy of the full-layer KV rows, page_first: (size, layer_num, 1, row_width)."""

    layout = "page_first"

    def __init__(self, device_pool: DSATokenToKVPool, kv_buffer: torch.Tensor):
        self.device_pool = device_pool
        self.page_size = device_pool.page_size
        self.layer_num = device_pool.layer_num
        self.dtype = device_pool.store_dtype
        self.kv_buffer = kv_buffer                # (size, layer_num, 1, row_width): allocated by ModelHostPools
        self.kv_cache_dim = kv_buffer.shape[-1]
        self.size = kv_buffer.shape[0]
        self.page_num = self.size // self.page_size
        self.allocator = _PagedHostFreeList(self.size, self.page_size)

    @property
    def row_bytes(self) -> int:
        return self.kv_cache_dim * self.dtype.itemsize

    def backup_from_device_all_layer(self, host_indices: torch.Tensor, device_indices: torch.Tensor) -> None:
        w = self.kv_cache_dim
        dev = device_indices.to(self.device_pool.device)
        for layer, buf in enumerate(self.device_pool.kv_buffer):
            self.kv_buffer[host_indices, layer, 0, :] = buf[dev, 0, :w].cpu()

    def load_to_device_all_layer(self, host_indices: torch.Tensor, device_indices: torch.Tensor) -> None:
        w = self.kv_cache_dim
        dev = device_indices.to(self.device_pool.device)
        for layer, buf in enumerate(self.device_pool.kv_buffer):
            buf[dev, 0, :w] = self.kv_buffer[host_indices, layer, 0, :].to(buf.device)

    def read_rows(self, host_indices: torch.Tensor) -> list[torch.Tensor]:
        """Per layer, the host rows as uint8 (n, row_bytes)."""
        return [self.kv_buffer[host_indices, layer, 0, :].view(torch.uint8).reshape(len(host_indices), -1)
                for layer in range(self.layer_num)]

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        yield "kv_buffer", self.kv_buffer


class DSAIndexerPoolHost:
    """Host DSA index pages (0.5.23 only), a sidecar of KV: host page = KV host index // page_size.

    page_first: (indexer_page_num, layer_num, 1, page_bytes) uint8 with
    indexer_page_num = (size + page_size + 1) // page_size.

    Free count: SGLang's DSAIndexerPoolHost is a HostKVCache, so ``clear()`` (pool_host/base.py) gives
    it a free list of its own, ``size`` slots (= the KV host pool's size). Nothing ever allocates
    from or frees into it: its decl says ``indices_from_pool=PoolName.KV`` (pool_host/dsa.py
    make_dsa_indexer_pool_decl), and HostPoolGroup.resolve_host_transfers / release_transfers
    (pool_host/group.py) and the controller's rollbacks skip such derived transfers, reusing the KV
    host indices. So its ``available_size()`` stays at ``size`` while the KV pool's moves.
    """

    layout = "page_first"

    def __init__(self, device_pool: DSATokenToKVPool, anchor: MLATokenToKVPoolHost, buffer: torch.Tensor):
        self.device_pool = device_pool
        self.page_size = anchor.page_size
        self.size = anchor.size
        self.live_layers = [i for i, b in enumerate(device_pool.index_key_cache.buffer) if b.shape[0]]
        self.layer_num = len(self.live_layers)
        self.indexer_page_stride_size = device_pool.index_key_cache.row_bytes
        self.indexer_page_num = index_page_count(self.size, self.page_size)
        # its own free list, never allocated from (the KV host indices are reused; see the docstring)
        self.allocator = _PagedHostFreeList(self.size, self.page_size)
        if buffer.shape != (self.indexer_page_num, self.layer_num, 1, self.indexer_page_stride_size):
            raise ValueError(f"host index buffer {tuple(buffer.shape)} does not page the KV host pool of {self.size}")
        self.index_k_with_scale_buffer = buffer

    def _pages(self, indices: torch.Tensor) -> torch.Tensor:
        return indices.view(-1)[:: self.page_size] // self.page_size

    def backup_from_device_all_layer(self, host_indices: torch.Tensor, device_indices: torch.Tensor) -> None:
        hp, dp = self._pages(host_indices), self._pages(device_indices).to(self.device_pool.device)
        for h, layer in enumerate(self.live_layers):
            self.index_k_with_scale_buffer[hp, h, 0] = self.device_pool.index_key_cache.buffer[layer][dp].cpu()

    def load_to_device_all_layer(self, host_indices: torch.Tensor, device_indices: torch.Tensor) -> None:
        hp, dp = self._pages(host_indices), self._pages(device_indices).to(self.device_pool.device)
        for h, layer in enumerate(self.live_layers):
            buf = self.device_pool.index_key_cache.buffer[layer]
            buf[dp] = self.index_k_with_scale_buffer[hp, h, 0].to(buf.device)

    def read_pages(self, host_indices: torch.Tensor) -> list[torch.Tensor]:
        hp = self._pages(host_indices)
        return [self.index_k_with_scale_buffer[hp, h, 0] for h in range(self.layer_num)]

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        yield "index_k_with_scale_buffer", self.index_k_with_scale_buffer


class MambaPoolHost:
    """Host KDA states, page_size 1 (one page = one state slot), page_first per state tensor."""

    layout = "page_first"
    page_size = 1

    def __init__(self, device_pool: MambaPool, conv_buffer: list[torch.Tensor], temporal_buffer: torch.Tensor):
        self.device_pool = device_pool
        self.num_mamba_layers = len(device_pool.mamba_layer_ids)
        self.conv_buffer = list(conv_buffer)      # (slots, layers, 1, *state): allocated by ModelHostPools
        self.temporal_buffer = temporal_buffer
        self.size = temporal_buffer.shape[0]
        self.allocator = _PagedHostFreeList(self.size, 1)

    def _host_tensors(self) -> list[torch.Tensor]:
        return [*self.conv_buffer, self.temporal_buffer]

    def backup_from_device_all_layer(self, host_slot: int, device_slot: int) -> None:
        for h, d in zip(self._host_tensors(), self.device_pool.state_tensors()):
            h[host_slot, :, 0] = d[:, device_slot].cpu()

    def load_to_device_all_layer(self, host_slot: int, device_slot: int) -> None:
        for h, d in zip(self._host_tensors(), self.device_pool.state_tensors()):
            d[:, device_slot] = h[host_slot, :, 0].to(d.device)

    def read_slot(self, host_slot: int) -> list[torch.Tensor]:
        return [h[host_slot, :, 0].contiguous().view(torch.uint8) for h in self._host_tensors()]

    def slot_bytes(self) -> int:
        return sum(h[0].numel() * h.element_size() for h in self._host_tensors())

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        for i, c in enumerate(self.conv_buffer):
            yield f"conv_buffer[{i}]", c
        yield "temporal_buffer", self.temporal_buffer


@dataclass
class PoolEntry:
    name: PoolName
    host_pool: Any
    device_pool: Any
    is_primary_index_anchor: bool = False
    indices_from_pool: Optional[PoolName] = None  # a sidecar reuses another entry's host indices


@dataclass(frozen=True)
class NotOnHost:
    what: str
    why: str


class HostPoolGroup:
    """Allocation facade for an anchor host pool (KV) and its side pools; holds no data itself."""

    def __init__(self, entries: list[PoolEntry], geometry: PoolGeometry):
        if len({e.name for e in entries}) != len(entries):
            raise ValueError("HostPoolGroup pool names must be unique")
        self.entries = list(entries)
        self.entry_map = {e.name: e for e in entries}
        anchors = [e for e in entries if e.is_primary_index_anchor]
        self.anchor_entry = anchors[0] if anchors else entries[0]
        self.geometry = geometry
        self.layout = self.anchor_entry.host_pool.layout
        self.page_size = self.anchor_entry.host_pool.page_size

    def get_pool(self, name: PoolName):
        return self.entry_map[name].host_pool

    @property
    def names(self) -> list[str]:
        return [e.name.value for e in self.entries]

    @property
    def kv(self) -> MLATokenToKVPoolHost:
        return self.get_pool(PoolName.KV)

    @property
    def indexer(self) -> Optional[DSAIndexerPoolHost]:
        e = self.entry_map.get(PoolName.INDEXER)
        return e.host_pool if e else None

    @property
    def mamba(self) -> MambaPoolHost:
        return self.get_pool(PoolName.MAMBA)

    # ---- allocation ----
    def alloc_kv(self, need_size: int) -> Optional[torch.Tensor]:
        """Host token slots for KV; the INDEXER sidecar (when present) uses the same indices."""
        return self.kv.allocator.alloc(need_size)

    def free_kv(self, host_indices: torch.Tensor) -> None:
        self.kv.allocator.free(host_indices)

    def alloc_mamba(self) -> Optional[int]:
        out = self.mamba.allocator.alloc(1)
        return None if out is None else int(out[0])

    def free_mamba(self, host_slot: int) -> None:
        self.mamba.allocator.free(torch.tensor([host_slot]))

    def free_counts(self) -> dict[str, int]:
        out = {"host_kv_slots": self.kv.allocator.available_size(),
               "host_mamba_slots": self.mamba.allocator.available_size()}
        if self.indexer is not None:
            out["host_indexer_slots"] = self.indexer.allocator.available_size()
        return out

    # ---- transfers (device -> host is "backup", host -> device is "load back") ----
    def backup_kv(self, host_indices: torch.Tensor, device_indices: torch.Tensor) -> None:
        for e in self.entries:
            if e.name in (PoolName.KV, PoolName.INDEXER):
                e.host_pool.backup_from_device_all_layer(host_indices, device_indices)

    def load_back_kv(self, host_indices: torch.Tensor, device_indices: torch.Tensor) -> None:
        for e in self.entries:
            if e.name in (PoolName.KV, PoolName.INDEXER):
                e.host_pool.load_to_device_all_layer(host_indices, device_indices)

    def backup_mamba(self, host_slot: int, device_slot: int) -> None:
        self.mamba.backup_from_device_all_layer(host_slot, device_slot)

    def load_back_mamba(self, host_slot: int, device_slot: int) -> None:
        self.mamba.load_to_device_all_layer(host_slot, device_slot)

    # ---- what HiCache does not cover ----
    def not_on_host(self) -> list[NotOnHost]:
        return not_on_host(self.geometry)

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        for e in self.entries:
            for name, b in e.host_pool.named_buffers():
                yield f"{type(e.host_pool).__name__}[{e.name.value}].{name}", b


def not_on_host(g: PoolGeometry) -> list[NotOnHost]:
    """What the HostPoolGroup of this layout never copies to host, and why."""
    out = []
    if not g.rules.host_indexer_pool:
        out.append(NotOnHost(
            "indexer (IndexKeyCache)",
            "the hybrid HostPoolGroup has only KV + MAMBA entries and page_first allocates no "
            "index_k_buffer; loaded-back tokens have no indexer keys until recomputed"))
    if g.host_kv_row_width < g.kv_cache_dim:
        item = torch.tensor([], dtype=torch_dtype(g.store_dtype)).element_size()
        out.append(NotOnHost(
            f"KV row bytes {g.host_kv_row_bytes}..{g.kv_row_bytes} "
            f"({(g.kv_cache_dim - g.host_kv_row_width) * item} B/token/layer)",
            f"the host KV row is {g.host_kv_row_width} wide (no override_kv_cache_dim) while the "
            f"device row is {g.kv_cache_dim}: the fp8 scales past byte {g.host_kv_row_bytes} are not copied"))
    if g.kpool_use_compress:
        out.append(NotOnHost(
            "compress tail (_compress_tail_k / _compress_tail_score)",
            "per-request HBM buffers, not on the RadixTree and not a HostPoolGroup entry"))
    out.append(NotOnHost("req_to_token", "request-to-slot map; rebuilt from the tree, never backed up"))
    return out


def build_host_pool_group(pools: DevicePools, hicache_ratio: float = 2.0,
                          layout: str = "page_first", pin_memory: Optional[bool] = None,
                          fill: str = "zeros") -> HostPoolGroup:
    """The HostPoolGroup SGLang builds for this layout (``_MambaStrategy`` in the article).

    The host tensors are the ones ``model_pools.ModelHostPools`` allocates for every model (issue 31: one host
    builder); the pool objects here give them SGLang's names and the transfers. ``fill='empty'`` allocates the
    same host storage without touching it (measurement).
    """
    if layout != "page_first":
        raise ValueError(f"only the page_first host layout is modelled, got {layout!r}")
    g = pools.geometry
    b = dict(ModelHostPools(pools, hicache_ratio, fill=fill, pin_memory=pin_memory).named_buffers())
    kv = MLATokenToKVPoolHost(pools.full_kv_pool, b["MLATokenToKVPoolHost[kv].kv_buffer"])
    entries = [PoolEntry(PoolName.KV, kv, pools.full_kv_pool, is_primary_index_anchor=True)]
    index = b.get("DSAIndexerPoolHost[indexer].index_k_with_scale_buffer")
    if index is not None:   # 0.5.23 only (rules.host_indexer_pool), and only with an indexed layer
        entries.append(PoolEntry(PoolName.INDEXER, DSAIndexerPoolHost(pools.full_kv_pool, kv, index),
                                 pools.full_kv_pool, indices_from_pool=PoolName.KV))
    conv = [b[f"MambaPoolHost[mamba].conv_buffer[{i}]"] for i in range(len(pools.mamba_pool.conv))]
    entries.append(PoolEntry(PoolName.MAMBA, MambaPoolHost(pools.mamba_pool, conv,
                                                           b["MambaPoolHost[mamba].temporal_buffer"]),
                             pools.mamba_pool))
    return HostPoolGroup(entries, g)
