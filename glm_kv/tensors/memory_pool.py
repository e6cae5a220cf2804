"""Device pools that allocate real tensors, shaped exactly like SGLang's.

The object tree and the names follow SGLang (``sglang/srt/mem_cache/memory_pool.py``,
``index_key_cache.py``, ``allocator/``), so a reader can hold each buffer against theirs::

    DevicePools                                   (our container; SGLang keeps these on the ModelRunner)
      req_to_token_pool: ReqToTokenPool           req_to_token (max_reqs + 1, context_len + extra) int32
      token_to_kv_pool: HybridLinearKVPool
        full_kv_pool: DSATokenToKVPool            the full-attention (DSA) layers only
          kv_buffer[i]                            (size + page_size, 1, kv_cache_dim) bf16 | uint8 (fp8)
          index_key_cache: IndexKeyCache
            buffer[i]                             (num_pages, index_page_bytes) uint8
          _compress_tail_k[i], _compress_tail_score[i]   (max_reqs + 2, tail_width, 128) bf16
        mamba_pool: MambaPool                     the KDA (linear-attention) layers only
          conv[0]                                 (kda_layers, mamba_size + 1, K - 1, conv_dim / tp) bf16
          temporal                                (kda_layers, mamba_size + 1, heads / tp, d, d) fp32 | bf16
      token_to_kv_pool_allocator: PagedTokenToKVPoolAllocator   free pages 1 .. size / page_size
      mamba_allocator: MambaSlotAllocator                       free slots 1 .. mamba_size

Shapes are derived here, by ``pool_geometry``, from the model config (``glm_kv.inputs.model``)
and the *resolved* server arguments (``glm_kv.inputs.resolve.ServerArgs``), restating the rules of
SGLang 0.5.23's constructors (``calculate_mla_kv_cache_dim``, ``KimiLinearStateShape``,
``DSATokenToKVPool``, ``IndexKeyCache``, ``MambaPool``, ``HybridReqToTokenPool``,
``get_req_to_token_extra_context_len``). The only ledger module imported is ``parallel`` (which
TP size splits the KDA heads: a resolution step, no bytes). No byte formula of the token,
request, tail or host ledgers is imported and no plan byte field is read: those are what
``glm_kv.tensors.measure`` compares the allocations against, so the two sides cannot agree by
sharing a formula (``tests/tensors/test_measure.py`` plants an error in each ledger formula).

Per layout (``sglang_layout``):

* ``article`` (upstream f4de6abee6, as the source article describes it): 64-token pages;
  IndexKeyCache rows are ``page_size x (index_head_dim + index_head_dim / 128 x 4)`` = 64 x 132
  = 8,448 B, i.e. 132 B per token per layer.
* ``0.5.23`` (the PyPI release): page size forced to 64 x index_kpool = 256; IndexKeyCache rows
  are ``page_size // index_kpool x 132`` = 8,448 B per 256-token page (33 B per token per layer).

Both allocate ``(index_buf_size + page_size + 1) // page_size`` index pages per layer with
``index_buf_size = size`` (0.5.23's formula; the article does not print its own, and its 64-token
page gives the same 8,448 B row). Slot 0 / page 0 is SGLang's padding slot in every pool: the
allocators never hand it out.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Iterator, Optional

import torch

from ..errors import ProfileError
from ..inputs.model import ModelConfig
from ..inputs.resolve import REQ_TO_TOKEN_BASE_EXTRA, ServerArgs, req_to_token_extra_context_len  # noqa: F401
from ..inputs.rules import RULES, SglangRules, rules_for
from ..ledgers.parallel import parallel_ledger
from ..units import FP8_SCALE_BYTES, FP8_SCALE_GROUP, index_page_count
from .budget import check_budget

LAYOUTS = tuple(RULES)
REQ_TO_TOKEN_DTYPE = torch.int32

_DTYPES = {
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float32": torch.float32, "fp32": torch.float32,
    "float16": torch.float16,
    "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64,
}


def torch_dtype(name: str | torch.dtype) -> torch.dtype:
    """'bfloat16' -> torch.bfloat16 (accepts a torch.dtype unchanged)."""
    if isinstance(name, torch.dtype):
        return name
    try:
        return _DTYPES[str(name).removeprefix("torch.")]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}") from None


def default_device() -> str:
    """CUDA when available, else CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


# --------------------------------------------------------------------------- geometry


class RankPoolSizes:
    """The sizes every pool geometry derives alike from its fields (``full_attention_layer_ids``,
    ``linear_attention_layer_ids``, ``size``, ``page_size``, ``max_running_requests_per_worker``, ``context_len``,
    ``extra_context_len``): GLM-5.3-Flash's ``PoolGeometry`` and the other models' ``ModelGeometry``."""

    @property
    def num_full_layers(self) -> int:
        return len(self.full_attention_layer_ids)

    @property
    def num_linear_layers(self) -> int:
        return len(self.linear_attention_layer_ids)

    @property
    def index_num_pages(self) -> int:
        """IndexKeyCache pages per layer: (index_buf_size + page_size + 1) // page_size."""
        return index_page_count(self.size, self.page_size)

    @property
    def req_to_token_rows(self) -> int:
        """``ReqToTokenPool``: max_reqs + 1 rows (row 0 is the padding row)."""
        return self.max_running_requests_per_worker + 1

    @property
    def max_context_len(self) -> int:
        """req_to_token columns: context_len + the extra headroom (HybridReqToTokenPool's max_context_len)."""
        return self.context_len + self.extra_context_len


@dataclass(frozen=True)
class PoolGeometry(RankPoolSizes):
    """Everything that fixes the shape of every device buffer, for one rank."""

    layout: str
    size: int                                   # token slots handed out (multiple of page_size)
    page_size: int
    full_attention_layer_ids: tuple[int, ...]
    linear_attention_layer_ids: tuple[int, ...]
    kv_cache_dim: int
    store_dtype: str                            # SGLang's store_dtype: bfloat16, or uint8 for fp8
    index_head_dim: int
    index_kpool: int
    skip_topk_layers: tuple[bool, ...]          # per full layer; True -> 0-row index/tail buffers
    index_kpool_compress: bool
    tail_width: int                             # index_kpool + speculative draft tokens
    max_running_requests_per_worker: int        # as resolved (the mamba cap included)
    context_len: int
    mamba_size: int                             # mamba state slots handed out
    conv_state_shapes: tuple[tuple[int, ...], ...]
    temporal_state_shape: tuple[int, ...]
    conv_dtype: str
    temporal_dtype: str
    host_kv_row_width: int                      # host KV row, in elements of the store dtype
    kv_lora_rank: int = 512
    qk_rope_head_dim: int = 0
    extra_context_len: int = 0                  # req_to_token columns beyond context_len
    speculative_num_draft_tokens: int = 0       # EAGLE/MTP verify: per-draft-token KDA scratch
    spec_state_size: int = 0                    # requests the verify scratch is sized for
    profile_name: str = ""
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"sglang_layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.size <= 0 or self.size % self.page_size:
            raise ValueError(f"size {self.size} must be a positive multiple of page_size {self.page_size}")
        if self.page_size % self.index_kpool:
            raise ValueError(f"page_size {self.page_size} must be a multiple of index_kpool {self.index_kpool}")
        if self.mamba_size < 1:
            raise ValueError(f"mamba_size must be >= 1, got {self.mamba_size}")
        if len(self.skip_topk_layers) != len(self.full_attention_layer_ids):
            raise ValueError("skip_topk_layers needs one entry per full-attention layer")

    # -- derived, per SGLang's code (not from ledger totals) --
    @property
    def rules(self) -> SglangRules:
        """This layout's SGLang version facts (which pools exist, pooled or unpooled rows)."""
        return rules_for(self.layout)

    @property
    def index_bytes_per_token_unpooled(self) -> int:
        """index_head_dim + index_head_dim / 128 x 4 (fp8 key + one fp32 scale per 128)."""
        return self.index_head_dim + self.index_head_dim // FP8_SCALE_GROUP * FP8_SCALE_BYTES

    @property
    def index_page_bytes(self) -> int:
        """One IndexKeyCache buffer row = one page of one layer, per layout (8,448 B here)."""
        if self.rules.indexer_pooled_rows:
            return self.page_size // self.index_kpool * self.index_bytes_per_token_unpooled
        return self.page_size * self.index_bytes_per_token_unpooled

    @property
    def num_pages(self) -> int:
        """Token pages the allocator hands out (page 0 is padding)."""
        return self.size // self.page_size

    @property
    def tail_rows(self) -> int:
        """Compress-tail rows: ``req_to_token.shape[0] + 1`` (the pool gets the req_to_token rows as
        max_running_requests and adds one sentinel row) = max_running_requests + 2."""
        return self.req_to_token_rows + 1

    @property
    def kv_row_bytes(self) -> int:
        return self.kv_cache_dim * torch_dtype(self.store_dtype).itemsize

    @property
    def host_kv_row_bytes(self) -> int:
        return self.host_kv_row_width * torch_dtype(self.store_dtype).itemsize

    def with_sizes(self, *, size: Optional[int] = None, mamba_size: Optional[int] = None,
                   max_running_requests_per_worker: Optional[int] = None,
                   context_len: Optional[int] = None,
                   spec_state_size: Optional[int] = None) -> "PoolGeometry":
        """The same geometry with other pool sizes (shapes per slot unchanged)."""
        return replace(
            self,
            spec_state_size=self.spec_state_size if spec_state_size is None else spec_state_size,
            size=self.size if size is None else size,
            mamba_size=self.mamba_size if mamba_size is None else mamba_size,
            max_running_requests_per_worker=(self.max_running_requests_per_worker
                                             if max_running_requests_per_worker is None
                                             else max_running_requests_per_worker),
            context_len=self.context_len if context_len is None else context_len,
        )

    # -- bytes the shapes imply (used for the budget check *before* allocating) --
    def shape_table(self) -> list[tuple[str, tuple[int, ...], str]]:
        """(buffer name, shape, dtype) of every device tensor, in allocation order."""
        out: list[tuple[str, tuple[int, ...], str]] = []
        out.append(("req_to_token_pool.req_to_token",
                    (self.req_to_token_rows, self.max_context_len), "int32"))
        for conv_i, conv_shape in enumerate(self.conv_state_shapes):
            out.append((f"mamba_pool.conv[{conv_i}]",
                        (self.num_linear_layers, self.mamba_size + 1, *conv_shape), self.conv_dtype))
        out.append(("mamba_pool.temporal",
                    (self.num_linear_layers, self.mamba_size + 1, *self.temporal_state_shape),
                    self.temporal_dtype))
        if self.speculative_num_draft_tokens:
            d, rows = self.speculative_num_draft_tokens, self.spec_state_size + 1
            out.append(("mamba_pool.intermediate_ssm",
                        (self.num_linear_layers, rows, d, *self.temporal_state_shape), self.temporal_dtype))
            for conv_i, conv_shape in enumerate(self.conv_state_shapes):
                out.append((f"mamba_pool.intermediate_conv_window[{conv_i}]",
                            (self.num_linear_layers, rows, d, *conv_shape), self.conv_dtype))
        for i, layer in enumerate(self.full_attention_layer_ids):
            out.append((f"full_kv_pool.kv_buffer[{i}]",
                        (self.size + self.page_size, 1, self.kv_cache_dim), self.store_dtype))
        for i, layer in enumerate(self.full_attention_layer_ids):
            pages = 0 if self.skip_topk_layers[i] else self.index_num_pages
            out.append((f"full_kv_pool.index_key_cache.buffer[{i}]",
                        (pages, self.index_page_bytes), "uint8"))
        if self.kpool_use_compress:
            for name in ("_compress_tail_k", "_compress_tail_score"):
                for i, layer in enumerate(self.full_attention_layer_ids):
                    rows = 0 if self.skip_topk_layers[i] else self.tail_rows
                    out.append((f"full_kv_pool.{name}[{i}]",
                                (rows, self.tail_width, self.index_head_dim), "bfloat16"))
        return out

    @property
    def kpool_use_compress(self) -> bool:
        return self.index_kpool > 1 and self.index_kpool_compress

    def shape_bytes(self) -> int:
        return sum(math.prod(shape) * torch_dtype(dt).itemsize for _, shape, dt in self.shape_table())


# --------------------------------------------------------------------------- SGLang's shape rules
# Each function below restates one rule of SGLang 0.5.23's pool constructors, from the model
# config and the resolved server arguments. None of them reads a ledger: the ledgers compute the
# same quantities on their own, and ``glm_kv.tensors.measure`` compares the two.

DSA_QUANT_BLOCK_SIZE = 128      # DSATokenToKVPool.quant_block_size
DSA_ROPE_STORAGE_BYTES = 2      # DSATokenToKVPool.rope_storage_dtype = torch.bfloat16
FP8_SCALE_ITEM_BYTES = 4        # "kv_lora_rank // quant_block_size * 4" (fp32 scales)
CONV_STATE_DTYPE = "bfloat16"   # mamba2_state_dtype(): conv follows the model dtype (bf16)


def mla_kv_cache_dim(model: ModelConfig, kv_cache_dtype: str, prefill_backend: str, decode_backend: str,
                     disaggregation_mode: str = "null") -> int:
    """``calculate_mla_kv_cache_dim`` (kv_cache_configurator.py) for a DSA model on CUDA.

    Raw ``kv_lora_rank + qk_rope_head_dim`` when the local role's backend is trtllm, or both are
    tilelang, or the KV is not fp8; else the scaled fp8 row: nope bytes + one fp32 scale per 128
    + the rope part in bf16.
    """
    raw = model.kv_lora_rank + model.qk_rope_head_dim
    if disaggregation_mode == "decode":
        trtllm = decode_backend == "trtllm"
    elif disaggregation_mode == "prefill":
        trtllm = prefill_backend == "trtllm"
    else:
        trtllm = "trtllm" in (prefill_backend, decode_backend)
    if trtllm or (prefill_backend == "tilelang" and decode_backend == "tilelang"):
        return raw
    if kv_cache_dtype != "fp8_e4m3":
        return raw
    if model.kv_lora_rank % DSA_QUANT_BLOCK_SIZE:
        raise ValueError(f"kv_lora_rank {model.kv_lora_rank} must be a multiple of {DSA_QUANT_BLOCK_SIZE}")
    return (model.kv_lora_rank + model.kv_lora_rank // DSA_QUANT_BLOCK_SIZE * FP8_SCALE_ITEM_BYTES
            + model.qk_rope_head_dim * DSA_ROPE_STORAGE_BYTES)


def kv_store_dtype(kv_cache_dtype: str) -> str:
    """``KVCache.store_dtype``: float8 KV is stored as uint8 (index_put does not take fp8)."""
    return "uint8" if kv_cache_dtype.startswith("fp8") else kv_cache_dtype


def kimi_linear_state_shapes(model: ModelConfig, linear_tp: int) -> tuple[tuple[int, int], tuple[int, int, int]]:
    """``KimiLinearStateShape.create``: conv (K - 1, (proj + 2 x proj_k) / tp), temporal (heads / tp, d, d)."""
    heads, hd = model.kda_num_heads, model.kda_head_dim
    proj = heads * hd
    proj_k = proj  # num_k_heads defaults to num_heads
    conv_dim = proj + 2 * proj_k
    if conv_dim % linear_tp or heads % linear_tp:
        raise ValueError(f"linear-attention TP {linear_tp} does not divide the KDA projection ({proj})")
    return (model.short_conv_kernel_size - 1, conv_dim // linear_tp), (heads // linear_tp, hd, hd)


def pool_geometry(args: ServerArgs, *, size: Optional[int] = None, mamba_size: Optional[int] = None,
                  max_running_requests_per_worker: Optional[int] = None,
                  context_len: Optional[int] = None, spec_state_size: Optional[int] = None,
                  profile_name: Optional[str] = None) -> PoolGeometry:
    """The shapes SGLang's constructors give every buffer, for resolved arguments and pool sizes.

    From the model config: layer ids, kv_lora_rank, index_head_dim, index_kpool, KDA heads; from
    the resolved arguments: layout, page size, KV dtype and DSA backends (row width), SSM dtype,
    linear-attention TP, draft tokens, context length. Nothing here reads a ledger's bytes.

    ``size`` (tokens) defaults to 4 pages and ``mamba_size`` to 1 slot: a small real allocation.
    ``max_running_requests_per_worker`` defaults to the resolved per-worker count (refused when
    it is automatic: then the capacity decides it, and the caller must pass it).
    """
    model, p = args.model, args.profile
    layout = p.sglang_layout
    page_size = args.page_size
    linear_tp = parallel_ledger(args).linear_attn_tp_size
    conv_shape, temporal_shape = kimi_linear_state_shapes(model, linear_tp)
    kv_dim = mla_kv_cache_dim(model, args.kv_cache_dtype, args.dsa_prefill_backend, args.dsa_decode_backend,
                              getattr(p, "disaggregation_mode", "null"))
    reqs = max_running_requests_per_worker if max_running_requests_per_worker is not None else args.requests_per_worker
    if reqs is None:
        raise ProfileError("max_running_requests", "the pools need a request count: set "
                                                   "max_running_requests or available_bytes in the profile")
    indexed = set(model.dsa_indexed_layers)
    full = tuple(model.full_attention_layers)
    draft = args.draft_tokens
    # Host KV row: the article's build_kv_host_pool passes no override_kv_cache_dim (512 wide even
    # for a 528 device row); 0.5.23's MLATokenToKVPoolHost takes the device pool's kv_cache_dim.
    host_width = kv_dim if rules_for(layout).host_row_is_device_row else model.kv_lora_rank + model.qk_rope_head_dim
    return PoolGeometry(
        layout=layout,
        size=int(size) if size is not None else 4 * page_size,
        page_size=page_size,
        full_attention_layer_ids=full,
        linear_attention_layer_ids=tuple(model.linear_attention_layers),
        kv_cache_dim=kv_dim,
        store_dtype=kv_store_dtype(args.kv_cache_dtype),
        index_head_dim=model.index_head_dim,
        index_kpool=model.index_kpool,
        skip_topk_layers=tuple(i not in indexed for i in full),
        index_kpool_compress=model.index_kpool_compress,
        tail_width=model.index_kpool + draft,      # index_kpool + max_speculative_num_draft_tokens
        max_running_requests_per_worker=int(reqs),
        context_len=int(context_len if context_len is not None else args.context_length),
        extra_context_len=req_to_token_extra_context_len(args),
        mamba_size=int(mamba_size) if mamba_size is not None else 1,
        conv_state_shapes=(conv_shape,),
        temporal_state_shape=temporal_shape,
        conv_dtype=CONV_STATE_DTYPE,
        temporal_dtype=p.mamba_ssm_dtype,
        host_kv_row_width=host_width,
        speculative_num_draft_tokens=args.verify_state_draft_tokens,   # none on a PD prefill server
        spec_state_size=(int(spec_state_size) if spec_state_size is not None
                         else (1 if args.verify_state_draft_tokens else 0)),
        kv_lora_rank=model.kv_lora_rank,
        qk_rope_head_dim=model.qk_rope_head_dim,
        profile_name=profile_name if profile_name is not None else p.label,
    )


# --------------------------------------------------------------------------- allocation


def _alloc(shape: tuple[int, ...], dtype: torch.dtype, device: str, fill: str) -> torch.Tensor:
    if fill == "zeros":
        return torch.zeros(shape, dtype=dtype, device=device)
    if fill == "empty":
        return torch.empty(shape, dtype=dtype, device=device)
    raise ValueError(f"fill must be 'zeros' or 'empty', got {fill!r}")


class ReqToTokenPool:
    """req_to_token[req_pool_idx, :seqlen] -> token slots; row 0 is padding."""

    def __init__(self, size: int, max_context_len: int, device: str, fill: str = "zeros"):
        self.size = size
        self.max_context_len = max_context_len
        self.device = device
        self.req_to_token = _alloc((size + 1, max_context_len), REQ_TO_TOKEN_DTYPE, device, fill)
        self.free_slots: deque[int] = deque(range(1, size + 1))   # FIFO, as SGLang's free list

    def available_size(self) -> int:
        return len(self.free_slots)

    def alloc(self, need: int = 1) -> Optional[list[int]]:
        if need > len(self.free_slots):
            return None
        # O(need), not O(pool): the free list is a deque taken from the front
        return [self.free_slots.popleft() for _ in range(need)]

    def free(self, idx: int | list[int]) -> None:
        self.free_slots.extend([idx] if isinstance(idx, int) else idx)

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        yield "req_to_token", self.req_to_token


class MambaPool:
    """KDA state per (layer, slot): conv windows and the temporal (recurrent) state.

    Row ``mamba_size`` + 1 exists because slot 0 is the padding slot, as in SGLang.
    """

    def __init__(self, *, size: int, conv_state_shapes, temporal_state_shape, conv_dtype,
                 temporal_dtype, mamba_layer_ids, device: str, fill: str = "zeros",
                 speculative_num_draft_tokens: int = 0, spec_state_size: int = 0):
        self.size = size
        self.device = device
        self.mamba_layer_ids = list(mamba_layer_ids)
        n = len(self.mamba_layer_ids)
        self.conv = [_alloc((n, size + 1, *s), torch_dtype(conv_dtype), device, fill)
                     for s in conv_state_shapes]
        self.temporal = _alloc((n, size + 1, *temporal_state_shape), torch_dtype(temporal_dtype),
                               device, fill)
        # EAGLE/MTP target verify: per draft token, one temporal state and one conv window per
        # request slot (KDA keeps the dense conv-window layout: conv_window_dedup_enabled is False).
        self.intermediate_ssm = self.intermediate_conv_window = None
        if speculative_num_draft_tokens:
            d, rows = speculative_num_draft_tokens, spec_state_size + 1
            self.intermediate_ssm = _alloc((n, rows, d, *temporal_state_shape), torch_dtype(temporal_dtype),
                                           device, fill)
            self.intermediate_conv_window = [_alloc((n, rows, d, *s), torch_dtype(conv_dtype), device, fill)
                                             for s in conv_state_shapes]

    def state_tensors(self) -> list[torch.Tensor]:
        return [*self.conv, self.temporal]

    def slot_bytes(self) -> int:
        """Bytes of one state slot across all KDA layers (SGLang's mamba_cache_per_req)."""
        return sum(t[:, 0].numel() * t.element_size() for t in self.state_tensors())

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        for i, c in enumerate(self.conv):
            yield f"conv[{i}]", c
        yield "temporal", self.temporal
        if self.intermediate_ssm is not None:
            yield "intermediate_ssm", self.intermediate_ssm
            for i, c in enumerate(self.intermediate_conv_window):
                yield f"intermediate_conv_window[{i}]", c


class IndexKeyCache:
    """DSA indexer keys: one uint8 page buffer per full layer (fp8 key bytes, then scales)."""

    def __init__(self, pool: "DSATokenToKVPool", index_buf_size: int, fill: str = "zeros"):
        g = pool.geometry
        self.pool = pool
        self.num_pages = index_page_count(index_buf_size, pool.page_size)
        self.row_bytes = g.index_page_bytes
        self.buffer = [
            _alloc((0 if g.skip_topk_layers[i] else self.num_pages, self.row_bytes),
                   torch.uint8, pool.device, fill)
            for i in range(pool.layer_num)
        ]

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        for i, b in enumerate(self.buffer):
            yield f"buffer[{i}]", b


class DSATokenToKVPool:
    """MLA latent rows per full layer + the IndexKeyCache + the compress-tail pair.

    ``kv_buffer[i]`` has ``size + page_size`` rows: the first page is the padding page.
    fp8 KV is stored as uint8 (SGLang's ``store_dtype``).
    """

    def __init__(self, geometry: PoolGeometry, device: str, fill: str = "zeros"):
        g = geometry
        self.geometry = g
        self.size = g.size
        self.page_size = g.page_size
        self.layer_num = g.num_full_layers
        self.device = device
        self.kv_cache_dim = g.kv_cache_dim
        self.store_dtype = torch_dtype(g.store_dtype)
        self.index_head_dim = g.index_head_dim
        self.index_kpool = g.index_kpool
        self.kv_buffer = [_alloc((g.size + g.page_size, 1, g.kv_cache_dim), self.store_dtype, device, fill)
                          for _ in range(self.layer_num)]
        self.index_key_cache = IndexKeyCache(self, g.size, fill)
        self.kpool_use_compress = g.kpool_use_compress
        if self.kpool_use_compress:
            rows = [0 if s else g.tail_rows for s in g.skip_topk_layers]
            shape = lambda r: (r, g.tail_width, g.index_head_dim)  # noqa: E731
            self._compress_tail_k = [_alloc(shape(r), torch.bfloat16, device, fill) for r in rows]
            self._compress_tail_score = [_alloc(shape(r), torch.bfloat16, device, fill) for r in rows]
        else:
            self._compress_tail_k = self._compress_tail_score = None

    @property
    def index_k_with_scale_buffer(self) -> list[torch.Tensor]:
        return self.index_key_cache.buffer

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        for i, b in enumerate(self.kv_buffer):
            yield f"kv_buffer[{i}]", b
        for name, b in self.index_key_cache.named_buffers():
            yield f"index_key_cache.{name}", b
        if self.kpool_use_compress:
            for i, b in enumerate(self._compress_tail_k):
                yield f"_compress_tail_k[{i}]", b
            for i, b in enumerate(self._compress_tail_score):
                yield f"_compress_tail_score[{i}]", b


class HybridLinearKVPool:
    """One pool for the hybrid model: full_kv_pool (DSA layers) + mamba_pool (KDA layers)."""

    def __init__(self, geometry: PoolGeometry, device: str, mamba_pool: MambaPool, fill: str = "zeros"):
        self.geometry = geometry
        self.size = geometry.size
        self.page_size = geometry.page_size
        self.device = device
        self.full_attention_layer_id_mapping = {
            layer: i for i, layer in enumerate(geometry.full_attention_layer_ids)}
        self.full_kv_pool = DSATokenToKVPool(geometry, device, fill)
        self.mamba_pool = mamba_pool

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        for name, b in self.full_kv_pool.named_buffers():
            yield f"full_kv_pool.{name}", b
        for name, b in self.mamba_pool.named_buffers():
            yield f"mamba_pool.{name}", b


class PagedTokenToKVPoolAllocator:
    """Free list of token pages; page 0 is padding, so pages 1 .. size / page_size are handed out.

    Token slot ``t`` lives in page ``t // page_size``; ``alloc(n)`` returns n slots, whole pages.
    """

    first_page = 1  # device pools keep page 0 as padding; host pools start at 0

    def __init__(self, size: int, page_size: int):
        self.size = size
        self.page_size = page_size
        self.num_pages = size // page_size
        self.clear()

    def clear(self) -> None:
        # FIFO like SGLang's free_pages tensor (alloc takes the front, free appends); a deque makes
        # alloc O(pages taken) where slicing a list copied the whole free list on every call
        self.free_pages: deque[int] = deque(range(self.first_page, self.first_page + self.num_pages))

    def available_size(self) -> int:
        return len(self.free_pages) * self.page_size

    def alloc(self, need_size: int) -> Optional[torch.Tensor]:
        if need_size % self.page_size:
            raise ValueError(f"alloc({need_size}) is not a multiple of page_size {self.page_size}")
        n = need_size // self.page_size
        if n > len(self.free_pages):
            return None
        pages = [self.free_pages.popleft() for _ in range(n)]
        base = torch.tensor(pages, dtype=torch.int64).repeat_interleave(self.page_size) * self.page_size
        return base + torch.arange(self.page_size, dtype=torch.int64).repeat(n)

    def free(self, indices: torch.Tensor) -> None:
        if indices.numel() == 0:
            return
        pages = (indices.view(-1)[:: self.page_size] // self.page_size).tolist()
        self.free_pages.extend(pages)


class MambaSlotAllocator:
    """Free list of mamba state slots 1 .. size (slot 0 is the padding slot)."""

    def __init__(self, size: int):
        self.size = size
        self.clear()

    def clear(self) -> None:
        self.free_slots: deque[int] = deque(range(1, self.size + 1))

    def available_size(self) -> int:
        return len(self.free_slots)

    def alloc(self, need_size: int = 1) -> Optional[torch.Tensor]:
        if need_size > len(self.free_slots):
            return None
        out = [self.free_slots.popleft() for _ in range(need_size)]
        return torch.tensor(out, dtype=torch.int64)

    def free(self, indices: torch.Tensor) -> None:
        self.free_slots.extend(indices.view(-1).tolist())


class DevicePools:
    """The device side of one rank: SGLang's pools plus their allocators.

    ``fill='zeros'`` mirrors SGLang (torch.zeros); ``fill='empty'`` allocates the same storage
    without touching it (what measurement needs, and fast).
    """

    def __init__(self, geometry: PoolGeometry, device: Optional[str] = None, fill: str = "zeros",
                 budget: Optional[int] = None):
        self.geometry = geometry
        self.device = device or default_device()
        g = geometry
        # Refuse before allocating anything: one line with what was asked and what is free.
        check_budget(g.shape_bytes(), self.device, budget,
                     what=f"the pools of profile {g.profile_name or '?'}")
        self.req_to_token_pool = ReqToTokenPool(g.max_running_requests_per_worker, g.max_context_len, self.device, fill)
        mamba_pool = MambaPool(size=g.mamba_size, conv_state_shapes=g.conv_state_shapes,
                               temporal_state_shape=g.temporal_state_shape, conv_dtype=g.conv_dtype,
                               temporal_dtype=g.temporal_dtype,
                               mamba_layer_ids=g.linear_attention_layer_ids, device=self.device, fill=fill,
                               speculative_num_draft_tokens=g.speculative_num_draft_tokens,
                               spec_state_size=g.spec_state_size)
        self.token_to_kv_pool = HybridLinearKVPool(g, self.device, mamba_pool, fill)
        self.token_to_kv_pool_allocator = PagedTokenToKVPoolAllocator(g.size, g.page_size)
        self.mamba_allocator = MambaSlotAllocator(g.mamba_size)

    @property
    def full_kv_pool(self) -> DSATokenToKVPool:
        return self.token_to_kv_pool.full_kv_pool

    @property
    def mamba_pool(self) -> MambaPool:
        return self.token_to_kv_pool.mamba_pool

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Every device tensor, named by its path in SGLang's object tree."""
        for name, b in self.req_to_token_pool.named_buffers():
            yield f"req_to_token_pool.{name}", b
        for name, b in self.token_to_kv_pool.named_buffers():
            yield name, b

    def free_counts(self) -> dict[str, int]:
        return {"token_slots": self.token_to_kv_pool_allocator.available_size(),
                "mamba_slots": self.mamba_allocator.available_size(),
                "req_slots": self.req_to_token_pool.available_size()}

    # ---- byte access used by the RadixTree / HiCache model ----
    def read_token_rows(self, indices: torch.Tensor) -> list[torch.Tensor]:
        """Per full layer, the kv_buffer rows of these token slots, as uint8 (n, row_bytes)."""
        idx = indices.to(self.device)
        return [b[idx].view(torch.uint8).reshape(len(idx), -1) for b in self.full_kv_pool.kv_buffer]

    def write_token_rows(self, indices: torch.Tensor, rows: list[torch.Tensor]) -> None:
        idx = indices.to(self.device)
        for b, r in zip(self.full_kv_pool.kv_buffer, rows):
            b.view(torch.uint8).view(b.shape[0], -1)[idx, : r.shape[1]] = r.to(self.device)

    def read_index_pages(self, indices: torch.Tensor) -> list[torch.Tensor]:
        """Per full layer, the IndexKeyCache pages holding these (page-aligned) token slots."""
        pages = (indices.view(-1)[:: self.geometry.page_size] // self.geometry.page_size).to(self.device)
        return [b[pages] for b in self.full_kv_pool.index_key_cache.buffer if b.shape[0]]

    def write_index_pages(self, indices: torch.Tensor, rows: list[torch.Tensor]) -> None:
        pages = (indices.view(-1)[:: self.geometry.page_size] // self.geometry.page_size).to(self.device)
        live = [b for b in self.full_kv_pool.index_key_cache.buffer if b.shape[0]]
        for b, r in zip(live, rows):
            b[pages] = r.to(self.device)

    def read_mamba_slot(self, slot: int) -> list[torch.Tensor]:
        """One state slot across all KDA layers: [conv..., temporal], each (layers, ...) as uint8."""
        return [t[:, slot].contiguous().view(torch.uint8) for t in self.mamba_pool.state_tensors()]

    def write_mamba_slot(self, slot: int, parts: list[torch.Tensor]) -> None:
        for t, p in zip(self.mamba_pool.state_tensors(), parts):
            t[:, slot] = p.to(self.device).view(t.dtype).view(t[:, slot].shape)


def write_reduced_model_config(path, *, full_layers: int = 2, kda_per_full: int = 3,
                               kda_heads: int = 2, kda_head_dim: int = 16) -> str:
    """Write a smaller copy of the shipped GLM-5.3-Flash config to ``path`` (a config.json).

    Same layer pattern (three KDA layers, then one DSA layer), same per-token row widths
    (kv_lora_rank 512, index_head_dim 128, index_kpool 4), fewer layers and KDA heads. For tests
    and demos that move many bytes (the RadixTree property test): a profile with
    ``model: <path>`` then plans, allocates and measures like the real one at a fraction of the size.
    """
    import json
    from importlib import resources
    from pathlib import Path

    cfg = json.loads(resources.files("glm_kv.inputs").joinpath("data/glm-5.3-flash.json").read_text())
    text = cfg["text_config"]
    n = full_layers * (kda_per_full + 1)
    types = (["linear_attention"] * kda_per_full + ["deepseek_sparse_attention"]) * full_layers
    text["num_hidden_layers"] = n
    text["layer_types"] = types
    text["indexer_types"] = ["full"] * n
    text["linear_attn_config"].update(
        num_heads=kda_heads, head_dim=kda_head_dim,
        kda_layers=[i for i, t in enumerate(types) if t == "linear_attention"],
        full_attn_layers=[i for i, t in enumerate(types) if t != "linear_attention"])
    cfg["_provenance"] = (f"reduced copy of the shipped GLM-5.3-Flash excerpt: {full_layers} DSA + "
                          f"{full_layers * kda_per_full} KDA layers, {kda_heads} KDA heads of {kda_head_dim}")
    out = Path(path)
    out.write_text(json.dumps(cfg, indent=1))
    return str(out)
