"""vLLM 0.33.0's decode context parallelism (``--decode-context-parallel-size`` / ``-dcp``) in the KV plan.

Read from vLLM 0.33.0's installed package (paths relative to ``vllm/``); the expected values come from vLLM's
own code through tests/vllm/oracle.py (``test_glm_kv_plan.py`` ``DCP``), never from here.

What DCP moves (``ledgers/vllm.py`` uses these rules):

* not the specs: a layer's spec, page and block size are the same at any DCP size (``get_kv_cache_spec``
  reads no DCP size; ``resolve_dcp_kv_block_size`` scales a block's token span only for the scheduler's
  hashing, v1/core/kv_cache_utils.py:740-742), nor the grouping, the bytes per block or ``num_blocks``;
* the tokens a request keeps per rank: an attention cache whose ``dcp_sharded`` is True (``AttentionSpec``'s
  default, v1/kv_cache_interface.py:553: MLA, the DSA indexer, full attention) holds cdiv(max_model_len, dcp)
  of them (``FullAttentionSpec.max_memory_usage_bytes``, :643-648), so its blocks per request fall by about
  dcp; GLM-5.3-Flash's tail ring (``dcp_sharded=False``, models/glm5next/common/attention.py:178) and the
  Mamba state (no ``AttentionSpec``) are replicated on every rank. Hence ``Maximum concurrency``, the
  printed ``GPU KV cache size`` and the one-request admission check (``_max_memory_usage_bytes_from_groups``);
* which attention backend a layer gets: ``validate_configuration`` drops a backend whose impl lacks
  ``supports_dcp`` ("DCP not supported", v1/attention/backend.py:346-347). On sm_90 that leaves
  FLASHMLA_SPARSE alone for sparse MLA (FLASH_ATTN_MLA_SPARSE and FLASHINFER_MLA_SPARSE_SM90 have none),
  whose impl refuses a bf16 cache under DCP (v1/attention/backends/mla/flashmla_sparse.py:784-788); on
  sm_100 FA4 sparse MLA needs heads x dcp in (8, 16, 32, 64) gathered query heads
  (mla/flashattn_mla_sparse.py:324-334). Dense MLA (FLASH_ATTN_MLA, FLASHMLA, FLASHINFER_MLA) and full
  attention (FLASH_ATTN, FLASHINFER) take DCP and return the softmax LSE that
  ``check_attention_cp_compatibility`` asks of them (v1/worker/cp_utils.py).

Refusals, in vLLM's words: ``ParallelConfig`` (tp divisible by dcp, config/parallel.py:594-600), the GQA
limits of ``ModelConfig.verify_with_parallel_config`` (config/model.py:1578-1607; Qwen3.5 and Nemotron, two
KV heads), both pydantic ``ValidationError``s at engine config; the bf16 FLASHMLA_SPARSE refusal at model
build; "No valid attention backend" for the two sm_90 sparse launches whose message is derived here; and
``validate_block_size``'s interleave check (config/vllm.py:3392-3412), run by the engine core after the
capacity line (v1/engine/core.py:354) on the smallest prefix-cacheable group's block.

``--cp-kv-cache-interleave-size`` moves no memory; above 1 with DCP the metadata builders and
``check_attention_cp_compatibility`` refuse some backends (FlashInfer MLA: interleave 1 only; MTP needs
``supports_mtp_with_cp_non_trivial_interleave_size``), which is not derived: NotModelled.
``--dcp-kv-cache-interleave-size`` is read only with a NIXL KV connector (``adjust_dcp_kv_cache_interleave_size``,
config/vllm.py:3339-3390), which glm-kv refuses as not modelled: without one it moves nothing.
"""
from __future__ import annotations

from typing import Optional

from ..inputs.hf_config import HfConfig
from .vllm_refusals import NotModelled, VllmRefusal

# v1/attention/backends/mla/flashmla_sparse.py:784-788 (the impl's __init__, at model build)
FLASHMLA_SPARSE_BF16 = ("DCP for FlashMLA sparse requires an fp8_ds_mla kv-cache; the bf16 sparse path is not "
                        "supported under DCP.")

_SELECTOR = ("No valid attention backend found for cuda with AttentionSelectorConfig(head_size={head}, "
             "dtype=torch.bfloat16, kv_cache_dtype={kvd}, block_size=None, use_mla=True, has_sink=False, "
             "use_sparse=True, use_mm_prefix=False, use_per_head_quant_scales=False, "
             "attn_type=AttentionType.DECODER, has_sliding_window=False, use_non_causal=False, "
             "use_batch_invariant=False, use_kv_connector=False, use_adaptive_verification=False, use_pcp=False, "
             "use_dcp=True, use_rswa=False). Reasons: {{{reasons}}}.")
_FA_SPARSE = ("FLASH_ATTN_MLA_SPARSE: [kv_cache_dtype not supported, DCP not supported, FlashAttention MLA Sparse "
              "currently supports only FP16/BF16 KV cache]")
# platforms/cuda.py get_attn_backend_cls on sm_90 (the sparse list, platforms/cuda.py:139-157, in its order),
# each backend's invalid reasons (v1/attention/backend.py validate_configuration + supports_combination)
NO_VALID_SM90 = {
    # the DSA models (head 576) with fp8_e4m3: not in FLASHMLA_SPARSE's dtypes, FLASHINFER_MLA_SPARSE_SM90 no DCP
    (576, "fp8_e4m3"): _SELECTOR.format(head=576, kvd="fp8_e4m3", reasons=(
        "FLASH_ATTN_MLA: [kv_cache_dtype not supported, sparse not supported], FLASHMLA: [sparse not supported], "
        "FLASHINFER_MLA: [sparse not supported, compute capability not supported], TRITON_MLA: [sparse not "
        f"supported], {_FA_SPARSE}, FLASHMLA_SPARSE: [kv_cache_dtype not supported], "
        "FLASHINFER_MLA_SPARSE_SM90: [DCP not supported]")),
    # GLM-5.3-Flash (rope-free head 512) with fp8: FLASHMLA_SPARSE takes head 512 with bf16 / fp8_ds_mla only
    (512, "fp8"): _SELECTOR.format(head=512, kvd="fp8", reasons=(
        "FLASH_ATTN_MLA: [kv_cache_dtype not supported, sparse not supported], FLASHMLA: [sparse not supported], "
        "FLASHINFER_MLA: [sparse not supported, compute capability not supported, FlashInfer MLA kernel requires "
        "qk_nope_head_dim in [64, 128, 192], but got 256], TRITON_MLA: [sparse not supported], "
        f"FLASHINFER_MLA_SPARSE_SM90: [DCP not supported], {_FA_SPARSE}, FLASHMLA_SPARSE: [FLASHMLA_SPARSE supports "
        "head_size 512 only with bf16 or fp8_ds_mla kv-cache on SM90 (NoPE), got kv_cache_dtype=fp8, "
        "capability=DeviceCapability(major=9, minor=0)]")),
}


def _validation_error(model: str, message: str) -> VllmRefusal:
    """A pydantic model validator's ValueError as pydantic reports it (up to its ``[type=...]`` tail, which
    carries the input's repr)."""
    return VllmRefusal("engine_config", "ValidationError", f"1 validation error for {model}\n  Value error, {message}")


def check_parallel_config(tp: int, dcp: int) -> None:
    """ParallelConfig's validator (config/parallel.py:594-600): without PCP, DCP reuses the TP ranks."""
    if dcp < 1:
        raise NotModelled(f"decode_context_parallel_size {dcp} (vLLM's field takes >= 1)")
    if tp % dcp:
        raise _validation_error("ParallelConfig", f"tp_size={tp} must be divisible by dcp_size={dcp}.")


def check_gqa(cfg: HfConfig, tp: int, dcp: int) -> None:
    """ModelConfig.verify_with_parallel_config for a non-MLA model under DCP (config/model.py:1578-1607): TP
    must exceed the KV heads, dcp at most tp // kv heads, and the query heads per KV head divisible by dcp."""
    t = cfg.text
    kv = int(t.get("num_key_value_heads") or t.get("num_attention_heads"))
    q = int(t["num_attention_heads"])
    if tp <= kv:
        raise _validation_error("VllmConfig", (
            f"Decode context parallelism for GQA/MQA requires `--tensor-parallel-size` ({tp}) to be greater than "
            f"the model's total number of KV heads ({kv}). Increase `--tensor-parallel-size` or set "
            "`--decode-context-parallel-size 1`."))
    if dcp > tp // kv:
        raise _validation_error("VllmConfig", (
            f"`--decode-context-parallel-size` ({dcp}) exceeds the maximum supported value ({tp // kv}) for "
            f"`--tensor-parallel-size` ({tp}) and {kv} model KV heads."))
    if (q // kv) % dcp:
        raise _validation_error("VllmConfig", (
            f"The model's number of query heads per KV head ({q // kv}) must be divisible by "
            f"`--decode-context-parallel-size` ({dcp}) for GQA/MQA."))


def h200_sparse_mla(head: int, kvd: str, ds_mla: bool, user_block: Optional[int]) -> None:
    """Sparse MLA on sm_90 under DCP: FLASHMLA_SPARSE is the one backend with DCP. Its fp8_ds_mla row
    (``ds_mla``: the DSA models' "fp8" / "fp8_ds_mla") is sized as without DCP; a bf16 cache reaches its
    impl's refusal; any other fp8 finds no backend (vLLM's message, derived for block_size None)."""
    if ds_mla:
        return
    if not kvd.startswith("fp8"):
        raise VllmRefusal("model", "NotImplementedError", FLASHMLA_SPARSE_BF16)
    words = NO_VALID_SM90.get((head, kvd))
    if words is None or user_block is not None:
        raise NotModelled(f"H200 sparse MLA under DCP with kv cache {kvd!r}"
                          f"{'' if user_block is None else f', --block-size {user_block}'} (vLLM finds no backend; "
                          "its message is not derived here)")
    raise VllmRefusal("model", "ValueError", words)


def b200_flashmla_sparse_bf16() -> VllmRefusal:
    """sm_100 FLASHMLA_SPARSE picked for a bf16 cache (more than 16 heads per rank, or FA4 and FlashInfer
    invalid): the impl's refusal under DCP."""
    return VllmRefusal("model", "NotImplementedError", FLASHMLA_SPARSE_BF16)


def validate_block_size(block: int, dcp: int, interleave: int) -> None:
    """VllmConfig.validate_block_size (config/vllm.py:3392-3412) after the capacity: ``block`` is the
    smallest prefix-cacheable group's block (v1/engine/core.py:335-351). Then an interleave above 1 under DCP:
    not derived (the metadata builders' and check_attention_cp_compatibility's per-backend refusals)."""
    if dcp <= 1:
        return
    if not (interleave <= block and block % interleave == 0):
        raise VllmRefusal("validate_block_size", "AssertionError",
                          f"Block_size({block}) should be greater than or equal to and divisible by "
                          f"cp_kv_cache_interleave_size ({interleave}).")
    if interleave > 1:
        raise NotModelled(f"cp_kv_cache_interleave_size {interleave} under DCP (vLLM's per-backend checks at "
                          "initialize_kv_cache: FlashInfer MLA takes 1 only, MTP needs backend support)")
