"""The per-token ledger: MLA latent KV and DSA indexer K over the full-attention layers."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import ProfileError
from .gpus import Gpu
from .model import ModelConfig

ARTICLE_PAGE_SIZE = 64  # upstream f4de6abee6: DSATokenToKVPool asserts page_size == 64 on CUDA
FP8_SCALE_GROUP = 128   # one 4-byte scale per 128 fp8 elements
FP8_SCALE_BYTES = 4
ITEM_BYTES = {"bfloat16": 2, "fp8_e4m3": 1}
STORAGE_DTYPE = {"bfloat16": "bfloat16", "fp8_e4m3": "uint8"}  # SGLang stores fp8 KV as uint8


@dataclass(frozen=True)
class TokenLedger:
    kv_cache_dtype: str
    kv_storage_dtype: str
    kv_item_bytes: int
    kv_layout: str              # "bf16", "fp8_scaled" or "fp8_raw"
    dsa_prefill_backend: str
    dsa_decode_backend: str
    kv_cache_dim: int
    kv_row_bytes: int           # one full layer, one token
    num_full_layers: int
    kv_bytes_per_token: int
    page_size: int
    index_kpool: int
    indexer_row_bytes: int      # index_head_dim + scales: 132 B for one token's K
    indexer_page_bytes: int     # one IndexKeyCache page, one layer
    indexer_tokens_per_page: int
    indexer_bytes_per_token_per_layer: int
    indexer_bytes_per_token: int
    indexer_effective_bytes_per_token_per_layer: int  # one pooled K per index_kpool tokens
    indexer_effective_bytes_per_token: int  # what index_kpool pooling actually writes
    index_groups_per_page: int  # logical index_kpool groups in one 64-token indexer page
    index_topk_groups: int      # top-k tokens scored as this many pooled groups
    draft_layers: int
    draft_bytes_per_token: int  # MTP draft layer KV + indexer (0 without speculative decoding)
    cell_size_bytes: int
    target_cell_size_bytes: int  # KV + indexer of the target model's pools (no MTP draft layer)


def resolve_kv_dtype(p, gpu: Gpu) -> str:
    """SGLang 0.5.23's auto: fp8_e4m3 on SM100+ (B200/B300), bfloat16 on SM90 (H100/H200)."""
    if p.kv_cache_dtype != "auto":
        return p.kv_cache_dtype
    return "fp8_e4m3" if gpu.sm >= 100 else "bfloat16"


def resolve_dsa_backends(p, gpu: Gpu, kv_dtype: str) -> tuple[str, str]:
    """Defaults as ``_dsa_split_backend_resolution``; a backend the user set is kept."""
    if kv_dtype == "fp8_e4m3":
        default = ("trtllm", "trtllm") if gpu.sm >= 100 else ("flashmla_kv", "flashmla_kv")
    else:
        default = ("flashmla_sparse", "trtllm" if gpu.sm >= 100 else "fa3")
    prefill = p.dsa_prefill_backend or default[0]
    decode = p.dsa_decode_backend or default[1]
    if "triton" in (prefill, decode):
        raise ProfileError("dsa_prefill_backend" if prefill == "triton" else "dsa_decode_backend",
                           "the triton DSA backend is only supported on ROCm/HIP")
    if kv_dtype == "fp8_e4m3" and (prefill == "tilelang") != (decode == "tilelang"):
        raise ProfileError("dsa_decode_backend", "CUDA TileLang FP8 KV requires both DSA backends to be "
                                                 "tilelang; raw and scaled FP8 KV layouts cannot be mixed")
    return prefill, decode


def kv_cache_dim(model: ModelConfig, kv_dtype: str, prefill: str, decode: str) -> tuple[int, str]:
    """Row width as ``calculate_mla_kv_cache_dim``: raw 512 for trtllm/tilelang, scaled 528 else."""
    base = model.kv_lora_rank + model.qk_rope_head_dim
    if kv_dtype != "fp8_e4m3":
        return base, "bf16"
    if "trtllm" in (prefill, decode) or prefill == decode == "tilelang":
        return base, "fp8_raw"
    scaled = (model.kv_lora_rank + model.kv_lora_rank // FP8_SCALE_GROUP * FP8_SCALE_BYTES
              + model.qk_rope_head_dim * 2)
    return scaled, "fp8_scaled"


def indexer_row_bytes(model: ModelConfig) -> int:
    """One token's indexer K with its fp8 scales: 128 + 128/128 x 4 = 132 B per layer."""
    return model.index_head_dim + model.index_head_dim // FP8_SCALE_GROUP * FP8_SCALE_BYTES


def effective_kpool(model: ModelConfig) -> int:
    return model.index_kpool if model.index_kpool_compress else 1


def page_size(model: ModelConfig, layout: str) -> int:
    """article: 64-token pages; 0.5.23 forces 64 x index_kpool (256) for this model."""
    return ARTICLE_PAGE_SIZE if layout == "article" else ARTICLE_PAGE_SIZE * effective_kpool(model)


def draft_token_count(p) -> int:
    """speculative_num_draft_tokens, or SGLang's default (3 steps x topk 1 + 1 = 4)."""
    if p.speculative_algorithm is None:
        return 0
    if p.speculative_num_draft_tokens is not None:
        return p.speculative_num_draft_tokens
    steps = p.speculative_num_steps or 3
    topk = p.speculative_eagle_topk or 1
    return steps * topk + 1 if topk > 1 else steps + 1


def token_ledger(model: ModelConfig, p, gpu: Gpu) -> TokenLedger:
    kpool = effective_kpool(model)
    if ARTICLE_PAGE_SIZE % kpool:
        raise ProfileError("model.index_kpool", f"index_kpool ({kpool}) must divide the 64-token indexer page")
    if model.index_topk % kpool:
        raise ProfileError("model.index_kpool", f"index_kpool ({kpool}) must divide index_topk ({model.index_topk})")
    kv_dtype = resolve_kv_dtype(p, gpu)
    prefill, decode = resolve_dsa_backends(p, gpu, kv_dtype)
    dim, layout = kv_cache_dim(model, kv_dtype, prefill, decode)
    item = ITEM_BYTES[kv_dtype]
    n_full = model.num_full_layers
    n_indexed = len(model.dsa_indexed_layers)
    row = indexer_row_bytes(model)
    psize = page_size(model, p.sglang_layout)
    if p.sglang_layout == "article":
        # IndexKeyCache holds 64 tokens x 132 B per page: capacity is reserved at 132 B/token/layer.
        idx_page_tokens, idx_page_bytes = psize, psize * row
        per_layer = row
    else:
        # 0.5.23: one page of page_size tokens holds page_size // kpool pooled rows.
        idx_page_tokens, idx_page_bytes = psize, psize // kpool * row
        per_layer = math.ceil(row / kpool)  # _compute_dsa_indexer_cell_size
    draft_layers = model.num_nextn_predict_layers if p.speculative_algorithm else 0
    draft = draft_layers * (dim * item + math.ceil(row / kpool))
    kv = dim * item * n_full
    indexer = per_layer * n_indexed
    return TokenLedger(
        kv_cache_dtype=kv_dtype, kv_storage_dtype=STORAGE_DTYPE[kv_dtype], kv_item_bytes=item,
        kv_layout=layout, dsa_prefill_backend=prefill, dsa_decode_backend=decode,
        kv_cache_dim=dim, kv_row_bytes=dim * item, num_full_layers=n_full,
        kv_bytes_per_token=kv, page_size=psize, index_kpool=kpool, indexer_row_bytes=row,
        indexer_page_bytes=idx_page_bytes, indexer_tokens_per_page=idx_page_tokens,
        indexer_bytes_per_token_per_layer=per_layer, indexer_bytes_per_token=indexer,
        indexer_effective_bytes_per_token_per_layer=math.ceil(row / kpool),
        indexer_effective_bytes_per_token=math.ceil(row / kpool) * n_indexed,
        index_groups_per_page=ARTICLE_PAGE_SIZE // kpool, index_topk_groups=model.index_topk // kpool,
        draft_layers=draft_layers, draft_bytes_per_token=draft,
        cell_size_bytes=kv + indexer + draft, target_cell_size_bytes=kv + indexer,
    )
