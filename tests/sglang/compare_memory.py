"""Compare glm-kv's device-to-pools path and host sizes with SGLang 0.5.23 (oracle_memory.py).

Both sides get the same inputs (issue 19): the profile as the user wrote it (a field it omits is
each side's own default), and the numbers SGLang measures on a GPU - pre-load free memory and the
weights incl. the MTP draft - from the profile, else chosen by this suite (``profiles.hardware``),
never glm-kv's estimates. Every key of ``KEYS`` is compared both ways: one side without it (absent
or null) while the other has it fails with the key's name. Everything else — the default
fraction, the float32 readings, the rest, pool sizes, the host split / auto-size / MTP packing,
the CP split of the KDA state, refusals — is computed independently by each side.
"""
from __future__ import annotations


import numpy as np

from tests.pytest_glm_kv import run_seed

GiB = 1 << 30
L = {"sglang_layout": "0.5.23"}

KEYS = (
    "capacity.mem_fraction_static", "capacity.rest_bytes", "capacity.available_bytes",
    "capacity.max_mamba_cache_size", "capacity.mamba_pool_bytes", "capacity.spec_scratch_bytes",
    "capacity.token_pool_budget_bytes", "capacity.max_total_num_tokens", "capacity.max_running_requests",
    "parallel.linear_attn_tp_size", "parallel.attn_tp_size", "request.state_slot_bytes",
    "host.kv_tokens", "host.kv_bytes", "host.kv_layers", "host.indexer_bytes", "host.mamba_slots",
    "host.mamba_bytes", "host.total_bytes", "host.hicache_ratio", "host.draft_tokens", "host.draft_bytes",
)


def _g(pid: str, **overrides) -> tuple[str, dict]:
    return pid, {**L, "max_running_requests": 64, **overrides}


W40 = 40_000_000_000
HAND_PICKED = [
    # 1. VLM reduction (the shipped config has a vision_config), language-only, PD decode
    _g("vlm-h200-tp8-dp8", tp_size=8, dp_size=8, enable_dp_attention=True, weights_bytes=W40),
    _g("vlm-h200-tp1-auto-mrr", max_running_requests=None, weights_bytes=60_000_000_000),
    _g("vlm-language-only", tp_size=8, dp_size=8, enable_dp_attention=True, language_only=True,
       weights_bytes=W40),
    _g("vlm-b200-tp8", gpu="B200", tp_size=8, weights_bytes=W40),
    _g("vlm-h100-tp8-dp8", gpu="H100", tp_size=8, dp_size=8, enable_dp_attention=True, weights_bytes=20_000_000_000),
    # 2. pre-load free memory below the total (given), float32 readings under TP
    _g("preload-given-tp8", tp_size=8, dp_size=8, enable_dp_attention=True, weights_bytes=W40,
       pre_model_load_bytes=147_412_123_456),
    _g("preload-given-tp1", weights_bytes=70_000_000_000, pre_model_load_bytes=149_000_000_001),
    _g("preload-mfs-given", mem_fraction_static=0.8, weights_bytes=60_000_000_000,
       pre_model_load_bytes=148_000_000_000),
    # 3. weights under DP attention, MTP draft weights counted
    _g("weights-dp4-mtp", tp_size=8, dp_size=4, enable_dp_attention=True, speculative_algorithm="EAGLE",
       weights_bytes=45_000_000_000),
    _g("weights-mtp-tp1", speculative_algorithm="EAGLE", weights_bytes=70_000_000_000),
    # 4. reservation flags
    _g("chunked-2048", chunked_prefill_size=2048, weights_bytes=W40),
    _g("chunked-off-max-prefill", chunked_prefill_size=-1, max_prefill_tokens=32768, weights_bytes=W40),
    _g("graph-bs-decode-64", tp_size=8, cuda_graph_max_bs_decode=64, weights_bytes=W40),
    _g("deepep", tp_size=8, dp_size=8, enable_dp_attention=True, moe_a2a_backend="deepep", weights_bytes=W40),
    _g("max-prefill-tokens", chunked_prefill_size=-1, max_prefill_tokens=8192, weights_bytes=W40),
    _g("mrr-none-h200-tp8", tp_size=8, max_running_requests=None, weights_bytes=W40),
    _g("pd-prefill", tp_size=8, disaggregation_mode="prefill", weights_bytes=W40),
    _g("pd-decode-mtp", tp_size=8, disaggregation_mode="decode", speculative_algorithm="EAGLE", weights_bytes=W40),
    _g("a2a-mooncake-no-prefill-graph", tp_size=8, moe_a2a_backend="mooncake", weights_bytes=W40),
    # 5. HiCache host sizes: ratio, size split, auto-size, MTP, refused layout
    _g("host-ratio-1.5", enable_hierarchical_cache=True, hicache_ratio=1.5, available_bytes=100 * GiB),
    _g("host-size-100", enable_hierarchical_cache=True, hicache_size=100, available_bytes=100 * GiB),
    _g("host-size-100-mtp", enable_hierarchical_cache=True, hicache_size=100, speculative_algorithm="EAGLE",
       available_bytes=100 * GiB),
    _g("host-auto-2TB-8ranks", tp_size=8, dp_size=8, enable_dp_attention=True, enable_hierarchical_cache=True,
       host_memory_bytes=2_000_000_000_000, ranks_per_host=8, weights_bytes=W40),
    _g("host-auto-small-ram", enable_hierarchical_cache=True, host_memory_bytes=200_000_000_000,
       ranks_per_host=4, available_bytes=100 * GiB),
    _g("host-auto-mtp", enable_hierarchical_cache=True, host_memory_bytes=300_000_000_000,
       ranks_per_host=2, speculative_algorithm="EAGLE", available_bytes=90 * GiB),
    _g("host-ratio-mtp", enable_hierarchical_cache=True, hicache_ratio=1.5, speculative_algorithm="EAGLE",
       available_bytes=100 * GiB),
    _g("host-decode-refused", enable_hierarchical_cache=True, disaggregation_mode="decode",
       available_bytes=100 * GiB),
    _g("host-layer-first-refused", enable_hierarchical_cache=True, hicache_mem_layout="layer_first",
       hicache_ratio=2.0, available_bytes=100 * GiB),
    # 6. context parallel: KDA split over the whole TP group
    _g("cp-tp8-interleave", tp_size=8, attn_cp_size=8, enable_prefill_cp=True, cp_strategy="interleave",
       available_bytes=100 * GiB),
    _g("cp-tp4-interleave-weights", tp_size=4, attn_cp_size=4, enable_prefill_cp=True, cp_strategy="interleave",
       weights_bytes=60_000_000_000),
    _g("cp-zigzag-refused", tp_size=8, attn_cp_size=8, enable_prefill_cp=True, cp_strategy="zigzag",
       available_bytes=100 * GiB),
    _g("cp-narrow-refused", tp_size=8, attn_cp_size=4, enable_prefill_cp=True, cp_strategy="interleave",
       available_bytes=100 * GiB),
    # 7. speculative + explicit max_mamba_cache_size + DP: the divided value caps the scratch
    _g("spec-mmc-dp4", tp_size=8, dp_size=4, enable_dp_attention=True, speculative_algorithm="EAGLE",
       max_mamba_cache_size=400, available_bytes=100 * GiB),
    _g("spec-mmc-dp8-weights", tp_size=8, dp_size=8, enable_dp_attention=True, speculative_algorithm="EAGLE",
       max_mamba_cache_size=1200, max_running_requests=256, weights_bytes=W40),
]


def random_profiles(n: int = 120) -> list[tuple[str, dict]]:
    """Random profiles over every input of the path (seed: GLM_KV_SEED)."""
    seed = run_seed()
    rng = np.random.default_rng(seed)
    pick = lambda xs: xs[int(rng.integers(0, len(xs)))]  # noqa: E731
    out = []
    for i in range(n):
        tp = pick([1, 2, 4, 8, 8])
        dpa = pick([False, True]) and tp > 1
        d = {"gpu": pick(["H100", "H200", "H200", "B200"]), "tp_size": tp,
             "kv_cache_dtype": pick(["auto", "bfloat16", "fp8_e4m3"]),
             "max_running_requests": pick([None, 8, 64, 256])}
        if dpa:
            d.update(dp_size=pick([d for d in (2, 4, 8) if tp % d == 0] or [tp]), enable_dp_attention=True)
        if rng.random() < 0.25:
            d["speculative_algorithm"] = "EAGLE"
        if rng.random() < 0.3:
            d["chunked_prefill_size"] = pick([-1, 2048, 4096, 16384])
        if rng.random() < 0.3:
            d["cuda_graph_max_bs_decode"] = pick([8, 64, 160, 512])
        if rng.random() < 0.2:
            d["moe_a2a_backend"] = pick(["deepep", "none"])
        if rng.random() < 0.15:
            d["language_only"] = True
        if rng.random() < 0.15:
            d["disaggregation_mode"] = pick(["prefill", "decode"])
        if rng.random() < 0.2:
            d["mem_fraction_static"] = round(float(rng.uniform(0.7, 0.93)), 3)
        if rng.random() < 0.15:
            d["max_mamba_cache_size"] = int(rng.integers(50, 2000))
        mem = {"H100": 81559, "H200": 143771, "B200": 183359}[d["gpu"]] * (1 << 20)
        if rng.random() < 0.6:
            d["weights_bytes"] = int(rng.integers(15, 60) * 10**9 // max(1, tp // 2))
            if rng.random() < 0.5:
                d["pre_model_load_bytes"] = int(mem - rng.integers(300, 4000) * (1 << 20) - rng.integers(0, 1 << 20))
        else:
            d["available_bytes"] = int(rng.integers(10, 120) * GiB + rng.integers(0, GiB))
        if rng.random() < 0.35:
            d["enable_hierarchical_cache"] = True
            r = rng.random()
            if r < 0.35:
                d["hicache_ratio"] = round(float(rng.uniform(0.5, 3.0)), 2)
            elif r < 0.65:
                d["hicache_size"] = int(rng.integers(20, 400))
            else:
                d["host_memory_bytes"] = int(rng.integers(100, 3000) * 10**9)
                d["ranks_per_host"] = pick([1, 2, 4, 8])
        out.append((f"random-{seed}-{i:03d}", {**L, **d}))
    return out


def engine(raw: dict, measured: dict | None = None):
    """(typed plan, contract dict) or (None, error) for the profile as the user wrote it."""
    from glm_kv.errors import ProfileError
    from compare import glm_kv_side
    from glm_kv.inputs.profile import make_profile
    from glm_kv.inputs.resolve import resolve
    from glm_kv.ledgers.plan import plan_from_args

    try:
        plan = plan_from_args(resolve(make_profile(glm_kv_side(raw), default_name="memory-agreement")),
                              dict(measured) if measured else None)
        return plan, plan.to_dict()
    except ProfileError as e:
        return None, {"field": e.field, "rule": e.rule}


def sglang_inputs(raw: dict, measured: dict) -> dict:
    """The two free-memory readings SGLang takes, from the profile / the suite (never glm-kv)."""
    if raw.get("available_bytes") is not None or raw.get("weights_bytes") is None:
        return {"pre_model_load_bytes": None, "weights_bytes": None}
    return {"pre_model_load_bytes": raw["pre_model_load_bytes"],
            "weights_bytes": raw["weights_bytes"] + measured.get("draft_weights_bytes", 0)}


def dig(d, dotted):
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            return KeyError
        d = d[part]
    return d


def _absent(v) -> bool:
    return v is KeyError or v is None


def compare(pid: str, raw: dict, engine_fn=engine) -> dict:
    """{'compared': [...], 'mismatches': [...]} for one profile."""
    from oracle_memory import sglang_memory
    from profiles import hardware

    raw, measured = hardware(raw)
    plan, d = engine_fn(raw, measured)
    sg = sglang_memory(raw, raw, **sglang_inputs(raw, measured))
    if plan is None:
        ok = "errors" in sg
        return {"compared": ["errors"], "mismatches": [] if ok else
                [{"key": "errors", "engine": d, "sglang": "starts"}]}
    if "errors" in sg:
        return {"compared": ["errors"], "mismatches": [{"key": "errors", "engine": "starts",
                                                       "sglang": sg["errors"]}]}
    res = {"compared": [], "mismatches": []}
    # the fraction is compared even where no capacity is derived
    pairs = [("resolved.mem_fraction_static", plan.memory.mem_fraction_static)]
    pairs += [(k, dig(d, k)) for k in KEYS]
    for key, mine in pairs:
        theirs = dig(sg, key)
        if _absent(theirs) and _absent(mine):
            continue  # neither side sizes it here (no capacity inputs, HiCache off)
        res["compared"].append(key)
        if _absent(theirs) != _absent(mine):
            res["mismatches"].append({"key": key, "engine": "<missing>" if _absent(mine) else mine,
                                      "sglang": "<missing>" if _absent(theirs) else theirs})
        elif mine != theirs:
            res["mismatches"].append({"key": key, "engine": mine, "sglang": theirs})
    return res
