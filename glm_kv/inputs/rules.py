"""One SGLang version's facts about pool rows and defaults, as data (issue 22).

Why an object and not constants: the layer specs (``glm_kv.ledgers.layers``) take these facts
as a parameter, so a second SGLang version (or the article's layout) is a second ``SglangRules``
value, not a branch in every spec. Two values: ``ARTICLE`` (upstream f4de6abee6 as the source
article describes it) and ``SGLANG_0_5_23`` (the PyPI release); ``rules_for(profile or layout)``
picks one. Every place that behaved differently per ``sglang_layout`` asks this object a
question instead (issue 22 deliverable 2; tests/inputs/test_rules.py fails when a layout
comparison appears anywhere else in glm_kv). The byte formulas stay where they were: a rule
here is a fact (a flag, a size), never a ledger's arithmetic.

Every default below is what SGLang 0.5.23's ``ServerArgs.resolve_once()`` resolves for the
shipped configs on a fake GPU of that SM (tests/sglang/test_models.py re-derives them from the
wheel and fails naming the model and the key when one differs).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ProfileError


@dataclass(frozen=True)
class SglangRules:
    """Row layouts, element sizes and launch defaults of one SGLang version."""

    version: str
    # -- GLM-5.3-Flash (DSA + KDA with index_kpool) facts, per version --
    # page size = 64 x index_kpool (0.5.23 forces it for kpool-compressed indexers); the article: 64
    page_times_kpool: bool = True
    # IndexKeyCache pages hold page_size // index_kpool pooled rows (33 B/token/layer) rather than
    # page_size unpooled 132 B rows (the article)
    indexer_pooled_rows: bool = True
    # the launch command is checked against this version's argparse (unknown / renamed flags refused)
    strict_launch_flags: bool = True
    # the start-up refusals this version gives (mamba strategy vs page size, hicache_mem_layout)
    startup_refusals: bool = True
    # EAGLE/NEXTN with --speculative-num-steps and no --speculative-eagle-topk: 0.5.23's
    # _handle_eagle_family (arg_groups/speculative_hook.py) fills topk only when steps is unset,
    # then compares it (`speculative_eagle_topk > 1`, the page-tree check) and the server dies on a
    # TypeError (None > int); the article's layout takes topk as 1
    eagle_steps_need_topk: bool = True
    # HiCache: the host pool group has a DSAIndexerPoolHost entry, the host KV row is the device
    # row (override_kv_cache_dim) and the MTP draft layers are packed into the host pools;
    # the article: KV + MAMBA only, 512-wide host rows, no draft layers on the host
    host_indexer_pool: bool = True
    host_row_is_device_row: bool = True
    host_packs_draft: bool = True
    # --hicache-size split over the device pools (_split_hicache_size) and the ratio auto-sized from
    # the host's RAM when neither is given (auto_size_hicache); the article: each pool gets the
    # whole size and the ratio is taken as given
    split_hicache_size: bool = True
    auto_hicache_ratio: bool = True
    # a plan note when this layout's capacity order is borrowed from another version
    capacity_note: str | None = None
    # models other than GLM-5.3-Flash (glm_kv.ledgers.model_plan) are modelled for this version
    other_models: bool = True
    fp8_scale_group: int = 128          # DSATokenToKVPool.quant_block_size
    fp8_scale_bytes: int = 4            # one fp32 scale per group
    scaled_rope_item_bytes: int = 2     # DSATokenToKVPool.rope_storage_dtype (bf16) in scaled fp8 rows
    indexer_item_bytes: int = 1         # index_k_with_scale_buffer_dtype (uint8)
    conv_state_dtype: str = "bfloat16"  # mamba2_state_dtype(): conv is bf16 (env SGLANG_MAMBA_CONV_DTYPE unset)
    default_ssm_dtype: str = "float32"  # mamba2_state_dtype(): when neither the flag nor the config says
    # (family, sm) -> (page_size when --page-size is unset, the page sizes the attention backend
    # keeps, None = any): a page size outside the set is replaced by the default, as SGLang's
    # backend constraints do (_mla_backend_page_constraints, the DSA and Qwen3.5 overrides)
    page_rules: dict = field(default_factory=dict)
    # DSA models' kv dtype and backends: glm_kv.inputs.resolve (resolve_kv_dtype,
    # resolve_dsa_backends), shared with GLM-5.3-Flash; a later rules object should own them.
    # hybrid (mamba-ish) models with the radix cache on: mamba_radix_cache_strategy "auto" resolves to
    # this when the overlap schedule is on or pages are wider than one token, else to no_buffer
    # (_mamba_radix_cache_resolution; every shipped hybrid supports the extra buffer)
    default_mamba_strategy: str = "extra_buffer"
    # families whose attention backend on Blackwell (SM >= 100) is trtllm_mla by default; SGLang
    # 0.5.23's _mla_kv_cache_dtype_checks then refuses kv_cache_dtype "bfloat16" (its list holds the
    # spelling "bf16" only). glm_kv reads both spellings as bfloat16 (profile alias), so it refuses
    # both: stricter than SGLang for "bf16", never a plan for a server that does not start.
    trtllm_mla_families: tuple = ()
    # families whose attention backend on Blackwell is trtllm_mha by default (validate_mamba_no_buffer
    # refuses no_buffer with it)
    trtllm_mha_families: tuple = ()

    def default_backend_is_trtllm_mha(self, family: str | None, sm: int | None) -> bool:
        return family in self.trtllm_mha_families and sm is not None and _sm_class(sm) == 100

    def check_kv_dtype(self, family: str, sm: int, kv_cache_dtype: str) -> None:
        """Refuse a KV dtype this version refuses at start-up for the family's default backend."""
        if family in self.trtllm_mla_families and _sm_class(sm) == 100 and kv_cache_dtype == "bfloat16":
            raise ProfileError("kv_cache_dtype", "SGLang 0.5.23 refuses bfloat16 here: its default "
                               "attention backend on Blackwell is trtllm_mla, and 'TensorRT-LLM MLA backend "
                               "only supports kv-cache-dtype of fp8_e4m3, bf16, or auto.' (it compares the "
                               "spelling; glm-kv reads bf16 as bfloat16 and refuses both)")

    def mamba_strategy(self, requested: str, disable_overlap_schedule: bool, page_size: int) -> str:
        if requested != "auto":
            return requested
        if not disable_overlap_schedule or page_size > 1:
            return self.default_mamba_strategy
        return "no_buffer"

    def page_size(self, family: str, sm: int, given: int | None = None) -> int:
        key = (family, _sm_class(sm))
        if key not in self.page_rules:
            raise ProfileError("page_size", f"SGLang {self.version}'s page size for a {family} model "
                                            f"on SM {sm} is not known to glm-kv")
        default, allowed = self.page_rules[key]
        if given is None or (allowed is not None and given not in allowed):
            return default
        return given


def _sm_class(sm: int) -> int:
    """SGLang's defaults split Hopper (90) from Blackwell (100, 103 as is_sm100)."""
    return 100 if sm >= 100 else 90


SGLANG_0_5_23 = SglangRules(
    version="0.5.23",
    page_rules={
        ("mla+kda", 90): (1, None), ("mla+kda", 100): (64, {32, 64}),              # B200: trtllm_mla
        ("gqa+gdn", 90): (1, None), ("gqa+gdn", 100): (1, {1}),                    # B200: triton, page 1
        ("gqa+mamba2", 90): (1, None), ("gqa+mamba2", 100): (64, {16, 32, 64, 128}),   # B200: trtllm_mha
        ("mla_dsa", 90): (64, {64}), ("mla_dsa", 100): (64, {64}),                 # DSA: 64-token pages
        ("mla_dsa+kda", 90): (256, {256}), ("mla_dsa+kda", 100): (256, {256}),     # GLM-5.3-Flash: 64 x kpool 4
        ("gqa+jet", 90): (1, None), ("gqa+jet", 100): (1, None),                   # Jet-Nemotron: fa3 / triton
        ("gqa_swa", 90): (1, None), ("gqa_swa", 100): (64, {16, 32, 64, 128}),     # gpt-oss: fa3 / trtllm_mha
    },
    trtllm_mla_families=("mla+kda",),
    trtllm_mha_families=("gqa+mamba2", "gqa_swa"),
)

ARTICLE = SglangRules(
    version="article",
    page_times_kpool=False,
    indexer_pooled_rows=False,
    strict_launch_flags=False,
    startup_refusals=False,
    eagle_steps_need_topk=False,
    host_indexer_pool=False,
    host_row_is_device_row=False,
    host_packs_draft=False,
    split_hicache_size=False,
    auto_hicache_ratio=False,
    capacity_note="layout 'article': capacity sizing follows SGLang 0.5.23's order; the article "
                  "does not describe it",
    other_models=False,
)

RULES = {"article": ARTICLE, "0.5.23": SGLANG_0_5_23}


def rules_for(profile_or_layout) -> SglangRules:
    """The rules of a profile's ``sglang_layout`` (or of a layout name)."""
    layout = getattr(profile_or_layout, "sglang_layout", profile_or_layout)
    if layout not in RULES:
        raise ProfileError("sglang_layout", f"must be one of {', '.join(RULES)}, got {layout!r}")
    return RULES[layout]
