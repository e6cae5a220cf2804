"""DeepSeek-V4's HiCache host pools (``--enable-hierarchical-cache``), as SGLang 0.5.23 sizes them, per rank.

SGLang builds them in ``build_deepseek_v4_hicache_stack`` (mem_cache/hybrid_cache/hybrid_pool_assembler.py, the
``_DeepSeekV4Strategy``), not through ``HostKVCache``'s ratio / size rules that ``ledgers.host`` models:

* the page counts (``_deepseek_v4_num_host_pages``): ``int(device pages x hicache_ratio)``, the full pages of the
  allocator's ``size_full`` for the KV-derived pools, the SWA pages of the SWA pool for the SWA-derived ones; no
  padding page. ``--hicache-size`` is refused there ("use --hicache-ratio instead"), and a launch that gives no
  ratio is refused earlier by the auto-size (``hicache_auto_size``: DeepSeekV4TokenToKVPool is not a pool it
  sizes), so only an explicit ``--hicache-ratio`` starts;
* the pools (CUDA: no unified KV, so no rope halves and with the c4 compress states; no ratio-1 / ratio-2
  layers): ``kv`` a ``LogicalHostPool`` (indices only, no bytes) of full pages x page tokens; ``swa`` the SWA
  latent pages (every layer, one padded V4 page a host page); ``deepseek_v4_c4`` / ``_c4_indexer`` / ``_c128``
  the compressed pools' padded pages (one page of page/4 resp. page/128 rows a full page, the fused fp8 indexer
  page of page/4 rows); ``deepseek_v4_c4_state`` / ``_c4_indexer_state`` one ring of compress-state rows a SWA
  page (``DeepSeekV4StateHostPool``). Each ``DeepSeekV4PagedHostPool`` allocates layers x pages x item bytes;
* the host-memory check: each pool against ``host_memory_budget_bytes()`` (free RAM - 10 GiB, over the ranks per
  host), each on its own (the V4 pools book nothing), in SGLang's words; the layouts are layer_first, page_first
  and page_first_direct ("Unsupported layout" otherwise).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ProfileError
from ..inputs.resolve import refuse_hicache_without_radix
from .dsv4 import Dsv4Model, Dsv4Sizes, ring_size
from .host import HICACHE_HOST_MEMORY_RESERVE_BYTES, explicit_ratio, ranks_per_host

DSV4_HOST_LAYOUTS = ("layer_first", "page_first", "page_first_direct")   # DeepSeekV4PagedHostPool / StateHostPool
PAGED, STATE, LOGICAL = "DeepSeekV4PagedHostPool", "DeepSeekV4StateHostPool", "LogicalHostPool"


@dataclass(frozen=True)
class Dsv4HostPool:
    """One HostPoolGroup entry: ``layers`` x ``pages`` x ``item_bytes`` (a page of ``slot_page_size`` tokens)."""

    name: str
    cls: str
    layers: int
    pages: int
    slot_page_size: int
    item_bytes: int

    @property
    def tokens(self) -> int:
        """The pool's ``size``: pages x slot page size."""
        return self.pages * self.slot_page_size

    @property
    def nbytes(self) -> int:
        return self.layers * self.pages * self.item_bytes


@dataclass(frozen=True)
class Dsv4Host:
    hicache_ratio: float
    mem_layout: str
    kv_pages: int          # full host pages (the KV-derived pools)
    swa_pages: int         # SWA host pages (the SWA-derived pools)
    pools: tuple[Dsv4HostPool, ...]

    def pool(self, name: str) -> Dsv4HostPool | None:
        return next((q for q in self.pools if q.name == name), None)


def resolved_layout(p) -> str:
    """``resolve_layout_io_compatibility``: page_first with the direct io backend becomes page_first_direct."""
    if p.hicache_mem_layout == "page_first" and p.hicache_io_backend == "direct":
        return "page_first_direct"
    return p.hicache_mem_layout


def host_pages(sizes: Dsv4Sizes, page_size: int, ratio: float) -> tuple[int, int]:
    """``_deepseek_v4_num_host_pages``: (full, SWA) device pages x the ratio, truncated (GPU: C128 = full)."""
    full_pages = -(-sizes.full_max_total_num_tokens // page_size)
    swa_pages = -(-sizes.swa_max_total_num_tokens // page_size)
    return int(full_pages * ratio), int(swa_pages * ratio)


def dsv4_host_pools(m: Dsv4Model, sizes: Dsv4Sizes, page_size: int, ratio: float) -> tuple[int, int, tuple]:
    """The entries in SGLang's build order, with their rows and page bytes."""
    full, swa = host_pages(sizes, page_size, ratio)
    n4, n128 = m.layers_of(4), m.layers_of(128)
    pools = [Dsv4HostPool("kv", LOGICAL, 0, full, page_size, 0),
             Dsv4HostPool("swa", PAGED, m.num_layers, swa, page_size, m.latent.page_bytes(page_size))]
    if n4:
        ring = ring_size(4, m.draft_tokens)
        pools += [Dsv4HostPool("deepseek_v4_c4", PAGED, n4, full, page_size, m.latent.page_bytes(page_size // 4)),
                  Dsv4HostPool("deepseek_v4_c4_indexer", PAGED, n4, full, page_size,
                               page_size // 4 * m.indexer.row_bytes),
                  Dsv4HostPool("deepseek_v4_c4_state", STATE, n4, swa, page_size, ring * m.state(4).row_bytes),
                  Dsv4HostPool("deepseek_v4_c4_indexer_state", STATE, n4, swa, page_size,
                               ring * m.state(4, indexer=True).row_bytes)]
    if n128:
        pools.append(Dsv4HostPool("deepseek_v4_c128", PAGED, n128, full, page_size,
                                  m.latent.page_bytes(page_size // 128)))
    return full, swa, tuple(pools)


def validate_dsv4_hicache(p) -> None:
    """What SGLang 0.5.23 refuses before it sizes DeepSeek-V4's host pools (its words), and what glm-kv does not
    size (said so)."""
    refuse_hicache_without_radix(p)
    if p.hicache_size > 0:
        raise ProfileError("hicache_size", "SGLang 0.5.23 refuses it: \"DeepSeek V4 HiCache currently does not "
                                           "support --hicache-size; use --hicache-ratio instead.\" "
                                           "(hybrid_pool_assembler._deepseek_v4_num_host_pages)")
    if not explicit_ratio(p):
        raise ProfileError("hicache_ratio", "give it: SGLang 0.5.23 refuses DeepSeek-V4 HiCache without one (\"HiCache "
                                            "auto-sizing does not support DeepSeekV4TokenToKVPool; set --hicache-ratio "
                                            "or --hicache-size explicitly.\", hicache_auto_size)")
    if p.speculative_algorithm is not None:
        raise ProfileError("speculative_algorithm", "HiCache with speculative decoding is not sized for DeepSeek-V4 "
                                                    "yet: SGLang packs the MTP draft's SWA layers into the SWA host "
                                                    "pool (build_deepseek_v4_hicache_stack)")


def _check_memory(p, q: Dsv4HostPool) -> None:
    """The check each V4 host pool makes (``host_memory_budget_bytes()``, nothing booked), in SGLang's words."""
    if p.host_memory_bytes is None or q.cls == LOGICAL:
        return
    avail = (p.host_memory_bytes - HICACHE_HOST_MEMORY_RESERVE_BYTES) // ranks_per_host(p)
    if q.nbytes > avail:
        kind = "paged" if q.cls == PAGED else "state"
        raise ProfileError("hicache_ratio", f"the HiCache {q.name} host pool does not fit: SGLang 0.5.23 refuses to "
                                            f"start (\"Not enough host memory for V4 {kind} pool {q.name}. Requesting "
                                            f"{q.nbytes / 1e9:.2f} GB but only have {avail / 1e9:.2f} GB free.\"; "
                                            f"host_memory_bytes {p.host_memory_bytes:,}, {ranks_per_host(p)} ranks "
                                            f"per host)")


def dsv4_host(p, m: Dsv4Model, sizes: Dsv4Sizes, page_size: int) -> Dsv4Host | None:
    """DeepSeek-V4's host pools on one rank; None without HiCache. The launch has passed
    ``validate_dsv4_hicache`` (dsv4_plan runs it before any pool is sized, as SGLang refuses first)."""
    if not p.enable_hierarchical_cache:
        return None
    layout = resolved_layout(p)
    full, swa, pools = dsv4_host_pools(m, sizes, page_size, p.hicache_ratio)
    for q in pools:   # SGLang's build order: each pool checks the memory, then allocates in the layout
        _check_memory(p, q)
        if q.cls != LOGICAL and layout not in DSV4_HOST_LAYOUTS:
            raise ProfileError("hicache_mem_layout", f"SGLang 0.5.23 refuses it for DeepSeek-V4: \"Unsupported "
                                                     f"layout: {layout}\" ({q.cls}: {', '.join(DSV4_HOST_LAYOUTS)})")
    return Dsv4Host(hicache_ratio=p.hicache_ratio, mem_layout=layout, kv_pages=full, swa_pages=swa, pools=pools)


def dsv4_host_to_dict(h: Dsv4Host, page_size: int) -> dict:
    """The plan's ``host`` section: the shared plan's key names where they mean the same (entries, entry_classes,
    kv_tokens / kv_bytes (the logical KV pool holds no bytes), swa_*, total_bytes, hicache_ratio, mem_layout),
    then each pool's rows and bytes."""
    swa = h.pool("swa")
    return {"enabled": True, "entries": [q.name for q in h.pools], "entry_classes": [q.cls for q in h.pools],
            "kv_page_size": page_size, "mem_layout": h.mem_layout, "hicache_ratio": h.hicache_ratio,
            "hicache_ratio_source": "profile", "kv_tokens": h.pool("kv").tokens, "kv_bytes": 0,
            "swa_layers": swa.layers, "swa_tokens": swa.tokens, "swa_bytes": swa.nbytes,
            "total_bytes": sum(q.nbytes for q in h.pools), "kv_pages": h.kv_pages, "swa_pages": h.swa_pages,
            "pools": {q.name: {"class": q.cls, "layers": q.layers, "pages": q.pages, "slot_page_size": q.slot_page_size,
                               "tokens": q.tokens, "item_bytes": q.item_bytes, "bytes": q.nbytes} for q in h.pools}}


__all__ = ["Dsv4Host", "Dsv4HostPool", "dsv4_host", "dsv4_host_pools", "dsv4_host_to_dict", "host_pages",
           "resolved_layout", "validate_dsv4_hicache"]
