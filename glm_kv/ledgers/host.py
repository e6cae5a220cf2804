"""HiCache's host (DRAM) side: which HostPoolGroup entries exist, their rows and sizes.

0.5.23 sizes the hybrid host pools in ``build_hybrid_mamba_stack``
(mem_cache/hybrid_cache/hybrid_pool_assembler.py): ``--hicache-size`` (GB = 10^9) is split over
the KV and mamba host pools in proportion to their device bytes (``_split_hicache_size``); without
it each pool takes ``device capacity x hicache_ratio``. With neither ratio nor size the ratio is
auto-sized from host RAM (``hicache_auto_size.auto_size_hicache``). Under MTP the host KV and
indexer pools pack the draft layer too. The indexer sidecar comes on top of the split.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ProfileError
from ..inputs.rules import SglangRules, rules_for
from ..units import GB, GiB, index_page_count
from .layers import STATE_KINDS, SWA_KINDS, DsaIndexerK, GqaKv, MlaKv, SlidingWindowKv
from .model_layers import ModelLayers
from .token import TokenLedger

DEFAULT_HICACHE_RATIO = 2.0                 # handle_hicache_ratio_default (cache mode)
BUFFER_ONLY_HICACHE_RATIO = 1.2             # handle_hicache_ratio_default (buffer_only: a staging buffer)
HICACHE_HOST_MEMORY_FRACTION = 0.8          # --hicache-host-memory-fraction default
HICACHE_HOST_MEMORY_RESERVE_BYTES = 10 * GiB   # pool_host/base.py: RAM left to the OS
ALLOCATION_SLACK_FRACTION = 0.05            # hicache_auto_size._ALLOCATION_SLACK_FRACTION
MAMBA_HOST_LAYOUTS = ("page_first", "page_first_direct", "page_first_kv_split")


@dataclass(frozen=True)
class HostLedger:
    enabled: bool
    entries: tuple[str, ...]
    entry_classes: tuple[str, ...]
    kv_row_bytes: int            # one full layer, one token
    kv_bytes_per_token: int
    kv_page_size: int
    indexer_bytes_per_token: int
    mamba_slot_bytes: int
    mamba_page_size: int
    mem_layout: str
    kv_host_tokens: int | None = None
    kv_host_bytes: int | None = None
    indexer_host_bytes: int | None = None
    mamba_host_slots: int | None = None
    mamba_host_bytes: int | None = None
    total_host_bytes: int | None = None
    # contract names (plan-contract "Additions"), appended
    kv_tokens: int | None = None
    kv_bytes: int | None = None
    indexer_bytes: int | None = None
    mamba_slots: int | None = None
    mamba_bytes: int | None = None
    total_bytes: int | None = None
    hicache_ratio: float | None = None
    hicache_ratio_source: str | None = None   # "profile", "default", "auto-size"
    kv_layers: int | None = None
    indexer_logged_bytes: int | None = None   # what the "Allocating ... DSA indexer" line prints
    device_bytes: int | None = None           # device pools the ratio / size split is taken over
    # appended (issue 30): the DFLASH draft's host sidecar (build_full_draft_pools): one host slot per host
    # KV token (the anchor's logical size), the draft's KV bytes per token each; 0 without a sidecar
    draft_tokens: int | None = None
    draft_bytes: int | None = None
    indexer_page_bytes: int = 0               # one DSAIndexerPoolHost page over every indexed layer (appended)
    # appended (issue 32), hybrid-SWA models only (None, and absent from the plan JSON, elsewhere): _SwaStrategy's
    # SWA host pool beside the KV one (build_hybrid_swa_stack: an MHATokenToKVPoolHost over the SWA device pool)
    swa_bytes_per_token: int | None = None    # every sliding-window layer's K + V rows of one token
    swa_layers: int | None = None
    swa_tokens: int | None = None
    swa_bytes: int | None = None
    # appended (issue 30 / 32 follow-up), PD decode servers only (absent from the plan JSON elsewhere): the retraction
    # backup SGLang resolves (inputs/retraction.py); host_pool builds the host pools above without HiCache
    retraction_backup: str | None = None


HOST_POOL_CLASSES = {"kv": "MLATokenToKVPoolHost", "indexer": "DSAIndexerPoolHost",
                     "mamba": "MambaPoolHost", "swa": "MHATokenToKVPoolHost"}
MHA_HOST_POOL_CLASS = "MHATokenToKVPoolHost"   # GQA/MHA models' host KV pool


def host_entries(layers: ModelLayers, rules: SglangRules) -> tuple[str, ...]:
    """The HostPoolGroup's entries: KV, the INDEXER sidecar of a DSA model's KV (0.5.23; the
    article's _MambaStrategy built KV + MAMBA only), MAMBA for a hybrid's state slots."""
    dsa = bool(layers.specs((DsaIndexerK,))) and rules.host_indexer_pool
    return ("kv",) + (("indexer",) if dsa else ()) + (("mamba",) if layers.specs(STATE_KINDS) else ()) \
        + (("swa",) if layers.specs(SWA_KINDS) else ())   # _SwaStrategy: KV + SWA (hybrid SWA, issue 32)


ASYMMETRIC_MHA_HOST_POOL_CLASS = "AsymmetricMHATokenToKVPoolHost"   # K and V rows of two head dims (MiMo-V2)


def host_classes(layers: ModelLayers, entries: tuple[str, ...]) -> tuple[str, ...]:
    """Each entry's host pool class; an MHA one is ``get_mha_host_pool_cls``'s: the asymmetric class when its
    device pool's K and V head dims differ (MiMo-V2-Flash: 192 / 128, both the KV and the SWA pool)."""
    mla = bool(layers.specs((MlaKv,)))

    def mha(kinds) -> str:
        specs = layers.specs(kinds)
        asym = any(getattr(s, "head_dim", 0) != getattr(s, "v_head_dim", 0) for s in specs)
        return ASYMMETRIC_MHA_HOST_POOL_CLASS if asym else MHA_HOST_POOL_CLASS
    return tuple(mha((GqaKv,)) if e == "kv" and not mla else mha(SWA_KINDS) if e == "swa" else HOST_POOL_CLASSES[e]
                 for e in entries)


def host_size(device_capacity: int, page_size: int, ratio: float, size_gb: float, per_unit: int) -> int:
    """``HostKVCache`` sizing: hicache_size (GB) wins over hicache_ratio; one extra page."""
    if size_gb > 0:
        size = int(size_gb * GB // per_unit)
    else:
        size = int(device_capacity * ratio)
    return (size // page_size + 1) * page_size


def device_kv_bytes(tokens: int, token: TokenLedger, layers: int) -> int:
    """``DSATokenToKVPool.get_kv_size_bytes``: KV rows (size + page) + index pages, per layer."""
    rows = (tokens + token.page_size) * token.kv_row_bytes
    index = index_page_count(tokens, token.page_size) * token.indexer_page_bytes if token.indexer_bytes_per_token else 0
    return layers * (rows + index)


def explicit_ratio(p) -> bool:
    """Did the user give --hicache-ratio? (SGLang's field default is None.)"""
    fields_set = getattr(p, "model_fields_set", None)
    return fields_set is None or "hicache_ratio" in fields_set


def default_ratio(p) -> float:
    """The ratio ``handle_hicache_ratio_default`` gives when --hicache-ratio is not: 2.0 in cache mode, 1.2 when
    host memory is only a staging buffer (--hicache-host-memory-mode buffer_only)."""
    buffer_only = getattr(p, "hicache_host_memory_mode", "cache") == "buffer_only"
    return BUFFER_ONLY_HICACHE_RATIO if buffer_only else DEFAULT_HICACHE_RATIO


def host_memory_fraction(p) -> float:
    """--hicache-host-memory-fraction: the share of the RAM left after the reserve that auto-sizing may use."""
    return getattr(p, "hicache_host_memory_fraction", HICACHE_HOST_MEMORY_FRACTION)


def host_budget(host_memory_bytes: int, ranks_per_host: int, fraction: float = HICACHE_HOST_MEMORY_FRACTION) -> int:
    """``auto_size_hicache``'s per-rank budget: RAM less the reserve, split over the machine's ranks, times the
    fraction."""
    return int((host_memory_bytes - HICACHE_HOST_MEMORY_RESERVE_BYTES) // max(ranks_per_host, 1) * fraction)


def auto_ratio(device_bytes: int, host_memory_bytes: int, ranks_per_host: int,
               requested: float = DEFAULT_HICACHE_RATIO,
               fraction: float = HICACHE_HOST_MEMORY_FRACTION) -> tuple[float, int]:
    """``auto_size_hicache``: (ratio, per-rank budget) from the machine's free RAM; the requested ratio (the
    mode's default) is the cap."""
    budget = host_budget(host_memory_bytes, ranks_per_host, fraction)
    ratio = min(requested, budget * (1 - ALLOCATION_SLACK_FRACTION) / device_bytes)
    if ratio <= 0:
        raise ProfileError("host_memory_bytes", "no host memory is left for HiCache after the 10 GiB "
                                                "reserve; give hicache_ratio or hicache_size")
    return ratio, budget


def ranks_per_host(p) -> int:
    """``pool_host/base.py ranks_per_host``: SGLang's launch world size per node, tp x pp // nnodes (at least
    1; pp is 1 here, --pp-size being refused); the profile's ``ranks_per_host`` when it states one (a reading
    of SGLang's auto-size log line, as ``verify`` takes it)."""
    if p.ranks_per_host is not None:
        return p.ranks_per_host
    return max(p.tp_size // max(p.nnodes, 1), 1)


# SGLang 0.5.23's words when a host pool does not fit (pool_host/base.py, mamba.py; pool_host/dsa.py)
HOST_MEMORY_SAYS = ("Not enough host memory available. Requesting {req:.2f} GB but only have {avail:.2f} GB free. "
                    "Please reduce the size of the hierarchical cache.")
INDEXER_HOST_MEMORY_SAYS = ("Not enough host memory for DSA indexer hierarchical cache. Requesting {req:.2f} GB "
                            "but only have {avail:.2f} GB free.")


def check_host_memory(p, requests: list[tuple[str, int]], auto_budget: int | None) -> None:
    """The host-memory check each host pool makes before it allocates (``host_memory_budget_bytes``):
    ``requests`` = [(pool, bytes)] in SGLang's build order (KV, indexer, mamba; then a draft sidecar).

    Auto-sized (``auto_budget``, inside ``host_memory_budget_scope``): each pool is booked against the one
    per-rank budget. Otherwise each pool is checked against (free RAM - 10 GiB) // ranks per host. The free
    RAM is ``host_memory_bytes`` (what SGLang reads, per check); without it glm-kv cannot check.
    """
    host_mem = p.host_memory_bytes
    if host_mem is None:
        return
    per_rank = (host_mem - HICACHE_HOST_MEMORY_RESERVE_BYTES) // ranks_per_host(p)
    left = auto_budget
    for pool, req in requests:
        avail = per_rank if left is None or pool.startswith("draft") else left
        if req > avail:
            says = INDEXER_HOST_MEMORY_SAYS if pool == "indexer" else HOST_MEMORY_SAYS
            field = "hicache_size" if p.hicache_size > 0 else (
                "hicache_ratio" if explicit_ratio(p) else "host_memory_bytes")
            raise ProfileError(field, f"the HiCache {pool} host pool does not fit: SGLang 0.5.23 refuses to start "
                                      f"(\"{says.format(req=req / 1e9, avail=avail / 1e9)}\"; host_memory_bytes "
                                      f"{host_mem:,}, {ranks_per_host(p)} ranks per host)")
        if left is not None and not pool.startswith("draft"):
            left -= req


def hisparse_host_pool(p, tokens: int, ratio: int, token: TokenLedger) -> tuple[int, int]:
    """HiSparse's host copy (issue 30): the ``MLATokenToKVPoolHost`` ``HiSparseCoordinator`` builds over the device
    pool (``host_size=0``, ``host_to_device_ratio``): tokens x ratio plus one page of KV rows over the full layers,
    in host RAM per rank. Its host-memory check (``_allocate_host_buffer``) against (free RAM - 10 GiB) // ranks
    per host refuses the start where ``host_memory_bytes`` is too small, in SGLang's words."""
    size = host_size(tokens, token.page_size, ratio, 0, 0)
    nbytes = size * token.kv_row_bytes * token.num_full_layers
    if p.host_memory_bytes is not None:
        avail = (p.host_memory_bytes - HICACHE_HOST_MEMORY_RESERVE_BYTES) // ranks_per_host(p)
        if nbytes > avail:
            raise ProfileError("host_memory_bytes", f"HiSparse's host KV copy does not fit: SGLang 0.5.23 refuses to "
                                                    f"start (\"{HOST_MEMORY_SAYS.format(req=nbytes / 1e9, avail=avail / 1e9)}\"; "
                                                    f"host_memory_bytes {p.host_memory_bytes:,}, {ranks_per_host(p)} "
                                                    f"ranks per host)")
    return size, nbytes


def replayssm_conv_window_bytes(args, request, requests_per_worker: int | None) -> int:
    """The verify conv windows MambaPool still allocates under --enable-linear-replayssm-spec with a draft
    (mem_cache/memory_pool.py ``intermediate_conv_window``: layers x (max_num_reqs + 1) x draft tokens x one
    conv state), which ``_handle_max_mamba_cache`` leaves out of the budget (the ring replaces the scratch)
    but ``_split_hicache_size`` and the auto-size count, as ``MambaPool.get_kv_size_bytes`` does."""
    if not (args.replayssm_active and args.draft_tokens and requests_per_worker):
        return 0
    return request.num_linear_layers * (requests_per_worker + 1) * args.draft_tokens * request.conv_state_bytes


def validate_host(p, rules: SglangRules | None = None, hybrid: bool = True) -> None:
    """Host-side combinations 0.5.23 refuses for a hybrid model (MambaPoolHost's layout assert)."""
    if not p.enable_hierarchical_cache or not hybrid or not (rules or rules_for(p)).startup_refusals:
        return
    if p.hicache_mem_layout not in MAMBA_HOST_LAYOUTS:
        raise ProfileError("hicache_mem_layout", f"{p.hicache_mem_layout!r} fails MambaPoolHost's layout "
                                                 f"assert in SGLang 0.5.23 (page_first or page_first_direct)")


ASYMMETRIC_KV_HOST_LAYOUTS = ("page_first", "page_first_direct")   # AsymmetricMHATokenToKVPoolHost.init_kv_buffer


def validate_asymmetric_kv_layout(layers: ModelLayers, p) -> None:
    """``get_mha_host_pool_cls``: a KV pool whose K and V head dims differ (MiMo-V2-Flash) gets an
    ``AsymmetricMHATokenToKVPoolHost``, which builds its two host buffers only page_first or page_first_direct. A
    decode host receive threshold below 1 resolves the layout to layer_first (``hicache_hook``), so SGLang 0.5.23
    refuses that backup-only launch as it builds the host pools (tests/sglang/test_decode_retraction_backup.py).
    Only that case is refused: an explicit --hicache-mem-layout layer_first there starts under the suite's SGLang
    oracle with page_first host pools, a difference not derived yet (said in the closing note)."""
    if p.disaggregation_decode_host_receive_threshold >= 1 or p.hicache_mem_layout in ASYMMETRIC_KV_HOST_LAYOUTS:
        return
    if not any(s.head_dim != s.v_head_dim for s in layers.specs((GqaKv, SlidingWindowKv))):
        return
    raise ProfileError("disaggregation_decode_host_receive_threshold", "SGLang 0.5.23 refuses it: \"Unsupported "
                       f"layout for models with head_dim != v_head_dim: {p.hicache_mem_layout}; expected 'page_first' "
                       "or 'page_first_direct'.\" (mem_cache/pool_host/mha.py, AsymmetricMHATokenToKVPoolHost: the "
                       "threshold makes the decode host pool layer_first)")


BACKUP_ONLY_HICACHE_RATIO = 0.2   # kv_cache_builder: a backup-only retraction pool's host slots per device slot


def backup_only_ratio(p, device_tokens: int, page_size: int, max_context_len: int) -> float:
    """``resolve_decode_retraction_backup``'s ratio for host-pool retraction without HiCache (no --hicache-ratio):
    0.2, and without --hicache-size at least one longest request (``decode_retraction_max_tokens``: the
    req_to_token row less one token, at most the KV pool, page-aligned), two when a host receive threshold below 1
    lets one request receive while another is retracted."""
    if p.hicache_size != 0:
        return BACKUP_ONLY_HICACHE_RATIO
    min_tokens = -(-min(max_context_len - 1, device_tokens) // page_size) * page_size
    if p.disaggregation_decode_host_receive_threshold < 1:
        min_tokens *= 2
    return max(BACKUP_ONLY_HICACHE_RATIO, min_tokens / device_tokens)


def host_ledger(layers: ModelLayers, p, token: TokenLedger, slot_bytes: int,
                device_tokens: int | None, device_slots: int | None, *,
                mamba_device_bytes: int | None = None, draft_layers: int = 0,
                rules: SglangRules | None = None, sidecar_draft_bytes_per_token: int = 0,
                swa_device_tokens: int | None = None, retraction_backup: str | None = None,
                max_context_len: int | None = None) -> HostLedger:
    """The host pool group of any model; sizes when HiCache is on and the device pools are known.

    ``mamba_device_bytes``: the device mamba pool's bytes (slots + 1, plus the speculative
    intermediate buffers); ``draft_layers``: MTP layers packed into the host KV / indexer pools;
    ``sidecar_draft_bytes_per_token``: a draft with its own KV pool that HiCache backs up as a sidecar
    (DFLASH: ``HiCacheDraftMode.SIDECAR`` in speculative/base_spec_worker.py), its KV bytes per token;
    ``swa_device_tokens``: a hybrid-SWA model's SWA device pool (issue 32), whose host pool
    ``build_hybrid_swa_stack`` sizes as the KV one (ratio x its tokens, or its device-bytes share of
    --hicache-size), after the KV pool in the build order and the host-memory checks.
    ``retraction_backup``: a PD decode server's resolved backup (``inputs.retraction``); ``host_pool`` builds the
    same host pools without HiCache (``create_unified_radix_cache`` -> ``init_hicache``), at
    ``backup_only_ratio`` unless a ratio is given (``max_context_len``: the req_to_token row).
    """
    rules = rules or rules_for(p)
    hybrid = bool(layers.specs(STATE_KINDS))
    validate_host(p, rules, hybrid)
    entries = host_entries(layers, rules)
    mla = layers.specs((MlaKv,))
    if rules.host_row_is_device_row or not mla:
        row = token.kv_row_bytes
    else:
        # the article's build_kv_host_pool passes no override_kv_cache_dim: 512 elements even for a
        # 528 device row
        row = (mla[0].kv_lora_rank + mla[0].qk_rope_head_dim) * token.kv_item_bytes
    indexer = token.indexer_bytes_per_token if rules.host_indexer_pool else 0
    if not rules.host_packs_draft:
        draft_layers = 0
    kv_per_token = row * token.num_full_layers
    ledger = dict(enabled=p.enable_hierarchical_cache, entries=entries,
                  entry_classes=host_classes(layers, entries), kv_row_bytes=row,
                  kv_bytes_per_token=kv_per_token, kv_page_size=token.page_size,
                  indexer_bytes_per_token=indexer, mamba_slot_bytes=slot_bytes, mamba_page_size=1,
                  mem_layout=p.hicache_mem_layout,
                  indexer_page_bytes=token.indexer_page_bytes * len(layers.layer_ids(DsaIndexerK)) if indexer else 0)
    swa_spt = token.swa_kv_bytes_per_token or 0
    if (swa_spt and p.enable_hierarchical_cache and rules.startup_refusals
            and getattr(p, "hicache_host_memory_mode", "cache") == "buffer_only"):
        raise ProfileError("hicache_host_memory_mode", "buffer_only on a sliding-window model is not sized by glm-kv "
                                                       "yet: SGLang 0.5.23's buffer-mode stack checks the SWA host "
                                                       "staging pool against two retain windows, widened by draft "
                                                       "reads (buffer_mode/pipeline.py validate_buffer_only_stack); "
                                                       "plan it in cache mode")
    if swa_spt:
        ledger.update(swa_bytes_per_token=swa_spt, swa_layers=token.num_swa_layers)
    ledger.update(retraction_backup=retraction_backup)
    backup_only = retraction_backup == "host_pool" and not p.enable_hierarchical_cache
    if backup_only and rules.startup_refusals:
        validate_asymmetric_kv_layout(layers, p)
    if not ((p.enable_hierarchical_cache or backup_only) and device_tokens is not None):
        return HostLedger(**ledger)
    kv_layers = token.num_full_layers + draft_layers
    kv_spt = row * kv_layers
    idx_layers = (len(layers.layer_ids(DsaIndexerK)) + draft_layers) if indexer else 0
    mamba_dev = (mamba_device_bytes if mamba_device_bytes is not None
                 else (device_slots + 1) * slot_bytes if slot_bytes else 0)
    kv_dev = device_kv_bytes(device_tokens, token, token.num_full_layers)
    # a packed draft adds its own device pool's bytes to the auto-size total (one slot per target slot)
    draft_dev = device_kv_bytes(device_tokens, token, draft_layers) if draft_layers else 0
    # a sidecar draft's device pool (MHATokenToKVPool: size + one page of rows) joins the auto-size total
    # (hicache_auto_size._draft_bytes, scaled to the target's slots: the same count here)
    draft_dev += (device_tokens + token.page_size) * sidecar_draft_bytes_per_token
    # the SWA device pool (MHATokenToKVPool: its size + one page of rows), in the split and the auto-size total
    swa_dev = (swa_device_tokens + token.page_size) * swa_spt if swa_spt else 0
    size_gb = p.hicache_size
    ratio, ratio_src, auto_budget = p.hicache_ratio, "profile", None
    # the ratio SGLang defaults to: HiCache's (2.0; 1.2 buffer_only), or a backup-only retraction pool's
    requested = (backup_only_ratio(p, device_tokens, token.page_size, max_context_len) if backup_only
                 else default_ratio(p))
    if size_gb > 0:   # the size wins; the ratio SGLang still resolves is the given one, else the default
        ratio = p.hicache_ratio if explicit_ratio(p) else requested
        ratio_src = "unused (hicache_size)"
    elif not explicit_ratio(p):
        host_mem = p.host_memory_bytes
        if host_mem is not None:
            ratio, auto_budget = auto_ratio(kv_dev + mamba_dev + swa_dev + draft_dev, host_mem, ranks_per_host(p),
                                            requested, host_memory_fraction(p))
            ratio_src = "auto-size"
        else:
            ratio, ratio_src = requested, "retraction backup" if backup_only else "default"
    if not rules.auto_hicache_ratio:   # sized as before 0.5.23: the ratio as given
        ratio, ratio_src = p.hicache_ratio, "profile"
    kv_share = mamba_share = swa_share = 0.0 if rules.split_hicache_size else float(size_gb)   # unsplit: each pool
    if size_gb > 0 and rules.split_hicache_size:   # _split_hicache_size over (KV + index) and mamba / SWA device bytes
        kv_share = size_gb * kv_dev / (kv_dev + mamba_dev + swa_dev)
        mamba_share = size_gb * mamba_dev / (kv_dev + mamba_dev + swa_dev)
        swa_share = size_gb * swa_dev / (kv_dev + mamba_dev + swa_dev)
    tokens = host_size(device_tokens, token.page_size, ratio, kv_share, kv_spt)
    slots = host_size(device_slots, 1, ratio, mamba_share, slot_bytes) if slot_bytes else 0
    kv_b, mamba_b = tokens * kv_spt, slots * slot_bytes
    # DSAIndexerPoolHost allocates (size + page + 1) // page pages; its log line counts one fewer.
    idx_b = index_page_count(tokens, token.page_size) * token.indexer_page_bytes * idx_layers
    idx_logged = tokens // token.page_size * token.indexer_page_bytes * idx_layers
    # the sidecar's host pool: host_token_capacity = the KV host pool's size (no padding page of its own)
    draft_tokens = tokens if sidecar_draft_bytes_per_token else 0
    draft_b = draft_tokens * sidecar_draft_bytes_per_token
    swa_tokens = host_size(swa_device_tokens, token.page_size, ratio, swa_share, swa_spt) if swa_spt else 0
    swa_b = swa_tokens * swa_spt
    total = kv_b + idx_b + mamba_b + draft_b + swa_b
    if rules.startup_refusals:   # the indexer pool checks (and logs) its page bytes without the padding page
        check_host_memory(p, [("KV", kv_b), ("indexer", idx_logged), ("mamba", mamba_b)]
                          + ([("SWA", swa_b)] if swa_b else []) + ([("draft", draft_b)] if draft_b else []),
                          auto_budget)
    if swa_spt:
        ledger.update(swa_tokens=swa_tokens, swa_bytes=swa_b)
    ledger.update(kv_host_tokens=tokens, kv_host_bytes=kv_b, indexer_host_bytes=idx_b,
                  mamba_host_slots=slots, mamba_host_bytes=mamba_b, total_host_bytes=total,
                  kv_tokens=tokens, kv_bytes=kv_b, indexer_bytes=idx_b, mamba_slots=slots,
                  mamba_bytes=mamba_b, total_bytes=total,
                  # 0.5.23 resolves a ratio even when --hicache-size sizes the pools
                  # (handle_hicache_ratio_default: the given one, else 2.0); it is unused for sizing
                  hicache_ratio=None if size_gb > 0 and not rules.auto_hicache_ratio else ratio,
                  hicache_ratio_source=ratio_src, kv_layers=kv_layers, indexer_logged_bytes=idx_logged,
                  device_bytes=kv_dev + mamba_dev + swa_dev + draft_dev, draft_tokens=draft_tokens, draft_bytes=draft_b)
    return HostLedger(**ledger)
