"""The agreement matrix: every shipped profile run under layout 0.5.23, plus generated ones.

Each entry is (id, base profile name or None, overrides). Overrides use the
plan-contract input field names; the profile is resolved by glm_kv.inputs.profile so
SGLang and the engine see exactly the same inputs (defaults included).
"""

from __future__ import annotations

GiB = 1 << 30

L = {"sglang_layout": "0.5.23"}


def shipped_profiles() -> list[tuple[str, str | None, dict]]:
    from glm_kv.inputs.profile import PACKAGE_DIR

    out = []
    for path in sorted((PACKAGE_DIR / "profiles").glob("*.yaml")):
        name = path.stem
        pid = f"shipped:{name}" if name.endswith("0.5.23") else f"shipped:{name}@0.5.23"
        out.append((pid, name, dict(L)))
    return out


def _g(pid: str, **overrides) -> tuple[str, None, dict]:
    return (pid, None, {**L, **overrides})


GENERATED = [
    # parallelism (TP 1/2/4/8, DP attention on/off)
    _g("tp1-bf16-100GiB", available_bytes=100 * GiB),
    _g("tp2-bf16-60GiB", tp_size=2, available_bytes=60 * GiB),
    _g("tp4-bf16-40GiB", tp_size=4, available_bytes=40 * GiB),
    _g("tp8-nodpattn-20GiB", tp_size=8, available_bytes=20 * GiB),
    _g("tp8-dp2-dpattn", tp_size=8, dp_size=2, enable_dp_attention=True, available_bytes=50 * GiB),
    _g("tp8-dp4-dpattn-mrr256", tp_size=8, dp_size=4, enable_dp_attention=True,
       max_running_requests=256, available_bytes=80 * GiB),
    _g("tp8-dp8-dpattn-weights", tp_size=8, dp_size=8, enable_dp_attention=True,
       weights_bytes=40_000_000_000),
    _g("tp4-dp4-dpattn-auto-mrr", tp_size=4, dp_size=4, enable_dp_attention=True,
       max_running_requests=None, available_bytes=100 * GiB),
    # kv dtype and DSA backends (scaled vs raw fp8 rows)
    _g("fp8-scaled-auto-mrr", kv_cache_dtype="fp8_e4m3", max_running_requests=None,
       available_bytes=100 * GiB),
    _g("fp8-trtllm-decode-raw", kv_cache_dtype="fp8_e4m3", dsa_decode_backend="trtllm",
       available_bytes=100 * GiB),
    _g("fp8-tilelang-both-raw", kv_cache_dtype="fp8_e4m3", dsa_prefill_backend="tilelang",
       dsa_decode_backend="tilelang", available_bytes=100 * GiB),
    _g("fp8-tilelang-one-side-refused", kv_cache_dtype="fp8_e4m3",
       dsa_prefill_backend="tilelang"),
    _g("b200-auto-fp8-trtllm", gpu="B200", available_bytes=150 * GiB),
    _g("b200-bf16", gpu="B200", kv_cache_dtype="bfloat16", available_bytes=150 * GiB),
    _g("b300-auto-weights", gpu="B300", tp_size=4, weights_bytes=80_000_000_000),
    _g("h100-tp8-dp8-weights", gpu="H100", tp_size=8, dp_size=8, enable_dp_attention=True,
       weights_bytes=20_000_000_000),
    _g("h200-mfs-0.8-weights", mem_fraction_static=0.8, weights_bytes=60_000_000_000),
    # SSM dtype
    _g("ssm-bf16-100GiB", mamba_ssm_dtype="bfloat16", available_bytes=100 * GiB),
    _g("ssm-bf16-tp4", mamba_ssm_dtype="bfloat16", tp_size=4, available_bytes=30 * GiB),
    # scheduler: overlap, radix, lazy buffer, skip-decode-lock
    _g("no-overlap", disable_overlap_schedule=True, available_bytes=100 * GiB),
    _g("radix-off-mrr64", disable_radix_cache=True, available_bytes=100 * GiB),
    _g("radix-off-auto-mrr", disable_radix_cache=True, max_running_requests=None,
       available_bytes=100 * GiB),
    _g("radix-off-tp8-dp8", disable_radix_cache=True, tp_size=8, dp_size=8,
       enable_dp_attention=True, available_bytes=100 * GiB),
    _g("lazy-buffer", mamba_scheduler_strategy="extra_buffer_lazy", available_bytes=100 * GiB),
    _g("lazy-buffer-no-overlap-refused", mamba_scheduler_strategy="extra_buffer_lazy",
       disable_overlap_schedule=True, available_bytes=100 * GiB),
    _g("no-buffer-refused", mamba_scheduler_strategy="no_buffer"),
    _g("non-triton-linear-attn-refused", linear_attn_backend="flashinfer"),
    _g("skip-decode-lock", mamba_skip_decode_lock=True, available_bytes=100 * GiB),
    _g("skip-decode-lock-no-overlap", mamba_skip_decode_lock=True,
       disable_overlap_schedule=True, available_bytes=100 * GiB),
    # EAGLE / MTP draft tokens
    _g("eagle-default", speculative_algorithm="EAGLE", available_bytes=100 * GiB),
    _g("eagle-2-tokens", speculative_algorithm="EAGLE", speculative_num_steps=1,
       speculative_eagle_topk=1, speculative_num_draft_tokens=2, available_bytes=100 * GiB),
    _g("eagle-auto-mrr", speculative_algorithm="EAGLE", max_running_requests=None,
       available_bytes=100 * GiB),
    _g("eagle-draft-tokens-only-refused", speculative_algorithm="EAGLE",
       speculative_num_draft_tokens=4),
    _g("eagle-fp8-tp8-dp8", speculative_algorithm="EAGLE", kv_cache_dtype="fp8_e4m3",
       tp_size=8, dp_size=8, enable_dp_attention=True, weights_bytes=40_000_000_000),
    # max running requests, pool caps, available bytes
    _g("mrr256-100GiB", max_running_requests=256, available_bytes=100 * GiB),
    _g("mrr16-100GiB", max_running_requests=16, available_bytes=100 * GiB),
    _g("max-total-tokens-1M", max_total_tokens=1_000_000, available_bytes=100 * GiB),
    _g("max-mamba-cache-200-dp4", max_mamba_cache_size=200, tp_size=8, dp_size=4,
       enable_dp_attention=True, available_bytes=100 * GiB),
    _g("mamba-ratio-0.5", mamba_full_memory_ratio=0.5, available_bytes=100 * GiB),
    _g("tiny-1GiB-refused", available_bytes=1 * GiB),
    _g("odd-9.5GiB", available_bytes=int(9.5 * GiB) + 12345),
    # HiCache
    _g("hicache-ratio-2", enable_hierarchical_cache=True, available_bytes=100 * GiB),
    _g("hicache-size-100", enable_hierarchical_cache=True, hicache_size=100,
       available_bytes=100 * GiB),
    _g("hicache-radix-off-refused", enable_hierarchical_cache=True, disable_radix_cache=True),
    # TP that does not divide the KDA heads
    _g("tp3-refused", tp_size=3),
]


def matrix() -> list[tuple[str, str | None, dict]]:
    return shipped_profiles() + GENERATED
