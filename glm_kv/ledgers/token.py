"""The per-token ledger: the KV rows (MLA latent or GQA K+V) and the DSA indexer K over the full-attention layers."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ProfileError
from ..inputs.resolve import ARTICLE_PAGE_SIZE, ServerArgs
from ..inputs.swa import swa_full_tokens_ratio
from ..units import DTYPE_BYTES, FP8_SCALE_BYTES, FP8_SCALE_GROUP, KV_STORE_DTYPE
from .layers import SWA_KINDS, DsaIndexerK, GqaKv, MlaKv
from .model_layers import ModelLayers, dsa_fp8_row, layers_for

KV_KINDS = (MlaKv, GqaKv)   # the full pool's KV rows (a sliding-window layer's are in the SWA pool)


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
    # appended (issue 32): a hybrid-SWA model's SWA pool (None for every other model). SGLang's
    # HybridSWAPoolConfigurator prices a full-pool token as the full layers' rows plus
    # swa_full_tokens_ratio x the sliding-window layers' rows (its float _cell_size; cell_size_bytes is its
    # integer part): swa_kv_bytes_per_token = _swa_per_token x the SWA layers
    swa_kv_bytes_per_token: int | None = None
    num_swa_layers: int | None = None
    swa_full_tokens_ratio: float | None = None
    sliding_window_size: int | None = None
    # appended (issue 30): --enable-hisparse's host-to-device ratio (None without HiSparse): the indexer and the
    # MTP draft rows above are per device token and already carry it (pool_configurator: index_buf_size and the
    # draft's logical space are device tokens x ratio)
    hisparse_host_to_device_ratio: int | None = None

    @property
    def swa_cell_size(self) -> float:
        """SGLang's float ``_cell_size`` of a hybrid-SWA model (``_recompute_cell_size``: full rows +
        ratio x SWA rows); the integer cell of every other model."""
        if self.swa_kv_bytes_per_token is None:
            return self.cell_size_bytes
        # a DFLASH / DSPARK draft's own pool rides on every full-pool token (_draft_cell_size)
        return (self.kv_bytes_per_token + self.swa_full_tokens_ratio * self.swa_kv_bytes_per_token
                + self.dflash_draft_bytes_per_token)


JSON_NAMES = {"store_dtype": "kv_storage_dtype",
              "indexer_unpooled_bytes_per_token_per_layer": "indexer_row_bytes"}


def kv_cache_dim(model, kv_dtype: str, prefill: str, decode: str,
                 disaggregation_mode: str = "null") -> tuple[int, str]:
    """Row width as ``calculate_mla_kv_cache_dim``: raw 512 for trtllm/tilelang, scaled 528 else
    (``model``: anything with ``kv_lora_rank`` and ``qk_rope_head_dim``; the book's figures use it)."""
    base = model.kv_lora_rank + model.qk_rope_head_dim
    if kv_dtype != "fp8_e4m3":
        return base, "bf16"
    if dsa_fp8_row(prefill, decode, disaggregation_mode) == "fp8_raw":
        return base, "fp8_raw"
    scaled = (model.kv_lora_rank + model.kv_lora_rank // FP8_SCALE_GROUP * FP8_SCALE_BYTES
              + model.qk_rope_head_dim * 2)
    return scaled, "fp8_scaled"


def indexer_unpooled_bytes(spec: DsaIndexerK) -> int:
    """One token's indexer K with its fp8 scales: 128 + 128/128 x 4 = 132 B per layer."""
    return spec.unpooled_bytes


def _kv_shape(spec) -> tuple[int, str]:
    """(elements of one token's row in one layer, the row layout) of a KV spec."""
    if isinstance(spec, MlaKv):
        return spec.kv_cache_dim, spec.row
    return spec.heads_per_rank * (spec.head_dim + spec.v_head_dim), "bf16" if spec.item_bytes == 2 else "fp8_raw"


def _check_kpool(idx: DsaIndexerK) -> None:
    """The indexer page holds 64 / index_kpool pooled groups, and top-k is scored as
    index_topk / index_kpool groups: both divisions must be exact."""
    kpool = idx.index_kpool
    if ARTICLE_PAGE_SIZE % kpool:
        raise ProfileError("model.index_kpool", f"index_kpool ({kpool}) must divide the 64-token indexer page")
    if idx.index_topk % kpool:
        raise ProfileError("model.index_kpool", f"index_kpool ({kpool}) must divide index_topk ({idx.index_topk})")


def token_ledger(args: ServerArgs, layers: ModelLayers | None = None) -> TokenLedger:
    """The per-token ledger summed over the model's token-pool specs (any model: MLA or GQA KV,
    the DSA indexer where the model has one), plus the MTP draft layers and a DFLASH draft's pool."""
    m = layers or layers_for(args)
    kv_specs = m.specs(KV_KINDS)
    idx_specs = m.specs((DsaIndexerK,))
    idx = idx_specs[0] if idx_specs else None
    if idx is not None:
        _check_kpool(idx)
    kv_dtype = args.kv_cache_dtype
    dim, layout = _kv_shape(kv_specs[0])
    row_bytes = kv_specs[0].bytes_per_token
    psize = args.page_size
    kv = sum(s.bytes_per_token for s in kv_specs)
    indexer = sum(s.bytes_per_token for s in idx_specs)
    kpool = idx.index_kpool if idx else 1
    per_layer = idx.bytes_per_token if idx else 0
    effective = idx.pooled_bytes if idx else 0
    # The MTP draft layer is one more full-attention layer with the target's row widths: article-era
    # builds reserve it at the unpooled 132 B indexer row (644 B/token with raw fp8, exactly one target
    # layer: 7,084 / 11; public 4 x B200 boot logs: 3.80 GiB for 6,327,680 tokens), 0.5.23 at the pooled
    # ceil(132 / kpool) = 33 B (545 B/token).
    draft = args.draft_layers * (row_bytes + per_layer)
    ratio = getattr(args, "hisparse_ratio", 0)
    if ratio and idx is not None:
        # HiSparse (_compute_dsa_indexer_cell_size): the index K on every full layer (no shared-top-k elision),
        # for ratio x the device tokens; the EAGLE draft's KV and indexer are addressed by the same logical IDs
        indexer = per_layer * len(m.full_attention_layers) * ratio
        draft *= ratio
    swa_specs = m.specs(SWA_KINDS)
    # --swa-full-tokens-ratio (HybridSWAPoolConfigurator._swa_full_tokens_ratio: the flag, else 0.8)
    swa_ratio = swa_full_tokens_ratio(args.profile)
    swa = dict(swa_kv_bytes_per_token=sum(s.bytes_per_token for s in swa_specs), num_swa_layers=len(swa_specs),
               swa_full_tokens_ratio=swa_ratio, sliding_window_size=swa_specs[0].window) \
        if swa_specs else {}
    cell = kv + indexer + draft + args.draft_kv_bytes_per_token
    if swa_specs:   # the integer part of SGLang's float cell (full + ratio x SWA rows + a DFLASH draft's rows)
        cell = int(kv + swa_ratio * swa["swa_kv_bytes_per_token"] + args.draft_kv_bytes_per_token)
    return TokenLedger(
        kv_cache_dtype=kv_dtype, store_dtype=KV_STORE_DTYPE[kv_dtype], kv_item_bytes=DTYPE_BYTES[kv_dtype],
        kv_layout=layout, dsa_prefill_backend=args.dsa_prefill_backend,
        dsa_decode_backend=args.dsa_decode_backend,
        kv_cache_dim=dim, kv_row_bytes=row_bytes, num_full_layers=len(m.full_attention_layers),
        kv_bytes_per_token=kv, page_size=psize, index_kpool=kpool,
        indexer_unpooled_bytes_per_token_per_layer=indexer_unpooled_bytes(idx) if idx else 0,
        indexer_page_bytes=idx.page_bytes(psize) if idx else 0, indexer_tokens_per_page=psize if idx else 0,
        indexer_bytes_per_token_per_layer=per_layer, indexer_bytes_per_token=indexer,
        indexer_effective_bytes_per_token_per_layer=effective,
        indexer_effective_bytes_per_token=effective * len(idx_specs),
        index_groups_per_page=ARTICLE_PAGE_SIZE // kpool if idx else 0,
        index_topk_groups=idx.index_topk // kpool if idx else 0,
        draft_layers=args.draft_layers, draft_bytes_per_token=draft,
        cell_size_bytes=cell, target_cell_size_bytes=kv + indexer,
        dflash_draft_bytes_per_token=args.draft_kv_bytes_per_token, **swa,
        hisparse_host_to_device_ratio=ratio or None,
    )
