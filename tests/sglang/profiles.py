"""The agreement matrix: every shipped profile run under layout 0.5.23, plus generated ones.

Each entry is (id, base profile name or None, overrides). Overrides use the
plan-contract input field names. SGLang is given only what a user gives it (issue 19):
the model config, the launch arguments the profile states (a field the profile omits
takes SGLang's own default, never glm-kv's), and the hardware readings SGLang would
take on a GPU (`hardware`). Every generated profile states the launch argument
``--max-running-requests 64`` unless it sets its own, so the matrix does not lean on
either side's default for it.
"""

from __future__ import annotations

from pathlib import Path

GiB = 1 << 30
REPO = Path(__file__).resolve().parents[2]
PROFILES_DIR = REPO / "glm_kv" / "inputs" / "profiles"   # the shipped YAML files (user inputs)

L = {"sglang_layout": "0.5.23"}

# ---- hardware readings, chosen by this test suite (never computed by glm_kv)
# SGLang reads the free device memory twice on a GPU: before the weights load
# (pre_model_load) and after the target + MTP draft weights load. A profile that states
# `weights_bytes` but no `pre_model_load_bytes` gets the reading below for its GPU, and
# glm-kv gets the SAME number as its `pre_model_load_bytes` profile field.
TEST_GPU = "H200"   # the GPU a profile that names none runs on (both sides are told so)
PRE_MODEL_LOAD_BYTES = {
    # H200: 137.29 GiB, the "Load weight begin. avail mem=137.29 GB" of a public 8 x H200
    # TP 8 boot log (sgl-project/sglang PR #11716), as bytes (plus a non-round tail).
    "H200": 147_412_123_456,
    # the rest: device memory as CUDA reports it (GPU_FACTS) minus about 3 GiB, chosen here.
    "H100": 82_300_000_001,
    "B200": 189_000_000_007,
    "B300": 285_000_000_003,
}
# The MTP draft (one NextN layer) as the second "Load weight end ... mem usage" would show
# it: 3.912 GB on one rank (capture_boot_logs.py's h200-tp1-mtp-hicache), split evenly
# over tp_size ranks. A choice of this suite, given to glm-kv as a measured input
# (`draft_weights_bytes`, the way `glm-kv verify` passes a boot log's reading).
DRAFT_WEIGHTS_BYTES_TP1 = 3_912_000_000


def hardware(raw: dict) -> tuple[dict, dict]:
    """(the profile with the suite's hardware readings stated, {"draft_weights_bytes": ...}).

    Adds ``gpu`` (TEST_GPU) when the profile names no GPU and gives no memory_bytes/sm, and
    ``pre_model_load_bytes`` when it states ``weights_bytes`` without one. The second dict
    is the MTP draft reading for a speculative profile sized from its weights (empty
    otherwise). Both sides receive all of it.
    """
    out = dict(raw)
    if "gpu" not in out and out.get("memory_bytes") is None:
        out["gpu"] = TEST_GPU
    measured: dict = {}
    if out.get("weights_bytes") is not None and out.get("available_bytes") is None:
        if out.get("pre_model_load_bytes") is None:
            out["pre_model_load_bytes"] = (PRE_MODEL_LOAD_BYTES[out["gpu"]] if out.get("memory_bytes") is None
                                           else out["memory_bytes"] - 3 * GiB)
        if out.get("speculative_algorithm"):
            measured["draft_weights_bytes"] = DRAFT_WEIGHTS_BYTES_TP1 // int(out.get("tp_size") or 1)
    return out, measured


def shipped_profiles() -> list[tuple[str, str | None, dict]]:
    out = []
    for path in sorted(PROFILES_DIR.glob("*.yaml")):
        name = path.stem
        pid = f"shipped:{name}" if name.endswith("0.5.23") else f"shipped:{name}@0.5.23"
        out.append((pid, name, dict(L)))
    return out


def _g(pid: str, **overrides) -> tuple[str, None, dict]:
    return (pid, None, {**L, "max_running_requests": 64, **overrides})


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
