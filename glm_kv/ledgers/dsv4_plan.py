"""DeepSeek-V4's plan under SGLang 0.5.23 (issue 32): tokens, requests and capacity from its own pools.

Why apart from ``plan.py``: SGLang 0.5.23 does not size DeepSeek-V4 with a cell size and a MambaPool but with
``DSV4PoolConfigurator`` (``glm_kv.ledgers.dsv4``), so the plan's token / request / capacity keys here are that
configurator's: the SWA pool's bytes per token, the compressed pools' bytes per full token, the ratio-128
compress state per request, and ``_PoolSizes``' DeepSeek-V4 fields. The keys GLM-5.3-Flash's plan has keep
their names where they mean the same (``capacity.max_total_num_tokens`` is SGLang's: the full tokens).

What is sized is SGLang's default CUDA path (the DeepSeek-V4 model override's page 256 and SWA ratio 0.1
(which SGLang then counts as given, so the SWA pool is never sized from the request cap), FlashMLA, the V4 KV
layout, fp8 KV, the fp8 indexer, fp32 compress state). The rest is refused in one line naming the field:
a launch field this plan does not read, speculative decoding other than EAGLE top-k 1, HiSparse, PD
disaggregation, and HiCache beyond its host pools at an explicit --hicache-ratio (``dsv4_host``). The bytes for the pools are the profile's ``available_bytes``, else SGLang's rest after
the weights (the profile's ``weights_bytes``, else ``dsv4_weights``' estimate) as for every other model
(``memory.memory_ledger_for``: the default fraction, the pre-load memory, ``_profile_available_bytes``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from types import SimpleNamespace

from ..errors import ProfileError, shown
from ..inputs.gpus import Gpu, resolve_gpu
from ..inputs.hf_config import HfConfig, load_dsv4_config
from ..inputs.profile import FIELDS, Profile
from ..inputs.resolve import resolve_tp, validate_caps
from ..units import MiB, fmt_bytes
from .dsv4 import Dsv4Model, Dsv4Sizes, bytes_summary, dsv4_model, dsv4_pool_sizes
from .dsv4_host import Dsv4Host, dsv4_host, dsv4_host_to_dict, validate_dsv4_hicache
from . import dsv4_weights
from .memory import (PRE_LOAD_ESTIMATE_NOTE, MemoryLedger, gpu_defaults, memory_ledger_for,
                     memory_plan_keys, pools_budget, weights_estimate_note)

DSV4_PAGE_SIZE = 256          # model_overrides/deepseek_v4.py: page_size = 256 on CUDA
DSV4_DEFAULT_MAX_RUNNING_REQUESTS = 256   # apply_deepseek_v4_defaults
DSV4_SWA_FULL_TOKENS_RATIO = 0.1          # model_overrides/deepseek_v4.py when --swa-full-tokens-ratio is unset
# profile fields this plan reads; any other field given a value other than its default is refused by name
READ_FIELDS = frozenset({"name", "description", "sglang_layout", "model", "gpu", "available_bytes",
                         "max_running_requests", "chunked_prefill_size", "disable_overlap_schedule",
                         "disable_radix_cache", "swa_full_tokens_ratio", "page_size", "tp_size", "dp_size",
                         "enable_dp_attention", "kv_cache_dtype", "context_length", "speculative_algorithm",
                         "speculative_num_draft_tokens", "speculative_num_steps", "speculative_eagle_topk",
                         # the device-to-rest path (memory.memory_ledger_for), as for every other model
                         "mem_fraction_static", "pre_model_load_bytes", "weights_bytes", "draft_weights_bytes",
                         "weights_estimate", "memory_bytes", "sm",
                         # HiCache's host pools (ledgers.dsv4_host); --hicache-size is read to be refused in SGLang's
                         # words, the rest of HiCache's fields (storage, host memory mode and fraction) stay refused
                         "enable_hierarchical_cache", "hicache_ratio", "hicache_size", "hicache_mem_layout",
                         "hicache_io_backend", "host_memory_bytes", "ranks_per_host"})
_PATH = ("SGLang 0.5.23's default CUDA path for DeepSeek-V4: page 256, FlashMLA, the V4 KV layout, fp8 KV and "
         "indexer, fp32 compress state, no speculative decoding but EAGLE top-k 1, no HiSparse{} or PD disaggregation")
PATH = _PATH.format(", HiCache")
PATH_HICACHE = _PATH.format("") + "; HiCache's host pools at the given --hicache-ratio"


@dataclass(frozen=True)
class Dsv4Plan:
    """One DeepSeek-V4 deployment: the resolved launch, the layers, the pool sizes per rank."""

    profile: Profile
    config: HfConfig
    gpu: Gpu
    layers: Dsv4Model
    kv_cache_dtype: str
    attn_dp: int
    chunked_prefill_size: int
    requested_max_running_requests: int
    sizes: Dsv4Sizes
    memory: MemoryLedger
    available_bytes: int
    available_source: str
    notes: tuple[str, ...] = field(default=())
    host: Dsv4Host | None = None    # HiCache's host pools per rank (None without --enable-hierarchical-cache)

    def to_dict(self) -> dict:
        return dsv4_plan_to_dict(self)


def _refuse_unread(p: Profile) -> None:
    for name in sorted(p.model_fields_set - READ_FIELDS):
        value = getattr(p, name)
        if value != FIELDS[name].default:
            raise ProfileError(name, f"{shown(value)} is not modelled for DeepSeek-V4 yet (glm-kv sizes {PATH})")


def _kv_dtype(p: Profile) -> str:
    """``_deepseek_v4_kv_cache_dtype``: auto is fp8_e4m3; only fp8_e4m3 and bfloat16 start (its assert)."""
    kv = "fp8_e4m3" if p.kv_cache_dtype == "auto" else p.kv_cache_dtype
    if kv not in ("fp8_e4m3", "bfloat16"):
        raise ProfileError("kv_cache_dtype", f"SGLang 0.5.23 refuses it: \"{kv} is not supported for "
                                             f"DeepseekV4ForCausalLM\" (arg_groups/overrides.py)")
    if kv == "bfloat16":
        raise ProfileError("kv_cache_dtype", "SGLang 0.5.23 does not start DeepSeek-V4 with bfloat16 KV on the V4 "
                                             "layout: DeepSeekV4SingleKVPool.create_buffer fails its bare \"assert "
                                             "self.store_dtype == torch.uint8\" (AssertionError, no message)")
    return kv


def _draft_tokens(p: Profile) -> int:
    """``apply_deepseek_v4_defaults``' speculative rules (its words), then the draft tokens the rings serve."""
    algo = p.speculative_algorithm
    if algo is None:
        return 0
    if algo not in ("EAGLE", "DSPARK"):
        raise ProfileError("speculative_algorithm", "SGLang 0.5.23 refuses it: \"Only EAGLE and DSPARK speculative "
                                                    "algorithms are supported for DeepseekV4ForCausalLM\"")
    if algo == "EAGLE" and p.speculative_eagle_topk != 1:
        raise ProfileError("speculative_eagle_topk", "SGLang 0.5.23 refuses it: \"Only EAGLE speculative algorithm "
                                                     "with topk == 1 is supported for DeepseekV4ForCausalLM\"")
    if algo == "DSPARK":
        raise ProfileError("speculative_algorithm", "DSPARK is not sized for DeepSeek-V4 yet (its draft ring and "
                                                    "bf16 draft pool)")
    if p.speculative_num_steps is None:
        raise ProfileError("speculative_num_steps", "give it: glm-kv does not resolve SGLang's EAGLE defaults for "
                                                    "DeepSeek-V4 yet")
    # _handle_eagle_family: top-k 1 adjusts speculative_num_draft_tokens to speculative_num_steps + 1
    return p.speculative_num_steps + 1


def dsv4_plan(p: Profile) -> Dsv4Plan:
    """The plan of a profile whose model is DeepSeek-V4; ProfileError for what is not sized or SGLang refuses."""
    _refuse_unread(p)
    if p.enable_hierarchical_cache:   # refused before any pool is sized (resolution, then the auto-size)
        validate_dsv4_hicache(p)
    cfg = load_dsv4_config(p.model)
    draft = _draft_tokens(p)
    layers = dsv4_model(cfg, draft_tokens=draft)
    gpu = resolve_gpu(p)
    kv = _kv_dtype(p)
    notes: list[str] = []
    page = DSV4_PAGE_SIZE
    if "page_size" in p.model_fields_set and p.page_size not in (None, page):
        notes.append(f"page_size {p.page_size} is overridden: this model runs with {page} (the DeepSeek-V4 "
                     f"model override)")
    if gpu.sm < 90:
        raise ProfileError("gpu", f"{gpu.name} (SM{gpu.sm}) is not sized for DeepSeek-V4: glm-kv sizes its FlashMLA "
                                  f"pools on SM90 / SM100 GPUs")
    attn_dp = p.dp_size if p.enable_dp_attention else 1
    # SGLang's start-up refusals every model meets: DP attention divides TP, attention TP divides the heads, the
    # chunk is a whole number of pages (glm-kv's checks for the other models, with their words)
    resolve_tp(p, SimpleNamespace(architectures=cfg.architectures), cfg, attn_dp)
    validate_caps(p, page, attn_dp)
    # the weights load after the launch resolves and passes those checks; then the rest sizes the pools
    mem = dsv4_memory(p, cfg, gpu, attn_dp, bool(draft))
    available, available_source, _ = pools_budget(p, gpu, mem)   # one rule with every other plan
    chunk = p.chunked_prefill_size if p.chunked_prefill_size is not None else gpu_defaults(
        gpu.memory_bytes / MiB, p.tp_size)[0]
    chunk = chunk // attn_dp if chunk and chunk > 0 else chunk   # DP attention divides the chunk
    mrr = p.max_running_requests
    if mrr is None:
        mrr = DSV4_DEFAULT_MAX_RUNNING_REQUESTS
        notes.append("max_running_requests unset: SGLang sets 256 for DeepseekV4ForCausalLM "
                     "(apply_deepseek_v4_defaults)")
    # the DeepSeek-V4 model override sets --swa-full-tokens-ratio 0.1 when it is not given, before the kv-cache
    # hook marks it explicitly set: SGLang 0.5.23 sizes DeepSeek-V4's SWA pool by the ratio, never by the request
    # cap (read off SGLang's resolution: _swa_full_tokens_ratio_explicitly_set is True on a default launch)
    ratio = p.swa_full_tokens_ratio if "swa_full_tokens_ratio" in p.model_fields_set else DSV4_SWA_FULL_TOKENS_RATIO
    sizes = dsv4_pool_sizes(layers, available_bytes=available, page_size=page, max_running_requests=mrr,
                            chunked_prefill_size=chunk, overlap=not p.disable_overlap_schedule, attn_dp=attn_dp,
                            disable_radix_cache=p.disable_radix_cache, swa_full_tokens_ratio=ratio)
    if p.available_bytes is None and mem.pre_model_load_source == "estimate":
        notes.append(PRE_LOAD_ESTIMATE_NOTE)
    if p.available_bytes is None and (note := weights_estimate_note(mem)):
        notes.append(note)
    path = PATH_HICACHE if p.enable_hierarchical_cache else PATH
    notes.append(f"DeepSeek-V4: sized as {path}; not counted: the request-to-token tables"
                 + (" and the draft/MTP layer's own pool (SGLang reserves it by inflating the per-token bytes by "
                    "(layers + 1) / layers, as counted here)" if draft else ""))
    over = sum(sizes.pool_bytes.values()) - available
    if over > 0:   # the reserved pages and page padding SGLang's coefficient leaves out (calculate_pool_sizes)
        notes.append(f"the pools allocate {over:,} B beyond available_bytes: SGLang 0.5.23's DSV4PoolConfigurator "
                     f"budgets tokens without each pool's reserved page and page padding")
    host = dsv4_host(p, layers, sizes, page)
    return Dsv4Plan(profile=p, config=cfg, gpu=gpu, layers=layers, kv_cache_dtype=kv, attn_dp=attn_dp,
                    chunked_prefill_size=chunk, requested_max_running_requests=max(1, mrr // attn_dp), sizes=sizes,
                    memory=mem, available_bytes=available, available_source=available_source, notes=tuple(notes),
                    host=host)


def dsv4_memory(p: Profile, cfg: HfConfig, gpu: Gpu, attn_dp: int, speculative: bool) -> MemoryLedger:
    """The device-to-rest path (``memory.memory_ledger_for``: SGLang's default fraction, the pre-load memory,
    ``_profile_available_bytes``) with DeepSeek-V4's weights: the profile's, else ``dsv4_weights``' estimate
    (target, and the MTP draft when EAGLE runs)."""
    attn_tp = max(1, p.tp_size // attn_dp)
    # SGLang keeps wo_a in fp8 where DeepGEMM's fp8 GEMM runs (SM100 / SM120), bf16 on SM90 (its default there)
    fp8_wo_a = gpu.sm >= 100
    est = dsv4_weights.dsv4_weight_bytes(cfg, p.tp_size, attn_tp, attn_dp > 1, wo_a_fp8=fp8_wo_a)
    target, source = (int(p.weights_bytes), "profile") if p.weights_bytes is not None else (None, None)
    if target is None and p.available_bytes is None:
        if not p.weights_estimate:
            raise ProfileError("weights_bytes", "give it (or available_bytes): weights_estimate is off")
        target, source = est, "estimate"
    draft = draft_source = None   # the profile's draft_weights_bytes is read by memory_ledger_for itself
    if speculative and p.available_bytes is not None:
        draft = 0
    elif speculative and p.draft_weights_bytes is None:
        draft = dsv4_weights.dsv4_draft_weight_bytes(cfg, p.tp_size, attn_tp, attn_dp > 1, wo_a_fp8=fp8_wo_a)
        draft_source = "estimate"
    return memory_ledger_for(p, cfg, None, gpu, attn_dp, p.max_running_requests, attn_tp,
                             target_weights_bytes=target, weights_source=source, draft_weights_bytes=draft,
                             weights_estimate_bytes=est, draft_source=draft_source)


def dsv4_plan_to_dict(plan: Dsv4Plan) -> dict:
    """The plan JSON: the sections every plan has (profile, model, gpu, token, request, capacity, notes, layers),
    with DeepSeek-V4's keys in them."""
    m, s, page = plan.layers, plan.sizes, DSV4_PAGE_SIZE
    b = bytes_summary(m, page)
    pools = dict(s.pool_bytes)
    d = {
        "profile": {"name": plan.profile.label, **{k: v for k, v in plan.profile.model_dump(exclude={"name"}).items()
                                                   if k in plan.profile.model_fields_set}},
        "model": {"name": plan.config.name, "source": plan.config.source, "num_hidden_layers": m.num_layers,
                  "full_attention_layers": [], "linear_attention_layers": [],
                  "model_type": plan.config.model_type, "family": plan.config.family,
                  "swa_attention_layers": list(range(m.num_layers)),
                  "compress_ratios": list(m.compress_ratios)},
        "gpu": asdict(plan.gpu),
        "token": {"page_size": page, "kv_cache_dtype": plan.kv_cache_dtype, "sliding_window_size": m.window,
                  "swa_kv_bytes_per_token": b["swa_bytes_per_token"],
                  "compressed_bytes_per_full_token": b["compressed_bytes_per_full_token"],
                  "bytes_per_full_token": s.bytes_per_full_token, "swa_mode": s.swa_mode,
                  "latent_row_bytes": m.latent.row_bytes, "indexer_row_bytes": m.indexer.row_bytes},
        "request": {"c128_state_bytes_per_request": b["c128_state_bytes_per_request"],
                    "state_kind": "dsv4_compress_state"},
        "capacity": {"available_bytes": plan.available_bytes, "available_source": plan.available_source,
                     "max_total_num_tokens": s.full_max_total_num_tokens,
                     "requested_max_running_requests": plan.requested_max_running_requests,
                     "max_running_requests": s.max_running_requests_per_worker,
                     "full_max_total_num_tokens": s.full_max_total_num_tokens,
                     "swa_max_total_num_tokens": s.swa_max_total_num_tokens,
                     "c4_max_total_num_tokens": s.c4_max_total_num_tokens,
                     "c128_max_total_num_tokens": s.c128_max_total_num_tokens,
                     "c4_state_pool_size": s.c4_state_pool_size, "c128_state_pool_size": s.c128_state_pool_size,
                     "fixed_bytes": int(s.fixed_bytes), "pool_bytes": pools, "token_pool_bytes": sum(pools.values()),
                     "chunked_prefill_size": plan.chunked_prefill_size,
                     **memory_plan_keys(plan.memory, plan.available_bytes, plan.profile.available_bytes is not None)},
        "memory": {"mem_fraction_static": plan.memory.mem_fraction_static,
                   "mem_fraction_static_source": plan.memory.mem_fraction_source},
        "notes": list(plan.notes),
        "layers": {"dsv4_latent_kv": {"pool": "swa", "layers": m.num_layers, "bytes_per_row": m.latent.row_bytes},
                   "dsv4_c4": {"pool": "c4", "layers": m.layers_of(4)},
                   "dsv4_c128": {"pool": "c128", "layers": m.layers_of(128)},
                   "dsv4_swa_only": {"pool": "swa", "layers": m.layers_of(0)}},
    }
    if plan.host is not None:   # appended: HiCache's host pools (ledgers.dsv4_host), only with HiCache on
        d["host"] = dsv4_host_to_dict(plan.host, page)
    return d
