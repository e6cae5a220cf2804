"""DeepSeek-V4's HiCache host pools (glm_kv/ledgers/dsv4_host.py) against SGLang 0.5.23's own classes, on the CPU.

SGLang gets the vendored config and the launch (with --enable-hierarchical-cache and its flags) and never a
glm-kv number: ``test_dsv4_plan.sglang_plan`` resolves the launch on a faked CUDA GPU and sizes the device pools
with SGLang's ``KVCacheConfigurator``; then, in that resolved context, SGLang's ``DeepSeekV4TokenToKVPool`` is
built at SGLang's sizes on the meta device, and SGLang's ``build_deepseek_v4_hicache_stack`` (what its
``_DeepSeekV4Strategy`` calls) builds the host pool group over it, with the allocator's ``size_full`` SGLang's
full token count. No host memory is allocated: the pools' ``ALLOC_MEMORY_FUNCS`` entry for the meta device
gives meta tensors, and the host RAM SGLang's ``host_memory_budget_bytes`` reads is the launch's
``host_memory_bytes`` (its ``available_host_memory_bytes``), split over the launch's ranks per host (its
``ranks_per_host``). The cache controller (transfer streams) is not built.

Every entry (name, class, layers, pages, slot page size, tokens, item bytes, bytes) must equal the plan's
``host.pools`` both ways, on random launches (the run's seed); the refusals (host memory, layout, no ratio,
--hicache-size) must be SGLang's, in its words. A planted error must be caught.
"""
from __future__ import annotations

import random

import pytest

from tests.pytest_glm_kv import run_seed


def draw(rng: random.Random) -> tuple[str, dict]:
    from test_dsv4_plan import draw as draw_plan

    name, launch = draw_plan(rng)
    for k in ("speculative_algorithm", "speculative_eagle_topk", "speculative_num_steps",
              "speculative_num_draft_tokens", "draft_weights_bytes"):
        launch.pop(k, None)
    tp = launch["tp_size"]
    launch.update(disable_radix_cache=False, enable_hierarchical_cache=True,
                  hicache_ratio=rng.choice([0.5, 1.0, 1.5, 2.0, 3.7]),
                  hicache_mem_layout=rng.choice(["layer_first", "page_first", "page_first_direct"]),
                  hicache_io_backend=rng.choice(["kernel", "direct"]),
                  # the machine's free RAM: mostly enough for every pool, sometimes not
                  host_memory_bytes=rng.choice([2 << 40, 2 << 40, tp * rng.randint(20 << 30, 200 << 30)]))
    return name, launch


def sglang_host(name: str, launch: dict) -> dict:
    """SGLang's host pool group for the launch: {entry: {class, layers, pages, slot_page_size, tokens, item_bytes,
    bytes}}, plus the resolved ratio and layout."""
    from test_dsv4_plan import sglang_plan

    return sglang_plan(name, launch, then=lambda sa, config, mc, out: _build(sa, config, mc, launch))


def _build(sa, config, mc, launch: dict) -> dict:
    from types import SimpleNamespace as NS
    from unittest import mock

    import torch

    import sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler as hpa
    import sglang.srt.mem_cache.memory_pool_host as mph
    import sglang.srt.mem_cache.pool_host.base as base
    from sglang.srt.arg_groups.overrides import resolved_view
    from sglang.srt.mem_cache.deepseek_v4_memory_pool import DeepSeekV4TokenToKVPool
    from sglang.srt.mem_cache.hicache_auto_size import auto_size_hicache
    from sglang.srt.runtime_context import get_memory

    v = resolved_view(sa)
    page = v.page_size
    n = mc.num_hidden_layers
    kv = DeepSeekV4TokenToKVPool(
        max_num_reqs=config.max_running_requests, swa_size=config.swa_max_total_num_tokens,
        c4_size=config.c4_max_total_num_tokens, c128_size=config.c128_max_total_num_tokens,
        c4_state_pool_size=config.c4_state_pool_size, c128_state_pool_size=config.c128_state_pool_size,
        page_size=page, swa_page_size=page, dtype=torch.float8_e4m3fn, c4_state_dtype=torch.float32,
        c128_state_dtype=torch.float32, qk_nope_head_dim=mc.qk_nope_head_dim, qk_rope_head_dim=mc.qk_rope_head_dim,
        indexer_head_dim=mc.index_head_dim, layer_num=n, device="meta", enable_memory_saver=False,
        compression_ratios=mc.compress_ratios, sliding_window=mc.window_size, start_layer=0, end_layer=n,
        full_size=config.full_max_total_num_tokens)
    allocator = NS(size_full=config.full_max_total_num_tokens, swa_attn_allocator=NS(alloc=None, free=None),
                   get_kvcache=lambda: kv)
    params = NS(page_size=page, token_to_kv_pool_allocator=allocator, mtp_draft_device_pools=(), req_to_token_pool=None,
                tp_cache_group=None, attn_cp_cache_group=None, attn_tp_cache_group=None, pp_cache_group=None)

    def meta_alloc(shape, dtype, device, pin_memory, allocator=None, **kw):   # no host RAM is taken
        return torch.empty(shape, dtype=dtype, device="meta")

    tp = launch["tp_size"]
    host_ram = launch["host_memory_bytes"]
    with mock.patch.dict(mph.ALLOC_MEMORY_FUNCS, {"meta": meta_alloc}), \
            mock.patch.object(base, "available_host_memory_bytes", lambda **kw: host_ram), \
            mock.patch.object(base, "ranks_per_host", lambda: tp), \
            mock.patch.object(mph, "make_kernel_ptr_table", lambda *a, **kw: None), \
            mock.patch.object(hpa, "HybridCacheController", lambda *a, **kw: None):
        # the kv_cache_builder's auto-size scope (SGLang refuses DeepSeek-V4 there without an explicit ratio)
        with auto_size_hicache(params, None, enabled=True):
            group, _ = hpa.build_deepseek_v4_hicache_stack(params=params, kvcache=kv, load_cache_event=None,
                                                           storage_backend=None)
    pools = {}
    for name, entry in group.entry_map.items():
        h = entry.host_pool
        logical = type(h).__name__ == "LogicalHostPool"
        item = 0 if logical else getattr(h, "item_bytes", None) or h.state_page_bytes
        pages = h.size // h.page_size if logical else h.num_host_pages
        pools[str(name.value if hasattr(name, "value") else name)] = {
            "class": type(h).__name__, "layers": h.layer_num, "pages": pages, "slot_page_size": h.page_size,
            "tokens": h.size, "item_bytes": item, "bytes": h.layer_num * pages * item}
    mem = get_memory()
    return {"pools": pools, "hicache_ratio": mem.hicache_ratio, "mem_layout": mem.hicache_mem_layout}


def glm_kv_host(name: str, launch: dict) -> dict:
    from test_dsv4_plan import glm_kv_plan

    return glm_kv_plan(name, launch)["host"]


def differences(name: str, launch: dict) -> list[str]:
    sg = sglang_host(name, launch)
    mine = glm_kv_host(name, launch)
    bad = [f"entry {k}: glm-kv {mine['pools'].get(k)} vs SGLang {sg['pools'].get(k)}"
           for k in sorted(set(sg["pools"]) | set(mine["pools"])) if mine["pools"].get(k) != sg["pools"].get(k)]
    if list(mine["pools"]) != list(sg["pools"]):
        bad.append(f"entry order: glm-kv {list(mine['pools'])} vs SGLang {list(sg['pools'])}")
    bad += [f"{k}: glm-kv {mine[k]} vs SGLang {sg[k]}" for k in ("hicache_ratio", "mem_layout") if mine[k] != sg[k]]
    sums = {"total_bytes": sum(p["bytes"] for p in sg["pools"].values()), "kv_tokens": sg["pools"]["kv"]["tokens"],
            "swa_tokens": sg["pools"]["swa"]["tokens"], "swa_bytes": sg["pools"]["swa"]["bytes"],
            "kv_pages": sg["pools"]["kv"]["pages"], "swa_pages": sg["pools"]["swa"]["pages"],
            "entries": list(sg["pools"]), "entry_classes": [p["class"] for p in sg["pools"].values()]}
    bad += [f"{k}: glm-kv {mine[k]} vs SGLang {v}" for k, v in sums.items() if mine[k] != v]
    return bad


def agree(name: str, launch: dict) -> None:
    """Equal host pools, or both refuse: SGLang's error text is in glm-kv's refusal (test_dsv4_plan.agree)."""
    from test_dsv4_plan import agree as agree_or_both_refuse

    agree_or_both_refuse(name, launch, sglang_host, glm_kv_host, differences)


@pytest.mark.parametrize("i", range(8))
def test_host_pools_equal_sglangs_on_random_launches(i):
    agree(*draw(random.Random(run_seed() * 15485863 + i)))


FIXED = ("deepseek-v4-flash", {"gpu": "H200", "tp_size": 8, "available_bytes": 60_000_000_000,
                               "enable_hierarchical_cache": True, "hicache_ratio": 2.0,
                               "hicache_mem_layout": "page_first", "host_memory_bytes": 2 << 40})


@pytest.mark.parametrize("bad, field", [
    ({"hicache_ratio": None}, "hicache_ratio"),                       # the auto-size refuses DeepSeekV4TokenToKVPool
    ({"hicache_size": 100}, "hicache_size"),                          # _deepseek_v4_num_host_pages
    ({"hicache_mem_layout": "page_first_kv_split"}, "hicache_mem_layout"),   # DeepSeekV4PagedHostPool
    ({"host_memory_bytes": 200 << 30}, "hicache_ratio"),              # the SWA pool's host-memory check
])
def test_launches_sglang_refuses_are_refused_in_its_words(bad, field):
    from glm_kv.errors import ProfileError

    name, launch = FIXED
    launch = {**launch, **bad}
    with pytest.raises((ValueError, RuntimeError)) as sg:
        sglang_host(name, launch)
    with pytest.raises(ProfileError) as mine:
        glm_kv_host(name, launch)
    assert mine.value.field == field and str(sg.value) in str(mine.value), (str(sg.value), str(mine.value))


def test_without_hicache_the_plan_has_no_host_section():
    from test_dsv4_plan import glm_kv_plan

    name, launch = FIXED
    assert "host" not in glm_kv_plan(name, {k: v for k, v in launch.items() if not k.startswith(("hicache", "enable_h",
                                                                                                 "host_"))})


@pytest.mark.parametrize("plant", ["no_state_pools", "device_page_for_indexer", "padding_page"])
def test_planted_errors_are_caught(monkeypatch, plant):
    """Each plant puts one of SGLang's rules wrong in glm-kv: the state host pools dropped; the indexer's host page
    taken as a page of full-page rows (the device's page_size instead of page / 4); HostKVCache's padding page added
    to the host pages (the shared host ledger's rule, which the V4 pools do not follow)."""
    import glm_kv.ledgers.dsv4_host as H

    name, launch = FIXED
    assert differences(name, launch) == []
    if plant == "no_state_pools":
        real = H.dsv4_host_pools
        monkeypatch.setattr(H, "dsv4_host_pools", lambda *a: (lambda f, s, pools: (f, s, tuple(
            q for q in pools if q.cls != H.STATE)))(*real(*a)))
    elif plant == "device_page_for_indexer":
        real = H.dsv4_host_pools
        monkeypatch.setattr(H, "dsv4_host_pools", lambda m, sizes, page, ratio: (lambda f, s, pools: (f, s, tuple(
            H.Dsv4HostPool(q.name, q.cls, q.layers, q.pages, q.slot_page_size, page * m.indexer.row_bytes)
            if q.name.endswith("c4_indexer") else q for q in pools)))(*real(m, sizes, page, ratio)))
    elif plant == "padding_page":
        real = H.host_pages
        monkeypatch.setattr(H, "host_pages", lambda *a: tuple(x + 1 for x in real(*a)))
    assert differences(name, launch) != []
