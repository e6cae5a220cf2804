"""One resolution step: a validated profile -> the server arguments SGLang ends up running with.

SGLang resolves its ``ServerArgs`` (defaults per GPU, model overrides, strategy choice, the
speculative reset) once, before any pool is sized. This module does the same, once, so every
ledger reads resolved values and none re-derives a default of its own.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import ProfileError
from ..units import requests_per_worker
from .draft import (DFLASH_DEFAULT_BLOCK_SIZE, DSPARK_DEFAULT_GAMMA, DraftConfig, DSparkFields,
                    check_dspark_draft, draft_kv_bytes_per_token, dspark_draft_path, dspark_fields, load_draft)
from .gpus import Gpu, resolve_gpu
from .hisparse import hisparse_backends, hisparse_ratio, validate_hisparse
from .hf_config import (HfConfig, extra_buffer_strategy, glm_hf_config, is_dsv4_model, load_hf_config,
                        names_other_model, refuse_model_override)
from .model import ModelConfig, load_model
from .profile import Profile
from .rules import RULES, SglangRules, rules_for
from .startup import validate_linear_attn_backend, validate_startup

ARTICLE_PAGE_SIZE = 64  # upstream f4de6abee6: DSATokenToKVPool asserts page_size == 64 on CUDA
SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS = 48
# SpeculativeAlgorithm.is_dflash_family(): a draft checkpoint of its own, its KV pool in the cell
DRAFT_MODEL_ALGORITHMS = ("DFLASH", "DSPARK")
# ServerArgs.LANGUAGE_MODEL_ONLY_ARCHITECTURES (0.5.23): Glm5NextForConditionalGeneration is not one
LANGUAGE_MODEL_ONLY_ARCHITECTURES = ("DeepseekV4ForCausalLM", "MuseGlimmerForConditionalGeneration",
                                     "Cosmos3ForConditionalGeneration", "Cosmos3EdgeForConditionalGeneration")
# architectures _handle_encoder_disaggregation accepts for --language-only / --encoder-only (0.5.23)
ENCODER_DISAGG_ARCHITECTURES = (
    "Qwen2VLForConditionalGeneration", "Qwen3VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "Qwen3OmniMoeForConditionalGeneration",
    "Qwen2AudioForConditionalGeneration", "Qwen2_5OmniForConditionalGeneration", "Dots3NoteForCausalLM",
    "KimiVLForConditionalGeneration", "KimiK25ForConditionalGeneration", "KimiK3ForConditionalGeneration",
    "MiMoV2ForCausalLM", "Glm5NextForConditionalGeneration", "MiniMaxM3SparseForConditionalGeneration",
    "MuseSparkForConditionalGeneration")


@dataclass(frozen=True)
class ServerArgs:
    """The subset of SGLang's resolved ``ServerArgs`` that decides KV-cache memory on a rank.

    Every model is the same kind of data here: ``config`` (its config.json) and ``layers`` (the
    cache specs SGLang allocates per layer, built from the config and these resolved arguments).
    ``model`` is GLM-5.3-Flash's validated reading of its config, kept for the book's GLM chapters;
    None for every other model. No ledger reads it.
    """

    profile: Profile                       # context_length filled in
    model: ModelConfig | None
    gpu: Gpu
    kv_cache_dtype: str                    # "bfloat16" or "fp8_e4m3" (never "auto")
    dsa_prefill_backend: str
    dsa_decode_backend: str
    index_kpool: int                       # pooling actually applied (1 without kpool compression)
    page_size: int
    mamba_strategy: str                    # "none" when the radix cache is off
    draft_tokens: int                      # 0 without speculative decoding
    draft_layers: int
    attn_dp_size: int
    max_running_requests_global: int | None   # None: SGLang's automatic value
    requests_per_worker: int | None           # max(1, global // attn_dp); None when automatic
    context_length: int
    draft: DraftConfig | None = None          # DFLASH/DSPARK: the draft checkpoint's config.json
    draft_attn_tp_size: int = 1               # DFLASH/DSPARK: the draft's KV heads split (draft_attn_tp_size())
    draft_kv_bytes_per_token: int = 0         # DFLASH/DSPARK: dflash_draft_cell_size_per_token on one rank
    dspark: DSparkFields | None = None        # DSPARK: gamma, Markov head, mask token of the draft
    draft_model_path: str | None = None       # the draft folder read (DSPARK may default it to <model>/dspark)
    decode_extra_slots: int = 0               # PD decode: req_to_token rows beyond the per-worker cap
    config: HfConfig | None = None            # the model's config.json (any model)
    rules: SglangRules | None = None          # the layout's rules, looked up once (rules_for)
    attn_tp_size: int = 1                     # tp // attn_dp // attn_cp
    linear_attn_tp_size: int = 1              # the TP that splits the state heads (CP-TP sharing: tp)
    # EAGLE / NEXTN: the MTP draft worker's own KV layers, which HiCache packs into the host KV (and indexer)
    # pools (base_spec_worker._can_pack_hicache_mtp: the draft-mode config's NextN count, 1 for the targets
    # SGLang rewrites to their MTP draft); draft_layers above are the ones folded into the cell size
    packed_draft_layers: int = 0
    # the --attn-cp-size SGLang's default-fraction heuristic reads (memory_hook runs before the DSA model override
    # widens prefill CP to the TP group: resolve_dsa_prefill_cp); the profile above holds the resolved width
    fraction_attn_cp_size: int = 1
    # --enable-hisparse (issue 30): the host-to-device ratio of the logical slots (0: off; inputs/hisparse.py)
    hisparse_ratio: int = 0

    @property
    def verify_state_draft_tokens(self) -> int:
        """Draft tokens of the KDA verify scratch (MambaPool's spec state): 0 on a PD prefill server.

        ``kv_cache_configurator._pd_prefill_skips_mamba_spec_state``: prefill never runs
        TARGET_VERIFY, so under ``--disaggregation-mode prefill`` the hybrid request pool gets no
        ``speculative_num_draft_tokens`` and the mamba budget reserves no spec state (role switch
        and unified memory, which keep it, are refused by the flag table). The KV cell, the tail
        width and ``req_to_token`` still count every draft token.
        """
        if self.replayssm_active:   # the replay ring owns rollback: no verify scratch
            return 0
        return 0 if self.profile.disaggregation_mode == "prefill" else self.draft_tokens


    @property
    def replayssm_active(self) -> bool:
        """``_handle_max_mamba_cache``'s ``replayssm_active``: the flag, on a model SGLang gives a KDA or Gated
        DeltaNet config (hybrid_arch.py: Kimi / GLM-5.3-Flash; Qwen3-Next / Qwen3.5 / Jet-Nemotron). On Mamba-2 and
        attention-only models the ring does not exist and speculative decoding keeps its verify scratch."""
        family = self.config.family if self.config is not None else "mla_dsa+kda"
        return bool(self.profile.enable_linear_replayssm_spec) and family in REPLAYSSM_FAMILIES


REPLAYSSM_FAMILIES = ("mla_dsa+kda", "mla+kda", "gqa+gdn", "gqa+jet")
DECODE_EXTRA_SLOTS_MAX_PER_WORKER = 32   # pd_disaggregation_hook: "per_worker <= 32"
DECODE_EXTRA_SLOTS_PER_REQUEST = 2       # pd_disaggregation_hook: "extra_slots = per_worker * 2"


def decode_extra_slots(p: Profile) -> int:
    """``handle_pd_disaggregation`` (arg_groups/pd_disaggregation_hook.py): the default
    ``disaggregation_decode_extra_slots`` of a decode server, the pre-allocation rows
    ``DecodeReqToTokenPool`` adds to ``req_to_token`` (``size + pre_alloc_size + 1`` rows).

    Only a launch that gives ``--max-running-requests`` gets any: the hook runs before the
    speculative hooks reset an unset cap (so their 48 counts as unset here) and before the pools
    size an automatic one. Per worker = max(1, cap // DP ranks) (``num_dp_ranks_of``: replicas x
    attention-DP groups, one of them 1); 2 x per worker when that is <= 32, else 0. Not on a
    prefill or a co-located server.
    """
    if p.disaggregation_mode != "decode":
        return 0
    if p.disaggregation_decode_extra_slots is not None:   # given: SGLang takes it as it is
        return p.disaggregation_decode_extra_slots
    if p.max_running_requests is None:
        return 0
    per_worker = max(1, p.max_running_requests // max(1, p.dp_size))
    if per_worker <= DECODE_EXTRA_SLOTS_MAX_PER_WORKER:
        return DECODE_EXTRA_SLOTS_PER_REQUEST * per_worker
    return 0


def resolve_kv_dtype(p: Profile, gpu: Gpu) -> str:
    """``_dsa_kv_cache_dtype_resolution``: auto -> fp8_e4m3 when the capability's major is >= 10
    (B200/B300 SM 100/103, RTX PRO 6000 SM 120, GB10 SM 121), else bfloat16 (A100, L40S, Hopper).
    Checked per GPU of gpus.json against the wheel: tests/sglang/test_gpu_defaults.py."""
    if p.kv_cache_dtype != "auto":
        return p.kv_cache_dtype
    return "fp8_e4m3" if gpu.sm >= 100 else "bfloat16"


def resolve_dsa_backends(p: Profile, gpu: Gpu, kv_dtype: str) -> tuple[str, str]:
    """Defaults as ``_dsa_split_backend_resolution``; a backend the user set is kept."""
    if kv_dtype == "fp8_e4m3":
        default = ("trtllm", "trtllm") if gpu.sm >= 100 else ("flashmla_kv", "flashmla_kv")
    else:
        default = ("flashmla_sparse", "trtllm" if gpu.sm >= 100 else "fa3")
    prefill = p.dsa_prefill_backend or default[0]
    decode = p.dsa_decode_backend or default[1]
    prefill, decode = hisparse_backends(p, kv_dtype) or (prefill, decode)   # HiSparse's arm wins (issue 30)
    if "triton" in (prefill, decode):
        raise ProfileError("dsa_prefill_backend" if prefill == "triton" else "dsa_decode_backend",
                           "the triton DSA backend is only supported on ROCm/HIP")
    if kv_dtype == "fp8_e4m3" and (prefill == "tilelang") != (decode == "tilelang"):
        raise ProfileError("dsa_decode_backend", "CUDA TileLang FP8 KV requires both DSA backends to be "
                                                 "tilelang; raw and scaled FP8 KV layouts cannot be mixed")
    if kv_dtype == "fp8_e4m3" and prefill == decode == "tilelang" and gpu.sm < 89:
        raise ProfileError("dsa_prefill_backend", f"CUDA TileLang FP8 KV requires SM89 or newer "
                                                  f"(this GPU is SM{gpu.sm}); SGLang 0.5.23 refuses it at start-up")
    return prefill, decode


def dspark_draft_token_count(p: Profile, dspark: DSparkFields | None) -> int:
    """``_handle_dspark``: the verify window gamma + 1, gamma from --speculative-dspark-block-size, else the
    draft config, else 7 when --speculative-num-draft-tokens is not given either; a given
    --speculative-num-draft-tokens must equal gamma + 1 and be >= 2 (SGLang's refusals, its words)."""
    gamma = p.speculative_dspark_block_size
    if gamma is None and dspark is not None:
        gamma = dspark.gamma
    if gamma is None and p.speculative_num_draft_tokens is None:
        gamma = DSPARK_DEFAULT_GAMMA
    tokens = p.speculative_num_draft_tokens
    if gamma is not None:
        if tokens is not None and tokens != gamma + 1:
            raise ProfileError("speculative_num_draft_tokens",
                               f"SGLang 0.5.23 refuses it: \"DSpark speculative_num_draft_tokens must equal gamma + 1 "
                               f"(= {gamma + 1} for gamma={gamma}), but got speculative_num_draft_tokens={tokens}.\"")
        tokens = gamma + 1
    if tokens < 2:
        raise ProfileError("speculative_num_draft_tokens",
                           f"SGLang 0.5.23 refuses it: \"DSpark speculative_num_draft_tokens must be >= 2 "
                           f"(= gamma + 1), got {tokens}.\"")
    return tokens


def draft_token_count(p: Profile, draft: DraftConfig | None = None, dspark: DSparkFields | None = None) -> int:
    """speculative_num_draft_tokens as SGLang 0.5.23 resolves it.

    EAGLE/NEXTN: the flag, or 3 steps x topk 1 + 1 = 4. DFLASH (``_handle_dflash``): the block size,
    from --speculative-dflash-block-size, else the flag, else the draft config's ``block_size``, else 16.
    DSPARK: ``dspark_draft_token_count``.
    """
    if p.speculative_algorithm is None:
        return 0
    if p.speculative_algorithm == "DSPARK":
        return dspark_draft_token_count(p, dspark)
    if p.speculative_algorithm == "DFLASH":
        if p.speculative_dflash_block_size is not None:
            return p.speculative_dflash_block_size
        if p.speculative_num_draft_tokens is not None:
            return p.speculative_num_draft_tokens
        if draft is not None and draft.block_size is not None:
            return draft.block_size
        return DFLASH_DEFAULT_BLOCK_SIZE
    if p.speculative_num_draft_tokens is not None:
        return p.speculative_num_draft_tokens
    steps = p.speculative_num_steps or 3
    topk = p.speculative_eagle_topk or 1
    return steps * topk + 1 if topk > 1 else steps + 1


def effective_max_running_requests(p: Profile) -> int | None:
    """--max-running-requests as the server ends up with it: 48 under speculative decoding if unset."""
    if p.max_running_requests is None and p.speculative_algorithm:
        return SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS
    return p.max_running_requests


def strategy_page(p: Profile, facts: "ModelFacts", page_size: int, sm: int = 0) -> int:
    """The page size ``_mamba_radix_cache_resolution`` and ``validate_mamba_no_buffer`` read: a DSA
    model's page (its model override runs first), else ``--page-size`` as given (1 when unset): the
    attention backend's page constraint (``_mla_backend_page_constraints``: trtllm_mla / trtllm_mha on
    Blackwell force 64) runs after them (SGLang 0.5.23 on B200: Kimi-K3 with --disable-overlap-schedule
    and no --page-size runs no_buffer on 64-token pages)."""
    if facts.is_dsa:
        return page_size
    if facts.family == "gqa+gdn" and sm >= 100:
        # model_overrides/qwen3_5.py (Qwen3-Next / Qwen3.5 on SM100, no --attention-backend): the model
        # override sets the page before the strategy pass, and with the strategy still unresolved it picks
        # triton on page 1 (SGLang 0.5.23 on B200: --page-size 128 --disable-overlap-schedule runs no_buffer;
        # found by test_models_contract, seed 1189594772)
        return page_size
    if (p.speculative_algorithm is not None and rules_for(p).default_backend_is_trtllm_mha(facts.family, sm)
            and nemotron_spec_trtllm(p)):
        return p.page_size or 64   # model_overrides/nemotron_h.py sets the page before the strategy pass
    return p.page_size or 1


def mha_default_is_trtllm(p: Profile) -> bool:
    """Whether ``get_default_attn_backend`` (arg_groups/model_override_base.py) gives an MHA model trtllm_mha on
    SM100, as far as the launch decides it: not under speculative decoding whose ``--speculative-eagle-topk`` is
    unset when the backend is chosen (NEXTN / EAGLE without it: flashinfer or triton, on the user's page), nor
    with a topk above 1, nor a topk of 1 beside ``--page-size`` above 1 (``is_no_spec_infer_or_topk_one``).
    SGLang 0.5.23 on B200: Qwen3.5 with NEXTN runs triton on page 1 (found by the contract oracle, issue 31)."""
    topk = p.speculative_eagle_topk
    if not (topk is None or (topk == 1 and (p.page_size or 1) == 1)):
        return False
    return p.speculative_algorithm is None or topk is not None or p.speculative_algorithm == "DFLASH"


def resolve_strategy(p: Profile, page_size: int) -> str:
    """``_mamba_radix_cache_resolution``: auto -> extra_buffer when triton and (overlap or paging);
    ``page_size``: the page it reads (``strategy_page``)."""
    if p.disable_radix_cache:
        return "none"
    if p.mamba_scheduler_strategy != "auto":
        return p.mamba_scheduler_strategy
    wants = (not p.disable_overlap_schedule) or page_size > 1
    return "extra_buffer" if wants and p.linear_attn_backend == "triton" else "no_buffer"


def validate_strategy(p: Profile, strategy: str, page_size: int, rules: SglangRules | None = None,
                      family: str | None = None, sm: int | None = None) -> None:
    """The start-up refusals SGLang 0.5.23 gives for a hybrid model; the article layout had none.
    ``page_size``: the page the validator reads (``strategy_page``)."""
    rules = rules or rules_for(p)
    if not rules.startup_refusals:
        return
    # validate_mamba_no_buffer (arg_groups/mamba_hook.py), its asserts in its order: the page, the overlap
    # schedule (auto turns it off itself), the trtllm_mha backend
    if strategy == "no_buffer" and page_size > 1:
        field = ("mamba_scheduler_strategy" if p.mamba_scheduler_strategy == "no_buffer"
                 else "linear_attn_backend")
        raise ProfileError(field, f"SGLang 0.5.23 refuses it: \"no_buffer only supports page_size=1.\" "
                                  f"(arg_groups/mamba_hook.py), and it forces page_size={page_size} for this "
                                  f"model (auto resolves to no_buffer unless linear_attn_backend is triton)")
    if strategy == "no_buffer" and p.mamba_scheduler_strategy == "no_buffer" and not p.disable_overlap_schedule:
        raise ProfileError("mamba_scheduler_strategy", "SGLang 0.5.23 refuses it: \"no_buffer do not support overlap "
                                                       "schedule. Try to set disable_overlap_schedule=True.\"")
    if strategy == "no_buffer" and rules.default_backend_is_trtllm_mha(family, sm) and nemotron_spec_trtllm(p):
        # validate_mamba_no_buffer (arg_groups/mamba_hook.py)
        raise ProfileError("disable_overlap_schedule" if p.mamba_scheduler_strategy == "auto"
                           else "mamba_scheduler_strategy",
                           "SGLang 0.5.23 refuses it: \"no_buffer do not support trtllm_mha attention backend.\" "
                           "(its default attention backend for this model on Blackwell; auto resolves to "
                           "no_buffer with the overlap schedule off and no --page-size above 1)")
    if strategy in ("extra_buffer", "extra_buffer_lazy") and p.linear_attn_backend != "triton":
        raise ProfileError("linear_attn_backend", f"{strategy} needs linear_attn_backend triton")
    if strategy == "extra_buffer_lazy" and p.disable_overlap_schedule:
        raise ProfileError("mamba_scheduler_strategy", "extra_buffer_lazy requires the overlap schedule "
                                                       "(--disable-overlap-schedule is incompatible)")


def validate_caps(p: Profile, page_size: int, attn_dp: int) -> None:
    """Caps that leave an empty pool whatever the memory (the capacity kernel refuses them too,
    but only when the memory is known; these need no memory to be refused)."""
    if p.max_total_tokens is not None and p.max_total_tokens < page_size:
        raise ProfileError("max_total_tokens", f"{p.max_total_tokens:,} is smaller than one page of tokens "
                                               f"({page_size}): the token pool would hold none")
    cps = p.chunked_prefill_size  # validation_hook: "chunked_prefill_size must be divisible by page_size"
    if cps is not None and cps > 0 and p.disaggregation_mode != "decode" and cps % page_size:
        raise ProfileError("chunked_prefill_size", f"{cps:,} is not a multiple of the page size ({page_size}); "
                                                   f"SGLang 0.5.23 refuses it at start-up")
    if p.max_mamba_cache_size is not None and p.max_mamba_cache_size // attn_dp < 1:
        raise ProfileError("max_mamba_cache_size", f"{p.max_mamba_cache_size:,} leaves no state slot per worker "
                                                   f"once divided over the {attn_dp} DP-attention workers")


def validate_combination(p: Profile, model, rules: SglangRules | None = None) -> None:
    """Combinations SGLang refuses at start-up, whatever the sizes (``model``: its ``ModelFacts``)."""
    if p.language_model_only:  # handle_language_model_only (arg_groups/model_hook.py)
        if p.language_only:
            raise ProfileError("language_model_only", "cannot be combined with language_only")
        if p.disaggregation_mode != "null":
            raise ProfileError("language_model_only", "is incompatible with disaggregation_mode prefill/decode")
        if not set(model.architectures) & set(LANGUAGE_MODEL_ONLY_ARCHITECTURES):
            raise ProfileError("language_model_only", f"SGLang 0.5.23 does not support it for "
                                                      f"{list(model.architectures)} (supported: "
                                                      f"{', '.join(LANGUAGE_MODEL_ONLY_ARCHITECTURES)}); "
                                                      f"the server would not start")
    if p.language_only and model.architectures and model.architectures[0] not in ENCODER_DISAGG_ARCHITECTURES:
        raise ProfileError("language_only", f"SGLang 0.5.23 does not support encoder disaggregation for "
                                            f"{model.architectures[0]}")
    refuse_hicache_without_radix(p)
    if p.speculative_algorithm == "DFLASH":
        validate_dflash(p)
    if p.speculative_algorithm == "DSPARK":
        validate_dspark(p)
    if p.speculative_algorithm in DRAFT_MODEL_ALGORITHMS:
        for f, algo in (("speculative_dflash_block_size", "DFLASH"), ("speculative_dspark_block_size", "DSPARK")):
            if getattr(p, f) is not None and p.speculative_algorithm != algo:
                raise ProfileError(f, f"SGLang 0.5.23 reads it with --speculative-algorithm {algo} only; glm-kv "
                                      f"refuses it with {p.speculative_algorithm} (leave it out)")
        return
    if p.speculative_algorithm and not getattr(model, "has_mtp", model.num_nextn_predict_layers > 0):
        raise ProfileError("speculative_algorithm", "the model config has no MTP layer "
                                                    "(num_nextn_predict_layers is 0, no mtp_num_hidden_layers)")
    for f in ("speculative_num_draft_tokens", "speculative_num_steps", "speculative_eagle_topk"):
        if getattr(p, f) is not None and not p.speculative_algorithm:
            raise ProfileError(f, "needs speculative_algorithm (EAGLE, NEXTN, DFLASH or DSPARK)")
    for f in ("speculative_draft_model_path", "speculative_dflash_block_size", "speculative_draft_window_size",
              "speculative_dspark_block_size"):
        if getattr(p, f) is not None:   # an EAGLE draft checkpoint / window: a different draft, not modelled
            raise ProfileError(f, "is modelled with speculative_algorithm DFLASH or DSPARK only (glm-kv does not "
                                  "model it for EAGLE/NEXTN, whose draft is the model's own MTP layer)")
    if p.speculative_algorithm and p.speculative_num_steps is None and (
            p.speculative_num_draft_tokens is not None or p.speculative_eagle_topk is not None):
        raise ProfileError("speculative_num_draft_tokens" if p.speculative_num_draft_tokens is not None
                           else "speculative_eagle_topk",
                           "needs speculative_num_steps: without it SGLang 0.5.23 picks steps, topk and "
                           "draft tokens itself and asserts that none of them was given")
    if (p.speculative_num_steps is not None and p.speculative_eagle_topk is None
            and (rules or rules_for(p)).eagle_steps_need_topk):
        # EAGLE/NEXTN here (the draft-model algorithms returned above; they fill topk themselves)
        raise ProfileError("speculative_eagle_topk",
                           "is needed with speculative_num_steps: SGLang 0.5.23 fills topk only when steps is "
                           "unset and otherwise fails at start-up on \"'>' not supported between instances of "
                           "'NoneType' and 'int'\" (_handle_eagle_family); give --speculative-eagle-topk 1 "
                           "(or leave steps, topk and draft tokens all out)")


def validate_dflash(p: Profile) -> None:
    """``_handle_dflash`` (arg_groups/speculative_hook.py): SGLang 0.5.23's refusals, its reasons."""
    if p.enable_dp_attention and p.dp_size > 1:
        # cfg.enable_dp_lm_head is required; glm-kv does not model --enable-dp-lm-head
        raise ProfileError("speculative_algorithm", "DFLASH with dp attention requires --enable-dp-lm-head "
                                                    "(SGLang 0.5.23 refuses it otherwise; glm-kv does not model "
                                                    "--enable-dp-lm-head)")
    if p.speculative_draft_model_path is None:
        raise ProfileError("speculative_draft_model_path", "DFLASH speculative decoding requires setting "
                                                           "--speculative-draft-model-path")
    block, tokens = p.speculative_dflash_block_size, p.speculative_num_draft_tokens
    if block is not None and tokens is not None and block != tokens:
        raise ProfileError("speculative_dflash_block_size",
                           f"Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set but "
                           f"they differ. For DFLASH they must match. speculative_num_draft_tokens={tokens}, "
                           f"speculative_dflash_block_size={block}")


def validate_dspark(p: Profile) -> None:
    """``_handle_dspark`` (arg_groups/speculative_hook.py): SGLang 0.5.23's refusals that need no draft
    config, its reasons. The draft path default and the token count come in ``resolve``."""
    if p.enable_dp_attention and p.dp_size > 1:
        raise ProfileError("speculative_algorithm", "SGLang 0.5.23 refuses it: \"DSpark with dp attention requires "
                                                    "--enable-dp-lm-head.\" (and glm-kv does not model "
                                                    "--enable-dp-lm-head)")
    if p.enable_prefill_cp and p.attn_cp_size > 1:   # arg_groups/cp_tp_group_sharing_hook.py (this model)
        raise ProfileError("speculative_algorithm", "SGLang 0.5.23 refuses it: \"CP/TP group sharing only supports "
                                                    "DFLASH or native MTP with top-k 1.\"")


def resolve_dspark_draft(p: Profile) -> str:
    """The draft folder SGLang loads: the flag, else the target checkpoint's ``dspark/`` subfolder;
    else SGLang's refusal (no Hub lookup: glm-kv reads local folders only)."""
    if p.speculative_draft_model_path is not None:
        return p.speculative_draft_model_path
    raw = None
    path = Path(p.model)
    if path.is_dir() or path.suffix == ".json":
        try:
            raw = json.loads((path / "config.json" if path.is_dir() else path).read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            raw = None   # load_model has read it already; nothing more to learn here
    found = dspark_draft_path(str(path if path.is_dir() else path.parent), raw if isinstance(raw, dict) else None)
    if found is None:
        raise ProfileError("speculative_draft_model_path", "SGLang 0.5.23 refuses it: \"DSpark dense speculative "
                                                           "decoding requires setting --speculative-draft-model-path.\"")
    return found


def validate_draft_window(p: Profile, draft_tokens: int) -> None:
    w = p.speculative_draft_window_size
    if p.speculative_algorithm == "DSPARK":
        return   # SGLang: "--speculative-draft-window-size has no effect with speculative_algorithm=DSPARK"
    if w is not None and w < draft_tokens:
        raise ProfileError("speculative_draft_window_size",
                           f"--speculative-draft-window-size must be >= --speculative-num-draft-tokens "
                           f"(block_size). window_size={w}, block_size={draft_tokens}")
    if w is not None:   # a window SGLang takes: its memory is not computed, so no plan (issue 20)
        raise ProfileError("speculative_draft_window_size",
                           "not modelled by glm-kv: with a draft window the DFLASH draft worker allocates its own "
                           "req->token table (speculative/dflash_worker_v2.py alloc_memory_pool, after the target's "
                           "pools are sized), which glm-kv does not count; leave the flag out for a plan")


def validate_replayssm_spec(p: Profile, draft_tokens: int, family: str = "mla_dsa+kda") -> None:
    """``--enable-linear-replayssm-spec``: SGLang 0.5.23's refusals, in its words.

    arg_groups/attention_hook.py (linear draft chain, decode backend, PD prefill) and MambaPool's
    ring checks at allocation (mem_cache/memory_pool.py: the ring length is a power of two and at
    least twice the draft tokens, the early-flush margin). HiCache with the ring is not modelled.
    """
    if not p.enable_linear_replayssm_spec:
        return
    if p.speculative_eagle_topk not in (None, 1):
        raise ProfileError("enable_linear_replayssm_spec",
                           "--enable-linear-replayssm-spec requires a linear draft chain (--speculative-eagle-topk "
                           "in {None, 1}); the chunked verify kernel uses a strictly-lower causal mask and is "
                           f"invalid for EAGLE tree verify. Got --speculative-eagle-topk={p.speculative_eagle_topk!r}.")
    if p.linear_attn_backend not in ("triton", "flashinfer"):
        raise ProfileError("enable_linear_replayssm_spec",
                           "--enable-linear-replayssm-spec requires the triton or flashinfer linear-attn decode "
                           f"backend, got --linear-attn-decode-backend={p.linear_attn_backend!r}.")
    if p.disaggregation_mode == "prefill":
        raise ProfileError("enable_linear_replayssm_spec",
                           "--enable-linear-replayssm-spec is not supported on a PD prefill server: the ring is "
                           "spec-verify-only scratch and the prefill server never runs spec verify.")
    if "+" in family and not family.endswith("+kda") and p.speculative_algorithm in DRAFT_MODEL_ALGORITHMS:
        # kv_cache_configurator._build_hybrid_req_pool (a hybrid's request pool; DSA-only models build none)
        raise ProfileError("enable_linear_replayssm_spec", "SGLang 0.5.23 refuses it: \"--enable-linear-replayssm-spec "
                                                           "with DSPARK/DFLASH requires a KDA model; got a non-KDA "
                                                           "model.\" (mem_cache/kv_cache_configurator.py)")
    if not family.endswith("+kda"):   # the ring checks below are MambaPool's KDA backstop (memory_pool.py)
        return
    length = p.linear_replayssm_cache_len
    if length & (length - 1):
        raise ProfileError("linear_replayssm_cache_len",
                           f"spec-verify ring length must be a power of two, got {length} (MambaPool refuses it "
                           f"when SGLang 0.5.23 allocates the pools)")
    if draft_tokens and length < 2 * draft_tokens:
        raise ProfileError("linear_replayssm_cache_len",
                           f"spec-verify ring too small: {length} < 2 * {draft_tokens} (early-flush margin) "
                           f"(MambaPool refuses it when SGLang 0.5.23 allocates the pools)")


def draft_attn_tp(p: Profile) -> int:
    """The TP width that splits the draft's KV heads (DP attention is refused with both algorithms).

    DFLASH: ``draft_attn_tp_size()``: the full TP when CP runs without DP attention, else attn_tp.
    DSPARK: ``legacy_draft_attn_tp_size``: attn_tp (tp / attn_cp), as the target's configurator sizes it.
    """
    if p.speculative_algorithm == "DSPARK":
        return max(1, p.tp_size // max(1, p.attn_cp_size))
    return p.tp_size


def resolve_context_length(profile: Profile, model) -> Profile:
    """SGLang's context_len: --context-length when given, else the model's max_position_embeddings.

    Longer than the model's maximum is a start-up error (``ModelConfig._derive_context_length``)
    unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (``allow_overwrite_longer_context_len``).
    ``model``: anything with ``max_position_embeddings`` (None: the config has none).
    """
    longest = model.max_position_embeddings
    if profile.context_length is not None:
        if (longest is not None and profile.context_length > longest
                and not profile.allow_overwrite_longer_context_len):
            raise ProfileError("context_length", f"{profile.context_length:,} is longer than the model's "
                                                 f"max_position_embeddings ({longest:,}); "
                                                 f"SGLang refuses it unless SGLANG_ALLOW_OVERWRITE_LONGER_"
                                                 f"CONTEXT_LEN=1 (allow_overwrite_longer_context_len: true)")
        return profile
    if longest is None:
        raise ProfileError("context_length", "give it: the config has no max_position_embeddings")
    return profile.model_copy(update={"context_length": longest})


@dataclass(frozen=True)
class ModelFacts:
    """What resolution reads of any model's config besides its layers: the architecture, the MTP
    layers, the longest context, the vocabulary, the DSA indexer's pooling (1 without one)."""

    architectures: tuple[str, ...]
    num_nextn_predict_layers: int
    max_position_embeddings: int | None
    vocab_size: int
    family: str
    index_kpool: int          # the config's index_kpool (get_dsa_index_kpool: 1 when absent)
    is_dsa: bool
    # the checkpoint ships MTP layers SGLang's NEXTN draft loads: NextN layers, Qwen3.5's mtp_num_hidden_layers,
    # or an architecture whose released checkpoints carry them though its config names none (Qwen3-Next)
    has_mtp: bool = False

    @property
    def has_state_layers(self) -> bool:
        """A hybrid family: linear-attention / SSM layers hold per-request state (MambaPool)."""
        return "+" in self.family


def model_facts(config: HfConfig, model: ModelConfig | None, context_given: bool = False) -> ModelFacts:
    """The facts from GLM-5.3-Flash's checked reader when there is one, else from the config. With a
    --context-length given, a config's unreadable max_position_embeddings is not read (None)."""
    from .hf_config import config_int, config_where

    t = config.text
    raw = t.get("max_position_embeddings")
    if model is not None:
        longest = model.max_position_embeddings
    elif raw is None or (context_given and (isinstance(raw, bool) or not isinstance(raw, int) or raw < 1)):
        longest = None
    else:   # a bad value is refused naming the config key (it was int()-ed: 1.5 -> 1, "x" a traceback)
        longest = config_int(t, "max_position_embeddings", config_where(config))
    dsa = bool(set(config.architectures) & set(DSA_ARCHITECTURES)) and t.get("index_topk") is not None
    kpool = t.get("index_kpool", 1) if dsa else 1
    return ModelFacts(architectures=config.architectures, num_nextn_predict_layers=config.num_nextn_predict_layers,
                      max_position_embeddings=longest, vocab_size=config.vocab_size, family=config.family,
                      index_kpool=kpool if isinstance(kpool, int) and not isinstance(kpool, bool) and kpool > 0 else 1,
                      is_dsa=dsa, has_mtp=config.num_nextn_predict_layers > 0 or _positive(t.get("mtp_num_hidden_layers"))
                      or bool(set(config.architectures) & set(MTP_WITHOUT_COUNT)))


def _positive(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


# is_deepseek_dsa's architectures (the config must also have index_topk)
DSA_ARCHITECTURES = ("DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "GlmMoeDsaForCausalLM",
                     "Glm5NextForConditionalGeneration")
# SGLang 0.5.23's ModelConfig turns Qwen3-Next / Qwen3.5 / NemotronH targets into their MTP draft
# (configs/model_config.py, the ``is_draft_model`` rewrites) under EAGLE / NEXTN without a draft path, whatever
# the config says of NextN layers: Qwen3.5's count is ``mtp_num_hidden_layers``, Qwen3-Next's config names
# none. The TARGET's cell size still reads the target config's ``num_nextn_predict_layers``
# (spec_aux_hidden_state.py: the path-less draft is sized off the target config), so for these SGLang adds no
# draft layer to the token pool.
# SGLang rewrites a NemotronH target too, but glm-kv plans MTP only for a checkpoint that declares its layers
# (Nemotron-3 Super / Ultra do; Nano and Nemotron-H-56B do not), and for Qwen3-Next, whose released checkpoints
# ship the MTP layer with no count in the config.
MTP_WITHOUT_COUNT = ("Qwen3NextForCausalLM",)


def load_config(p: Profile) -> tuple[HfConfig, ModelConfig | None]:
    """The model's config.json (any model), and GLM-5.3-Flash's checked reading of it (None otherwise)."""
    if is_dsv4_model(p.model):   # issue 32: SGLang sizes DeepSeek-V4's own pools (glm_kv.ledgers.dsv4_plan)
        raise ProfileError("model", "DeepSeek-V4 is planned by `glm-kv plan` only (its own pools: a sliding-window "
                                    "pool, c4 / c128 compressed KV and their compress states); this command does "
                                    "not size it yet")
    if names_other_model(p.model):
        return load_hf_config(p.model), None
    model = load_model(p.model)   # GLM-5.3-Flash's reader: its checks and messages
    return glm_hf_config(p.model), model


def resolve_kv(p: Profile, facts: ModelFacts, config: HfConfig, gpu: Gpu, rules: SglangRules) -> tuple[str, str, str]:
    """(kv_cache_dtype, DSA prefill backend, DSA decode backend) as SGLang 0.5.23 resolves them.

    DSA models: ``_dsa_kv_cache_dtype_resolution`` and the split backends (shared by GLM-5.3-Flash,
    DeepSeek-V3.2, GLM-5.1). Others: ``configure_kv_cache_dtype``, the checkpoint's
    ``kv_cache_quant_algo`` FP8 else the model dtype, after the family backend's refusals."""
    if facts.is_dsa:
        kv = resolve_kv_dtype(p, gpu)
        return (kv, *resolve_dsa_backends(p, gpu, kv))
    rules.check_kv_dtype(facts.family, gpu.sm, p.kv_cache_dtype)
    kv = p.kv_cache_dtype if p.kv_cache_dtype != "auto" else (
        "fp8_e4m3" if (config.kv_cache_quant_algo or "").upper() == "FP8" else "bfloat16")
    return kv, p.dsa_prefill_backend or "", p.dsa_decode_backend or ""


def resolve_page(p: Profile, facts: ModelFacts, gpu: Gpu, rules: SglangRules) -> int:
    """DSA models: 64 x index_kpool (model_overrides/deepseek_v2.py: "a logical page must own a whole
    pooled index group"; the article's layout: 64); others: the family's backend default on this GPU."""
    if facts.is_dsa:
        return ARTICLE_PAGE_SIZE * (facts.index_kpool if rules.page_times_kpool else 1)
    if mimo_v2_fa4(facts, gpu):
        # model_overrides/mimo_v2.py: MiMo-V2 on SM100 (no --attention-backend) runs fa4, whose page constraint
        # (overrides.py _fa4_page_constraint) forces 128-token pages over any --page-size, except under an EAGLE
        # topk above 1 (issue 32)
        return 128 if (p.speculative_eagle_topk or 0) <= 1 else (p.page_size or 1)
    if facts.family == "gqa+gdn" and gpu.sm >= 100:
        # model_overrides/qwen3_5.py (Qwen3-Next / Qwen3.5 on SM100, no --attention-backend): trtllm_mha on
        # 64-token pages unless the radix cache is on with no extra buffer and no speculative decoding (the
        # strategy is still "auto" when it runs, so only an explicit extra_buffer counts), else triton on
        # page 1; the user's --page-size is replaced either way (fresh-clone run, seed 1435354290: radix off
        # + --page-size 128 -> SGLang 64, glm-kv had 1)
        paged = (p.disable_radix_cache or p.speculative_algorithm is not None
                 or p.mamba_scheduler_strategy in ("extra_buffer", "extra_buffer_lazy"))
        return 64 if paged and mha_default_is_trtllm(p) else 1
    if rules.default_backend_is_trtllm_mha(facts.family, gpu.sm) and not nemotron_spec_trtllm(p):
        return p.page_size or 1   # model_overrides/nemotron_h.py: triton under EAGLE tree verify (topk > 1)
    return rules.page_size(facts.family, gpu.sm, p.page_size)


def mimo_v2_fa4(facts: ModelFacts, gpu: Gpu) -> bool:
    """``_mimo_v2_overrides``: a MiMo-V2 model on SM100 / SM103 (``is_sm100``) gets the fa4 attention backend."""
    return gpu.sm >= 100 and any(a in ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM") for a in facts.architectures)


def nemotron_spec_trtllm(p: Profile) -> bool:
    """model_overrides/nemotron_h.py on SM100 (no --attention-backend): trtllm_mha, unless speculative decoding
    asks a topk above 1 (then triton on the user's page). Under speculative decoding with trtllm_mha the
    override also sets the page to 64 when none is given and an auto strategy to extra_buffer, before
    SGLang's strategy pass (``strategy_page`` / ``resolve``)."""
    return p.speculative_algorithm is None or p.speculative_eagle_topk in (None, 1)


def resolve_tp(p: Profile, facts: ModelFacts, config: HfConfig, attn_dp: int) -> tuple[int, int]:
    """(attn_tp, linear_attn_tp): tp // attn_dp // attn_cp; the state heads split over attn_tp, or
    over the whole TP under GLM-5.3-Flash's CP-TP group sharing (``resolve_cp_tp_group_sharing``)."""
    if p.enable_dp_attention and p.tp_size % p.dp_size:
        raise ProfileError("dp_size", f"with enable_dp_attention, tp_size ({p.tp_size}) must be divisible "
                                      f"by dp_size ({p.dp_size})")
    if p.tp_size % (attn_dp * p.attn_cp_size):
        raise ProfileError("attn_cp_size", f"tp_size ({p.tp_size}) must be divisible by attn_dp x attn_cp "
                                           f"({attn_dp} x {p.attn_cp_size})")
    attn_tp = p.tp_size // attn_dp // p.attn_cp_size
    heads = config.text.get("num_attention_heads")
    if isinstance(heads, int) and not isinstance(heads, bool) and heads > 0 and heads % attn_tp:
        raise ProfileError("tp_size", f"attention TP {attn_tp} must divide num_attention_heads ({heads})")
    return attn_tp, (p.tp_size if cp_tp_group_sharing(p, facts) else attn_tp)


CP_TP_SHARING_ARCHS = ("Glm5NextForConditionalGeneration",)


def validate_cp_model(p: Profile, config: HfConfig) -> None:
    """arg_groups/parallel_hook.py ``_boundary_parallelism_overrides``: SGLang 0.5.23's per-model CP refusals."""
    if config.model_type in ("nemotron_h", "nemotron_h_puzzle") and p.attn_cp_size > 1:
        raise ProfileError("attn_cp_size", "SGLang 0.5.23 refuses it: \"Nemotron-H does not support --attn-cp-size "
                                           "> 1\" (arg_groups/parallel_hook.py)")
    # MiMo-V2 (issue 32): prefill CP with zigzag only (a missing --cp-strategy too, checked first); its text-only
    # rule binds MiMoV2ForCausalLM's multimodal configs, not MiMo-V2-Flash's
    archs = config.architectures
    if (p.enable_prefill_cp and archs and archs[0] in ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM")
            and p.cp_strategy != "zigzag"):
        raise ProfileError("cp_strategy", "SGLang 0.5.23 refuses it: \"MiMo V2 prefill CP only supports "
                                          "--cp-strategy zigzag.\" (arg_groups/parallel_hook.py)")


def resolve_dsa_prefill_cp(p: Profile, facts: ModelFacts) -> Profile:
    """model_overrides/deepseek_v2.py (DSA models, CUDA): prefill CP's width. ``--cp-strategy interleave`` keeps an
    ``--attn-cp-size`` above 1; otherwise (zigzag, or no width given) the CP group is the whole TP over the
    attention-DP groups (attention TP 1). DeepSeek-V3.2 refuses zigzag (arg_groups/parallel_hook.py), in SGLang's
    words. Data-parallel replicas (``--dp-size`` without DP attention) become attention-DP groups there, which
    glm-kv does not resolve: refused by name."""
    if facts.is_dsa and p.enable_prefill_cp and p.disaggregation_mode == "decode":
        return p   # the DSA override refuses prefill CP on a decode server first (startup.validate_startup)
    if p.enable_prefill_cp and p.cp_strategy is None:   # every model (handle_context_parallelism)
        raise ProfileError("enable_prefill_cp", "SGLang 0.5.23 refuses it: \"--cp-strategy must be set when "
                                                "--enable-prefill-cp is enabled.\" (arg_groups/parallel_hook.py)")
    if not (facts.is_dsa and p.enable_prefill_cp):
        return p
    archs = facts.architectures
    if archs and archs[0] == "DeepseekV32ForCausalLM" and p.cp_strategy == "zigzag":
        raise ProfileError("cp_strategy", "SGLang 0.5.23 refuses it: \"DeepSeek V3.2 prefill CP does not support "
                                          "--cp-strategy zigzag; use interleave.\" (arg_groups/parallel_hook.py)")
    if p.dp_size > 1 and not p.enable_dp_attention:
        raise ProfileError("dp_size", "under DSA prefill CP SGLang 0.5.23 runs --dp-size as attention-DP groups (a "
                                      "deprecated reading, model_overrides/deepseek_v2.py); glm-kv does not resolve it: "
                                      "give --enable-dp-attention (or --attn-dp-size) instead")
    attn_dp = p.dp_size if p.enable_dp_attention else 1
    if p.cp_strategy == "interleave" and p.attn_cp_size > 1:
        return p
    return p.model_copy(update={"attn_cp_size": max(1, p.tp_size // attn_dp)})


def cp_tp_group_sharing(p: Profile, facts: ModelFacts) -> bool:
    """``resolve_cp_tp_group_sharing``: prefill CP over the whole TP group shares it with KDA.

    Then ``linear_attn_tp_size()`` is the TP size, not attn_tp (1); SGLang refuses a CP group
    narrower than TP and any strategy but interleave for this model.
    """
    archs = facts.architectures
    if not p.enable_prefill_cp or p.attn_cp_size <= 1:
        return False
    if archs and archs[0] not in CP_TP_SHARING_ARCHS:
        return False
    if p.attn_cp_size != p.tp_size:
        raise ProfileError("attn_cp_size", f"CP-TP group sharing requires attn_cp_size == tp_size, got "
                                           f"attn_cp_size={p.attn_cp_size}, tp_size={p.tp_size}")
    if p.cp_strategy != "interleave":
        raise ProfileError("cp_strategy", f"CP-TP group sharing requires cp_strategy interleave for "
                                          f"this model, got {getattr(p, 'cp_strategy', None)!r}")
    return True


def resolve(p: Profile) -> ServerArgs:
    """Resolve a validated profile once, for any model; raises ProfileError for what SGLang refuses
    at start-up. The rules, the config and the model's facts are looked up here and nowhere else."""
    rules = rules_for(p)
    config, model = load_config(p)
    refuse_model_override(config)   # issue 32: SGLang's model override refuses the checkpoint (nemotron_h.py)
    facts = model_facts(config, model, p.context_length is not None)
    if model is None and not rules.other_models:
        modelled = ", ".join(v for v, r in RULES.items() if r.other_models)
        raise ProfileError("sglang_layout", f"other models are modelled for SGLang {modelled} only (the "
                                            f"{rules.version} layout describes GLM-5.3-Flash)")
    p = resolve_context_length(p, facts)
    validate_cp_model(p, config)
    given_cp = p.attn_cp_size   # what SGLang's default fraction reads, before the DSA override widens it
    p = resolve_dsa_prefill_cp(p, facts)
    if p.disaggregation_mode == "decode" and p.disable_radix_cache == p.disaggregation_decode_enable_radix_cache:
        # handle_pd_disaggregation (pd_disaggregation_hook.py): a 0.5.23 decode server runs without the radix
        # cache unless --disaggregation-decode-enable-radix-cache, which turns it on over --disable-radix-cache
        p = p.model_copy(update={"disable_radix_cache": not p.disaggregation_decode_enable_radix_cache})
    if p.disaggregation_decode_host_receive_threshold < 1 and p.hicache_mem_layout != "layer_first":
        # hicache_hook.handle_hicache: the decode host pool that KV transfer receives into is layer_first
        p = p.model_copy(update={"hicache_mem_layout": "layer_first"})
    validate_combination(p, facts, rules)
    gpu = resolve_gpu(p)
    kv_dtype, prefill, decode = resolve_kv(p, facts, config, gpu, rules)
    page = resolve_page(p, facts, gpu, rules)
    seen_page = strategy_page(p, facts, page, gpu.sm)
    strategy = resolve_strategy(p, seen_page) if facts.has_state_layers else "none"
    if facts.has_state_layers:   # issue 32: an architecture without extra_buffer (Jet-Nemotron)
        strategy = extra_buffer_strategy(p.mamba_scheduler_strategy, strategy, facts.architectures, seen_page)
        validate_strategy(p, strategy, seen_page, rules, facts.family, gpu.sm)
    validate_linear_attn_backend(p, gpu.sm)   # after the mamba strategy's checks, as SGLang's hooks run
    validate_startup(p, strategy, facts, config)   # issue 30: SGLang's start-up refusals of flag combinations (startup.py)
    validate_hisparse(p, facts.is_dsa, kv_dtype, prefill, decode, facts.has_state_layers)   # issue 30: validation_hook's hisparse slot, later
    attn_dp = p.dp_size if p.enable_dp_attention else 1
    attn_tp, linear_tp = resolve_tp(p, facts, config, attn_dp)
    validate_caps(p, page, attn_dp)
    mrr = effective_max_running_requests(p)
    draft_path = dspark = None
    if p.speculative_algorithm == "DSPARK":
        draft_path = resolve_dspark_draft(p)
        dspark = dspark_fields(draft_path)
    elif p.speculative_algorithm == "DFLASH":
        draft_path = p.speculative_draft_model_path
    draft = load_draft(draft_path) if draft_path is not None else None
    draft_tokens = draft_token_count(p, draft, dspark)
    if dspark is not None:
        check_dspark_draft(dspark, facts.vocab_size)
    validate_replayssm_spec(p, draft_tokens, facts.family)
    draft_tp = draft_attn_tp(p)
    draft_kv = 0
    if draft is not None:
        validate_draft_window(p, draft_tokens)
        # draft_kv_budget: the draft worker's KV dtype is the target's resolved kv_cache_dtype
        # (the default draft backend, flashinfer, keeps it; only fa4 would not, and it is not modelled)
        # (draft_kv_budget.resolve_dflash_draft_cell_size: the server's --kv-cache-dtype, DSA's resolved default
        # included, over the draft's own dtype: a ModelOpt checkpoint's FP8 KV quant is the target's alone)
        server_kv = kv_dtype if facts.is_dsa else p.kv_cache_dtype
        draft_kv = draft_kv_bytes_per_token(draft, draft_tp, 1 if server_kv == "fp8_e4m3" else draft.dtype_bytes)
    return ServerArgs(
        profile=p, model=model, gpu=gpu, kv_cache_dtype=kv_dtype, dsa_prefill_backend=prefill,
        dsa_decode_backend=decode, index_kpool=facts.index_kpool, page_size=page,
        mamba_strategy=strategy, draft_tokens=draft_tokens,
        draft_layers=facts.num_nextn_predict_layers if p.speculative_algorithm in ("EAGLE", "NEXTN") else 0,
        attn_dp_size=attn_dp, max_running_requests_global=mrr,
        requests_per_worker=None if mrr is None else requests_per_worker(mrr, attn_dp),
        context_length=p.context_length, draft=draft, draft_attn_tp_size=draft_tp,
        draft_kv_bytes_per_token=draft_kv, dspark=dspark, draft_model_path=draft_path,
        decode_extra_slots=decode_extra_slots(p), config=config, rules=rules,
        attn_tp_size=attn_tp, linear_attn_tp_size=linear_tp,
        packed_draft_layers=(facts.num_nextn_predict_layers or 1) if p.speculative_algorithm in ("EAGLE", "NEXTN")
        else 0,
        fraction_attn_cp_size=given_cp, hisparse_ratio=hisparse_ratio(p),
    )


REQ_TO_TOKEN_BASE_EXTRA = 4     # allocation_sizing.get_req_to_token_extra_context_len: "4 + draft"


def req_to_token_extra_context_len(args: ServerArgs) -> int:
    """``get_req_to_token_extra_context_len``: req_to_token columns beyond context_len.

    4 + the draft tokens; under speculative decoding with pages > 1 at least the per-decode
    reserve (2 x ``get_alloc_len_per_decode``) + page_size - 1.
    """
    p, draft = args.profile, args.draft_tokens
    extra = REQ_TO_TOKEN_BASE_EXTRA + draft
    if p.speculative_algorithm is not None and args.page_size > 1:
        steps = p.speculative_num_steps or 1
        topk = p.speculative_eagle_topk or 1
        if topk == 1:
            per_decode = max(steps * topk, draft)
        else:
            pages = (args.page_size - 1 + steps + args.page_size - 1) // args.page_size
            per_decode = max(pages * args.page_size * topk, draft)
        extra = max(extra, 2 * per_decode + args.page_size - 1)
    return extra


def refuse_hicache_without_radix(p) -> None:
    """arg_groups/kv_cache_hook.py: HiCache lives on the radix tree, so SGLang 0.5.23 refuses it without one.
    resolve() turned the radix cache off on a decode server, as SGLang does (unless
    --disaggregation-decode-enable-radix-cache)."""
    if not (p.enable_hierarchical_cache and p.disable_radix_cache):
        return
    where = (" on a decode server without --disaggregation-decode-enable-radix-cache"
             if p.disaggregation_mode == "decode" else "")
    raise ProfileError("enable_hierarchical_cache", "SGLang 0.5.23 refuses it at start-up: \"The arguments "
                       "enable-hierarchical-cache and disable-radix-cache are mutually exclusive and cannot be "
                       "used at the same time. Please use only one of them.\" (arg_groups/kv_cache_hook.py)"
                       + where)
