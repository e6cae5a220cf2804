"""From the device to SGLang's "rest": fraction, pre-load free memory, weights per rank.

SGLang 0.5.23 sizes the pools from three numbers, all in float GiB
(``KVCacheConfigurator._profile_available_bytes``)::

    rest = avail_after_weights - pre_model_load x (1 - mem_fraction_static) - VLM cache

``pre_model_load`` is the free memory measured after distributed init (CUDA context, NCCL
buffers) and before any weight is loaded, the minimum over ranks (``measure_pre_model_load_memory``);
``avail_after_weights`` is the free memory once the target AND the MTP draft are loaded. With
``tp x pp > 1`` both readings pass through a float32 tensor (``get_available_gpu_memory``'s
all-reduce MIN). The default fraction is ``handle_gpu_memory_settings`` with every input it reads,
scaled by ``adjust_mem_fraction_for_vlm`` for a multimodal checkpoint with a ``vision_config``.
Where an input is not given it is estimated here, and the estimate is labelled as such.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from ..inputs.gpus import Gpu
from ..inputs.model import ModelConfig
from ..units import GiB, MiB

MLA_PREFILL_GRAPH_MIB = 1536          # reserve_for_graph_mb: MLA prefill graph, flat
DEEPEP_PREFILL_GRAPH_MIB = 1024       # ... breakable prefill graph with moe_a2a_backend deepep
DEEPEP_A2A_MIB = 2048                 # reserve_for_deepep_a2a_mb (after the 10 GiB floor)
BREAKABLE_PREFILL_A2A = ("none", "deepep", "megamoe", "flashinfer")   # other a2a: prefill graph off
MULTIMODAL_ARCHS = ("Glm5NextForConditionalGeneration",)              # configs/model_config.py
VLM_CACHE_SIZE_MB = 100  # SGLANG_VLM_CACHE_SIZE_MB: reserved when the architecture is multimodal
VIT_BASE_LAYERS, VIT_BASE_HIDDEN = 24, 1024   # adjust_mem_fraction_for_vlm's baseline (ViT-L/14)

# Pre-load estimate (used only when the profile gives no pre_model_load_bytes, and labelled
# "estimate" wherever it shows). A public SGLang boot log on 8 x H200, TP 8 (sgl-project/sglang
# PR #11716) prints "Init torch distributed ends. mem usage=1.77-2.01 GB" and
# "Load weight begin. avail mem=137.29 GB" on a 140.40 GiB device: about 1 GiB of CUDA context
# plus about 2 GiB of NCCL / custom all-reduce buffers once more than one rank is launched.
PRE_LOAD_CONTEXT_BYTES = 1 * GiB
PRE_LOAD_DISTRIBUTED_BYTES = 2 * GiB

PRE_LOAD_ESTIMATE_NOTE = ("pre_model_load_bytes is an ESTIMATE (device memory - 1 GiB CUDA context"
                          " - 2 GiB NCCL buffers when tp > 1); give pre_model_load_bytes, or verify"
                          " against a boot log, for exact figures")
# issue 29: weights not stated are estimated on every route (profile or launch command), and said so
WEIGHTS_ESTIMATE_NOTE = ("weights_bytes is an ESTIMATE from the model's config and quantization ({weights}"
                         " per rank); give weights_bytes (a boot log's \"Load weight end ... mem usage\"),"
                         " or weights_estimate: false for the ledgers without a capacity")


# ---------------------------------------------------------------------------------------------
# the default mem_fraction_static (arg_groups/memory_hook.py handle_gpu_memory_settings)


@dataclass(frozen=True)
class FractionInputs:
    """Everything ``handle_gpu_memory_settings`` reads, as the user gave it (raw values)."""

    gpu_mem_mib: float
    tp_size: int
    pp_size: int
    attn_dp_size: int
    max_running_requests: int | None      # the user's global value, before any speculative reset
    chunked_prefill_size: int | None       # None: the per-GPU default
    cuda_graph_max_bs_decode: int | None   # None: the per-GPU default (clamped by max_running_requests)
    max_prefill_tokens: int
    disaggregation_mode: str               # "null", "prefill" or "decode"
    moe_a2a_backend: str
    speculative_num_draft_tokens: int | None
    attn_cp_size: int
    is_vlm: bool
    vision_num_hidden_layers: int
    vision_hidden_size: int
    decode_graph_disabled: bool = False    # --disable-cuda-graph / --disable-decode-cuda-graph
    prefill_graph_disabled: bool = False   # --disable-cuda-graph / --disable-prefill-cuda-graph
    # --cuda-graph-backend-prefill given: SGLang locks the prefill backend, so its auto-disable cascade
    # (apply_cuda_graph_compatibility: a2a backend, attn_cp) does not run; "full" has no DeepEP delta
    prefill_graph_backend: str | None = None


def gpu_defaults(gpu_mem_mib: float, tp_size: int) -> tuple[int, int]:
    """(chunked_prefill_size, decode cuda-graph max_bs) SGLang picks for a GPU of this size."""
    m = gpu_mem_mib
    if m < 20 * 1024:
        return 2048, 8
    if m < 35 * 1024:
        return 4096, 48 if tp_size < 4 else 160
    if m < 60 * 1024:
        return 4096, 32 if tp_size < 4 else 160
    if m < 160 * 1024:
        return 8192, 256 if tp_size < 4 else 512
    return 16384, 512


def vlm_factor(layers: int, hidden: int) -> float:
    """``adjust_mem_fraction_for_vlm``: 0.95 x a clamp of the ViT's size against ViT-L/14."""
    ratio = layers * hidden ** 2 / (VIT_BASE_LAYERS * VIT_BASE_HIDDEN ** 2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def reserved_mib(f: FractionInputs) -> float:
    """The activation + graph reservation in MiB (``handle_gpu_memory_settings``)."""
    chunk, max_bs = gpu_defaults(f.gpu_mem_mib, f.tp_size)
    if f.chunked_prefill_size is not None:
        chunk = f.chunked_prefill_size
    if f.cuda_graph_max_bs_decode is not None:
        max_bs = f.cuda_graph_max_bs_decode
    elif f.max_running_requests is not None and max_bs > f.max_running_requests:
        max_bs = f.max_running_requests
    mode = f.disaggregation_mode or "null"
    # the decode graph's backend (cuda_graph_config.decode): DISABLED drops max_bs x 2 and the DeepEP
    # a2a buffers, not the DP-attention padding term (reserve_for_graph_mb reads max_bs there whatever
    # the backend); a disabled prefill graph drops the MLA prefill graph's flat 1.5 GiB
    decode_graph = mode != "prefill" and not f.decode_graph_disabled
    # disable_breakable_cudagraph_if_incompatible runs before the fraction: an a2a backend outside
    # its list, or attn_cp_size > 1 (supports_prefill_cp_bcg needs the DSA prefill backend, not yet
    # resolved then), turns the prefill graph off; it comes back only after the fraction is fixed.
    locked = f.prefill_graph_backend is not None
    prefill_graph = (mode != "decode" and not f.prefill_graph_disabled
                     and (locked or (f.moe_a2a_backend in BREAKABLE_PREFILL_A2A and f.attn_cp_size == 1)))
    if mode == "decode":
        act = max((f.max_running_requests or max_bs or 1) * (f.speculative_num_draft_tokens or 1), 2048)
    elif chunk > 0:
        act = max(chunk, 2048)
    else:
        act = max(f.max_prefill_tokens, 2048)
    r = 512 + act * 1.5 + f.tp_size * f.pp_size / 8 * 1024
    graph = 0.0
    if mode != "prefill" and decode_graph:
        graph += max_bs * 2
    if f.attn_dp_size > 1 and mode != "prefill":
        graph += max_bs * f.attn_dp_size * 3
        if max_bs > 300:
            graph += max_bs * f.attn_dp_size * 1.5
    if mode != "decode" and prefill_graph:
        graph += MLA_PREFILL_GRAPH_MIB
        if f.moe_a2a_backend == "deepep" and (f.prefill_graph_backend or "breakable") == "breakable":
            graph += DEEPEP_PREFILL_GRAPH_MIB
    r += graph
    if f.gpu_mem_mib > 60 * 1024:
        r = max(r, 10 * 1024)
    if mode != "prefill" and decode_graph and f.moe_a2a_backend == "deepep":
        r += DEEPEP_A2A_MIB
    return r


def fraction_from_inputs(f: FractionInputs) -> float:
    """round((gpu_mem - reserved) / gpu_mem, 3), then the VLM factor (not re-rounded)."""
    frac = round((f.gpu_mem_mib - reserved_mib(f)) / f.gpu_mem_mib, 3)
    if f.is_vlm:
        frac = frac * vlm_factor(f.vision_num_hidden_layers, f.vision_hidden_size)
    return frac


def is_multimodal(model: ModelConfig, p=None) -> bool:
    """SGLang's ``is_multimodal``: a multimodal architecture, unless --language-model-only."""
    archs = getattr(model, "architectures", ()) or ()
    multimodal = not archs or any(a in MULTIMODAL_ARCHS for a in archs)
    return multimodal and not (p is not None and p.language_model_only)


def fraction_inputs(p, model: ModelConfig, gpu: Gpu, attn_dp: int,
                    max_running_requests: int | None) -> FractionInputs:
    """The inputs of the default fraction for a profile; ``max_running_requests`` is the user's."""
    mode = p.disaggregation_mode
    vlm = (is_multimodal(model, p) and getattr(model, "has_vision_config", False)
           and not p.language_only and mode != "decode")
    return FractionInputs(
        gpu_mem_mib=gpu.memory_bytes / MiB, tp_size=p.tp_size, pp_size=1, attn_dp_size=attn_dp,
        max_running_requests=max_running_requests,
        chunked_prefill_size=p.chunked_prefill_size,
        cuda_graph_max_bs_decode=p.cuda_graph_max_bs_decode,
        max_prefill_tokens=p.max_prefill_tokens,
        disaggregation_mode=mode, moe_a2a_backend=p.moe_a2a_backend,
        speculative_num_draft_tokens=p.speculative_num_draft_tokens,
        attn_cp_size=p.attn_cp_size, is_vlm=vlm,
        vision_num_hidden_layers=getattr(model, "vision_num_hidden_layers", None) or VIT_BASE_LAYERS,
        vision_hidden_size=getattr(model, "vision_hidden_size", None) or VIT_BASE_HIDDEN,
        # parse_cuda_graph_config: the per-phase backend flags win over the legacy / boolean switches
        decode_graph_disabled=(p.cuda_graph_backend_decode == "disabled" if p.cuda_graph_backend_decode
                               else p.disable_cuda_graph or p.disable_decode_cuda_graph),
        prefill_graph_disabled=(p.cuda_graph_backend_prefill == "disabled" if p.cuda_graph_backend_prefill
                                else p.disable_cuda_graph or p.disable_prefill_cuda_graph),
        prefill_graph_backend=p.cuda_graph_backend_prefill,
    )


# ---------------------------------------------------------------------------------------------
# weights per rank


@dataclass(frozen=True)
class WeightParams:
    """Parameter counts by how SGLang partitions them over the ranks."""

    over_tp: int          # experts, dense MLP, lm_head: the full TP group
    over_attn_tp: int     # MLA q_b / kv_b / o, embed_tokens under DP attention
    over_linear_tp: int   # KDA per-head projections, conv, A_log, dt_bias
    replicated: int       # MLA q_a / kv_a, DSA indexer, routers, low-rank KDA gates
    embed: int            # embed_tokens (over attn_tp with DP attention, else over tp)

    @property
    def total(self) -> int:
        return self.over_tp + self.over_attn_tp + self.over_linear_tp + self.replicated + self.embed


def _mla_split(model: ModelConfig) -> tuple[int, int]:
    """(partitioned over attn_tp, replicated) parameters of one MLA + DSA-indexer layer."""
    h, heads = model.hidden_size, model.num_attention_heads
    q_lora = getattr(model, "q_lora_rank", 0) or 1536
    nope = getattr(model, "qk_nope_head_dim", 0) or 256
    v_dim = getattr(model, "v_head_dim", 0) or 256
    rope = model.qk_rope_head_dim
    part = q_lora * heads * (nope + rope) + model.kv_lora_rank * heads * (nope + v_dim) + heads * v_dim * h
    idx = model.index_n_heads * model.index_head_dim
    repl = h * q_lora + h * (model.kv_lora_rank + rope) + q_lora * idx + h * model.index_head_dim \
        + h * model.index_n_heads
    return part, repl


def _moe_layer(model: ModelConfig) -> tuple[int, int]:
    """(experts incl. shared, router) parameters of one MoE layer."""
    h = model.hidden_size
    experts = (model.n_routed_experts + model.n_shared_experts) * 3 * h * model.moe_intermediate_size
    return experts, model.n_routed_experts * h


def weight_params(model: ModelConfig) -> WeightParams:
    """The target model's parameters by partition (norms and the vision tower left out)."""
    h = model.hidden_size
    n_moe = model.num_hidden_layers - model.first_k_dense_replace
    experts, router = _moe_layer(model)
    dense = 3 * h * model.intermediate_size
    mla_part, mla_repl = _mla_split(model)
    kda = 4 * h * model.kda_proj_size   # q, k, v, o per head
    return WeightParams(
        over_tp=n_moe * experts + model.first_k_dense_replace * dense + model.vocab_size * h,
        over_attn_tp=model.num_full_layers * mla_part,
        over_linear_tp=model.num_linear_layers * kda,
        replicated=n_moe * router + model.num_full_layers * mla_repl,
        embed=model.vocab_size * h,
    )


def estimate_weight_bytes(model: ModelConfig, tp_size: int, bytes_per_param: float = 1.0,
                          attn_tp_size: int | None = None, linear_attn_tp_size: int | None = None,
                          dp_attention: bool | None = None) -> int:
    """Target weights on one rank (FP8 checkpoint: 1 byte per parameter).

    With ``attn_tp_size`` the attention weights are split only over the attention-TP group and
    the MLA low-rank / indexer weights are replicated, as SGLang's layers do; without it every
    parameter is divided by ``tp_size`` (the rough figure the book's charts start from).
    """
    w = weight_params(model)
    if attn_tp_size is None:
        return int(w.total * bytes_per_param / tp_size)
    lin = linear_attn_tp_size or attn_tp_size
    dpa = attn_tp_size < tp_size if dp_attention is None else dp_attention
    per_rank = (w.over_tp / tp_size + w.over_attn_tp / attn_tp_size + w.over_linear_tp / lin
                + w.replicated + w.embed / (attn_tp_size if dpa else tp_size))
    return int(per_rank * bytes_per_param)


def estimate_draft_bytes(model: ModelConfig, tp_size: int, attn_tp_size: int,
                         bytes_per_param: float = 1.0, dp_attention: bool = False) -> int:
    """The MTP draft on one rank when the target pools are sized (an estimate).

    One MLA + MoE decoder layer, ``eh_proj`` (bf16, replicated) and the draft's OWN embed_tokens
    and lm_head shards (bf16): ``set_embed_and_head`` frees them only after the target pools exist.
    """
    h = model.hidden_size
    part, repl = _mla_split(model)
    experts, router = _moe_layer(model)
    layer = (experts / tp_size + part / attn_tp_size + repl + router) * bytes_per_param
    embed = model.vocab_size * h * 2 / (attn_tp_size if dp_attention else tp_size)
    head = model.vocab_size * h * 2 / tp_size
    eh_proj = 2 * h * h * 2
    return int(layer + embed + head + eh_proj) * max(model.num_nextn_predict_layers, 1)


def dflash_draft_weights(p) -> tuple[int, str]:
    """(the DFLASH/DSPARK draft checkpoint on one rank, "safetensors" or "estimate"): its folder's
    safetensors headers split over the draft's attention TP, else ``estimate_draft_weights`` from its
    config. DSPARK's folder may be the target checkpoint's ``dspark/`` subfolder (``resolve_dspark_draft``)."""
    from ..inputs.draft import estimate_draft_weights, load_draft
    from ..inputs.resolve import draft_attn_tp, resolve_dspark_draft
    from ..inputs.weights import safetensors_bytes

    path = resolve_dspark_draft(p) if p.speculative_algorithm == "DSPARK" else p.speculative_draft_model_path
    draft_tp = draft_attn_tp(p)
    exact = safetensors_bytes(path)
    if exact is not None:
        return exact // draft_tp, "safetensors"
    return estimate_draft_weights(load_draft(path), draft_tp), "estimate"


# ---------------------------------------------------------------------------------------------
# pre-load memory and the rest


def float32(x: float) -> float:
    """``float(np.float32(x))`` without numpy: the nearest float32 (round half to even, as the cast)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def free_reading_gib(free_bytes: int, distributed: bool) -> float:
    """``get_available_gpu_memory``: bytes -> GiB, through float32 when all-reduced over ranks."""
    if distributed:
        return float32(free_bytes) / GiB
    return free_bytes / GiB


def estimate_pre_model_load_bytes(gpu: Gpu, world_size: int) -> int:
    """Free memory after distributed init, before weights: device - context - NCCL (an estimate)."""
    return gpu.memory_bytes - PRE_LOAD_CONTEXT_BYTES - (PRE_LOAD_DISTRIBUTED_BYTES if world_size > 1 else 0)


def mm_reservation_gib(multimodal: bool) -> float:
    """``mm_runtime_reservation_gb`` with the default feature transport."""
    return VLM_CACHE_SIZE_MB / 1024 if multimodal else 0.0


def rest_gib_from(pre_model_load_bytes: int, weights_bytes: int, mem_fraction_static: float,
                  world_size: int, multimodal: bool) -> float:
    """``_profile_available_bytes`` before the mamba pool, in SGLang's float GiB."""
    dist = world_size > 1
    pre = free_reading_gib(pre_model_load_bytes, dist)
    avail = free_reading_gib(pre_model_load_bytes - weights_bytes, dist)
    return avail - pre * (1 - mem_fraction_static) - mm_reservation_gib(multimodal)


@dataclass(frozen=True)
class MemoryLedger:
    """The inputs of the rest and the rest itself, each with where it came from."""

    mem_fraction_static: float
    mem_fraction_source: str          # "profile" or "default"
    is_vlm: bool                      # the VLM factor was applied to the default
    reserved_mib: float | None        # the default's activation + graph reservation
    pre_model_load_bytes: int | None
    pre_model_load_source: str | None  # "profile", "boot-log", "estimate"
    target_weights_bytes: int | None
    draft_weights_bytes: int
    draft_weights_source: str | None   # "estimate", "boot-log" or None without MTP
    weights_bytes: int | None          # target + draft on the rank when the pools are sized
    weights_source: str | None
    mm_reservation_bytes: int
    rest_gib: float | None
    rest_bytes: int | None
    weights_estimate_bytes: int = 0    # the target per rank from the config (attention replicated
                                       # over DP attention): informational, never used for the rest


def memory_ledger(p, model: ModelConfig, gpu: Gpu, attn_dp: int, max_running_requests: int | None,
                  attn_tp: int | None = None, *, pre_model_load_bytes: int | None = None,
                  pre_source: str | None = None, target_weights_bytes: int | None = None,
                  draft_weights_bytes: int | None = None, weights_source: str | None = None
                  ) -> MemoryLedger:
    """The device-to-rest path for a profile (keyword overrides: values read off a boot log).

    ``max_running_requests`` is the user's global value (SGLang computes the fraction before the
    speculative reset). Without weights the rest is None: give weights_bytes or available_bytes.
    """
    f_in = fraction_inputs(p, model, gpu, attn_dp, max_running_requests)
    if p.mem_fraction_static is not None:
        mfs, src, reserved = p.mem_fraction_static, "profile", None
    else:
        mfs, src, reserved = fraction_from_inputs(f_in), "default", reserved_mib(f_in)
    world = p.tp_size
    multimodal = is_multimodal(model, p)
    if pre_model_load_bytes is None:
        if p.pre_model_load_bytes is not None:
            pre_model_load_bytes, pre_source = p.pre_model_load_bytes, "profile"
        else:
            pre_model_load_bytes, pre_source = estimate_pre_model_load_bytes(gpu, world), "estimate"
    if target_weights_bytes is None and p.weights_bytes is not None:
        target_weights_bytes, weights_source = int(p.weights_bytes), "profile"
    a_tp = attn_tp or max(1, p.tp_size // attn_dp)
    if (target_weights_bytes is None and p.available_bytes is None and p.weights_estimate):
        target_weights_bytes, weights_source = weights_from_model(p, model, a_tp, attn_dp)
    draft_src = None
    if draft_weights_bytes is None and p.draft_weights_bytes is not None and p.speculative_algorithm:
        draft_weights_bytes, draft_src = int(p.draft_weights_bytes), "profile"
    elif p.speculative_algorithm in ("DFLASH", "DSPARK") and draft_weights_bytes is None:
        draft_weights_bytes, draft_src = dflash_draft_weights(p)
    elif p.speculative_algorithm and draft_weights_bytes is None:
        draft_weights_bytes = estimate_draft_bytes(model, p.tp_size, a_tp, dp_attention=attn_dp > 1)
        draft_src = "estimate"
    elif draft_weights_bytes is not None and draft_src is None:
        draft_src = weights_source
    w_est = model_weight_estimate(p, model, a_tp, attn_dp)
    draft = draft_weights_bytes or 0
    weights = rest = rest_b = None
    w_src = weights_source
    if target_weights_bytes is not None:
        weights = target_weights_bytes + draft
        if draft_src == "estimate":
            w_src = f"{weights_source}+estimate"
        rest = rest_gib_from(pre_model_load_bytes, weights, mfs, world, multimodal)
        rest_b = int(rest * GiB)
    return MemoryLedger(
        mem_fraction_static=mfs, mem_fraction_source=src, is_vlm=f_in.is_vlm and src == "default",
        reserved_mib=reserved, pre_model_load_bytes=pre_model_load_bytes, pre_model_load_source=pre_source,
        target_weights_bytes=target_weights_bytes, draft_weights_bytes=draft, draft_weights_source=draft_src,
        weights_bytes=weights, weights_source=w_src,
        mm_reservation_bytes=int(mm_reservation_gib(multimodal) * GiB), rest_gib=rest, rest_bytes=rest_b,
        weights_estimate_bytes=w_est)


def weights_from_model(p, model: ModelConfig, attn_tp: int, attn_dp: int) -> tuple[int, str]:
    """(target weights on one rank, "safetensors" or "estimate") for a profile without weights_bytes.

    A local checkpoint folder: its safetensors headers give the exact total, split over the ranks in
    the proportions of ``estimate_weight_bytes`` (experts over TP, attention over attention TP, ...).
    Otherwise the estimate itself, at the bytes per parameter of the checkpoint's quantization.
    """
    from ..inputs.weights import local_config, safetensors_bytes

    cfg = local_config(p.model)
    per_rank = model_weight_estimate(p, model, attn_tp, attn_dp)
    exact = safetensors_bytes(p.model) if cfg is not None else None
    if exact is None:
        return per_rank, "estimate"
    whole = weight_params(model).total * checkpoint_bytes_per_param(p)
    return int(exact * per_rank / whole), "safetensors"


def checkpoint_bytes_per_param(p) -> float:
    """Bytes per parameter of the profile's checkpoint (its config's quantization; FP8 with its
    128 x 128 block scales when the config names none)."""
    from ..inputs.weights import BYTES_PER_PARAM, local_config, quantization_of

    return BYTES_PER_PARAM[quantization_of(local_config(p.model) or {})]


def model_weight_estimate(p, model: ModelConfig, attn_tp: int, attn_dp: int) -> int:
    """The one weight estimate per rank (config + quantization): what the plan uses when the
    profile states no weights, and what ``weights_estimate_bytes`` reports beside stated ones."""
    return estimate_weight_bytes(model, p.tp_size, checkpoint_bytes_per_param(p), attn_tp_size=attn_tp,
                                 dp_attention=attn_dp > 1)


def rest_for_profile(p, gpu: Gpu, attn_dp: int, max_running_requests: int | None) -> MemoryLedger:
    """The device-to-rest ledger for a profile (``max_running_requests``: the user's global value).

    Shared by the plan's sweep; ``rest_gib`` is None when the profile gives no weights and turns the
    estimate off.
    """
    from ..inputs.model import load_model

    return memory_ledger(p, load_model(p.model), gpu, attn_dp, max_running_requests)


def no_memory_rule(m: MemoryLedger, gpu_name: str) -> str:
    """The one refusal text when the weights leave no memory for the pools (plan and sweep alike)."""
    draft = f", {m.draft_weights_bytes:,} B of them the draft's" if m.draft_weights_bytes else ""
    return (f"weights ({m.weights_bytes:,} B per rank{draft}, {m.weights_source}) leave no memory for the "
            f"pools on a {gpu_name} at mem_fraction_static={m.mem_fraction_static:.6g}")
