"""Where "available_bytes" comes from when a profile does not give it: GPU, fraction, weights.

SGLang measures free memory at run time; we can only model it. rest = T x mem_fraction_static - W
(T = device memory, W = weight bytes on the rank), the CUDA context and NCCL buffers being inside
SGLang's (1 - mem_fraction_static) slack. The default fraction follows 0.5.23's
``handle_gpu_memory_settings``. Both are labelled as derived wherever they are shown.
"""
from __future__ import annotations

from ..inputs.gpus import Gpu
from ..inputs.model import ModelConfig
from ..units import GiB, MiB

MLA_PREFILL_GRAPH_MIB = 1536


def default_mem_fraction_static(gpu: Gpu, tp_size: int, attn_dp: int, enable_dp_attention: bool,
                                max_running_requests: int | None, pp_size: int = 1) -> float:
    """round((gpu_mem - reserved) / gpu_mem, 3) with SGLang 0.5.23's reservation terms (MiB)."""
    mem = gpu.memory_bytes / MiB
    if mem < 20 * 1024:
        chunk = 2048
    elif mem < 60 * 1024:
        chunk = 4096
    elif mem < 160 * 1024:
        chunk = 8192
    else:
        chunk = 16384
    max_bs = (256 if tp_size < 4 else 512) if mem < 160 * 1024 else 512
    if max_running_requests is not None and max_running_requests < max_bs:
        max_bs = max_running_requests
    graph = max_bs * 2
    if enable_dp_attention:
        graph += max_bs * attn_dp * 3
        if max_bs > 300:
            graph += max_bs * attn_dp * 1.5
    graph += MLA_PREFILL_GRAPH_MIB
    reserved = 512 + max(chunk, 2048) * 1.5 + tp_size * pp_size / 8 * 1024 + graph
    if mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((mem - reserved) / mem, 3)


def estimate_weight_params(model: ModelConfig) -> int:
    """Parameter count from the config (an estimate: norms and small gates are left out)."""
    h = model.hidden_size
    embed = 2 * model.vocab_size * h
    n_moe = model.num_hidden_layers - model.first_k_dense_replace
    experts = (model.n_routed_experts + model.n_shared_experts) * 3 * h * model.moe_intermediate_size
    router = model.n_routed_experts * h
    dense = 3 * h * model.intermediate_size
    kda_proj = model.kda_proj_size
    kda = 4 * h * kda_proj  # q, k, v, o projections
    mla = (model.num_attention_heads * 256 * h * 2 + h * model.kv_lora_rank
           + model.kv_lora_rank * model.num_attention_heads * 512 + h * 1536)
    return (embed + n_moe * (experts + router) + model.first_k_dense_replace * dense
            + model.num_linear_layers * kda + model.num_full_layers * mla)


def estimate_weight_bytes(model: ModelConfig, tp_size: int, bytes_per_param: float = 1.0) -> int:
    """Weights per rank, split evenly over TP (FP8 checkpoint: 1 byte per parameter)."""
    return int(estimate_weight_params(model) * bytes_per_param / tp_size)


VLM_CACHE_SIZE_MB = 100  # SGLANG_VLM_CACHE_SIZE_MB: reserved when the architecture is multimodal


def derived_rest_gib(gpu: Gpu, mem_fraction_static: float, weights_bytes: int,
                     multimodal_reserve: bool = True) -> float:
    """``_profile_available_bytes`` in SGLang's float GiB: free after weights - slack - VLM cache.

    Free memory before loading is taken as the whole device (the CUDA context is ignored).
    GLM-5.3-Flash's architecture is on SGLang's multimodal list, so 100 MiB is held back
    unless the server runs with --language-model-only.
    """
    total_gib = gpu.memory_bytes / GiB
    free_after = (gpu.memory_bytes - weights_bytes) / GiB
    mm = VLM_CACHE_SIZE_MB / 1024 if multimodal_reserve else 0.0
    return free_after - total_gib * (1 - mem_fraction_static) - mm


def rest_for_profile(p, gpu: Gpu, attn_dp: int, max_running_requests: int | None) -> tuple[float, float, str]:
    """(rest in GiB, the mem_fraction_static used, where it came from) for a profile with weights_bytes.

    The fraction is the profile's, else SGLang 0.5.23's default for this GPU, TP, DP attention and
    (effective) max_running_requests.
    """
    mfs, how = p.mem_fraction_static, "mem_fraction_static from the profile"
    if mfs is None:
        mfs = default_mem_fraction_static(gpu, p.tp_size, attn_dp, p.enable_dp_attention, max_running_requests)
        how = "SGLang 0.5.23's default mem_fraction_static"
    return derived_rest_gib(gpu, mfs, p.weights_bytes, not p.language_model_only), mfs, how
