"""DeepSeek-V4's own pools, as SGLang 0.5.23 sizes and allocates them on a CUDA GPU (issue 32).

Why a module of its own: DeepSeek-V4 is not a full pool plus a state pool. SGLang 0.5.23 builds a
``DeepSeekV4TokenToKVPool`` (``mem_cache/deepseek_v4_memory_pool.py``) and sizes it with its own
``DSV4PoolConfigurator`` (``model_executor/pool_configurator.py``): every layer keeps a sliding-window
latent KV (the SWA pool), the layers of ``compress_ratios`` 4 keep a compressed latent KV of one row per
4 tokens plus a lightning-indexer K row, those of ratio 128 one latent row per 128 tokens, and both keep
a compress state (a ring of fp32 kv+score rows): ratio 4's addressed per SWA page, ratio 128's per
request slot. The "full" token count is only the index space the compressed pools divide.

The specs here are frozen and know their bytes as SGLang's classes do (no torch: layering):

* ``Dsv4LatentKv``: ``DeepSeekV4SingleKVPool`` in the V4 layout (``SGLANG_DSV4_KV_LAYOUT``'s default
  ``v4``): 448 fp8 nope + 64 bf16 rope + 448/64 scales + 1 pad = 584 B a row, a page padded to 576 B
  (``KVLayout.page_bytes``), ``ceil((size + global_page) / page)`` pages (``_num_dsv4_physical_kv_pages``).
* ``Dsv4IndexerK``: ``DeepSeekV4IndexerPool`` off the fp4 indexer: 128 + 128/128 x 4 = 132 B a row.
* ``Dsv4CompressState``: ``CompressStatePool`` (offline, fp32 ``SGLANG_DSV4_COMPRESS_STATE_DTYPE``):
  ``ceil((size + ring + 1) / ratio) x ratio`` rows of ``2 x (1 + overlap) x head_dim`` elements.

``dsv4_pool_sizes`` is ``DSV4PoolConfigurator.calculate_pool_sizes`` + ``finalize_with_max_running_requests``
for the path these specs describe; ``Dsv4Model.refusal`` names, in one line, what it does not size.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ProfileError
from .capacity import swa_request_cap

V4_PAGE_ALIGN = 576          # KVLayout.V4.page_align: the reader's TMA row stride
V4_TILE = 64                 # KVLayout.V4.tile_size: nope values sharing one fp8 scale
V4_SCALE_PAD = 1             # DeepSeekV4SingleKVPool.scale_pad
INDEXER_QUANT_BLOCK = 128    # get_dsv4_indexer_bytes_per_token (fp8): one fp32 scale per 128
STATE_ITEM_BYTES = 4         # SGLANG_DSV4_COMPRESS_STATE_DTYPE's default float32
DEFAULT_SWA_FULL_TOKENS_RATIO = 0.1   # DSV4_DEFAULT_SWA_FULL_TOKENS_RATIO
RING_SIZES = {4: 8, 128: 128}         # get_compress_state_ring_size without speculative decoding
SPEC_RING_SIZES = {4: 16, 128: 256}   # ... and with (any draft token count)


def ring_size(ratio: int, draft_tokens: int = 0) -> int:
    """``get_compress_state_ring_size``: rows per request ring, wider under speculative decoding."""
    return (SPEC_RING_SIZES if draft_tokens > 0 else RING_SIZES)[ratio]


def write_pad(ratio: int, ring: int) -> int:
    """``get_compress_state_write_pad``: the most draft tokens a ring keeps resident."""
    window = ratio * (2 if ratio == 4 else 1)
    return ring - window + 2 if ring > window else 0
SUPPORTED_RATIOS = (0, 4, 128)        # the ratios these specs size (1 and 2 are DeepSeek-V4.1's)


def _pages(size: int, page_size: int, global_page_size: int) -> int:
    """``_num_dsv4_physical_kv_pages``: the allocator's reserved logical page on top of ``size``."""
    return -(-(size + global_page_size) // page_size)


@dataclass(frozen=True)
class Dsv4LatentKv:
    """One layer's latent KV in ``DeepSeekV4SingleKVPool`` (V4 layout): fp8 nope, bf16 rope, fp8 scales."""

    qk_nope_head_dim: int
    qk_rope_head_dim: int
    kind = "dsv4_latent_kv"

    @property
    def row_bytes(self) -> int:
        """``get_bytes_per_token``: nope + rope x 2 + nope / 64 scales + 1 pad (584 for 448 + 64)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim * 2 + self.qk_nope_head_dim // V4_TILE + V4_SCALE_PAD

    def page_bytes(self, page_size: int) -> int:
        """``KVLayout.page_bytes``: a page's rows padded to a multiple of 576 B."""
        return -(-(page_size * self.row_bytes) // V4_PAGE_ALIGN) * V4_PAGE_ALIGN

    def bytes_per_slot(self, page_size: int) -> float:
        """``_get_paged_kv_bytes_per_token``: a page's bytes over its slots (the padding shared out)."""
        return self.page_bytes(page_size) / page_size

    def pool_bytes(self, size: int, page_size: int, global_page_size: int) -> int:
        """One layer's buffer: ``num_pages x bytes_per_page_padded``."""
        return _pages(size, page_size, global_page_size) * self.page_bytes(page_size)


@dataclass(frozen=True)
class Dsv4IndexerK:
    """One ratio-4 layer's lightning-indexer K in ``DeepSeekV4IndexerPool`` (fp8 + fp32 scales)."""

    index_head_dim: int
    kind = "dsv4_indexer_k"

    @property
    def row_bytes(self) -> int:
        """``get_dsv4_indexer_bytes_per_token(d, use_fp4_indexer=False)``: d + d / 128 x 4 (132)."""
        return self.index_head_dim + self.index_head_dim // INDEXER_QUANT_BLOCK * 4

    def pool_bytes(self, size: int, page_size: int, global_page_size: int) -> int:
        return _pages(size, page_size, global_page_size) * page_size * self.row_bytes


@dataclass(frozen=True)
class Dsv4CompressState:
    """One layer's compress state in ``CompressStatePool``: ratio 4 overlaps two windows (4 x head_dim a
    row), ratio 128 does not (2 x head_dim); kv and score, fp32."""

    ratio: int
    head_dim: int
    ring_size: int
    kind = "dsv4_compress_state"

    @property
    def row_bytes(self) -> int:
        overlap = self.ratio == 4
        return 2 * (1 + overlap) * self.head_dim * STATE_ITEM_BYTES

    def rows(self, size: int) -> int:
        """``size + ring_size + 1`` rows, padded to a multiple of the ratio."""
        return -(-(size + self.ring_size + 1) // self.ratio) * self.ratio

    def pool_bytes(self, size: int) -> int:
        return self.rows(size) * self.row_bytes


@dataclass(frozen=True)
class Dsv4Model:
    """DeepSeek-V4's layers as SGLang 0.5.23 allocates for them: ``compress_ratios`` over the model's
    ``num_hidden_layers`` (the last entry is the MTP layer's, which the target pool does not hold)."""

    name: str
    compress_ratios: tuple[int, ...]
    latent: Dsv4LatentKv
    indexer: Dsv4IndexerK
    window: int
    head_dim: int
    index_head_dim: int
    draft_tokens: int = 0          # speculative_num_draft_tokens (EAGLE); 0 without speculative decoding

    @property
    def num_layers(self) -> int:
        return len(self.compress_ratios)

    def layers_of(self, ratio: int) -> int:
        return sum(1 for r in self.compress_ratios if r == ratio)

    def state(self, ratio: int, indexer: bool = False) -> Dsv4CompressState:
        return Dsv4CompressState(ratio=ratio, head_dim=self.index_head_dim if indexer else self.head_dim,
                                 ring_size=ring_size(ratio, self.draft_tokens))

    def swa_bytes_per_token(self, page_size: int) -> float:
        """``_get_bytes_per_swa_token``: a latent row in every layer, plus ratio 4's compress state (attention
        and indexer), one ring of 8 rows per SWA page."""
        c4_state = self.state(4).row_bytes + self.state(4, indexer=True).row_bytes
        return (self.latent.bytes_per_slot(page_size) * self.num_layers
                + ring_size(4, self.draft_tokens) / page_size * c4_state * self.layers_of(4))

    def compressed_bytes_per_full_token(self, page_size: int) -> float:
        """``_compressed_bytes_per_full_token`` summed over the layers: ratio 4 a latent row and an indexer
        row per 4 tokens, ratio 128 a latent row per 128 (each at its page of page_size / ratio slots)."""
        c4 = (self.latent.bytes_per_slot(page_size // 4) + self.indexer.row_bytes) / 4
        c128 = self.latent.bytes_per_slot(page_size // 128) / 128
        return c4 * self.layers_of(4) + c128 * self.layers_of(128)


@dataclass(frozen=True)
class Dsv4Sizes:
    """``_PoolSizes``' DeepSeek-V4 fields (plus the request cap they were sized for) and each pool's bytes."""

    full_max_total_num_tokens: int
    swa_max_total_num_tokens: int
    c4_max_total_num_tokens: int
    c128_max_total_num_tokens: int
    c4_state_pool_size: int
    c128_state_pool_size: int
    max_running_requests_per_worker: int
    swa_mode: str                  # "cap" or "ratio"
    bytes_per_full_token: float
    fixed_bytes: float
    pool_bytes: dict               # pool name -> bytes its buffers take (every layer)


def c128_state_fixed_bytes(m: Dsv4Model, num_req_slots: int) -> int:
    """``_get_c128_state_fixed_bytes``: a 128-row ring per request slot on every ratio-128 layer."""
    if not m.layers_of(128):
        return 0
    return m.state(128).pool_bytes(num_req_slots * m.state(128).ring_size) * m.layers_of(128)


def pool_bytes(m: Dsv4Model, *, page_size: int, swa: int, c4: int, c128: int, c4_state: int,
               c128_state: int, num_req_slots: int) -> dict:
    """The bytes ``DeepSeekV4TokenToKVPool`` allocates for these sizes, per pool (all layers)."""
    n4, n128 = m.layers_of(4), m.layers_of(128)
    c128_rows = max(c128_state, num_req_slots * m.state(128).ring_size)
    return {
        "swa_kv": m.latent.pool_bytes(swa, page_size, page_size) * m.num_layers,
        "c4_kv": m.latent.pool_bytes(c4, page_size // 4, page_size) * n4,
        # the indexer's logical size is c128_size x 32, not c4_size (DeepSeekV4TokenToKVPool.c4_logical_size)
        "c4_indexer_k": m.indexer.pool_bytes(c128 * 32, page_size // 4, page_size) * n4,
        "c128_kv": m.latent.pool_bytes(c128, page_size // 128, page_size) * n128,
        "c4_state": (m.state(4).pool_bytes(c4_state) + m.state(4, indexer=True).pool_bytes(c4_state)) * n4,
        "c128_state": m.state(128).pool_bytes(c128_rows) * n128,
    }


def dsv4_pool_sizes(m: Dsv4Model, *, available_bytes: int, page_size: int, max_running_requests: int,
                    chunked_prefill_size: int | None, overlap: bool = True, attn_dp: int = 1,
                    disable_radix_cache: bool = False, swa_full_tokens_ratio: float | None = None,
                    swa_prefix_tails: int | None = None) -> Dsv4Sizes:
    """``DSV4PoolConfigurator.calculate_pool_sizes`` then ``finalize_with_max_running_requests``.

    ``max_running_requests`` is the launch's (the DeepSeek-V4 hook makes it 256 when not given). The SWA pool
    is sized in cap mode (the request cap plus ``swa_prefix_tails`` cached tails of window + page, default
    4 per request, none without the radix cache) unless the operator gave ``swa_full_tokens_ratio`` or no
    chunked prefill bounds a request; then it is that ratio (default 0.1) of the full tokens."""
    if page_size % 128:
        raise ProfileError("page_size", "SGLang 0.5.23 refuses it: \"page_size must be multiple of 128 for "
                                        "compressed attention\" (DSV4PoolConfigurator.calculate_pool_sizes)")
    for ratio in (4, 128):   # _assert_ring_serves_draft_tokens
        ring = ring_size(ratio, m.draft_tokens)
        if m.draft_tokens and m.layers_of(ratio) and m.draft_tokens > write_pad(ratio, ring):
            raise ProfileError("speculative_num_draft_tokens", f"SGLang 0.5.23 refuses it: \"speculative_num_draft_"
                                                               f"tokens={m.draft_tokens} exceeds what the c{ratio} "
                                                               f"compress state ring can keep resident (ring_size="
                                                               f"{ring} serves at most {write_pad(ratio, ring)} draft "
                                                               f"tokens). Lower the draft count, or grow the ring in "
                                                               f"get_compress_state_ring_size().\"")
    per_worker = max(1, max_running_requests // attn_dp)
    slots = per_worker + 1
    if swa_prefix_tails is None:
        swa_prefix_tails = 0 if disable_radix_cache else 4 * per_worker
    bpst = m.swa_bytes_per_token(page_size)
    cap_tokens = None
    # the draft worker reserved by (target + 1 draft layer) / target (scale_kv_cell_size_per_token_for_dflash)
    infl = (m.num_layers + 1) / m.num_layers if m.draft_tokens else 1.0
    if swa_full_tokens_ratio is None and chunked_prefill_size and chunked_prefill_size > 0:
        cap = swa_request_cap(page_size=page_size, window=m.window, requests_per_worker=per_worker,
                              chunked_prefill_size=chunked_prefill_size, overlap=overlap, draft_tokens=m.draft_tokens)
        cap_tokens = -(-(cap + swa_prefix_tails * (m.window + page_size)) // page_size) * page_size
    ratio = DEFAULT_SWA_FULL_TOKENS_RATIO if swa_full_tokens_ratio is None else swa_full_tokens_ratio
    bpft = (0 if cap_tokens is not None else ratio) * bpst + m.compressed_bytes_per_full_token(page_size)
    bpft, bpst = bpft * infl, bpst * infl
    fixed = c128_state_fixed_bytes(m, slots) + (0 if cap_tokens is None else cap_tokens * bpst)
    full = int(max(available_bytes - fixed, 0) / bpft) // page_size * page_size
    if full <= 0 and cap_tokens is not None:
        raise ProfileError("max_running_requests", f"SGLang 0.5.23 refuses it: \"The DSV4 SWA pool cap "
                                                   f"({cap_tokens} tokens, {cap_tokens * bpst / (1 << 30):.2f} GB) "
                                                   f"leaves no room for the full KV pool within the available "
                                                   f"{available_bytes / (1 << 30):.2f} GB. Reduce "
                                                   f"--max-running-requests, lower --swa-prefix-tails or "
                                                   f"SGLANG_SWA_EVICTION_INTERVAL, or increase "
                                                   f"--mem-fraction-static.\" (DSV4PoolConfigurator)")
    if cap_tokens is not None:
        swa = cap_tokens
    else:
        swa = int(full * ratio) // page_size * page_size
        if m.window + page_size >= swa:
            raise ProfileError("swa_full_tokens_ratio", f"SGLang 0.5.23 refuses it: \"SWA pool ({swa} tokens) "
                                                        f"cannot hold even one request: the prefill admission "
                                                        f"floor is sliding_window_size ({m.window}) + page_size "
                                                        f"({page_size}). Increase --swa-full-tokens-ratio or the "
                                                        f"total KV budget.\" (validate_swa_pool_size)")
    c4, c128 = full // 4, full // 128
    c4_state = swa // page_size * ring_size(4, m.draft_tokens)
    # resolve_max_num_reqs: the request cap, at most half the full tokens; the c128 state and the pool's request
    # slots follow the resolved count (finalize_with_max_running_requests), the budget's fixed bytes the requested
    reqs = min(per_worker, full // 2)
    c128_state = (reqs + 1) * ring_size(128, m.draft_tokens)
    return Dsv4Sizes(full_max_total_num_tokens=full, swa_max_total_num_tokens=swa, c4_max_total_num_tokens=c4,
                     c128_max_total_num_tokens=c128, c4_state_pool_size=c4_state, c128_state_pool_size=c128_state,
                     max_running_requests_per_worker=reqs, swa_mode="cap" if cap_tokens is not None else "ratio",
                     bytes_per_full_token=bpft, fixed_bytes=fixed,
                     pool_bytes=pool_bytes(m, page_size=page_size, swa=swa, c4=c4, c128=c128, c4_state=c4_state,
                                           c128_state=c128_state, num_req_slots=reqs + 1))


def dsv4_model(cfg, draft_tokens: int = 0) -> Dsv4Model:
    """The specs from an ``HfConfig`` of ``model_type`` deepseek_v4 (ModelConfig's DeepseekV4 branch:
    qk_nope = head_dim - qk_rope_head_dim, window = sliding_window, index_head_dim, compress_ratios)."""
    from ..inputs.hf_config import config_int as _int, config_where

    where = config_where(cfg)
    t = cfg.text
    n = _int(t, "num_hidden_layers", where)
    rope = _int(t, "qk_rope_head_dim", where)
    head_dim = _int(t, "head_dim", where)
    ratios = t.get("compress_ratios")
    if not isinstance(ratios, list) or len(ratios) < n or not all(
            type(r) is int and r in (0, 1, 2, 4, 128) for r in ratios):
        raise ProfileError(f"{where}.compress_ratios", f"must list 0, 1, 2, 4 or 128 for each of the {n} layers")
    stage = tuple(ratios[:n])    # DSV4PoolConfigurator: compress_ratios[start_layer:end_layer]
    if set(stage) - set(SUPPORTED_RATIOS):
        raise ProfileError(f"{where}.compress_ratios", "ratios 1 and 2 (DeepSeek-V4.1's kv_source layers) are not "
                                                       "sized by glm-kv yet")
    if head_dim <= rope:
        raise ProfileError(f"{where}.head_dim", f"must exceed qk_rope_head_dim ({rope}), got {head_dim}")
    idx = _int(t, "index_head_dim", where)
    return Dsv4Model(name=cfg.name, compress_ratios=stage,
                     latent=Dsv4LatentKv(qk_nope_head_dim=head_dim - rope, qk_rope_head_dim=rope),
                     indexer=Dsv4IndexerK(index_head_dim=idx), window=_int(t, "sliding_window", where),
                     head_dim=head_dim, index_head_dim=idx, draft_tokens=draft_tokens)


def requests_fit_at(s: Dsv4Sizes, m: Dsv4Model, page_size: int, context: int) -> int:
    """Requests of ``context`` tokens resident at once on a rank: SGLang's request cap, the full index space
    over the context (every compressed pool divides it), and the SWA pool over the admission floor each
    request holds there (``validate_swa_pool_size``: sliding_window_size + page_size)."""
    return min(s.max_running_requests_per_worker, s.full_max_total_num_tokens // context,
               s.swa_max_total_num_tokens // (m.window + page_size))


def bytes_summary(m: Dsv4Model, page_size: int) -> dict:
    """Per-token / per-request bytes as a plan shows them (what grows with tokens, what with requests)."""
    return {"swa_bytes_per_token": m.swa_bytes_per_token(page_size),
            "compressed_bytes_per_full_token": m.compressed_bytes_per_full_token(page_size),
            "c128_state_bytes_per_request": m.state(128).row_bytes * m.state(128).ring_size * m.layers_of(128),
            "layers": {str(r): m.layers_of(r) for r in SUPPORTED_RATIOS}}


__all__ = ["Dsv4LatentKv", "Dsv4IndexerK", "Dsv4CompressState", "Dsv4Model", "Dsv4Sizes", "dsv4_model",
           "dsv4_pool_sizes", "pool_bytes", "bytes_summary", "requests_fit_at"]
