"""Issue 32: DeepSeek-V4's pools (glm_kv/ledgers/dsv4.py) against SGLang 0.5.23's own classes, on the CPU.

SGLang gets the vendored config's numbers (the fields ``ModelConfig``'s DeepseekV4 branch reads) and the
launch; it never sees a glm-kv number. Its ``DSV4PoolConfigurator`` sizes the pools from a byte budget
(``calculate_pool_sizes`` + ``finalize_with_max_running_requests``) and its ``DeepSeekV4TokenToKVPool`` is
built at those sizes, the bytes read off its tensors. The launch context SGLang reads through
``get_schedule()`` / ``get_spec()`` / ``get_exec()`` / ``get_memory()`` / ``get_disagg()`` is the resolved
one of a CUDA (SM90) launch: flashmla, the V4 layout, no speculative decoding, no HiSparse, no encoder
replay (``Dsv4Model``'s path; anything else is refused by name). Launches are random (the run's seed):
page size, request cap, chunked prefill, overlap, radix cache, an explicit --swa-full-tokens-ratio, budget.
Every ``_PoolSizes`` field and every pool's bytes are compared both ways; planted errors must be caught.
"""
from __future__ import annotations

import json
import random
from types import SimpleNamespace as NS

import pytest

from tests.pytest_glm_kv import run_seed

MODELS = ("deepseek-v4-flash", "deepseek-v4-pro")
SIZE_FIELDS = ("full_max_total_num_tokens", "swa_max_total_num_tokens", "c4_max_total_num_tokens",
               "c128_max_total_num_tokens", "c4_state_pool_size", "c128_state_pool_size")


def _config(name: str) -> dict:
    from glm_kv.inputs.hf_config import DSV4_SHIPPED, MODELS_DIR

    return json.loads((MODELS_DIR / f"{DSV4_SHIPPED[name][0]}_config.json").read_text())


def draw(rng: random.Random, small: bool) -> dict:
    """One launch: ``small`` keeps the pools buildable on the CPU (a few hundred MB)."""
    mrr = rng.randint(1, 6) if small else rng.choice([None, 32, 64, 128, 256, 512])
    return {"page_size": rng.choice([128, 256, 512]),
            "max_running_requests": mrr if mrr is not None else 256,   # apply_deepseek_v4_defaults: 256
            "chunked_prefill_size": rng.choice([None, 256, 512, 1024] if small else [None, 2048, 4096, 8192, 16384]),
            "overlap": rng.random() < 0.7, "disable_radix_cache": rng.random() < 0.3,
            "swa_full_tokens_ratio": rng.choice([None, None, 0.1, 0.25, 0.5]),
            "available_bytes": rng.randint(300 << 20, 600 << 20) if small else rng.randint(20 << 30, 120 << 30),
            "attn_dp": 1 if small else rng.choice([1, 1, 2, 4, 8]),
            "draft_tokens": rng.choice([0, 0, 2, 4, 8])}


def sglang_sizes(monkeypatch, name: str, launch: dict, build: bool):
    """SGLang's ``MemoryPoolConfig`` for the launch, and (``build``) the bytes of its pools' tensors."""
    import torch

    import sglang.srt.mem_cache.deepseek_v4_memory_pool as mp
    import sglang.srt.mem_cache.kv_cache_configurator as kc
    import sglang.srt.model_executor.pool_configurator as pc

    cfg = _config(name)
    n = cfg["num_hidden_layers"]
    mc = NS(qk_nope_head_dim=cfg["head_dim"] - cfg["qk_rope_head_dim"], qk_rope_head_dim=cfg["qk_rope_head_dim"],
            index_head_dim=cfg["index_head_dim"], context_len=cfg["max_position_embeddings"],
            compress_ratios=cfg["compress_ratios"], window_size=cfg["sliding_window"],
            hf_config=NS(kv_source_layer_ids=[], architectures=cfg["architectures"], model_type=cfg["model_type"]))
    draft = launch.get("draft_tokens", 0)
    ratio = launch["swa_full_tokens_ratio"]
    if draft and ratio is None:   # EAGLE is checked in ratio mode (the mode SGLang's DeepSeek-V4 launch resolves)
        ratio = launch["swa_full_tokens_ratio"] = 0.1
    attn_dp = launch["attn_dp"]
    ctx = dict(
        get_spec=lambda: NS(speculative_algorithm="EAGLE" if draft else None,
                            speculative_num_draft_tokens=draft or None, speculative_num_steps=(draft - 1) or None,
                            speculative_eagle_topk=1 if draft else None),
        get_schedule=lambda: NS(max_running_requests=launch["max_running_requests"], swa_prefix_tails=None,
                                chunked_prefill_size=launch["chunked_prefill_size"],
                                disable_overlap_schedule=not launch["overlap"],
                                swa_full_tokens_ratio=0.1 if ratio is None else ratio,
                                _swa_full_tokens_ratio_explicitly_set=ratio is not None, max_total_tokens=None),
        get_exec=lambda: NS(kernel=NS(dsv4_attn_backend="flashmla", enable_deepseek_v4_fp4_indexer=False),
                            features=NS(enable_encoder_swa_bounded_replay=False)),
        get_memory=lambda: NS(enable_hisparse=False, disable_radix_cache=launch["disable_radix_cache"]),
        get_disagg=lambda: NS(disaggregation_mode="null", disaggregation_decode_extra_slots=0))
    for mod in (pc, mp):
        for k, v in ctx.items():
            if hasattr(mod, k):
                monkeypatch.setattr(mod, k, v)
    monkeypatch.setattr(pc, "max_speculative_num_draft_tokens", lambda: draft)
    page = launch["page_size"]
    kvc = NS(kv_cache_dtype_str="fp8_e4m3", model_config=mc, layer_info=NS(start_layer=0, end_layer=n), pp_size=1,
             pp_group=None, sliding_window_size=cfg["sliding_window"], page_size=page, attn_dp_size=attn_dp,
             spec_algorithm=NS(is_dspark=lambda: False, is_none=lambda: not draft, is_eagle=lambda: bool(draft)),
             spec_aux_config=None)
    conf = pc.DSV4PoolConfigurator(kvc)
    out = conf.calculate_pool_sizes(launch["available_bytes"], page)
    # KVCacheConfigurator._resolve_memory_pool_config: resolve_max_num_reqs, then finalize
    monkeypatch.setattr(kc, "get_schedule", ctx["get_schedule"])
    out.max_running_requests = kc.KVCacheConfigurator.resolve_max_num_reqs(
        NS(model_config=mc, attn_dp_size=attn_dp, mambaish_config=None), out.max_total_num_tokens)
    out = conf.finalize_with_max_running_requests(out)
    if not build:
        return out, None
    mrr = out.max_running_requests
    pool = mp.DeepSeekV4TokenToKVPool(
        max_num_reqs=mrr, swa_size=out.swa_max_total_num_tokens, c4_size=out.c4_max_total_num_tokens,
        c128_size=out.c128_max_total_num_tokens, c4_state_pool_size=out.c4_state_pool_size,
        c128_state_pool_size=out.c128_state_pool_size, page_size=page, swa_page_size=page,
        dtype=torch.float8_e4m3fn, c4_state_dtype=torch.float32, c128_state_dtype=torch.float32,
        qk_nope_head_dim=mc.qk_nope_head_dim, qk_rope_head_dim=mc.qk_rope_head_dim,
        indexer_head_dim=mc.index_head_dim, layer_num=n, device="cpu", enable_memory_saver=False,
        compression_ratios=cfg["compress_ratios"], sliding_window=cfg["sliding_window"], start_layer=0, end_layer=n)

    def nb(ts) -> int:
        return sum(t.numel() * t.element_size() for t in ts if t is not None)

    def states(pools, r):
        return nb(p.kv_score_buffer.kv_score for p in pools if p is not None and p.ratio == r)

    got = {"swa_kv": nb(pool.swa_kv_pool.kv_buffer), "c4_kv": nb(pool.c4_kv_pool.kv_buffer),
           "c4_indexer_k": nb(pool.c4_indexer_kv_pool.index_k_with_scale_buffer),
           "c128_kv": nb(pool.c128_kv_pool.kv_buffer),
           "c4_state": states(pool.compress_state_pools, 4) + states(pool.indexer_compress_state_pools, 4),
           "c128_state": states(pool.compress_state_pools, 128) + states(pool.indexer_compress_state_pools, 128)}
    return out, got


def ours(name: str, launch: dict):
    from glm_kv.inputs.hf_config import load_dsv4_config
    from glm_kv.ledgers.dsv4 import dsv4_model, dsv4_pool_sizes

    kw = {k: v for k, v in launch.items() if k != "draft_tokens"}
    return dsv4_pool_sizes(dsv4_model(load_dsv4_config(name), draft_tokens=launch.get("draft_tokens", 0)), **kw)


def differences(monkeypatch, name: str, launch: dict, build: bool) -> list[str]:
    sg, sg_bytes = sglang_sizes(monkeypatch, name, launch, build)
    mine = ours(name, launch)
    bad = [f"{f}: glm-kv {getattr(mine, f)} vs SGLang {getattr(sg, f)}" for f in SIZE_FIELDS
           if getattr(mine, f) != getattr(sg, f)]
    if sg.max_running_requests != mine.max_running_requests_per_worker:
        bad.append(f"max_running_requests: {mine.max_running_requests_per_worker} vs {sg.max_running_requests}")
    if build:
        keys = set(sg_bytes) | set(mine.pool_bytes)
        bad += [f"{k} bytes: glm-kv {mine.pool_bytes.get(k)} vs SGLang {sg_bytes.get(k)}" for k in sorted(keys)
                if mine.pool_bytes.get(k) != sg_bytes.get(k)]
    return bad


def launches(n: int, small: bool, salt: int) -> list[tuple[str, dict]]:
    rng = random.Random(run_seed() * 7919 + salt)
    return [(rng.choice(MODELS), draw(rng, small)) for _ in range(n)]


def agree(monkeypatch, name: str, launch: dict, build: bool) -> None:
    """Equal sizes (and bytes), or both refuse: SGLang's error text is in glm-kv's refusal."""
    from glm_kv.errors import ProfileError

    try:
        sglang_sizes(monkeypatch, name, launch, build=False)
    except (ValueError, RuntimeError) as e:   # SGLang refuses: so must we, in its words
        with pytest.raises(ProfileError) as mine:
            ours(name, launch)
        assert str(e) in str(mine.value), (launch, str(e), str(mine.value))
        return
    assert differences(monkeypatch, name, launch, build=build) == [], (name, launch)


@pytest.mark.parametrize("i", range(4))
def test_sizes_and_pool_bytes_equal_sglangs_on_small_launches(monkeypatch, i):
    """Built pools: every size and every buffer's bytes, both ways (the SWA refusals count too)."""
    agree(monkeypatch, *launches(4, True, 1)[i], build=True)


@pytest.mark.parametrize("i", range(8))
def test_sizes_equal_sglangs_on_gpu_sized_budgets(monkeypatch, i):
    """20-120 GB budgets (what an H100 / H200 leaves after the weights): every ``_PoolSizes`` field."""
    agree(monkeypatch, *launches(8, False, 2)[i], build=False)


FIXED = ("deepseek-v4-flash", {"page_size": 256, "max_running_requests": 4, "chunked_prefill_size": 512,
                               "overlap": True, "disable_radix_cache": False, "swa_full_tokens_ratio": None,
                               "available_bytes": 600 << 20, "attn_dp": 1})


@pytest.mark.parametrize("plant", ["page_align_512", "no_reserved_page", "c128_ring_64", "no_prefix_tails",
                                   "state_not_overlapped"])
def test_planted_errors_are_caught(monkeypatch, plant):
    """Each plant puts one of SGLang's rules wrong in glm-kv; the comparison with SGLang's classes must fail."""
    import glm_kv.ledgers.dsv4 as D

    name, launch = FIXED
    assert differences(monkeypatch, name, launch, build=True) == []
    if plant == "page_align_512":
        monkeypatch.setattr(D, "V4_PAGE_ALIGN", 512)
    elif plant == "no_reserved_page":   # _num_dsv4_physical_kv_pages without the allocator's dummy page
        monkeypatch.setattr(D, "_pages", lambda size, page, global_page: -(-size // page))
    elif plant == "c128_ring_64":
        monkeypatch.setitem(D.RING_SIZES, 128, 64)
    elif plant == "no_prefix_tails":
        real_sizes = D.dsv4_pool_sizes
        monkeypatch.setattr(D, "dsv4_pool_sizes", lambda m, **kw: real_sizes(m, **{**kw, "swa_prefix_tails": 0}))
    elif plant == "state_not_overlapped":
        monkeypatch.setattr(D.Dsv4CompressState, "row_bytes", property(lambda s: 2 * s.head_dim * D.STATE_ITEM_BYTES))
    assert differences(monkeypatch, name, launch, build=True) != []
