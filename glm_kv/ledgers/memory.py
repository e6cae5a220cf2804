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

import math
import struct
from dataclasses import dataclass

from ..errors import ProfileError, sglang_says
from ..inputs.gpus import Gpu
from ..units import GiB, MiB, fmt_bytes

MLA_PREFILL_GRAPH_MIB = 1536          # reserve_for_graph_mb: MLA prefill graph, flat
DEEPEP_PREFILL_GRAPH_MIB = 1024       # ... breakable prefill graph with moe_a2a_backend deepep
DEEPEP_A2A_MIB = 2048                 # reserve_for_deepep_a2a_mb (after the 10 GiB floor)
BREAKABLE_PREFILL_A2A = ("none", "deepep", "megamoe", "flashinfer")   # other a2a: prefill graph off
# configs/model_config.py multimodal_model_archs (is_multimodal_model), as the 0.5.23 wheel lists them
MULTIMODAL_ARCHS = (
    'CLIPModel', 'Cohere2VisionForConditionalGeneration', 'Cosmos3EdgeForConditionalGeneration',
    'DeepseekVL2ForCausalLM', 'Ernie4_5_VLMoeForConditionalGeneration', 'MiniMaxM3SparseForConditionalGeneration',
    'Gemma3ForConditionalGeneration', 'Gemma3nForConditionalGeneration', 'Gemma4ForConditionalGeneration',
    'EmbeddingGemma2Model', 'Gemma4UnifiedForConditionalGeneration', 'DiffusionGemmaForBlockDiffusion',
    'Glm4vForConditionalGeneration', 'Glm4vMoeForConditionalGeneration', 'Glm5NextForConditionalGeneration',
    'GlmOcrForConditionalGeneration', 'GlmAsrForConditionalGeneration', 'GlmImageForConditionalGeneration',
    'Grok1VForCausalLM', 'Grok1AForCausalLM', 'LlavaLlamaForCausalLM', 'Llama4ForConditionalGeneration',
    'LlavaMistralForCausalLM', 'LlavaQwenForCausalLM', 'LlavaForConditionalGeneration', 'LlavaVidForCausalLM',
    'Lfm2VlForConditionalGeneration', 'LightOnOCRForConditionalGeneration', 'MiMoV2ForCausalLM',
    'MiMoV2ASRForCausalLM', 'MiniCPMO', 'MiniCPMV', 'Mistral3ForConditionalGeneration', 'MultiModalityCausalLM',
    'MllamaForConditionalGeneration', 'MossVLForConditionalGeneration', 'NemotronH_Nano_VL_V2',
    'NemotronH_Nano_Omni_Reasoning_V3', 'NemotronH_Omni_Reasoning_V3', 'MuseGlimmerForConditionalGeneration',
    'MuseSparkForConditionalGeneration', 'PixtralForConditionalGeneration', 'Qwen2AudioForConditionalGeneration',
    'Qwen2VLForConditionalGeneration', 'Qwen2_5_VLForConditionalGeneration', 'Qwen3VLForConditionalGeneration',
    'Qwen3VLMoeForConditionalGeneration', 'Qwen3_5ForConditionalGeneration', 'Qwen3_5MoeForConditionalGeneration',
    'Qwen4ExpForConditionalGeneration', 'InternS2PreviewForConditionalGeneration',
    'InternS2MobiusForConditionalGeneration', 'Qwen3ASRForConditionalGeneration',
    'Qwen3OmniMoeForConditionalGeneration', 'KimiVLForConditionalGeneration',
    'LocateAnythingForConditionalGeneration', 'InternVLChatModel', 'InternS1ForConditionalGeneration',
    'InternS1ProForConditionalGeneration', 'Phi4MMForCausalLM', 'VoxtralForConditionalGeneration',
    'WhisperForConditionalGeneration', 'Step3VLForConditionalGeneration', 'POINTSV15ChatModel',
    'DotsVLMForCausalLM', 'Dots3NoteForCausalLM', 'DotsOCRForCausalLM', 'Sarashina2VisionForCausalLM',
    'NVILAForConditionalGeneration', 'NVILALiteForConditionalGeneration', 'DeepseekOCRForCausalLM',
    'UnlimitedOCRForCausalLM', 'JetVLMForConditionalGeneration', 'PaddleOCRVLForConditionalGeneration',
    'MiDashengLMModel', 'StepVLForConditionalGeneration', 'Step3p7ForConditionalGeneration',
    'KimiK25ForConditionalGeneration', 'BailingMMNativeForConditionalGeneration',
    'BailingMM2NativeForConditionalGeneration', 'BailingMoeV3VLForConditionalGeneration')
# ModelConfig.__init__: enable_multimodal defaults to False when the FIRST architecture is one of these
MM_DISABLED_ARCHS = ("Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
                     "Step3VLForConditionalGeneration", "InklingForConditionalGeneration")
# configs/model_config.py multimodal_breakable_cuda_graph_supported_model_archs
MULTIMODAL_BCG_ARCHS = (
    "MiniMaxM3SparseForConditionalGeneration", "Cohere2VisionForConditionalGeneration",
    "Glm5NextForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "PaddleOCRVLForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen4ExpForConditionalGeneration", "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration",
    "KimiK3ForConditionalGeneration", "KimiK25ForConditionalGeneration", "MiniMaxM3SparseForCausalLM")
# ModelConfig._derive_model_shapes: the architectures whose attention_arch is MLA (use_mla_backend,
# arg_groups/model_override_base.py); PixtralForConditionalGeneration only with a kv_lora_rank and
# DeepseekVL2ForCausalLM only with use_mla (default True), as there
# configs/model_config.py is_deepseek_v4
DSV4_ARCHS = ("DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN", "DeepseekV4ForCausalLMDSpark")
MLA_ARCHS = (
    "DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV3ForCausalLMNextN",
    "Dots3NoteForCausalLM", "Dots3NoteForCausalLMNextN", "DotsVLMForCausalLM", "Eagle3DeepseekV2ForCausalLM",
    "GigaChat35ForCausalLM", "GigaChat35ForCausalLMNextN", "Glm4MoeLiteForCausalLM", "Glm4MoeLiteForCausalLMNextN",
    "Glm5NextForConditionalGeneration", "Glm5NextForConditionalGenerationNextN", "GlmMoeDsaForCausalLM",
    "GlmMoeDsaForCausalLMNextN", "HYV4ForCausalLM", "HYV4ForCausalLMNextN", "KimiK25ForConditionalGeneration",
    "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "MistralLarge3ForCausalLM",
    "MistralLarge3ForCausalLMEagle", "MiniCPM3ForCausalLM", "KimiVLForConditionalGeneration",
    "KimiLinearForCausalLM", "KimiK3LinearForCausalLM", "KimiK3ForConditionalGeneration",
    "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration",
    "SarvamMLAForCausalLM")
# arg_groups/model_overrides/qwen3_vl.py: large_hopper_qwen3_vl_model_type's model types
HOPPER_QWEN3_VL_TYPES = ("qwen3_vl", "qwen3_vl_moe")
# the vision config's (num_hidden_layers, hidden_size) as SGLang's config classes expose them, per
# top-level model_type: KimiK3VisionConfig maps vt_num_hidden_layers / vt_hidden_size (configs/kimi_k3.py,
# defaults 27 / 1024); Qwen3_5VisionConfig (Qwen3VLVisionConfig) names the depth "depth", so
# getattr(..., "num_hidden_layers", 24) gives 24, and its hidden_size defaults to 1152
VISION_ATTRS = {"kimi_k3": (("vt_num_hidden_layers", 27), ("vt_hidden_size", 1024)),
                "qwen3_5_moe": (("num_hidden_layers", None), ("hidden_size", 1152)),
                "qwen3_5": (("num_hidden_layers", None), ("hidden_size", 1152))}
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
DRAFT_ESTIMATE_NOTE = ("draft_weights_bytes is an ESTIMATE from the draft's config (an MTP draft's: the model's"
                       " own) and quantization ({draft} per rank, on top of the weights_bytes given); give"
                       " draft_weights_bytes (the draft's \"Load weight end ... mem usage\" in a boot log)")


def weights_estimate_note(m: "MemoryLedger") -> str | None:
    """What of the weights per rank is an estimate, and what to give instead: the target's (the whole
    figure), else the MTP draft's alone (the target given); None when nothing is estimated."""
    if (m.weights_source or "").startswith("estimate"):
        return WEIGHTS_ESTIMATE_NOTE.format(weights=fmt_bytes(m.weights_bytes))
    if m.draft_weights_source == "estimate" and m.weights_bytes is not None:
        return DRAFT_ESTIMATE_NOTE.format(draft=fmt_bytes(m.draft_weights_bytes))
    return None


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
    # issue 31: what the fraction reads of the model beyond GLM-5.3-Flash (defaults: GLM-5.3-Flash's)
    mla_backend: bool = True               # use_mla_backend: flat 1.5 GiB prefill graph, else len(bs) x 8
    max_total_tokens: int | None = None    # caps the non-MLA prefill graph's max_bs
    model_prefill_graph_off: bool = False  # disable_breakable_cudagraph_if_incompatible's model rules
    two_batch_overlap: bool = False        # its "two-batch overlap" rule (--enable-two-batch-overlap)
    expand_decode_to_running: bool = False  # expand_multimodal_decode_graph_to_running_limit applies
    post_capture_kv_sizing: bool = False   # post_capture_kv_sizing_planned (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING)


def prefill_graph_batch_sizes(max_bs: int) -> list[int]:
    """``generate_prefill_cuda_graph_batch_sizes`` (arg_groups/cuda_graph_hook.py): the prefill
    capture sizes (tokens) up to ``max_bs``."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_bs + 1, 512)))
    return [s for s in sizes if s <= max_bs]


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
    # expand_multimodal_decode_graph_to_running_limit (arg_groups/model_overrides/qwen3_vl.py): Qwen3-VL
    # on a large Hopper keeps decode up to max_running_requests (<= 512) in the graph; never for an
    # explicit decode max_bs
    if (f.expand_decode_to_running and f.cuda_graph_max_bs_decode is None and f.max_running_requests is not None
            and f.max_running_requests <= 512 and max_bs < f.max_running_requests and f.gpu_mem_mib >= 60 * 1024):
        max_bs = f.max_running_requests
    mode = f.disaggregation_mode or "null"
    if f.post_capture_kv_sizing:   # graph and activations measured after capture: floor + parallel slack
        return 1536 + f.tp_size * f.pp_size / 8 * 1024
    # the decode graph's backend (cuda_graph_config.decode): DISABLED drops max_bs x 2 and the DeepEP
    # a2a buffers, not the DP-attention padding term (reserve_for_graph_mb reads max_bs there whatever
    # the backend); a disabled prefill graph drops the MLA prefill graph's flat 1.5 GiB
    decode_graph = mode != "prefill" and not f.decode_graph_disabled
    # disable_breakable_cudagraph_if_incompatible runs before the fraction: an a2a backend outside
    # its list, or attn_cp_size > 1 (supports_prefill_cp_bcg needs the DSA prefill backend, not yet
    # resolved then), turns the prefill graph off; it comes back only after the fraction is fixed.
    locked = f.prefill_graph_backend is not None
    # its model rules (KDA other than GLM-5.3-Flash, a multimodal model off the breakable allowlist)
    # and two-batch overlap ("TBO capture is unsupported") turn it off the same way
    prefill_graph = (mode != "decode" and not f.prefill_graph_disabled
                     and (locked or (f.moe_a2a_backend in BREAKABLE_PREFILL_A2A and f.attn_cp_size == 1
                                     and not f.model_prefill_graph_off and not f.two_batch_overlap)))
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
        if f.mla_backend:
            graph += MLA_PREFILL_GRAPH_MIB
        else:   # non-MLA: 8 MiB per prefill capture size, max_bs = chunked prefill (capped by max_total_tokens)
            prefill_max_bs = chunk if f.max_total_tokens is None else min(chunk, f.max_total_tokens)
            graph += len(prefill_graph_batch_sizes(prefill_max_bs)) * 8
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
    if f.is_vlm and f.post_capture_kv_sizing:   # adjust_mem_fraction_for_vlm: a flat 8 GiB instead
        return frac - 8 * 1024 / f.gpu_mem_mib
    if f.is_vlm:
        frac = frac * vlm_factor(f.vision_num_hidden_layers, f.vision_hidden_size)
    return frac


@dataclass(frozen=True)
class ModelFacts:
    """What SGLang's fraction and rest read of a model, from its config.json (``configs/model_config.py``
    ModelConfig, before the launch flags): the attention architecture, the multimodal decision, the
    vision tower's size for ``adjust_mem_fraction_for_vlm``, the prefill-graph model rules."""

    model_type: str
    use_mla: bool                    # attention_arch == MLA (use_mla_backend)
    multimodal: bool                 # is_multimodal without --language-model-only
    has_vision_config: bool
    vision_num_hidden_layers: int    # getattr(vision_config, "num_hidden_layers", 24)
    vision_hidden_size: int          # getattr(vision_config, "hidden_size", 1024)
    kda_prefill_graph_off: bool      # a KDA model other than GLM-5.3-Flash: breakable prefill graph off
    multimodal_bcg_supported: bool   # is_multimodal_breakable_cuda_graph_supported
    dsv4_prefill_graph_off: bool = False   # DeepSeek-V4 without prefill CP: breakable prefill graph off


def _uses_kda(cfg) -> bool:
    """``uses_kda_attention`` (configs/model_config.py): linear_attn_config.kda_layers, or linear
    attention layer types with linear_num_heads and linear_head_dim, on the config or its text part."""
    for c in (cfg.top, cfg.text):
        lac = c.get("linear_attn_config")
        if isinstance(lac, dict) and lac.get("kda_layers"):
            return True
        if "linear_attention" in (c.get("layer_types") or []) and c.get("linear_num_heads") is not None \
                and c.get("linear_head_dim") is not None:
            return True
    return False


def model_facts(model) -> ModelFacts:
    """The facts of a model from its ``HfConfig``, by SGLang's rules (GLM-5.3-Flash's as every model's)."""
    archs, top, text = tuple(model.architectures), model.top, model.text
    use_mla = any(a in MLA_ARCHS for a in archs) or (
        "PixtralForConditionalGeneration" in archs and text.get("kv_lora_rank") is not None) or (
        "DeepseekVL2ForCausalLM" in archs and text.get("use_mla", True))
    enable_mm = not (archs and archs[0] in MM_DISABLED_ARCHS)
    lm_only = bool(top.get("language_model_only", False))
    has_subconfig = "text_config" in top          # hf_config is not hf_text_config
    multimodal = enable_mm and not lm_only and (any(a in MULTIMODAL_ARCHS for a in archs) or has_subconfig)
    vision = top.get("vision_config")
    (layers_key, layers_default), (hidden_key, hidden_default) = VISION_ATTRS.get(
        model.model_type, (("num_hidden_layers", None), ("hidden_size", None)))
    v = vision if isinstance(vision, dict) else {}
    return ModelFacts(
        model_type=model.model_type, use_mla=use_mla, multimodal=multimodal,
        has_vision_config=isinstance(vision, dict),
        vision_num_hidden_layers=v.get(layers_key) or layers_default or VIT_BASE_LAYERS,
        vision_hidden_size=v.get(hidden_key) or hidden_default or VIT_BASE_HIDDEN,
        kda_prefill_graph_off=_uses_kda(model) and "Glm5NextForConditionalGeneration" not in archs,
        multimodal_bcg_supported=enable_mm and any(a in MULTIMODAL_BCG_ARCHS for a in archs),
        # disable_breakable_cudagraph_if_incompatible: "DeepSeek-V4 (heavy capture-pool memory pressure)",
        # is_deepseek_v4 on the first architecture, unless prefill CP (not sized for DeepSeek-V4 here) captures
        dsv4_prefill_graph_off=bool(archs) and archs[0] in DSV4_ARCHS)


def is_multimodal(model, p=None) -> bool:
    """SGLang's ``ModelConfig.is_multimodal``: a multimodal architecture or a text_config sub-config,
    unless --language-model-only (``model``: an HfConfig)."""
    return model_facts(model).multimodal and not (p is not None and p.language_model_only)


def fraction_inputs(p, model, gpu: Gpu, attn_dp: int,
                    max_running_requests: int | None) -> FractionInputs:
    """The inputs of the default fraction for a profile; ``max_running_requests`` is the user's.

    ``model``: an ``HfConfig`` (any model, GLM-5.3-Flash too). The rules read, all in
    arg_groups/: ``memory_hook.handle_gpu_memory_settings`` (GPU defaults, activation, parallel slack,
    10 GiB floor), ``memory_hook.reserve_for_graph_mb`` (decode graph, DP padding, the prefill graph:
    flat 1.5 GiB for MLA backends, ``len(bs) x 8`` otherwise), ``memory_hook.reserve_for_deepep_a2a_mb``,
    ``memory_hook.adjust_mem_fraction_for_vlm``, ``cuda_graph_hook.apply_cuda_graph_compatibility`` /
    ``disable_breakable_cudagraph_if_incompatible`` (which model turns the prefill graph off),
    ``model_overrides/qwen3_vl.expand_multimodal_decode_graph_to_running_limit`` and
    ``overrides.post_capture_kv_sizing_planned`` (False: SGLANG_ENABLE_POST_CAPTURE_KV_SIZING is off
    by default, and the profile has no field for it).
    """
    mode = p.disaggregation_mode
    facts = model_facts(model)
    multimodal = facts.multimodal and not p.language_model_only
    vlm = multimodal and facts.has_vision_config and not p.language_only and mode != "decode"
    return FractionInputs(
        gpu_mem_mib=gpu.memory_bytes / MiB, tp_size=p.tp_size, pp_size=1, attn_dp_size=attn_dp,
        max_running_requests=max_running_requests,
        chunked_prefill_size=p.chunked_prefill_size,
        cuda_graph_max_bs_decode=p.cuda_graph_max_bs_decode,
        max_prefill_tokens=p.max_prefill_tokens,
        disaggregation_mode=mode, moe_a2a_backend=p.moe_a2a_backend,
        speculative_num_draft_tokens=p.speculative_num_draft_tokens,
        attn_cp_size=p.attn_cp_size, is_vlm=vlm,
        vision_num_hidden_layers=facts.vision_num_hidden_layers,
        vision_hidden_size=facts.vision_hidden_size,
        # parse_cuda_graph_config: the per-phase backend flags win over the legacy / boolean switches
        decode_graph_disabled=(p.cuda_graph_backend_decode == "disabled" if p.cuda_graph_backend_decode
                               else p.disable_cuda_graph or p.disable_decode_cuda_graph),
        prefill_graph_disabled=(p.cuda_graph_backend_prefill == "disabled" if p.cuda_graph_backend_prefill
                                else p.disable_cuda_graph or p.disable_prefill_cuda_graph),
        prefill_graph_backend=p.cuda_graph_backend_prefill,
        mla_backend=facts.use_mla,
        max_total_tokens=p.max_total_tokens,
        model_prefill_graph_off=facts.kda_prefill_graph_off or facts.dsv4_prefill_graph_off
        or (multimodal and not facts.multimodal_bcg_supported),
        two_batch_overlap=p.enable_two_batch_overlap,
        expand_decode_to_running=(facts.model_type in HOPPER_QWEN3_VL_TYPES and multimodal and gpu.sm // 10 == 9),
        post_capture_kv_sizing=False,
    )


# ---------------------------------------------------------------------------------------------
# weights per rank


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


def free_readings(pre_model_load_bytes: int, weights_bytes: int, world_size: int) -> tuple[float, float]:
    """SGLang's two free-memory readings in float GiB: before the weights load (``pre_model_load_memory``) and
    after target + draft (``available_gpu_memory``), through float32 when all-reduced over ranks."""
    dist = world_size > 1
    return (free_reading_gib(pre_model_load_bytes, dist),
            free_reading_gib(pre_model_load_bytes - weights_bytes, dist))


def rest_gib_from(pre_model_load_bytes: int, weights_bytes: int, mem_fraction_static: float,
                  world_size: int, multimodal: bool) -> float:
    """``_profile_available_bytes`` before the mamba pool, in SGLang's float GiB."""
    pre, avail = free_readings(pre_model_load_bytes, weights_bytes, world_size)
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
    free_readings_gib: tuple[float, float] | None = None   # SGLang's float GiB free before and after
                                       # the weights (pre_model_load_memory, available_gpu_memory)


def memory_ledger_for(p, cfg, layers, gpu: Gpu, attn_dp: int, max_running_requests: int | None,
                      attn_tp: int | None = None, *, pre_model_load_bytes: int | None = None,
                      pre_source: str | None = None, target_weights_bytes: int | None = None,
                      draft_weights_bytes: int | None = None, weights_source: str | None = None,
                      weights_estimate_bytes: int | None = None, draft_source: str | None = None) -> MemoryLedger:
    """The device-to-rest path for any model (issue 31): ``cfg`` an ``HfConfig`` (config.json dicts +
    hf_quant_config.json), ``layers`` its ``ModelLayers`` (``model_layers.build_layers``).

    Reads only those two and the profile: the default fraction (``fraction_inputs`` / ``reserved_mib``:
    SGLang's arg_groups/memory_hook.py ``handle_gpu_memory_settings``), the pre-load free memory
    (the profile's, else an estimate), the weights per rank (given, else the local checkpoint's
    safetensors headers, else ``model_weights.checkpoint_weights`` from config + quantization, an
    ESTIMATE), the MTP draft (an estimate for MLA models with NextN layers), and the rest as
    ``KVCacheConfigurator._profile_available_bytes`` computes it (mem_cache/kv_cache_configurator.py,
    float32 readings, ``mm_runtime_reservation_gb`` for a multimodal model). Keyword overrides:
    values read off a boot log. ``max_running_requests`` is the user's global value (SGLang computes
    the fraction before the speculative reset). Without weights the rest is None.
    ``weights_estimate_bytes``: a model whose weights ``model_weights`` does not count gives its own
    estimate (DeepSeek-V4: ``dsv4_weights``) with the target and draft bytes (``draft_source``: where a
    draft given here comes from, when not where the target's came from).
    """
    f_in = fraction_inputs(p, cfg, gpu, attn_dp, max_running_requests)
    if p.mem_fraction_static is not None:
        mfs, src, reserved = p.mem_fraction_static, "profile", None
    else:
        mfs, src, reserved = fraction_from_inputs(f_in), "default", reserved_mib(f_in)
    world = p.tp_size
    multimodal = is_multimodal(cfg, p)
    if pre_model_load_bytes is None:
        if p.pre_model_load_bytes is not None:
            pre_model_load_bytes, pre_source = p.pre_model_load_bytes, "profile"
        else:
            pre_model_load_bytes, pre_source = estimate_pre_model_load_bytes(gpu, world), "estimate"
    if target_weights_bytes is None and p.weights_bytes is not None:
        target_weights_bytes, weights_source = int(p.weights_bytes), "profile"
    a_tp = attn_tp or max(1, p.tp_size // attn_dp)
    if (target_weights_bytes is None and p.available_bytes is None and p.weights_estimate):
        target_weights_bytes, weights_source = weights_for(p, cfg, layers, a_tp, attn_dp)
    draft_src = None
    if draft_weights_bytes is None and p.draft_weights_bytes is not None and p.speculative_algorithm:
        draft_weights_bytes, draft_src = int(p.draft_weights_bytes), "profile"
    elif p.speculative_algorithm in ("DFLASH", "DSPARK") and draft_weights_bytes is None:
        draft_weights_bytes, draft_src = dflash_draft_weights(p)
    elif p.speculative_algorithm and draft_weights_bytes is None:
        draft_weights_bytes = estimate_draft_bytes_for(cfg, layers, p.tp_size, a_tp, dp_attention=attn_dp > 1)
        draft_src = "estimate"
    elif draft_weights_bytes is not None and draft_src is None:
        draft_src = draft_source or weights_source
    w_est = (weights_estimate_bytes if weights_estimate_bytes is not None
             else weight_estimate_for(p, cfg, layers, a_tp, attn_dp))
    draft = draft_weights_bytes or 0
    weights = rest = rest_b = readings = None
    w_src = weights_source
    if target_weights_bytes is not None:
        weights = target_weights_bytes + draft
        if draft_src == "estimate":
            w_src = f"{weights_source}+estimate"
        rest = rest_gib_from(pre_model_load_bytes, weights, mfs, world, multimodal)
        rest_b = int(rest * GiB)
        readings = free_readings(pre_model_load_bytes, weights, world)
    return MemoryLedger(
        mem_fraction_static=mfs, mem_fraction_source=src, is_vlm=f_in.is_vlm and src == "default",
        reserved_mib=reserved, pre_model_load_bytes=pre_model_load_bytes, pre_model_load_source=pre_source,
        target_weights_bytes=target_weights_bytes, draft_weights_bytes=draft, draft_weights_source=draft_src,
        weights_bytes=weights, weights_source=w_src,
        mm_reservation_bytes=int(mm_reservation_gib(multimodal) * GiB), rest_gib=rest, rest_bytes=rest_b,
        weights_estimate_bytes=w_est, free_readings_gib=readings)


def memory_plan_keys(m: MemoryLedger, rest_bytes: int | None, given: bool) -> dict:
    """The plan's capacity.* keys of the device-to-rest path (appended; the inputs null where the profile gave
    the rest, ``given``): one list for the shared plan and DeepSeek-V4's."""
    return {
        "mem_fraction_static": m.mem_fraction_static,
        "mem_fraction_static_source": m.mem_fraction_source,
        "rest_bytes": rest_bytes,
        "pre_model_load_bytes": None if given else m.pre_model_load_bytes,
        "pre_model_load_bytes_source": None if given else m.pre_model_load_source,
        "weights_bytes": None if given else m.weights_bytes,
        "weights_bytes_source": None if given else m.weights_source,
        "draft_weights_bytes": None if given else m.draft_weights_bytes,
        "weights_estimate_bytes": m.weights_estimate_bytes,
    }


def weights_for(p, cfg, layers, attn_tp: int, attn_dp: int) -> tuple[int, str]:
    """(target weights on one rank, "safetensors" or "estimate") for a profile without weights_bytes.

    A local checkpoint folder: its safetensors headers give the exact total, split over the ranks in
    the proportions of the estimate (experts over TP, attention over attention TP, ...). Otherwise the
    estimate itself (``model_weights.checkpoint_weights``), at the checkpoint's quantization.
    """
    from ..inputs.weights import local_config, safetensors_bytes
    from .model_weights import checkpoint_weights

    cfg_local = local_config(p.model)
    per_rank = weight_estimate_for(p, cfg, layers, attn_tp, attn_dp)
    exact = safetensors_bytes(p.model) if cfg_local is not None else None
    if exact is None:
        return per_rank, "estimate"
    return int(exact * per_rank / checkpoint_weights(cfg, layers).whole_bytes), "safetensors"


def weight_estimate_for(p, cfg, layers, attn_tp: int, attn_dp: int) -> int:
    """The one weight estimate per rank (config + quantization) of any model: what the plan uses when
    the profile states no weights, and what ``weights_estimate_bytes`` reports beside stated ones."""
    from .model_weights import checkpoint_weights

    return checkpoint_weights(cfg, layers).per_rank(p.tp_size, attn_tp, dp_attention=attn_dp > 1)


def estimate_draft_bytes_for(cfg, layers, tp_size: int, attn_tp_size: int, dp_attention: bool = False) -> int:
    """The MTP / NextN draft on one rank when the target pools are sized (an ESTIMATE), for MLA models
    with ``num_nextn_predict_layers`` (GLM-5.3-Flash, DeepSeek-V3.2, GLM-5.1): one MLA (+ DSA indexer)
    + MoE decoder layer per NextN layer at the checkpoint's width (GLM-5.3-Flash: 1 B, as before),
    ``eh_proj`` (bf16, replicated) and the draft's OWN embed_tokens and lm_head shards (bf16),
    which ``set_embed_and_head`` frees only after the target pools exist."""
    from .model_weights import checkpoint_weights, draft_layer_counts

    if not model_facts(cfg).use_mla or cfg.text.get("kv_lora_rank") is None:
        raise ProfileError("speculative_algorithm", f"the draft weights of {cfg.name} are not estimated (MLA "
                                                     "models' NextN layers are); give draft_weights_bytes")
    t = cfg.text
    h, vocab = t["hidden_size"], t["vocab_size"]
    bpp = 1.0 if cfg.model_type == "glm5_next" else checkpoint_weights(cfg, layers).quantized_bytes_per_param
    experts, part, repl = draft_layer_counts(cfg, layers)
    layer = (experts / tp_size + part / attn_tp_size + repl) * bpp
    embed = vocab * h * 2 / (attn_tp_size if dp_attention else tp_size)
    head = vocab * h * 2 / tp_size
    eh_proj = 2 * h * h * 2
    return int(layer + embed + head + eh_proj) * max(t.get("num_nextn_predict_layers") or 0, 1)


def rest_for_profile(p, gpu: Gpu, attn_dp: int, max_running_requests: int | None) -> MemoryLedger:
    """The device-to-rest ledger for a profile (``max_running_requests``: the user's global value),
    through the one resolution (any model's config and layers).

    Shared by the plan's sweep; ``rest_gib`` is None when the profile gives no weights and turns the
    estimate off.
    """
    from ..inputs.resolve import resolve
    from .model_layers import layers_for

    args = resolve(p)
    return memory_ledger_for(p, args.config, layers_for(args), gpu, attn_dp, max_running_requests, args.attn_tp_size)


def no_memory_rule(m: MemoryLedger, gpu_name: str) -> str:
    """The one refusal text when the weights leave no memory for the pools (plan and sweep alike): what leaves
    none, then SGLang 0.5.23's own words (``_profile_available_bytes``), which name the fraction that would do."""
    draft = f", {m.draft_weights_bytes:,} B of them the draft's" if m.draft_weights_bytes else ""
    mine = (f"weights ({m.weights_bytes:,} B per rank{draft}, {m.weights_source}) leave no memory for the "
            f"pools on a {gpu_name} at mem_fraction_static={m.mem_fraction_static:.6g}")
    if m.free_readings_gib is not None and m.free_readings_gib[1] <= 0:   # SGLang's fraction would be >= 1
        mine += "; no fraction fits: the weights exceed the free memory"
    words = sglang_no_memory_text(m)
    return mine if words is None else mine + sglang_says(words)


def sglang_no_memory_text(m: MemoryLedger | None) -> str | None:
    """SGLang 0.5.23's refusal when the rest is not positive (``KVCacheConfigurator._profile_available_bytes``):
    the minimum viable fraction is ``1 - available/pre`` over its two float free readings, rounded up to 0.001.
    SGLang raises it too when the rest AFTER the mamba pool is not positive (capacity's ``NO_REST_CODES``), where
    the fraction it names may be below the one in use. None without the readings (the rest was given), or with
    no free memory before the weights (SGLang would divide by zero: no words of its to quote)."""
    if m is None or m.free_readings_gib is None or m.free_readings_gib[0] <= 0:
        return None
    pre, avail = m.free_readings_gib
    minimum = 1 - avail / pre
    suggested = math.ceil(minimum * 1000) / 1000
    return (f"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static="
            f"{m.mem_fraction_static}. Raise --mem-fraction-static above {suggested:.3f} (minimum viable = "
            f"1 - available/pre = {minimum:.4f}). If using speculative decoding, draft weights are now counted.")


def pools_budget(p, gpu: Gpu, mem: MemoryLedger | None) -> tuple[int | None, str, float | None]:
    """Bytes left for the pools on one rank, where they come from, and SGLang's float rest in GiB: the profile's
    ``available_bytes``, else the rest the device-to-rest path leaves (one rule for the shared plan and
    DeepSeek-V4's); a rest at or below zero is refused, naming what leaves none."""
    if p.available_bytes is not None:
        return p.available_bytes, "available_bytes from the profile", p.available_bytes / GiB
    if mem is None or mem.rest_gib is None:
        return None, "unknown (give available_bytes, or weights_bytes with gpu)", None
    rest_gib, mfs = mem.rest_gib, mem.mem_fraction_static
    avail = int(rest_gib * GiB)
    if avail <= 0 and mfs <= 0:  # the device is smaller than SGLang's own reservation (issue 10)
        raise ProfileError("memory_bytes" if p.memory_bytes is not None else "gpu",
                           f"{gpu.memory_bytes:,} B of device memory is less than SGLang 0.5.23 reserves "
                           f"(activations, CUDA graphs): no positive mem_fraction_static exists")
    if avail <= 0:
        raise ProfileError("weights_bytes", no_memory_rule(mem, gpu.name))
    how = ("mem_fraction_static from the profile" if mem.mem_fraction_source == "profile"
           else "SGLang 0.5.23's default mem_fraction_static" + (" x VLM factor" if mem.is_vlm else ""))
    mm = " - 100 MiB VLM cache" if mem.mm_reservation_bytes else ""
    return avail, (f"derived: free after weights ({mem.weights_source}) - pre_model_load_bytes "
                   f"({mem.pre_model_load_source}) x (1 - {mfs:.6g}) ({how}){mm}"), rest_gib
