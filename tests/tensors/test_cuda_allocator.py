"""The caching-allocator model against torch 2.13's rules (CPU), and against the real allocator (CUDA).

Every expected value below is worked out by hand from the rule it names (c10/core/AllocatorConfig.h
of the 2.13.0 wheel for the constants, CUDACachingAllocator.cpp's round_size / get_pool /
get_allocation_size / get_free_block / should_split), never by calling the model.
"""
from __future__ import annotations

import pytest
import torch

from glm_kv.tensors import cuda_allocator as CA

MiB = 1 << 20

# (request bytes, allocated, reserved, why) for a fresh allocator, one request each
FRESH = [
    # round_size: below kMinBlockSize a request takes 512; small pool opens a kSmallBuffer segment
    (100, 512, 2 * MiB, "round_size -> 512; get_allocation_size(<=1 MiB) = kSmallBuffer; split: 2 MiB-512 >= 512"),
    (1000, 1024, 2 * MiB, "round_size -> 1024 (512 x 2)"),
    # get_pool: exactly kSmallSize is small; the remaining 1 MiB >= 512 splits
    (MiB, MiB, 2 * MiB, "1 MiB <= kSmallSize: small pool, split"),
    # 1 MiB + 1 rounds to 1,049,088: large pool, < kMinLargeAlloc opens a 20 MiB segment, split (19 MiB > 1 MiB)
    (MiB + 1, 1_049_088, 20 * MiB, "large pool, kLargeBuffer segment, split"),
    # >= kMinLargeAlloc: segment rounded to kRoundLarge; 11 MiB leaves exactly 1 MiB: NOT > kSmallSize, no split
    (11 * MiB, 12 * MiB, 12 * MiB, "remaining == kSmallSize: should_split is false, the block is handed out whole"),
    # the IndexKeyCache buffer: 125,165,568 = 244,464 x 512; segment 60 x 2 MiB = 125,829,120;
    # remaining 663,552 <= 1 MiB: no split, memory_allocated() grows by the whole segment
    (125_165_568, 125_829_120, 125_829_120, "IndexKeyCache h200 buffer: 663,552 B over the storage"),
    # 13 MiB + 1 -> 13,631,488 + 512; segment 14 MiB; remaining 1,048,064 < 1 MiB: no split
    (13 * MiB + 1, 14 * MiB, 14 * MiB, "remaining just under 1 MiB: whole block"),
    # 12 MiB + 1 -> 12,583,424; segment 14 MiB; remaining 2,096,640 > 1 MiB: split
    (12 * MiB + 1, 12_583_424, 14 * MiB, "remaining over 1 MiB: split"),
    (0, 0, 0, "an empty storage calls no malloc"),
]


@pytest.mark.parametrize("size,allocated,reserved,why", FRESH, ids=[str(r[0]) for r in FRESH])
def test_one_request_on_a_fresh_allocator(size, allocated, reserved, why):
    step = CA.CachingAllocatorModel().malloc(size)
    assert (step.allocated, step.reserved) == (allocated, reserved), why


def test_a_naive_512_byte_model_fails_these_rules():
    """The table above tells the rules from 'storage rounded to 512 B' (the old measure.py)."""
    wrong = [r for r in FRESH if r[0] and CA.round_size(r[0]) != r[1]]
    assert len(wrong) >= 3  # 11 MiB, 13 MiB + 1 and the IndexKeyCache buffer


def test_cached_free_blocks_are_reused_best_fit():
    m = CA.CachingAllocatorModel()
    # 3 MiB opens a 20 MiB segment and splits; the 17 MiB rest is cached in the large pool
    assert (m.malloc(3 * MiB).allocated, m.reserved_added) == (3 * MiB, 20 * MiB)
    # 5 MiB fits the cached 17 MiB: no new segment; 12 MiB stays cached
    s = m.malloc(5 * MiB)
    assert (s.allocated, s.reserved, s.reused) == (5 * MiB, 0, True)
    # 12 MiB + 1 (12,583,424 rounded) no longer fits 12 MiB: a new 14 MiB segment
    s = m.malloc(12 * MiB + 1)
    assert (s.allocated, s.reserved, s.reused) == (12_583_424, 14 * MiB, False)
    # 12 MiB exactly fits the cached 12 MiB block; remaining 0: not split, whole block
    s = m.malloc(12 * MiB)
    assert (s.allocated, s.reserved, s.reused) == (12 * MiB, 0, True)
    # two small requests share one 2 MiB segment
    assert [m.malloc(1000).reserved for _ in range(2)] == [2 * MiB, 0]
    assert m.allocated_added == 3 * MiB + 5 * MiB + 12_583_424 + 12 * MiB + 2048
    assert m.reserved_added == 20 * MiB + 14 * MiB + 2 * MiB


def test_expandable_segments_map_pages_and_always_split():
    cfg = CA.AllocatorConfig.parse("expandable_segments:True")
    m = CA.CachingAllocatorModel(cfg)
    # large pool pages are large_segment_size (20 MiB): ceil(125,165,568 / 20 MiB) = 6 pages
    s = m.malloc(125_165_568)
    assert (s.allocated, s.reserved) == (125_165_568, 6 * 20 * MiB)
    # the tail keeps 663,552 B; the next one maps ceil((125,165,568 - 663,552) / 20 MiB) = 6 more pages
    s = m.malloc(125_165_568)
    assert (s.allocated, s.reserved) == (125_165_568, 6 * 20 * MiB)
    # small pool pages are kSmallBuffer
    assert (m.malloc(1000).reserved, m.malloc(1000).reserved) == (2 * MiB, 0)


def test_config_is_read_as_torch_reads_it():
    assert CA.AllocatorConfig.from_env({}) == CA.AllocatorConfig()
    env = {"PYTORCH_ALLOC_CONF": "expandable_segments:False", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert CA.AllocatorConfig.from_env(env).expandable_segments  # the CUDA name is read first
    cfg = CA.AllocatorConfig.parse("max_split_size_mb:64,large_segment_size_mb:40,garbage_collection_threshold:0.6")
    assert (cfg.max_split_size, cfg.large_segment_size) == (64 * MiB, 40 * MiB)
    # the 3 MiB request opens a large_segment_size (40 MiB) segment
    m = CA.CachingAllocatorModel(cfg)
    assert m.malloc(3 * MiB).reserved == 40 * MiB
    with pytest.raises(ValueError, match="must be > 20"):   # torch's own refusal
        CA.AllocatorConfig.parse("max_split_size_mb:20")
    with pytest.raises(CA.NotModelled, match="roundup_power2_divisions"):
        CA.AllocatorConfig.parse("roundup_power2_divisions:4")
    with pytest.raises(CA.NotModelled, match="backend:cudaMallocAsync"):
        CA.AllocatorConfig.parse("backend:cudaMallocAsync")


def test_a_snapshot_seeds_the_free_blocks():
    """A cached 17 MiB rest in a 20 MiB segment (torch.cuda.memory_snapshot()'s format) is reused."""
    snap = [{"device": 0, "address": 4096, "total_size": 20 * MiB, "stream": 0, "segment_type": "large",
             "is_expandable": False,
             "blocks": [{"size": 3 * MiB, "state": "active_allocated"}, {"size": 17 * MiB, "state": "inactive"}]},
            {"device": 1, "address": 0, "total_size": 20 * MiB, "stream": 0, "segment_type": "large",
             "blocks": [{"size": 20 * MiB, "state": "inactive"}]}]
    m = CA.CachingAllocatorModel.from_snapshot(snap, CA.AllocatorConfig(), stream=0, device=0)
    s = m.malloc(5 * MiB)
    assert (s.allocated, s.reserved, s.reused) == (5 * MiB, 0, True)
    s = m.malloc(13 * MiB)  # 12 MiB left on device 0; device 1's block is not this device's
    assert (s.reserved, s.reused) == (14 * MiB, False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: checks the model against the real allocator")
def test_the_model_predicts_the_real_allocator():
    sizes = [100, 1000, MiB, MiB + 1, 3 * MiB, 5 * MiB, 11 * MiB, 12 * MiB + 1, 13 * MiB + 1,
             125_165_568, 0, 64 * 1024, 7 * MiB]
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    model = CA.live_model("cuda")
    a0, r0 = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    held, got, want = [], [], []
    for n in sizes:
        a = torch.cuda.memory_allocated()
        held.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
        got.append(torch.cuda.memory_allocated() - a)
        want.append(model.malloc(n).allocated)
    assert got == want
    assert torch.cuda.memory_allocated() - a0 == model.allocated_added
    assert torch.cuda.memory_reserved() - r0 == model.reserved_added
    del held
    torch.cuda.empty_cache()
