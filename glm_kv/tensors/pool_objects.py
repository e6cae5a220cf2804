"""SGLang's device-pool objects, shaped exactly like SGLang's, over tensors the one builder allocates.

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

Issue 31: one geometry and one builder for every model. The shapes come from
``model_pools.model_geometry`` (``ModelGeometry``: GLM-5.3-Flash's MLA + DSA indexer with kpool paging and
the compress tail + KDA state read from its config.json like any other model's) and every tensor is
allocated by ``model_pools.ModelDevicePools`` from the geometry's shape table; ``model_pools.DevicePools``
hands those tensors to the objects below. ``memory_pool`` re-exports this module and those three names
(the import path the book's notebooks and the tests use).

This module keeps SGLang's shape rules that the geometry applies (``calculate_mla_kv_cache_dim``,
``KVCache.store_dtype``, ``get_req_to_token_extra_context_len``), the pool objects and the free lists.
No ledger is imported and no plan byte field is read: those are what ``glm_kv.tensors.measure``
compares the allocations against, so the two sides cannot agree by sharing a formula
(``tests/tensors/test_measure.py`` plants an error in each ledger formula).

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

from collections import deque
from typing import Any, Iterator, Optional

import torch

# req_to_token's extra columns live with the resolution (the ledgers read them too, and cannot import tensors)
from ..inputs.resolve import REQ_TO_TOKEN_BASE_EXTRA, ServerArgs, req_to_token_extra_context_len  # noqa: F401
from ..inputs.rules import RULES
from ..units import index_page_count

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


# --------------------------------------------------------------------------- SGLang's shape rules
# Each function below restates one rule of SGLang 0.5.23's pool constructors, from the model
# config and the resolved server arguments. None of them reads a ledger: the ledgers compute the
# same quantities on their own, and ``glm_kv.tensors.measure`` compares the two.

DSA_QUANT_BLOCK_SIZE = 128      # DSATokenToKVPool.quant_block_size
DSA_ROPE_STORAGE_BYTES = 2      # DSATokenToKVPool.rope_storage_dtype = torch.bfloat16
FP8_SCALE_ITEM_BYTES = 4        # "kv_lora_rank // quant_block_size * 4" (fp32 scales)
CONV_STATE_DTYPE = "bfloat16"   # mamba2_state_dtype(): conv follows the model dtype (bf16)


def mla_kv_cache_dim(model: Any, kv_cache_dtype: str, prefill_backend: str, decode_backend: str,
                     disaggregation_mode: str = "null") -> int:
    """``calculate_mla_kv_cache_dim`` (kv_cache_configurator.py) for a DSA model on CUDA; ``model``: anything
    with the config's ``kv_lora_rank`` and ``qk_rope_head_dim``.

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


# --------------------------------------------------------------------------- allocation


def host_pool_size(device_capacity: int, page_size: int, host_to_device_ratio: float) -> int:
    """``HostKVCache.__init__`` (pool_host/base.py) without ``--hicache-size``: the device capacity
    x ratio, in whole pages, plus one padding page: ``(int(capacity x ratio) // page + 1) x page``."""
    return (int(device_capacity * host_to_device_ratio) // page_size + 1) * page_size


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

    Row ``mamba_size`` + 1 exists because slot 0 is the padding slot, as in SGLang. The tensors are the
    ones ``model_pools.ModelDevicePools`` allocated (``mamba_pool.*`` rows of the geometry's shape table);
    this object gives them SGLang's attribute names.
    """

    def __init__(self, *, size: int, mamba_layer_ids, device: str, conv: list[torch.Tensor],
                 temporal: torch.Tensor, intermediate_ssm: Optional[torch.Tensor] = None,
                 intermediate_conv_window: Optional[list[torch.Tensor]] = None):
        self.size = size
        self.device = device
        self.mamba_layer_ids = list(mamba_layer_ids)
        self.conv = list(conv)
        self.temporal = temporal
        # EAGLE/MTP target verify: per draft token, one temporal state and one conv window per
        # request slot (KDA keeps the dense conv-window layout: conv_window_dedup_enabled is False).
        self.intermediate_ssm = intermediate_ssm
        self.intermediate_conv_window = intermediate_conv_window if intermediate_ssm is not None else None

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

    def __init__(self, pool: "DSATokenToKVPool", buffer: list[torch.Tensor]):
        g = pool.geometry
        self.pool = pool
        self.num_pages = index_page_count(g.size, pool.page_size)   # index_buf_size = size
        self.row_bytes = g.index_page_bytes
        self.buffer = list(buffer)

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        for i, b in enumerate(self.buffer):
            yield f"buffer[{i}]", b


class DSATokenToKVPool:
    """MLA latent rows per full layer + the IndexKeyCache + the compress-tail pair.

    ``kv_buffer[i]`` has ``size + page_size`` rows: the first page is the padding page.
    fp8 KV is stored as uint8 (SGLang's ``store_dtype``). The tensors are ``ModelDevicePools``'s
    ``full_kv_pool.*`` rows, given SGLang's attribute names.
    """

    def __init__(self, geometry, device: str, buffers: dict[str, torch.Tensor]):
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
        layers = range(self.layer_num)
        self.kv_buffer = [buffers[f"full_kv_pool.kv_buffer[{i}]"] for i in layers]
        self.index_key_cache = IndexKeyCache(self, [buffers[f"full_kv_pool.index_key_cache.buffer[{i}]"]
                                                    for i in layers])
        self.kpool_use_compress = g.kpool_use_compress
        if self.kpool_use_compress:
            self._compress_tail_k = [buffers[f"full_kv_pool._compress_tail_k[{i}]"] for i in layers]
            self._compress_tail_score = [buffers[f"full_kv_pool._compress_tail_score[{i}]"] for i in layers]
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

    def __init__(self, geometry, device: str, full_kv_pool: DSATokenToKVPool, mamba_pool: MambaPool):
        self.geometry = geometry
        self.size = geometry.size
        self.page_size = geometry.page_size
        self.device = device
        self.full_attention_layer_id_mapping = {
            layer: i for i, layer in enumerate(geometry.full_attention_layer_ids)}
        self.full_kv_pool = full_kv_pool
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
