"""vLLM 0.33.0's KV-cache sizing for the six hybrid/DSA models, re-derived from its source (issue 33).

Nothing here imports vLLM; every rule is written from reading vLLM 0.33.0's installed package (the
locations are named at each rule, relative to ``vllm/``). The expected values come from vLLM's own code
through tests/vllm/oracle.py, never from here.

What is modelled (``vllm_plan(config, args)``):

* spec kinds as vLLM names them (``v1/kv_cache_interface.py``): ``FullAttentionSpec`` (GQA: K+V of
  ``max(1, kv_heads // tp)`` heads), ``MLAAttentionSpec`` (latent row ``kv_lora_rank + qk_rope_head_dim``;
  the DSA indexer K as a 132-element uint8 row with ``tokens_per_state = index_kpool``),
  ``CircularBufferSpec`` (GLM-5.3-Flash's kpool tail ring: 2 heads x index_head_dim, ``index_kpool``
  tokens), ``MambaSpec`` (KDA / Gated DeltaNet / Mamba-2 conv + temporal state:
  ``model_executor/layers/mamba/mamba_utils.py`` ``MambaStateShapeCalculator``);
  ``page_size_bytes`` = heads x states x content (``AttentionSpec.unpadded_page_size_bytes``) or the
  state bytes, or ``page_size_padded``;
* the attention block size: backends' preferred / kernel block sizes
  (``platforms/interface.py`` ``_preferred_block_size_for_backends``) and the hybrid alignment
  (``_align_hybrid_block_size``: kernel alignment, the MLA x128 rule, the lcm with the Mamba prefill
  checkpoint alignment in ``align`` mode, attention block = alignment x cdiv(mamba page, alignment x
  attention page per token), Mamba page padded to the attention page);
* grouping (``v1/core/kv_cache_planning.py``): one uniform spec, ``UniformTypeKVCacheSpecs`` (one
  group), the uniform-page-size split (``_get_kv_cache_groups_uniform_page_size``: group size = the
  smallest bucket, or the largest when max < 1.5 x min; ``layers[i::n]``), and the block-outermost packing
  (``_get_packed_kv_cache_groups`` with ``_approximate_gcd``, state buckets capped at what one block holds);
* bytes per block (``_get_kv_cache_bytes_per_block``: layer-outer = max group sum of row-aligned pages;
  block-outer = max group sum rounded up to the lcm of the block-stride alignments), ``num_blocks`` =
  memory // bytes per block (or ``num_gpu_blocks_override``), the tensors' offsets and strides
  (``get_kv_cache_config_from_groups``);
* the null block and admission check (``get_kv_cache_configs``: memory less one block must hold one
  request of ``max_model_len``; ``_check_enough_kv_cache_memory``'s words), blocks per request
  (``max_memory_usage_bytes`` / page: attention cdiv(len, block); Mamba ``align`` 2 + spec + checkpoint
  blocks, ``none`` 1 + spec; the ring 1), ``Maximum concurrency`` = num_blocks / blocks per request
  (``v1/core/kv_cache_utils.py`` ``get_max_concurrency_for_kv_cache_config``) and ``GPU KV cache size``
  = int(concurrency x max_model_len) (``get_kv_cache_capacity``), printed ``%.2fx``.

* the GPU generation (``GPU_CAPABILITY``): H200 (sm_90) and B200 (sm_100). On B200 vLLM's selection
  (``platforms/cuda.py`` ``_get_backend_priorities`` / ``get_valid_backends``, ``_b200_backends`` here)
  puts sparse MLA on FLASHINFER_MLA_SPARSE (fp8; bf16 without FA4), FLASH_ATTN_MLA_SPARSE_FA4 (bf16,
  <= 16 heads per rank, 576-wide rows) or FLASHMLA_SPARSE (bf16, > 16 heads, 576-wide rows), dense MLA on
  FLASHINFER_MLA, full attention on FLASHINFER (layout LBHNC), each with its kernel block sizes and
  block-stride row alignment; GLM-5.1's and GLM-5.3-Flash's kv cache dtype "auto" becomes fp8
  (``model_executor/models/config.py``), whose MLA row is one byte per latent element (FlashInfer's
  plain fp8; no scales); the Mamba prefill checkpoints follow each kernel's SM10x rule.

* MTP speculative decoding (``--speculative-config '{"method": "mtp", "num_speculative_tokens": k}'``,
  ``_mtp_drafter_layers``): the drafter's KV layers after the target's, named and specced as vLLM's MTP
  modules build them (``DeepseekV32MTP``, ``Glm5NextMTP``, ``KimiK3MTP``, ``Qwen3_5MoeMTP``,
  ``NemotronHMTP``), ``SpeculativeConfig``'s check of k against the checkpoint's MTP layers (none, as
  Kimi-K3's: vLLM's ZeroDivisionError), and what k moves in the target: the conv state's k extra rows and
  k speculative Mamba blocks per request (hence the hybrid block), GLM-5.3-Flash's tail ring
  (``index_kpool`` x next_power_of_2(cdiv(index_kpool + k, index_kpool)) slots). Attention blocks per
  request do not move with k (vLLM's ``max_memory_usage_bytes`` has no lookahead term).

* ``--disable-hybrid-kv-cache-manager`` (``_unify_hybrid_kv_cache_specs``): the DSA models size as with
  the hybrid manager; the Mamba hybrids are refused in vLLM's words.

* decode context parallelism (``--decode-context-parallel-size``, ``ledgers/vllm_dcp.py``): attention caches
  keep cdiv(max_model_len, dcp) tokens per rank (the ring and the Mamba state are replicated), the backends
  without DCP drop out, and vLLM's DCP refusals (ParallelConfig, the GQA limits, FlashMLA sparse's bf16,
  the interleave check) in its words.

Not modelled (refused with ``NotModelled`` naming what): GPUs other than H200 and B200; on H200, fp8 MLA
past FLASHMLA / FLASHMLA_SPARSE / FLASHINFER_MLA_SPARSE_SM90 (fp8_e5m2, fp8_ds_mla on dense MLA (Kimi-K3:
vLLM finds no backend), a --block-size not a multiple of 64); on B200, a launch whose first valid attention
backend is past the ones derived here (e.g. a ``--block-size`` that rules FLASHINFER_MLA / FLASHINFER out;
FLASHMLA_SPARSE with an fp8 cache given as "fp8" cannot be reached by a modelled launch: FLASHINFER_MLA_SPARSE,
first in the fp8 list, takes every DSA launch it would, refusing only PCP+DCP), GLM-5.3-Flash's fp8_ds_mla
on B200 (vLLM finds no backend); speculative methods other than MTP
(refused where the launch is read, ``inputs/vllm_launch.py``), MTP with k not a multiple of a checkpoint's
n_predict > 1 (vLLM's ValueError, no vendored checkpoint to check its words on);
PCP, a DCP interleave above 1 (``--cp-kv-cache-interleave-size``), HiSparse, kv_cache_dtype_skip_layers.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Optional

from ..inputs.hf_config import HfConfig, config_where, nemotron_pattern

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "uint8": 1, "fp8_e4m3": 1}
DEFAULT_BLOCK_SIZE = 16                      # config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE
MLA_KERNEL_BLOCK_ALIGNMENT = 128             # platforms/interface.py _align_hybrid_block_size (use_mla)
KDA_FLASHKDA_CHECKPOINT_ALIGNMENT = 16       # model_executor/layers/mamba/kda_checkpoint.py
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64     # model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py
MAMBA2_CHECKPOINT_ALIGNMENT = 1              # model_executor/layers/mamba/mamba_mixer2.py get_kv_cache_spec


# the two ways a launch ends without a plan, in a module of their own so vllm_dcp.py raises them without
# importing this one (which imports it: no cycle)
from .vllm_refusals import NotModelled, VllmRefusal  # noqa: E402,F401
from . import vllm_dcp  # noqa: E402  (decode context parallelism's rules)


@dataclass(frozen=True)
class VllmArgs:
    """vLLM launch arguments (EngineArgs names); None: vLLM's default."""

    gpu: str = "H200"
    tp: int = 1
    kv_cache_memory_bytes: int = 0
    kv_cache_dtype: Optional[str] = None
    mamba_cache_dtype: Optional[str] = None
    mamba_ssm_cache_dtype: Optional[str] = None
    enable_prefix_caching: Optional[bool] = None
    block_size: Optional[int] = None
    max_model_len: Optional[int] = None
    max_num_seqs: Optional[int] = None
    num_speculative_tokens: int = 0
    disable_hybrid_kv_cache_manager: bool = False
    num_gpu_blocks_override: Optional[int] = None
    decode_context_parallel_size: int = 1               # DCP (-dcp): shards attention token positions
    cp_kv_cache_interleave_size: Optional[int] = None   # tokens per DCP rank in turn (default 1)
    dcp_kv_cache_interleave_size: Optional[int] = None  # its older name: read only with a NIXL KV connector

    @classmethod
    def from_launch(cls, launch: dict) -> "VllmArgs":
        """From the oracle's launch dict (tests/vllm/oracle.py FLAGS)."""
        kw = {k: v for k, v in launch.items() if k not in ("model", "speculative_config", "config_overrides")}
        spec = launch.get("speculative_config") or {}
        return cls(**kw, num_speculative_tokens=int(spec.get("num_speculative_tokens", 0)))


# ------------------------------------------------------------------------------------------------------
# spec kinds
# ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Spec:
    """One layer's KV cache spec, in vLLM's field names."""

    kind: str                       # FullAttentionSpec | MLAAttentionSpec | CircularBufferSpec | MambaSpec
    block_size: int
    num_kv_heads: int = 0
    head_size: int = 0
    head_size_v: int = 0
    dtype: str = ""
    cache_dtype_str: Optional[str] = None
    tokens_per_state: int = 1
    shapes: tuple = ()
    dtypes: tuple = ()
    mamba_type: str = ""
    num_speculative_blocks: int = 0
    num_prefill_checkpoint_blocks: int = 0
    page_size_padded: Optional[int] = None
    block_stride_alignment: int = 1      # bytes (row alignment of sparse MLA backends); 1: none
    state_content_bytes: Optional[int] = None   # the ds_mla rows' opaque per-token bytes (fp8_ds_mla: 656)
    role: str = ""                       # which vLLM module the layer is (indexer, mla, ...): grouping key

    @property
    def is_attention(self) -> bool:
        return self.kind != "MambaSpec"

    @property
    def state_content_size_bytes(self) -> int:
        if self.kind == "MambaSpec":
            return sum(math.prod(s) * DTYPE_BYTES[d] for s, d in zip(self.shapes, self.dtypes))
        # AttentionSpec.state_content_size_bytes: (head_size + head_size_v) x dtype size, unless given
        # (MLAAttention.get_kv_cache_spec: state_content_bytes {"fp8_ds_mla": 656}, mla_attention.py:1375-1388)
        if self.state_content_bytes is not None:
            return self.state_content_bytes
        return (self.head_size + self.head_size_v) * DTYPE_BYTES[self.dtype]

    @property
    def num_states(self) -> int:
        # KVCacheSpec.get_num_kernel_states: block_size // tokens_per_state
        return self.block_size // self.tokens_per_state if self.tokens_per_state > 0 else 1

    @property
    def unpadded_page_size_bytes(self) -> int:
        if self.kind == "MambaSpec":
            return self.state_content_size_bytes
        return self.num_kv_heads * self.num_states * self.state_content_size_bytes

    @property
    def page_size_bytes(self) -> int:
        if self.page_size_padded is not None:
            assert self.page_size_padded >= self.unpadded_page_size_bytes
            return self.page_size_padded
        return self.unpadded_page_size_bytes

    @property
    def stride_bytes(self) -> int:
        """_get_layer_block_stride: the page rounded up to the block-stride alignment."""
        return _round_up(self.page_size_bytes, self.block_stride_alignment)

    def blocks_per_request(self, max_model_len: int, mamba_cache_mode: str, dcp: int = 1) -> int:
        """cdiv(max_memory_usage_bytes, page_size_bytes) (kv_cache_interface.py). Under DCP an attention
        spec (``AttentionSpec.dcp_sharded`` True: every attention cache here but the ring) holds
        cdiv(max_model_len, dcp) tokens per rank (``FullAttentionSpec.max_memory_usage_bytes``, :643-648);
        the ring (``dcp_sharded`` False) and the Mamba state (no ``AttentionSpec``) are replicated."""
        if self.kind == "CircularBufferSpec":
            return 1
        if self.kind == "MambaSpec":
            if mamba_cache_mode == "align":
                return 2 + self.num_speculative_blocks + self.num_prefill_checkpoint_blocks
            return 1 + self.num_speculative_blocks
        return _cdiv(_cdiv(max_model_len, dcp) if dcp > 1 else max_model_len, self.block_size)

    def uniform_type_key(self):
        """UniformTypeKVCacheSpecs.is_uniform_type: same type and block size (attention: same
        token-slot needs); Mamba: same everything but the page."""
        if self.kind == "MambaSpec":
            return (self.kind, self.page_size_bytes, self.num_speculative_blocks, self.block_size)
        return (self.kind, self.block_size)

    def to_dict(self) -> dict:
        """The oracle's ``_spec_dict`` keys for this kind."""
        d = {"kind": self.kind, "page_size_bytes": self.page_size_bytes, "block_size": self.block_size}
        if self.kind == "MambaSpec":
            d.update(shapes=[list(s) for s in self.shapes], dtypes=list(self.dtypes),
                     mamba_type=f"MambaAttentionBackendEnum.{self.mamba_type}",
                     num_speculative_blocks=self.num_speculative_blocks, page_size_padded=self.page_size_padded,
                     tokens_per_state=-1)
            return d
        d.update(num_kv_heads=self.num_kv_heads, head_size=self.head_size, dtype=self.dtype)
        if self.kind == "MLAAttentionSpec":
            d["cache_dtype_str"] = self.cache_dtype_str
        if self.kind in ("FullAttentionSpec", "MLAAttentionSpec"):
            d["sliding_window"] = None
        d.update(page_size_padded=self.page_size_padded, tokens_per_state=self.tokens_per_state)
        return d


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _cdiv(a, b) * b


def _next_power_of_2(n: int) -> int:
    """utils/math_utils.py next_power_of_2 (inclusive; 1 below 1)."""
    return 1 if n < 1 else 1 << (n - 1).bit_length()


# ------------------------------------------------------------------------------------------------------
# the model as vLLM builds it: layer names, kinds, backends (H200 sm_90, B200 sm_100)
# ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Backend:
    """An attention backend as the sizing sees it: its name, the bases of its
    ``get_supported_kernel_block_sizes`` (an int and a ``MultipleOf`` are read alike:
    ``AttentionBackend.supports_block_size`` accepts any multiple of either, v1/attention/backend.py:122-137),
    and how its ``customize_spec`` row-aligns block strides (``sparse_utils.align_blocks_to_rows(spec, rows)``:
    stride alignment = rows x the row's bytes, v1/attention/backends/mla/sparse_utils.py:44-47; 0: none).

    A backend whose sizes are all fixed ints gets ``block_stride_alignment = MultipleOf(max)`` from
    ``customize_attention_spec`` (v1/worker/utils.py:477-486); that alignment is the page of
    gcd(max, block) tokens (``get_block_stride_alignment``, v1/kv_cache_interface.py:224-233), which
    divides the page of a spec whose page is linear in its block (every attention spec here), so it
    moves nothing and is not carried."""

    name: str
    sizes: tuple
    stride_rows: int = 0
    multiple_of: int = 0    # customize_spec's block_stride_alignment MultipleOf(n): the page of gcd(n, block) tokens

    @property
    def kernel_block(self) -> int:
        """The smallest kernel block (``min(s.base ...)`` in ``_align_hybrid_block_size``)."""
        return min(self.sizes)

    def supports(self, block_size: int) -> bool:
        return any(block_size % s == 0 for s in self.sizes)


# H200 (sm_90), with the kernel packages vLLM 0.33.0 pins (tests/vllm/README.md): backend classes and
# their get_supported_kernel_block_sizes / customize_spec, read in v1/attention/backends/.
FLASHINFER_MLA_SPARSE_SM90 = Backend("FLASHINFER_MLA_SPARSE_SM90", (64,), 1)   # mla/flashinfer_mla_sparse_sm90.py:160
FLASH_ATTN_MLA_SPARSE = Backend("FLASH_ATTN_MLA_SPARSE", (64,), 1)             # mla/flashattn_mla_sparse.py:50-55
FLASH_ATTN_MLA = Backend("FLASH_ATTN_MLA", (16,))                              # mla/flashattn_mla.py
FLASHMLA = Backend("FLASHMLA", (64,))                                          # mla/flashmla.py:57-58 ([64]); fp8
# FlashMLA sparse with a quantized cache off SM100: [MultipleOf(64)], block_stride_alignment MultipleOf(64): the
# page of gcd(64, block) tokens (64 x 656 B), which divides a layer-outer page (the DSA models) but rounds up the
# block-outer bytes per block (GLM-5.3-Flash: lcm with the indexer's 132-byte row), no row alignment
# (mla/flashmla_sparse.py:158-175; v1/kv_cache_interface.py:224-233 get_block_stride_alignment)
FLASHMLA_SPARSE_FP8_SM90 = Backend("FLASHMLA_SPARSE", (64,), 0, multiple_of=64)
DEEPSEEK_V32_INDEXER = Backend("DEEPSEEK_V32_INDEXER", (64,))                  # mla/indexer.py:285-286 ([64])
FLASH_ATTN = Backend("FLASH_ATTN", (16,))                                      # flash_attn.py (MultipleOf(16))

# B200 (sm_100), the same packages; what platforms/cuda.py's selection picks is in _b200_backends.
# FlashInfer's TRTLLM-gen sparse MLA: [MultipleOf(32)], rows aligned to its 32-row kernel page
# (mla/flashinfer_mla_sparse.py:73-77, 93-94)
FLASHINFER_MLA_SPARSE = Backend("FLASHINFER_MLA_SPARSE", (32,), 32)
# FA4 sparse MLA (subclass of the TRTLLM backend): [MultipleOf(64)], so 64-row pages (mla/flashattn_mla_sparse.py:275-285)
FLASH_ATTN_MLA_SPARSE_FA4 = Backend("FLASH_ATTN_MLA_SPARSE_FA4", (64,), 64)
# FlashMLA sparse, bf16 cache: [MultipleOf(64)], rows of 1 (mla/flashmla_sparse.py:158-175)
FLASHMLA_SPARSE = Backend("FLASHMLA_SPARSE", (64,), 1)
# FlashInfer dense MLA: [32, 64] (mla/flashinfer_mla.py:204-205)
FLASHINFER_MLA = Backend("FLASHINFER_MLA", (32, 64))
# FlashInfer (full attention): [16, 32, 64] (+ 128..1024 with trtllm-gen large pages); either way the
# smallest is 16 and every multiple of 16 is taken (flashinfer.py:585-604)
FLASHINFER = Backend("FLASHINFER", (16, 32, 64))


def glm5next_indexer(kpool: int) -> Backend:
    """Glm5NextIndexerBackend: index_kpool x the paged-MQA page sizes, (32, 64) off SM120
    (mla/indexer.py:297-307, utils/deep_gemm.py:37-40); its name is the DeepSeek-V3.2 indexer's."""
    return Backend("DEEPSEEK_V32_INDEXER", (kpool * 32, kpool * 64))


def _h200_fp8_mla_check(m: "_Model", kvd: str, user_block: Optional[int]) -> None:
    """An fp8 MLA cache on H200 (sm_90): the launches whose backend glm-kv derives, the rest NotModelled.
    The sm_90 MLA lists (platforms/cuda.py:139-157): dense FLASH_ATTN_MLA, FLASHMLA, FLASHINFER_MLA, ...;
    sparse head 512 (GLM-5.3-Flash, rope-free) FLASHINFER_MLA_SPARSE_SM90, FLASH_ATTN_MLA_SPARSE,
    FLASHMLA_SPARSE, head 576 (the DSA models) FLASH_ATTN_MLA_SPARSE, FLASHMLA_SPARSE, FLASHINFER_MLA_SPARSE_SM90.
    FLASH_ATTN_MLA and FLASH_ATTN_MLA_SPARSE take no fp8 (mla/flashattn_mla.py:42-46,
    mla/flashattn_mla_sparse.py:43-47); FLASHMLA (mla/flashmla.py:48-58, kernel block 64) and
    FLASHINFER_MLA_SPARSE_SM90 (mla/flashinfer_mla_sparse_sm90.py:148-160, kernel block 64) take fp8 and
    fp8_e4m3 as a plain 1-byte row; FLASHMLA_SPARSE (head 576) takes fp8 as the 656-byte fp8_ds_mla row.
    The DSA models' "fp8" thus becomes FLASHMLA_SPARSE's fp8_ds_mla (``_canonicalize_sparse_mla_kv_cache_dtype``,
    model_executor/layers/attention/mla_attention.py:359-369), their "fp8_e4m3" (not in FLASHMLA_SPARSE's list,
    mla/flashmla_sparse.py:148-154) FLASHINFER_MLA_SPARSE_SM90's plain row. Returns True for fp8_ds_mla."""
    dsa = m.mamba_kind != "kda" and any(r == "mla_sparse" for _, r in m.layers)
    sparse = any(r == "mla_sparse" for _, r in m.layers)
    if kvd == "fp8_ds_mla" and sparse:
        # FLASHMLA_SPARSE: head 576 (DSA) or SM90's rope-free head 512 (GLM-5.3-Flash) in the 656-byte row
        # (mla/flashmla_sparse.py:147-175; mla_attention.py:1375-1388)
        if user_block is not None and user_block % 64:
            raise NotModelled(f"H200 fp8_ds_mla with --block-size {user_block} (FLASHMLA_SPARSE: multiples of 64)")
        return True
    if kvd not in ("fp8", "fp8_e4m3"):
        raise NotModelled(f"H200 MLA backend for kv cache {kvd!r} (past FLASHMLA / FLASHINFER_MLA_SPARSE_SM90)")
    if user_block is not None and user_block % 64:
        raise NotModelled(f"H200 fp8 MLA backend for --block-size {user_block} (FLASHMLA / FLASHMLA_SPARSE / "
                          "FLASHINFER_MLA_SPARSE_SM90 need a multiple of 64)")
    return dsa and kvd in ("fp8", "fp8_ds_mla")


def _h200_backends(m: "_Model", roles: set, kpool: int, quantized: bool = False, ds_mla: bool = False) -> dict:
    """H200 (sm_90), as the harness's vLLM picks them (tests/vllm/README.md: GLM-5.3-Flash's sparse MLA on
    FLASHINFER_MLA_SPARSE_SM90, the DSA models' on FLASH_ATTN_MLA_SPARSE, dense MLA on FLASH_ATTN_MLA, or on
    FLASHMLA with an fp8 cache (``_h200_fp8_mla_check``), full attention on FLASH_ATTN;
    platforms/cuda.py:139-157, 169-182)."""
    out: dict = {}
    if "mla_sparse" in roles:
        out["mla_sparse"] = (FLASHMLA_SPARSE_FP8_SM90 if ds_mla else FLASHINFER_MLA_SPARSE_SM90
                             if m.mamba_kind == "kda" or quantized else FLASH_ATTN_MLA_SPARSE)
    if "mla" in roles:
        out["mla"] = FLASHMLA if quantized else FLASH_ATTN_MLA
    if "indexer" in roles:
        out["indexer"] = glm5next_indexer(kpool) if m.mamba_kind == "kda" else DEEPSEEK_V32_INDEXER
    if "gqa" in roles:
        out["gqa"] = FLASH_ATTN
    return out


def _b200_backends(cfg: HfConfig, m: "_Model", roles: set, cache_dtype: str, tp: int,
                   user_block: Optional[int], dcp: int = 1) -> dict:
    """platforms/cuda.py get_attn_backend_cls on sm_100: the first of ``_get_backend_priorities``
    (platforms/cuda.py:96-130 MLA, 157-168 otherwise) whose ``validate_configuration`` passes
    (v1/attention/backend.py:279-360: head size, model dtype, kv cache dtype, the user's block size,
    MLA / sparse, capability, then ``supports_combination``). ``num_heads`` is the layer's heads per
    rank (MLAAttention gets ``num_local_heads = num_heads // tp``, model_executor/models/deepseek_v2.py:1042,
    models/glm5next/common/attention.py:418; model_executor/layers/attention/mla_attention.py:514-521).
    A launch whose first valid backend is not derived here is refused by name (NotModelled)."""
    t = cfg.text
    out: dict = {}
    quantized = cache_dtype.startswith("fp8")     # kv_cache_interface.is_quantized_kv_cache
    mla_head = int(t.get("kv_lora_rank", 0)) + int(t.get("qk_rope_head_dim", 0) or 0)
    nope = int(t.get("qk_nope_head_dim", 0) or 0)
    rope = int(t.get("qk_rope_head_dim", 0) or 0)
    rank = int(t.get("kv_lora_rank", 0) or 0)

    def block_ok(b: Backend) -> bool:            # validate_configuration: the user's --block-size only
        return user_block is None or b.supports(user_block)

    if "mla_sparse" in roles:
        heads = int(t["num_attention_heads"]) // tp
        topk = t.get("index_topk")

        def flashinfer_sparse_ok() -> bool:      # mla/flashinfer_mla_sparse.py:80-160 (TRTLLM, SM10)
            if mla_head not in (512, 576) or cache_dtype not in ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3"):
                return False
            if rope == 0:                        # native no-rope MLA: only nope 256 / rank 512
                shape_ok = nope == 256 and rank == 512
            else:
                shape_ok = nope in (128, 192)
            return shape_ok and topk is not None and block_ok(FLASHINFER_MLA_SPARSE)

        def fa4_ok() -> bool:                    # mla/flashattn_mla_sparse.py:275-342 (+ the TRTLLM checks)
            # under DCP the query is all-gathered: heads x dcp, and 128 of them are not taken (:324-334)
            gathered = (8, 16, 32, 64) if dcp > 1 else (8, 16, 32, 64, 128)
            return (mla_head == 576 and cache_dtype in ("auto", "bfloat16") and topk is not None
                    and int(topk) % 128 == 0 and (rank, rope) == (512, 64) and heads * dcp in gathered
                    and flashinfer_sparse_ok() and block_ok(FLASH_ATTN_MLA_SPARSE_FA4))

        def flashmla_sparse_ok() -> bool:        # mla/flashmla_sparse.py:147-245: head 512 is SM90-only
            if quantized:                        # SM100 quantized: kernel block [64] exactly (:158-165)
                return mla_head == 576 and cache_dtype in ("fp8", "fp8_ds_mla") and user_block in (None, 64)
            return mla_head == 576 and cache_dtype in ("auto", "bfloat16") and block_ok(FLASHMLA_SPARSE)

        if quantized:                            # platforms/cuda.py:101-107: fp8 prefers FlashInfer
            order = [(FLASHINFER_MLA_SPARSE, flashinfer_sparse_ok), (FLASHMLA_SPARSE, flashmla_sparse_ok)]
        elif heads <= 16:                        # platforms/cuda.py:111-116
            order = [(FLASH_ATTN_MLA_SPARSE_FA4, fa4_ok), (FLASHINFER_MLA_SPARSE, flashinfer_sparse_ok),
                     (FLASHMLA_SPARSE, flashmla_sparse_ok)]
        else:                                    # platforms/cuda.py:117-121
            order = [(FLASHMLA_SPARSE, flashmla_sparse_ok), (FLASHINFER_MLA_SPARSE, flashinfer_sparse_ok)]
        pick = next((b for b, ok in order if ok()), None)
        if pick is None:
            raise NotModelled(f"B200 sparse MLA backend for kv cache {cache_dtype!r}, {heads} heads per rank "
                              f"(none of {[b.name for b, _ in order]} derived valid: vLLM falls further)")
        if pick is FLASHMLA_SPARSE and quantized and cache_dtype != "fp8_ds_mla":
            # _canonicalize_sparse_mla_kv_cache_dtype: fp8 becomes the 656-byte fp8_ds_mla row
            # (model_executor/layers/attention/mla_attention.py:359-369, 1383-1390); only an explicit
            # fp8_ds_mla reaches it here (FLASHINFER_MLA_SPARSE refuses that dtype, :134-135)
            raise NotModelled("B200 FLASHMLA_SPARSE with an fp8 cache given as 'fp8' (the fp8_ds_mla row layout)")
        if pick is FLASHMLA_SPARSE and not quantized and dcp > 1:

            raise vllm_dcp.b200_flashmla_sparse_bf16()
        out["mla_sparse"] = pick
    if "mla" in roles:
        # the dense MLA list starts with FLASHINFER_MLA (platforms/cuda.py:123-133); its checks:
        # qk_nope_head_dim in (64, 128, 192), head sizes 320/512/576, kv dtypes (mla/flashinfer_mla.py:193-248,
        # model_executor/layers/attention/mla_attention.py MLACommonBackend.get_supported_head_sizes)
        if (nope in (64, 128, 192) and mla_head in (320, 512, 576)
                and cache_dtype in ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3") and block_ok(FLASHINFER_MLA)):
            out["mla"] = FLASHINFER_MLA
        else:
            raise NotModelled(f"B200 dense MLA backend past FLASHINFER_MLA (kv cache {cache_dtype!r}, "
                              f"block {user_block})")
    if "indexer" in roles:
        out["indexer"] = glm5next_indexer(int(t.get("index_kpool", 1) or 1)) if m.mamba_kind == "kda" \
            else DEEPSEEK_V32_INDEXER
    if "gqa" in roles:
        # the causal non-MLA list on sm_100 starts with FLASHINFER (platforms/cuda.py:157-168); its checks:
        # head sizes 64/128/256/512, kv dtypes, capability 8.0-12.1 (flashinfer.py:573-583, 690-705)
        head = int(t.get("head_dim") or 0)
        if (head in (64, 128, 256, 512) and cache_dtype in ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")
                and block_ok(FLASHINFER)):
            out["gqa"] = FLASHINFER
        else:
            raise NotModelled(f"B200 full-attention backend past FLASHINFER (head {head}, kv cache {cache_dtype!r}, "
                              f"block {user_block})")
    return out


@dataclass
class _Layer:
    name: str
    spec: Spec
    backend: Optional[Backend]      # None: an SSM backend (no block-size say)
    module: str                     # the vLLM layer class, for ``attention_backends``
    backend_name: str


@dataclass(frozen=True)
class _Model:
    arch: str
    max_position: int
    use_mla: bool
    layers: tuple                   # (name, role, params) in vLLM's registration order
    mamba_kind: Optional[str]       # kda | gdn | mamba2
    block_outermost: bool           # resolve_kv_cache_layout: BLHNC (True) or LBNHC
    kv_cache_auto: str              # what kv_cache_dtype "auto" resolves to


def _text(cfg: HfConfig) -> dict:
    return cfg.text


def _model_of(cfg: HfConfig) -> _Model:
    t = cfg.text
    mt = cfg.model_type
    n = int(t.get("num_hidden_layers") or 0)
    if mt == "glm5_next":
        lac = t["linear_attn_config"]
        kda = set(lac["kda_layers"])
        layers = []
        for i in range(n):
            p = f"language_model.model.layers.{i}.self_attn"
            if i in kda:
                layers.append((p, "kda"))
            else:
                layers += [(p + ".indexer.k_cache", "indexer"), (p + ".indexer.tail_cache", "tail"),
                           (p + ".attn", "mla_sparse")]
        return _Model("Glm5NextForConditionalGeneration", int(t["max_position_embeddings"]), True,
                      tuple(layers), "kda", True, "bfloat16")
    if mt == "kimi_k3":
        kda = set(t["linear_attn_config"]["kda_layers"])   # 1-based (KimiLinearConfig.is_kda_layer)
        layers = [(f"language_model.model.layers.{i}.self_attn", "kda" if i + 1 in kda else "mla")
                  for i in range(n)]
        return _Model("KimiK3ForConditionalGeneration", int(t["max_position_embeddings"]), True,
                      tuple(layers), "kda", False, "bfloat16")
    if mt in ("qwen3_5_moe", "qwen3_5", "qwen3_next"):
        types = t.get("layer_types") or ["full_attention" if (i + 1) % int(t.get("full_attention_interval", 4)) == 0
                                         else "linear_attention" for i in range(n)]
        layers = [(f"language_model.model.layers.{i}." + ("self_attn.attn" if k == "full_attention" else "linear_attn"),
                   "gqa" if k == "full_attention" else "gdn") for i, k in enumerate(types)]
        return _Model("Qwen3_5MoeForConditionalGeneration", int(t["max_position_embeddings"]), False,
                      tuple(layers), "gdn", False, "bfloat16")
    if mt == "nemotron_h":
        pat = nemotron_pattern(t, config_where(cfg))
        layers = []
        for i, c in enumerate(pat):
            if c == "M":
                layers.append((f"model.layers.{i}.mixer", "mamba2"))
            elif c == "*":
                layers.append((f"model.layers.{i}.mixer.attn", "gqa"))
        q = (cfg.quant or {}).get("quantization", {}) if cfg.quant else {}
        # ModelOpt's kv_cache_quant_algo FP8 -> fp8_e4m3 (model_executor/layers/quantization/modelopt.py)
        auto = "fp8_e4m3" if str(q.get("kv_cache_quant_algo", "")).upper() == "FP8" else "bfloat16"
        return _Model("NemotronHForCausalLM", int(t["max_position_embeddings"]), False, tuple(layers),
                      "mamba2", False, auto)
    if mt in ("deepseek_v32", "glm_moe_dsa"):
        layers = []
        for i in range(n):
            p = f"model.layers.{i}.self_attn"
            layers += [(p + ".indexer.k_cache", "indexer"), (p + ".attn", "mla_sparse")]
        return _Model(cfg.architectures[0], int(t["max_position_embeddings"]), True, tuple(layers), None,
                      False, "bfloat16")
    raise NotModelled(f"model_type {mt!r}")


def _mtp_n_predict(cfg: HfConfig) -> Optional[int]:
    """The drafter's ``n_predict`` as ``SpeculativeConfig.hf_config_override`` sets it
    (config/speculative.py:710-1160): ``num_nextn_predict_layers`` (DeepSeek-V3.2 / GLM-5.1 as
    ``deepseek_mtp``, :750-763; Kimi-K3's text config, :785-793; Glm5Next's text config, :1146-1157;
    NemotronH, default 1, :902-906) or ``mtp_num_hidden_layers`` (Qwen3.5, :990-1006)."""
    t = cfg.text
    if cfg.model_type.startswith("qwen3_5"):
        v = cfg.top.get("mtp_num_hidden_layers", t.get("mtp_num_hidden_layers"))
    elif cfg.model_type == "nemotron_h":
        v = t.get("num_nextn_predict_layers", 1)
    else:
        v = t.get("num_nextn_predict_layers")
    return None if v is None else int(v)


def _mtp_drafter_layers(cfg: HfConfig, k: int) -> tuple:
    """The MTP drafter's KV-cache layers (``--speculative-config '{"method": "mtp", ...}'``), in vLLM's
    registration order: after the target's, built from the draft config under the ``eagle_head`` tag
    (v1/worker/gpu/spec_decode/..., tests/vllm/oracle.py ``_build_models``), one spec kind per role as
    the target's. First ``SpeculativeConfig.__post_init__``'s check of ``k`` against ``n_predict``
    (config/speculative.py:1584-1611: ``k > n_predict and k % n_predict != 0``, which divides by zero
    when the checkpoint has no MTP layer, e.g. Kimi-K3's ``num_nextn_predict_layers`` 0). Then:

    * DeepSeek-V3.2 / GLM-5.1 (``DeepseekV32MTP``, models/deepseek_v32/nvidia/mtp.py:172-190) and
      GLM-5.3-Flash (``Glm5NextMTP``, models/glm5next/common/mtp.py:109-125, a DSA decoder layer:
      ``is_mtp_layer``): ``model.layers.{i}`` for i in num_hidden_layers .. + n_predict, each the
      target's DSA layer (indexer K, for Glm5Next the tail ring, sparse MLA);
    * Kimi-K3 (``KimiK3MTP``, models/kimi_k3/nvidia/mtp.py:155-170): ``model.layers.{i}`` likewise,
      an MLA layer (``KimiLinearConfig.is_kda_layer`` is false past the target's layers);
    * Qwen3.5 (``Qwen3_5MultiTokenPredictor``, model_executor/models/qwen3_5_mtp.py:81-125):
      ``mtp.layers.{i}``, i < ``mtp_num_hidden_layers``, full-attention decoder layers;
    * NemotronH (``NemotronHMultiTokenPredictor``, model_executor/models/nemotron_h_mtp.py:245-291):
      ``mtp.layers.{i}`` over ``mtp_hybrid_override_pattern`` (one MTP layer only), an attention layer
      (``.mixer.attn``) per ``*``, none per ``E`` (MoE); any other character is refused."""
    t = cfg.text
    mt = cfg.model_type
    n_predict = _mtp_n_predict(cfg)
    if n_predict is None:
        raise NotModelled(f"MTP on a {mt!r} config without its MTP layer count")
    if n_predict == 0:          # k > 0 = n_predict, then k % 0: Python's words, not a refusal in vLLM's
        raise VllmRefusal("engine_config", "ZeroDivisionError", "integer modulo by zero")
    if k > n_predict and k % n_predict != 0:
        # vLLM's ValueError ("num_speculative_tokens:k must be divisible by n_predict=..."), as pydantic wraps
        # it: no vendored checkpoint has n_predict > 1, so its words are not checked against vLLM here
        raise NotModelled(f"num_speculative_tokens {k} not a multiple of the checkpoint's {n_predict} MTP layers")
    n = int(t.get("num_hidden_layers") or 0)
    out: list = []
    if mt in ("glm5_next", "deepseek_v32", "glm_moe_dsa", "kimi_k3"):
        for i in range(n, n + n_predict):
            p = f"model.layers.{i}.self_attn"
            if mt == "kimi_k3":
                out.append((p, "mla"))
            elif mt == "glm5_next":
                out += [(p + ".indexer.k_cache", "indexer"), (p + ".indexer.tail_cache", "tail"), (p + ".attn", "mla_sparse")]
            else:
                out += [(p + ".indexer.k_cache", "indexer"), (p + ".attn", "mla_sparse")]
    elif mt.startswith("qwen3_5"):
        out = [(f"mtp.layers.{i}.self_attn.attn", "gqa") for i in range(n_predict)]
    elif mt == "nemotron_h":
        if n_predict != 1:
            raise VllmRefusal("model", "AssertionError", "Only one MTP layer is supported for NemotronH-MTP")
        pattern = t.get("mtp_hybrid_override_pattern")
        if not pattern:
            raise NotModelled("NemotronH MTP without mtp_hybrid_override_pattern")
        for i, c in enumerate(pattern):
            if c not in "*E":
                raise VllmRefusal("model", "NotImplementedError", f"Pattern char '{c}' in {pattern} not implemented")
            if c == "*":
                out.append((f"mtp.layers.{i}.mixer.attn", "gqa"))
    else:
        raise NotModelled(f"MTP drafter layers of model_type {mt!r}")
    return tuple(out)


# ------------------------------------------------------------------------------------------------------
# the plan
# ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class VllmGroup:
    """KVCacheGroupSpec: its layers and (the scheduler's) representative spec."""

    layer_names: tuple
    spec: Spec
    layer_specs: tuple              # per layer (UniformTypeKVCacheSpecs' kv_cache_specs)

    def to_dict(self) -> dict:
        return {"layer_names": list(self.layer_names), **self.spec.to_dict()}


@dataclass(frozen=True)
class VllmPlan:
    """vLLM 0.33.0's KV sizing for one model and launch, in the oracle's keys (``to_dict``)."""

    vllm_version: str
    gpu_capability: tuple
    tp: int
    max_model_len: int
    kv_cache_memory_bytes: int
    cache_block_size: int
    mamba_block_size: Optional[int]
    mamba_cache_mode: str
    kv_cache_dtype: str
    enable_prefix_caching: bool
    num_speculative_tokens: int
    layout: str
    attention_backends: tuple
    layers: tuple                   # (name, Spec)
    groups: tuple                   # VllmGroup
    num_blocks: int
    bytes_per_block: int
    kv_cache_tensors: tuple         # dicts
    blocks_per_request: int
    gpu_kv_cache_size_tokens: int
    maximum_concurrency: float
    refused: Optional[dict] = None
    decode_context_parallel_size: int = 1   # not an oracle key: the blocks per request read it (vllm_dcp.py)

    @property
    def maximum_concurrency_printed(self) -> str:
        return f"{self.maximum_concurrency:.2f}x"

    def to_dict(self) -> dict:
        if self.refused is not None:
            return {"refused": dict(self.refused)}
        return {
            "vllm_version": self.vllm_version, "gpu_capability": list(self.gpu_capability), "tp": self.tp,
            "max_model_len": self.max_model_len, "kv_cache_memory_bytes": self.kv_cache_memory_bytes,
            "cache_block_size": self.cache_block_size, "mamba_block_size": self.mamba_block_size,
            "mamba_cache_mode": self.mamba_cache_mode, "kv_cache_dtype": self.kv_cache_dtype,
            "enable_prefix_caching": self.enable_prefix_caching,
            "num_speculative_tokens": self.num_speculative_tokens, "layout": self.layout,
            "attention_backends": list(self.attention_backends),
            "layers": {name: spec.to_dict() for name, spec in self.layers},
            "groups": [g.to_dict() for g in self.groups],
            "num_blocks": self.num_blocks,
            "kv_cache_tensors": [dict(t) for t in self.kv_cache_tensors],
            "gpu_kv_cache_size_tokens": self.gpu_kv_cache_size_tokens,
            "maximum_concurrency": self.maximum_concurrency,
            "maximum_concurrency_printed": self.maximum_concurrency_printed,
        }


# compute capability of the GPUs whose backend choice is derived (NVIDIA: H200 9.0, B200 10.0)
GPU_CAPABILITY = {"H200": (9, 0), "B200": (10, 0)}


def _refused(stage: str, type_: str, message: str) -> VllmPlan:
    return VllmPlan("0.33.0", (), 0, 0, 0, 0, None, "", "", False, 0, "", (), (), (), 0, 0, (), 0, 0, 0.0,
                    refused={"stage": stage, "type": type_, "message": message})


def vllm_plan(config: HfConfig, args: VllmArgs) -> VllmPlan:
    """vLLM 0.33.0's KV-cache plan (see the module docstring); vLLM's refusals come back as a plan with
    ``refused`` (stage, type, message); launches outside the model raise ``NotModelled``."""
    try:
        return _plan(config, args)
    except VllmRefusal as r:
        return _refused(r.stage, r.type, r.message)


def _plan(cfg: HfConfig, a: VllmArgs) -> VllmPlan:
    if a.gpu not in GPU_CAPABILITY:
        raise NotModelled(f"gpu {a.gpu!r}: only H200 (sm_90) and B200 (sm_100) backend tables are derived")
    sm100 = GPU_CAPABILITY[a.gpu][0] == 10
    if not a.kv_cache_memory_bytes:
        raise NotModelled("kv_cache_memory_bytes is required (no memory profile)")

    m = _model_of(cfg)
    tp, dcp = a.tp, a.decode_context_parallel_size
    vllm_dcp.check_parallel_config(tp, dcp)       # ParallelConfig: before the speculative config
    if a.num_speculative_tokens:
        m = replace(m, layers=m.layers + _mtp_drafter_layers(cfg, a.num_speculative_tokens))
    if dcp > 1 and not m.use_mla:
        vllm_dcp.check_gqa(cfg, tp, dcp)           # VllmConfig: after it
    t = cfg.text
    # --- CacheConfig / ModelConfig (config/cache.py, config/model.py, model_executor/models/config.py)
    max_len = a.max_model_len or m.max_position
    if a.max_model_len and a.max_model_len > m.max_position:
        raise NotModelled("max_model_len above the config's (vLLM's engine-config check)")
    hybrid = m.mamba_kind is not None
    prefix = True if a.enable_prefix_caching is None else bool(a.enable_prefix_caching)
    # mamba_cache_mode: "align" with prefix caching on a hybrid model, else "none" (config/cache.py)
    mode = "align" if (hybrid and prefix) else "none"
    kvd = a.kv_cache_dtype or "auto"
    if m.arch == "DeepseekV32ForCausalLM" and kvd == "bfloat16":
        # its verify_and_update_config turns an explicit bfloat16 into "auto" (model_executor/models/config.py:74-86)
        kvd = "auto"
    if sm100 and kvd == "auto":
        # SM10x switches the DSA GLMs' "auto" to fp8 (model_executor/models/config.py): GlmMoeDsaForCausalLM
        # (GLM-5.1) to "fp8_e4m3" (:89-101), Glm5Next (GLM-5.3-Flash, index_topk set) to "fp8" (:119-135)
        if m.arch == "GlmMoeDsaForCausalLM":
            kvd = "fp8_e4m3"
        elif m.arch == "Glm5NextForConditionalGeneration" and t.get("index_topk") is not None:
            kvd = "fp8"
    dsa = any(r == "mla_sparse" for _, r in m.layers) and m.mamba_kind != "kda"
    sparse = any(r == "mla_sparse" for _, r in m.layers)
    if kvd == "fp8_ds_mla" and not (dsa or (sparse and not sm100)):
        # vLLM: FLASHMLA_SPARSE only (GLM-5.3-Flash on H200: its NoPE 512 in the 656-byte row, sized here; on B200
        # no backend; Kimi-K3 refused at model build, no backend; tests/vllm/README.md)
        raise NotModelled(f"kv cache 'fp8_ds_mla' on {m.arch} {'on B200 ' if sparse else ''}(glm-kv sizes it for "
                          "the DSA models, and GLM-5.3-Flash on H200)")
    if kvd in ("fp8", "fp8_ds_mla"):     # fp8_ds_mla: fp8 (uint8) rows of 656 bytes (Spec.state_content_bytes)
        kvd_resolved = "fp8_e4m3"
    elif kvd == "auto":
        kvd_resolved = m.kv_cache_auto
    else:
        kvd_resolved = kvd
    # CacheConfig.cache_dtype: the flag as given; "auto" becomes the checkpoint's fp8 (ModelOpt) only
    cache_dtype_str = "fp8_e4m3" if (kvd == "auto" and m.kv_cache_auto == "fp8_e4m3") else kvd
    ds_mla = False
    if m.use_mla and kvd.startswith("fp8") and not sm100:
        ds_mla = _h200_fp8_mla_check(m, kvd, a.block_size)
    if ds_mla:   # the cache config's dtype becomes the backend's (mla_attention.py:1383-1390)
        cache_dtype_str = kvd = "fp8_ds_mla"
    kv_item = "uint8" if kvd_resolved == "fp8_e4m3" else "bfloat16"

    # --- per-layer raw specs (block size filled in below)
    roles = {r for _, r in m.layers}
    mla_head = int(t.get("kv_lora_rank", 0)) + int(t.get("qk_rope_head_dim", 0) or 0)
    index_dim = int(t.get("index_head_dim", 128))
    kpool = int(t.get("index_kpool", 1) or 1)
    # the indexer K row: index_head_dim fp8 + index_head_dim/128 x 4 B scales (v1/attention/backends/mla/indexer.py)
    index_row = index_dim + index_dim // 128 * 4
    if dcp > 1 and not sm100 and "mla_sparse" in roles:
        vllm_dcp.h200_sparse_mla(mla_head, kvd, ds_mla, a.block_size)
    backends = (_b200_backends(cfg, m, roles, kvd, tp, a.block_size, dcp) if sm100
                else _h200_backends(m, roles, kpool, quantized=kvd.startswith("fp8"), ds_mla=ds_mla))

    # --- the attention block size (platforms/interface.py update_block_size_for_backend)
    order = [r for r in ("indexer", "mla_sparse", "mla", "gqa") if r in backends]
    # backends in layer order: the first non-SSM layer's backend first
    first_role = next(r for _, r in m.layers if r in backends)
    order = [first_role] + [r for r in order if r != first_role]
    bks = []
    for r in order:
        if backends[r] not in bks:
            bks.append(backends[r])
    user_block = a.block_size is not None
    block = a.block_size if user_block else _preferred_block(bks)
    gqa_heads = max(1, int(t.get("num_key_value_heads", 1)) // tp) if "gqa" in roles else 0
    gqa_head = int(t.get("head_dim") or 0)
    if m.use_mla:
        attn_per_token = mla_head * DTYPE_BYTES[kv_item]            # MLAAttentionSpec, block 1
    else:
        attn_per_token = gqa_heads * 2 * gqa_head * DTYPE_BYTES[kv_item]

    mamba_shapes, mamba_dtypes, mamba_type, ckpt_align = _mamba_state(m, t, tp, a, sm100)
    mamba_page = sum(math.prod(s) * DTYPE_BYTES[d] for s, d in zip(mamba_shapes, mamba_dtypes)) if hybrid else 0
    mamba_block = None
    mamba_padded = None
    if hybrid:
        first = bks[0]
        align = max(first.kernel_block, block)
        backend_align = math.lcm(*(b.kernel_block for b in bks))
        if m.use_mla:
            align = max(align, MLA_KERNEL_BLOCK_ALIGNMENT)
        if mode == "align":
            align = math.lcm(align, ckpt_align or 1)
        attn_block = align * _cdiv(mamba_page, align * attn_per_token)
        attn_block = backend_align * _cdiv(attn_block, backend_align)
        if block < attn_block:
            block = attn_block
        attn_page = block * attn_per_token
        if attn_page != mamba_page:
            mamba_padded = attn_page
        # model_executor/models/config.py: mamba_block_size = block (align) or max_model_len (none)
        mamba_block = block if mode == "align" else max_len

    # --- specs in registration order (v1/worker/gpu/attn_utils.py get_kv_cache_spec)
    layers: list[tuple[str, Spec]] = []
    for name, role in m.layers:
        if role in ("kda", "gdn", "mamba2"):
            spec = Spec("MambaSpec", mamba_block, shapes=mamba_shapes, dtypes=mamba_dtypes, mamba_type=mamba_type,
                        num_speculative_blocks=a.num_speculative_tokens,
                        num_prefill_checkpoint_blocks=1 if ckpt_align is not None else 0,
                        page_size_padded=mamba_padded, role=role)
        elif role in ("mla", "mla_sparse"):
            b = backends[role]
            spec = Spec("MLAAttentionSpec", block, num_kv_heads=1, head_size=mla_head, dtype=kv_item,
                        cache_dtype_str=kvd, role=role,
                        state_content_bytes=656 if kvd == "fp8_ds_mla" else None)
            if b.stride_rows:   # sparse_utils.align_blocks_to_rows(spec, rows): stride = whole row pages
                spec = replace(spec, block_stride_alignment=b.stride_rows * spec.state_content_size_bytes)
            elif b.multiple_of and math.gcd(b.multiple_of, block) != block:   # one kv head, one token a state
                spec = replace(spec, block_stride_alignment=math.gcd(b.multiple_of, block) * spec.state_content_size_bytes)
        elif role == "indexer":
            spec = Spec("MLAAttentionSpec", block, num_kv_heads=1, head_size=index_row, dtype="uint8",
                        cache_dtype_str=None, tokens_per_state=kpool, role=role,
                        block_stride_alignment=index_row)
        elif role == "tail":
            # Glm5NextTailCache.get_kv_cache_spec (models/glm5next/common/attention.py:156-180): a ring of
            # index_kpool x next_power_of_2(cdiv(index_kpool + speculative tokens, index_kpool)) slots of
            # 2 x index_head_dim bf16 (raw K and gate score), which must divide the attention block
            ring = kpool * _next_power_of_2(_cdiv(kpool + a.num_speculative_tokens, kpool))
            if block % ring:
                raise VllmRefusal("get_kv_cache_spec", "AssertionError",
                                  f"Glm5NextTailCache: cache_config.block_size ({block}) must be a multiple of "
                                  f"the tail ring ({ring})")
            spec = Spec("CircularBufferSpec", ring, num_kv_heads=2, head_size=index_dim, dtype="bfloat16", role=role)
        elif role == "gqa":
            spec = Spec("FullAttentionSpec", block, num_kv_heads=gqa_heads, head_size=gqa_head,
                        head_size_v=gqa_head, dtype=kv_item, role=role)
        else:
            raise NotModelled(f"layer role {role}")
        layers.append((name, spec))

    # the vLLM layer class per role, and the backend name (SSM and ring backends: fixed)
    module_names = {"glm5_next": {"kda": "Glm5NextLinearAttention", "indexer": "Glm5NextIndexerCache",
                                  "tail": "Glm5NextTailCache", "mla_sparse": "MLAAttention"},
                    "kimi_k3": {"kda": "KimiK3DeltaAttention", "mla": "MultiHeadLatentAttention"},
                    "nemotron_h": {"mamba2": "MambaMixer2", "gqa": "Attention"},
                    "dsa": {"indexer": "DeepseekV32IndexerCache", "mla_sparse": "DeepseekV32Attention"},
                    "qwen": {"gdn": "QwenGatedDeltaNetAttention", "gqa": "Attention"}}
    fixed_backend = {"kda": "KIMI_K3_KDA" if cfg.model_type == "kimi_k3" else "GDN_ATTN", "gdn": "GDN_ATTN",
                     "mamba2": "MAMBA2_ATTN", "tail": "KPOOL_TAIL"}
    key = ("dsa" if cfg.model_type in ("deepseek_v32", "glm_moe_dsa") else
           "qwen" if cfg.model_type.startswith("qwen") else cfg.model_type)
    attention_backends = tuple(sorted({module_names[key][r] + ":" + (backends[r].name if r in backends else fixed_backend[r])
                                       for r in roles}))

    # --- groups (v1/core/kv_cache_planning.py get_kv_cache_groups)
    if a.disable_hybrid_kv_cache_manager:
        _unify_hybrid_kv_cache_specs(dict(layers))
    groups = _groups(dict(layers), m.block_outermost)
    # --- bytes per block, num_blocks, tensors
    bpb = _bytes_per_block(groups, m.block_outermost)
    mem = int(a.kv_cache_memory_bytes)
    if a.num_gpu_blocks_override is not None:
        mem = a.num_gpu_blocks_override * bpb
    # the null block: get_kv_cache_configs checks against memory less one block
    check_mem = mem - bpb
    per_request = sum(g.spec.blocks_per_request(max_len, mode, dcp) for g in groups)
    needed_pool = _needed_pool_bytes(groups, max_len, mode, bpb, m.block_outermost, dcp)
    if check_mem <= 0:
        raise VllmRefusal("get_kv_cache_configs", "ValueError", "No available memory for the cache blocks.")
    if needed_pool > check_mem:
        # _estimate_max_model_len_from_groups: binary search for the longest request that fits
        lo, hi, best = 1, max_len, 0
        if _needed_pool_bytes(groups, 1, mode, bpb, m.block_outermost, dcp) <= check_mem:
            best = 1
            while lo <= hi:
                mid = (lo + hi) // 2
                if _needed_pool_bytes(groups, mid, mode, bpb, m.block_outermost, dcp) <= check_mem:
                    best, lo = mid, mid + 1
                else:
                    hi = mid - 1
        est = (f"Based on the available memory, the estimated maximum model length is {best}. "
               if best > 0 else "")
        raise VllmRefusal("get_kv_cache_configs", "ValueError",
                          f"To serve at least one request with the model's max seq len ({max_len}), "
                          f"({_format_gib(needed_pool)} GiB KV cache is needed, which is larger than the "
                          f"available KV cache memory ({_format_gib(check_mem)} GiB). {est}")
    num_blocks = mem // bpb
    if a.num_gpu_blocks_override is not None:
        num_blocks = a.num_gpu_blocks_override
    tensors = _tensors(groups, num_blocks, bpb, m.block_outermost)
    conc = num_blocks / per_request
    # the engine core, after the capacity line: the block (the smallest prefix-cacheable group's; the ring
    # is not prefix-cacheable) against DCP's interleave
    vllm_dcp.validate_block_size(min(g.spec.block_size for g in groups if g.spec.kind != "CircularBufferSpec"),
                                 dcp, a.cp_kv_cache_interleave_size or 1)
    return VllmPlan(
        vllm_version="0.33.0", gpu_capability=GPU_CAPABILITY[a.gpu], tp=tp, max_model_len=max_len,
        kv_cache_memory_bytes=int(a.kv_cache_memory_bytes), cache_block_size=block, mamba_block_size=mamba_block,
        mamba_cache_mode=mode, kv_cache_dtype=cache_dtype_str, enable_prefix_caching=prefix,
        num_speculative_tokens=a.num_speculative_tokens, layout=_layout(m, backends),
        attention_backends=attention_backends, layers=tuple(layers), groups=tuple(groups), num_blocks=num_blocks,
        bytes_per_block=bpb, kv_cache_tensors=tuple(tensors), blocks_per_request=per_request,
        gpu_kv_cache_size_tokens=int(conc * max_len), maximum_concurrency=conc, decode_context_parallel_size=dcp)


def _layout(m: "_Model", backends: dict) -> str:
    """resolve_kv_cache_layout's pick (v1/attention/backends/utils.py:243-278, 293-383): the kpool tail
    takes BLHNC only (mla/indexer.py:310-316); FlashInfer on sm_10x declares (LBHNC, BLHNC), head-major
    block interiors for trtllm-gen (flashinfer.py:728-735); the others declare none (the default LBNHC).
    LBHNC and LBNHC are both layer-outer: the sizing is the same."""
    if m.block_outermost:
        return "BLHNC"
    if any(b is FLASHINFER for b in backends.values()):
        return "LBHNC"
    return "LBNHC"


def _format_gib(b: int) -> str:
    """utils/mem_utils.py format_gib: round(bytes / GiB, 2) as Python prints it."""
    return f"{round(b / (1 << 30), 2)}"


def _preferred_block(bks: list[Backend]) -> int:
    """_preferred_block_size_for_backends (platforms/interface.py:700-747): one backend: its preferred
    size (``get_preferred_block_size``, v1/attention/backend.py:155-163: the default when it supports it,
    else its smallest kernel block); several: the default when all take it, else the smallest of the
    lcms of one supported size per backend that all accept."""
    if len(bks) == 1:
        b = bks[0]
        return DEFAULT_BLOCK_SIZE if b.supports(DEFAULT_BLOCK_SIZE) else b.kernel_block
    if all(b.supports(DEFAULT_BLOCK_SIZE) for b in bks):
        return DEFAULT_BLOCK_SIZE
    for cand in sorted({math.lcm(*sizes) for sizes in itertools.product(*(b.sizes for b in bks))}):
        if all(b.supports(cand) for b in bks):
            return cand
    raise VllmRefusal("update_block_size_for_backend", "ValueError",
                      "The attention backends share no supported KV cache block size")


def _mamba_state(m: _Model, t: dict, tp: int, a: VllmArgs, sm100: bool = False):
    """MambaStateShapeCalculator (model_executor/layers/mamba/mamba_utils.py) and the state dtypes
    (MambaStateDtypeCalculator: conv in mamba_cache_dtype (auto: the model dtype), temporal in
    mamba_ssm_cache_dtype; default float32 as vLLM resolves it for these models); the last item is the
    layers' prefill checkpoint alignment (None: they export none)."""
    if m.mamba_kind is None:
        return (), (), "", None
    conv_dtype = a.mamba_cache_dtype if a.mamba_cache_dtype not in (None, "auto") else "bfloat16"
    ssm_dtype = a.mamba_ssm_cache_dtype if a.mamba_ssm_cache_dtype not in (None, "auto") else "float32"
    spec = a.num_speculative_tokens

    def div(n: int, what: str) -> int:
        if n % tp:
            raise VllmRefusal("model", "AssertionError", f"{n} is not divisible by {tp} ({what})")
        return n // tp

    if m.mamba_kind == "kda":
        lac = t["linear_attn_config"]
        h, d, k = int(lac["num_heads"]), int(lac["head_dim"]), int(lac["short_conv_kernel_size"])
        conv = (k - 1 + spec, div(h * d + 2 * h * d, "KDA conv dim"))        # kda_state_shape
        temporal = (div(h, "KDA heads"), d, d)
        # Glm5Next / KimiK3 KDA: the "auto" prefill backend is flashkda on SM90/SM10x/SM12x for bf16 and
        # head_dim 128 (models/glm5next/common/kda.py:137-160; models/kimi_k3/nvidia/kda.py:363-378, 486-523:
        # "flashinfer" only when asked for), which exports checkpoints every 16 (kda_checkpoint.py:9-10)
        ckpt = KDA_FLASHKDA_CHECKPOINT_ALIGNMENT if d == 128 else None
        return (conv, temporal), (conv_dtype, ssm_dtype), "GDN_ATTN", ckpt
    if m.mamba_kind == "gdn":
        nk, nv = int(t["linear_num_key_heads"]), int(t["linear_num_value_heads"])
        dk, dv, k = int(t["linear_key_head_dim"]), int(t["linear_value_head_dim"]), int(t["linear_conv_kernel_dim"])
        conv = (k - 1 + spec, div(dk * nk * 2 + dv * nv, "GDN conv dim"))   # gated_delta_net_state_shape
        temporal = (div(nv, "GDN v heads"), dv, dk)
        # FlashInfer's GDN prefill (checkpoints every 64 in align mode, qwen_gdn_linear_attn.py:691-696) runs
        # on SM90, and on SM10x with head_k_dim 128 and CUDA runtime >= 13 (qwen_gdn_linear_attn.py:246-267;
        # vLLM 0.33.0's pinned torch 2.14.0+cu130 is CUDA 13); else Triton, which exports none
        flashinfer_gdn = not sm100 or dk == 128
        return ((conv, temporal), (conv_dtype, ssm_dtype), "GDN_ATTN",
                FLASHINFER_GDN_CHECKPOINT_ALIGNMENT if flashinfer_gdn else None)
    # mamba2_state_shape
    heads, hdim = int(t["mamba_num_heads"]), int(t["mamba_head_dim"])
    ng = int(t.get("n_groups", 8))
    ng += 0 if ng % tp == 0 else tp - ng                                     # extra_groups_for_head_shards
    state = int(t["ssm_state_size"])
    k = int(t.get("conv_kernel", 4))
    conv = (k - 1 + spec, div(heads * hdim + 2 * ng * state, "Mamba-2 conv dim"))
    temporal = (div(heads, "Mamba-2 heads"), hdim, state)
    return (conv, temporal), (conv_dtype, ssm_dtype), "MAMBA2", MAMBA2_CHECKPOINT_ALIGNMENT


def _uniform_type(specs: list[Spec]) -> bool:
    return len({s.uniform_type_key() for s in specs}) == 1


def _unify_hybrid_kv_cache_specs(specs: dict[str, Spec]) -> None:
    """``--disable-hybrid-kv-cache-manager``: ``get_kv_cache_groups`` first calls
    ``unify_hybrid_kv_cache_specs`` (v1/core/kv_cache_planning.py:1127-1128, 853-876). It splits the layers
    by whether they are attention caches replicated across DCP ranks (an ``AttentionSpec`` with
    ``dcp_sharded`` False: only GLM-5.3-Flash's tail ring, ``Glm5NextTailCache``,
    models/glm5next/common/attention.py:178; ``AttentionSpec`` defaults to True, v1/kv_cache_interface.py:553;
    a ``MambaSpec`` is no ``AttentionSpec``) and asks of each part ``_promote_local_kv_cache_specs``
    (:744-815): one spec or one type, after sliding-window / chunked-local specs become full attention
    (none of these models has one), else its ValueError. So the DSA models (MLA and indexer: one type)
    size as with the hybrid manager, and every Mamba hybrid is refused: its Mamba and attention layers
    are one part of two types."""
    parts: dict[bool, list[Spec]] = {}
    for s in specs.values():
        parts.setdefault(s.kind == "CircularBufferSpec", []).append(s)
    for part in parts.values():
        if len(set(part)) > 1 and not _uniform_type(part):
            raise VllmRefusal("get_kv_cache_configs", "ValueError",
                              "Failed to promote local KV cache specs to one unified type.")


def _group(names: list[str], specs: dict[str, Spec]) -> VllmGroup:
    """A group and its scheduler spec (the first layer's)."""
    return VllmGroup(tuple(names), specs[names[0]], tuple(specs[n] for n in names))


def _groups(specs: dict[str, Spec], block_outermost: bool) -> list[VllmGroup]:
    values = list(specs.values())
    if len(set(values)) == 1:                              # is_kv_cache_spec_uniform
        return [_group(list(specs), specs)]
    if _uniform_type(values):                              # UniformTypeKVCacheSpecs.from_specs
        return [_group(list(specs), specs)]
    if block_outermost and len({s.page_size_bytes for s in values}) > 1:
        return _packed_groups(specs)
    return _uniform_page_groups(specs)


def _uniform_page_groups(specs: dict[str, Spec]) -> list[VllmGroup]:
    """_get_kv_cache_groups_uniform_page_size (after unify_kv_cache_spec_page_size, a no-op when the
    hybrid alignment already made every page equal)."""
    specs = _unify_page_size(specs)
    buckets: dict[Spec, list[str]] = {}
    for name, spec in specs.items():
        buckets.setdefault(spec, []).append(name)
    lists = list(buckets.values())
    lo, hi = min(map(len, lists)), max(map(len, lists))
    size = hi if hi < lo * 1.5 else lo
    out = []
    for names in lists:
        n = _cdiv(len(names), size)
        for i in range(n):
            out.append(_group(names[i::n], specs))
    return out


def _unify_page_size(specs: dict[str, Spec]) -> dict[str, Spec]:
    """unify_kv_cache_spec_page_size: pages below the largest are padded (Mamba; non-MLA attention
    whose page does not divide it) or their block scaled by the ratio; MLA that cannot scale is refused."""
    pages = {s.page_size_bytes for s in specs.values()}
    if len(pages) <= 1:
        return specs
    top = max(pages)
    out = {}
    for name, s in specs.items():
        if s.page_size_bytes == top:
            out[name] = s
        elif s.kind == "MambaSpec":
            out[name] = replace(s, page_size_padded=top)
        elif top % s.page_size_bytes == 0:
            out[name] = replace(s, block_size=s.block_size * (top // s.page_size_bytes))
        elif s.kind != "MLAAttentionSpec":
            out[name] = replace(s, page_size_padded=top)
        else:
            raise VllmRefusal("get_kv_cache_configs", "NotImplementedError",
                              f"Layer {name}: page size is not divisible by the maximum page size and cannot be "
                              "padded. Padding is only supported for non-MLA attention layers.")
    return out


def _approximate_gcd(values: list[int], lower_bound: int) -> int:
    """kv_cache_planning._approximate_gcd: the chunk in [lower_bound, max] with the least upward
    padding, ties to the larger."""
    lo, hi = max(1, lower_bound), max(values)
    if lo > hi:
        return lo
    best, best_pad = lo, None
    for d in range(lo, hi + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best):
            best, best_pad = d, pad
    return best


def _packed_groups(specs: dict[str, Spec]) -> list[VllmGroup]:
    """_get_packed_kv_cache_groups (block-outermost layouts with mixed page sizes)."""
    buckets: list[dict[str, Spec]] = []
    for name, spec in specs.items():
        for b in buckets:
            if _uniform_type([*b.values(), spec]):
                b[name] = spec
                break
        else:
            buckets.append({name: spec})
    info = []
    for b in buckets:
        by_page: dict[int, list[str]] = {}
        for n, s in b.items():
            by_page.setdefault(s.page_size_bytes, []).append(n)
        balanced = len({len(v) for v in by_page.values()}) == 1
        info.append((b, by_page, balanced))

    def max_per_page(by_page):
        return max(len(v) for v in by_page.values())

    floor = max((max_per_page(p) for _, p, bal in info if bal and len(p) > 1), default=0)
    repeats = _approximate_gcd([max_per_page(p) for _, p, bal in info if bal], floor) if floor else None

    def n_groups(by_page, bal):
        return _cdiv(max_per_page(by_page), repeats) if bal and repeats is not None else 1

    def widest(by_page, n):
        return sum(_cdiv(len(v), n) * page for page, v in by_page.items())

    def is_state(b):
        return next(iter(b.values())).kind in ("MambaSpec", "CircularBufferSpec")

    anchor = max((widest(p, len(b) if is_state(b) else n_groups(p, bal)) for b, p, bal in info), default=0)
    out = []
    for b, p, bal in info:
        n = n_groups(p, bal)
        if anchor and is_state(b):
            per_block = max(anchor // next(iter(b.values())).page_size_bytes, 1)
            n = max(n, _cdiv(len(b), per_block))
        if n == 1:
            out.append(_group(list(b), specs))
            continue
        repeats_list = list(zip(*p.values()))
        for i in range(n):
            out.append(_group([name for rep in repeats_list[i::n] for name in rep], specs))
    return out


def _bytes_per_block(groups: list[VllmGroup], block_outermost: bool) -> int:
    """_get_kv_cache_bytes_per_block."""
    if not block_outermost:
        return max(sum(s.stride_bytes for s in g.layer_specs) for g in groups)
    raw = max(sum(s.page_size_bytes for s in g.layer_specs) for g in groups)
    return _round_up(raw, math.lcm(*(s.block_stride_alignment for g in groups for s in g.layer_specs)))


def _needed_pool_bytes(groups, max_len, mode, bpb, block_outermost, dcp: int = 1) -> int:
    """_max_memory_usage_bytes_from_groups: one request's blocks of every group, at the pool's bytes per
    block (all groups draw from one pool of bpb-byte blocks)."""
    return sum(g.spec.blocks_per_request(max_len, mode, dcp) for g in groups) * bpb


def _tensors(groups, num_blocks, bpb, block_outermost) -> list[dict]:
    """get_kv_cache_config_from_groups: per group, per distinct spec, one KVCacheTensor view of the one
    backing allocation (size bpb x num_blocks)."""
    size = bpb * num_blocks
    out = []
    for g in groups:
        by_spec: dict[Spec, list[str]] = {}
        for name, s in zip(g.layer_names, g.layer_specs):
            by_spec.setdefault(s, []).append(name)
        off = 0
        for s, names in by_spec.items():
            if block_outermost:
                layer_stride, block_stride = s.page_size_bytes, bpb
            else:
                block_stride = s.stride_bytes
                layer_stride = block_stride * num_blocks
            out.append({"size_bytes": size, "layers": names, "offset_bytes": off, "layer_stride_bytes": layer_stride,
                        "block_stride_bytes": block_stride, "num_blocks": num_blocks})
            off += len(names) * (s.page_size_bytes if block_outermost else layer_stride)
    return out
