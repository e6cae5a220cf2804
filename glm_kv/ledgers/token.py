"""The per-token ledger: MLA latent KV and DSA indexer K over the full-attention layers."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ProfileError
from ..inputs.model import ModelConfig
from ..inputs.resolve import ARTICLE_PAGE_SIZE, ServerArgs
from ..inputs.rules import rules_for
from ..units import DTYPE_BYTES, FP8_SCALE_BYTES, FP8_SCALE_GROUP, KV_STORE_DTYPE


@dataclass(frozen=True)
class TokenLedger:
    kv_cache_dtype: str
    store_dtype: str            # SGLang's store_dtype: bfloat16, or uint8 for fp8 (JSON: kv_storage_dtype)
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
    # one token's indexer K with its fp8 scales, one layer, before kpool pooling: 132 B
    # (JSON: indexer_row_bytes; not to be confused with an IndexKeyCache row, which is a page)
    indexer_unpooled_bytes_per_token_per_layer: int
    indexer_page_bytes: int     # one IndexKeyCache page (= one buffer row), one layer
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
    # DFLASH: the draft checkpoint's own KV pool, per token on one rank (dflash_draft_cell_size_per_token);
    # SGLang adds it to the target's cell (scale_kv_cell_size_per_token_for_dflash) so one token budget
    # sizes both pools. 0 without DFLASH.
    dflash_draft_bytes_per_token: int = 0


JSON_NAMES = {"store_dtype": "kv_storage_dtype",
              "indexer_unpooled_bytes_per_token_per_layer": "indexer_row_bytes"}


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


def indexer_unpooled_bytes(model: ModelConfig) -> int:
    """One token's indexer K with its fp8 scales: 128 + 128/128 x 4 = 132 B per layer."""
    return model.index_head_dim + model.index_head_dim // FP8_SCALE_GROUP * FP8_SCALE_BYTES


def token_ledger(args: ServerArgs) -> TokenLedger:
    model, kpool = args.model, args.index_kpool
    if ARTICLE_PAGE_SIZE % kpool:
        raise ProfileError("model.index_kpool", f"index_kpool ({kpool}) must divide the 64-token indexer page")
    if model.index_topk % kpool:
        raise ProfileError("model.index_kpool", f"index_kpool ({kpool}) must divide index_topk ({model.index_topk})")
    kv_dtype = args.kv_cache_dtype
    dim, layout = kv_cache_dim(model, kv_dtype, args.dsa_prefill_backend, args.dsa_decode_backend)
    item = DTYPE_BYTES[kv_dtype]
    n_full = model.num_full_layers
    n_indexed = len(model.dsa_indexed_layers)
    row = indexer_unpooled_bytes(model)
    psize = args.page_size
    if rules_for(args.profile).indexer_pooled_rows:
        # 0.5.23: one page of page_size tokens holds page_size // kpool pooled rows.
        idx_page_tokens, idx_page_bytes = psize, psize // kpool * row
        per_layer = math.ceil(row / kpool)  # _compute_dsa_indexer_cell_size
    else:
        # article: IndexKeyCache holds 64 tokens x 132 B per page: capacity is reserved at 132 B/token/layer.
        idx_page_tokens, idx_page_bytes = psize, psize * row
        per_layer = row
    # The MTP draft layer is one more full-attention layer with the target's row widths: article-era
    # builds reserve it at the unpooled 132 B indexer row (644 B/token with raw fp8, exactly one target
    # layer: 7,084 / 11; public 4 x B200 boot logs: 3.80 GiB for 6,327,680 tokens), 0.5.23 at the pooled
    # ceil(132 / kpool) = 33 B (545 B/token). The article layout used to apply 0.5.23's 33 B here.
    draft = args.draft_layers * (dim * item + per_layer)
    kv = dim * item * n_full
    indexer = per_layer * n_indexed
    return TokenLedger(
        kv_cache_dtype=kv_dtype, store_dtype=KV_STORE_DTYPE[kv_dtype], kv_item_bytes=item,
        kv_layout=layout, dsa_prefill_backend=args.dsa_prefill_backend,
        dsa_decode_backend=args.dsa_decode_backend,
        kv_cache_dim=dim, kv_row_bytes=dim * item, num_full_layers=n_full,
        kv_bytes_per_token=kv, page_size=psize, index_kpool=kpool,
        indexer_unpooled_bytes_per_token_per_layer=row,
        indexer_page_bytes=idx_page_bytes, indexer_tokens_per_page=idx_page_tokens,
        indexer_bytes_per_token_per_layer=per_layer, indexer_bytes_per_token=indexer,
        indexer_effective_bytes_per_token_per_layer=math.ceil(row / kpool),
        indexer_effective_bytes_per_token=math.ceil(row / kpool) * n_indexed,
        index_groups_per_page=ARTICLE_PAGE_SIZE // kpool, index_topk_groups=model.index_topk // kpool,
        draft_layers=args.draft_layers, draft_bytes_per_token=draft,
        cell_size_bytes=kv + indexer + draft + args.draft_kv_bytes_per_token, target_cell_size_bytes=kv + indexer,
        dflash_draft_bytes_per_token=args.draft_kv_bytes_per_token,
    )
