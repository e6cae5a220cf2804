"""HiCache host pools: entries per layout, host row widths, real byte copies, and what has no host copy.

The pools come from ``pool_geometry`` (config + resolved arguments); ``plan.host`` is the ledger,
computed independently. Expected numbers name their source: "article #N" is row N of
/work/shared/reference/article-figures.md, "sglang-0.5.23.md item N" the 0.5.23 reference.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from glm_kv.tensors.memory_pool_host import PoolName, build_host_pool_group  # noqa: E402
from glm_kv.ledgers.plan import load_plan  # noqa: E402
from glm_kv.tensors.memory_pool import DevicePools, pool_geometry  # noqa: E402
from tests.pytest_glm_kv import run_seed  # noqa: E402


def _setup(profile: str, model: str | None = None, pages: int = 4, mamba: int = 2, ratio: float = 1.0):
    plan = load_plan(profile, {"model": model} if model else None)
    # a few requests and a short context keep req_to_token small: it has no host copy anyway
    # shapes from the config + resolved arguments only; the plan is the (independent) ledger side
    g = pool_geometry(plan.args, size=pages * plan.args.page_size, mamba_size=mamba,
                           max_running_requests_per_worker=4, context_len=4096)
    pools = DevicePools(g, device="cpu", fill="zeros")
    return plan, pools, build_host_pool_group(pools, hicache_ratio=ratio)


def _fill_random(pools, idx, seed: int):
    gen = torch.Generator().manual_seed(seed)
    g = pools.geometry
    rows = [torch.randint(0, 256, (len(idx), g.kv_row_bytes), dtype=torch.uint8, generator=gen)
            for _ in range(g.num_full_layers)]
    pages = [torch.randint(0, 256, (len(idx) // g.page_size, g.index_page_bytes), dtype=torch.uint8, generator=gen)
             for _ in range(g.num_full_layers)]
    pools.write_token_rows(idx, rows)
    pools.write_index_pages(idx, pages)
    return rows, pages


@pytest.mark.parametrize("profile,entries,classes", [
    ("article", ["kv", "mamba"], ["MLATokenToKVPoolHost", "MambaPoolHost"]),
    ("h200-0.5.23", ["kv", "indexer", "mamba"], ["MLATokenToKVPoolHost", "DSAIndexerPoolHost", "MambaPoolHost"]),
])
def test_entries_per_layout_match_the_plan(profile, entries, classes, reduced_config):
    plan, pools, host = _setup(profile, reduced_config)
    assert host.names == entries == list(plan.host.entries)
    assert [type(e.host_pool).__name__ for e in host.entries] == classes == list(plan.host.entry_classes)
    assert host.anchor_entry.name is PoolName.KV and host.layout == "page_first"
    if "indexer" in entries:
        assert host.entry_map[PoolName.INDEXER].indices_from_pool is PoolName.KV  # a sidecar of KV


def test_indexer_host_free_list_is_its_own_and_never_allocated_from(reduced_config):
    """SGLang 0.5.23 pool_host/base.py HostKVCache.clear gives DSAIndexerPoolHost a free list of
    ``size`` slots; its decl takes indices from KV (dsa.py make_dsa_indexer_pool_decl) and
    group.py resolve_host_transfers / release_transfers skip such pools, so its free count stays at
    ``size`` while KV's moves (measured there: 8,448 vs 7,680 after one prefill; issue 19)."""
    _, _, host = _setup("h200-0.5.23", reduced_config)
    idx, kv = host.indexer, host.kv
    assert idx.size == kv.size and idx.allocator is not kv.allocator
    got = host.alloc_kv(kv.page_size)
    assert kv.allocator.available_size() == kv.size - kv.page_size
    assert idx.allocator.available_size() == idx.size
    assert host.free_counts()["host_indexer_slots"] == idx.size
    host.free_kv(got)
    assert idx.allocator.available_size() == idx.size == kv.allocator.available_size()


@pytest.mark.parametrize("profile,row_bytes", [
    ("article", 512),             # article #28: row 512 even when the device row is 528
    ("article-bf16", 1024),       # article #2: 512 x 2 B (512 elements, as article #28)
    ("article-trtllm-raw", 512),  # article #5 / #28
    ("worked-example-0.5.23", 528),  # sglang-0.5.23.md item 5: host row = device row (fp8 scaled)
    ("h200-0.5.23", 1024),        # sglang-0.5.23.md item 5: bf16
])
def test_host_kv_row_per_layout(profile, row_bytes, reduced_config):
    plan, pools, host = _setup(profile, reduced_config)
    kv = host.kv
    assert kv.row_bytes == row_bytes == plan.host.kv_row_bytes
    ps = pools.geometry.page_size
    # page_first (size, layers, 1, row); size = (int(device tokens x ratio) // page + 1) x page
    # (SGLang pool_host/base.py HostKVCache.__init__)
    assert kv.kv_buffer.shape == (kv.size, pools.geometry.num_full_layers, 1, kv.kv_cache_dim)
    assert kv.size == (pools.geometry.size // ps + 1) * ps and kv.page_size == ps


def test_host_buffers_are_cpu_and_pinned_only_with_cuda(reduced_config):
    _, _, host = _setup("article", reduced_config)
    for _, b in host.named_buffers():
        assert b.device.type == "cpu"
        assert b.is_pinned() == torch.cuda.is_available()


def test_mamba_host_is_one_slot_per_page(reduced_config):
    _, pools, host = _setup("article", reduced_config, mamba=3, ratio=2.0)
    m = host.mamba
    # article #28: MambaPoolHost page_size 1; size int(slots x ratio) // 1 + 1 (SGLang HostKVCache)
    assert m.page_size == 1 and m.size == int(3 * 2.0) + 1
    assert m.temporal_buffer.shape == (m.size, pools.geometry.num_linear_layers, 1,
                                       *pools.geometry.temporal_state_shape)
    assert m.slot_bytes() == pools.mamba_pool.slot_bytes()


@pytest.mark.parametrize("profile", ["article-bf16", "h200-0.5.23", "worked-example-0.5.23"])
def test_backup_and_loadback_copy_every_byte_when_the_host_row_is_the_device_row(profile, reduced_config):
    _, pools, host = _setup(profile, reduced_config)
    ps = pools.geometry.page_size
    dev = pools.token_to_kv_pool_allocator.alloc(2 * ps)
    rows, pages = _fill_random(pools, dev, seed=run_seed())
    hidx = host.alloc_kv(2 * ps)
    host.backup_kv(hidx, dev)
    assert all(torch.equal(a, b) for a, b in zip(host.kv.read_rows(hidx), rows))
    # load back into freshly allocated device slots
    fresh = pools.token_to_kv_pool_allocator.alloc(2 * ps)
    assert not set(fresh.tolist()) & set(dev.tolist())
    host.load_back_kv(hidx, fresh)
    assert all(torch.equal(a, b) for a, b in zip(pools.read_token_rows(fresh), rows))
    restored_index = all(torch.equal(a, b) for a, b in zip(pools.read_index_pages(fresh), pages))
    assert restored_index == (host.indexer is not None)


def test_article_fp8_host_row_drops_the_scale_bytes(reduced_config):
    """Article layout, scaled FP8: the host holds bytes 0..511 of each 528-byte row, no indexer."""
    _, pools, host = _setup("article", reduced_config)
    dev = pools.token_to_kv_pool_allocator.alloc(64)
    rows, pages = _fill_random(pools, dev, seed=run_seed() + 1)
    hidx = host.alloc_kv(64)
    host.backup_kv(hidx, dev)
    fresh = pools.token_to_kv_pool_allocator.alloc(64)
    host.load_back_kv(hidx, fresh)
    back = pools.read_token_rows(fresh)
    assert all(torch.equal(a[:, :512], b[:, :512]) for a, b in zip(back, rows))
    assert all(int(a[:, 512:].abs().sum()) == 0 for a in back)  # the fresh slots' scales: not restored
    assert all(int(p.abs().sum()) == 0 for p in pools.read_index_pages(fresh))  # no indexer on host
    missing = {x.what.split(" ")[0] for x in host.not_on_host()}
    assert {"indexer", "KV", "compress", "req_to_token"} <= missing


def test_mamba_state_round_trip(reduced_config):
    _, pools, host = _setup("article", reduced_config)
    slot = int(pools.mamba_allocator.alloc(1)[0])
    parts = [torch.randint(0, 256, p.shape, dtype=torch.uint8) for p in pools.read_mamba_slot(slot)]
    pools.write_mamba_slot(slot, parts)
    hs = host.alloc_mamba()
    host.backup_mamba(hs, slot)
    assert all(torch.equal(a, b) for a, b in zip(host.mamba.read_slot(hs), parts))
    fresh = int(pools.mamba_allocator.alloc(1)[0])
    host.load_back_mamba(hs, fresh)
    assert all(torch.equal(a, b) for a, b in zip(pools.read_mamba_slot(fresh), parts))


@pytest.mark.parametrize("profile,has_indexer", [("article", False), ("h200-0.5.23", True)])
def test_what_has_no_host_copy_is_stated(profile, has_indexer, reduced_config):
    _, pools, host = _setup(profile, reduced_config)
    whats = " | ".join(x.what for x in host.not_on_host())
    assert "compress tail" in whats and "req_to_token" in whats
    assert ("indexer" in whats) == (not has_indexer)
    host_storages = {b.untyped_storage().data_ptr() for _, b in host.named_buffers()}
    for name in ("_compress_tail_k", "_compress_tail_score"):
        for t in getattr(pools.full_kv_pool, name):
            assert t.untyped_storage().data_ptr() not in host_storages
    names = " ".join(n for n, _ in host.named_buffers())
    assert "tail" not in names and "req_to_token" not in names


def test_host_allocation_is_page_granular(reduced_config):
    _, pools, host = _setup("article", reduced_config)
    ps = pools.geometry.page_size
    start = host.kv.allocator.available_size()
    got = host.alloc_kv(2 * ps)
    assert got is not None and int(got[0]) % ps == 0 and len(got) == 2 * ps
    with pytest.raises(ValueError):
        host.alloc_kv(ps + 1)
    host.free_kv(got)
    assert host.kv.allocator.available_size() == start
