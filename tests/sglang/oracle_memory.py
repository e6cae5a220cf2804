"""SGLang 0.5.23's own path from the device to the pools, and its HiCache host sizes, on CPU.

`oracle.py` answers "free memory after weights" with one number and takes the whole device as
the pre-load reading. This oracle runs the real readings instead:

* the default ``mem_fraction_static``: ``ServerArgs(...).resolve_once()`` with the model's
  ``vision_config`` and every flag the fraction reads (chunked prefill, decode graph max bs,
  max prefill tokens, DeepEP, disaggregation mode, language-only, prefill CP);
* both free-memory readings through SGLang's own ``get_available_gpu_memory`` (its float32
  all-reduce included), with ``torch.cuda.mem_get_info`` answering ``pre_model_load_bytes`` and
  then ``pre_model_load_bytes - weights_bytes`` (W3b below);
* ``KVCacheConfigurator._profile_available_bytes`` -> ``config_from_budget`` ->
  ``resolve_max_num_reqs``;
* with HiCache: the device pools at FULL size on the ``meta`` device and the host pool group
  (``build_hybrid_mamba_stack``, its ``_split_hicache_size``, and ``auto_size_hicache`` with the
  profile's host RAM and ranks per host), host buffers allocated on ``meta`` (W8).

Workarounds on top of cpu_workarounds.py (named, as there):
  W3b FREE_MEMORY   ``torch.cuda.mem_get_info`` / ``device_count`` / ``current_device`` /
                    ``get_device_properties`` and ``empty_device_cache`` answer for one fake device;
                    ``torch.distributed.all_reduce`` is the identity (one rank: MIN of one value),
                    so SGLang's own float32 conversion is what rounds.
  W8 META_HOST      ``HostTensorAllocator.allocate`` returns ``meta`` tensors: the host pools
                    compute their sizes unpatched but do not touch 100+ GB of RAM. Host RAM for
                    auto-sizing and the host-memory checks is ``available_host_memory_bytes``
                    answering the profile's value (one reading, the same at every check).
                    ``ranks_per_host`` is SGLang's own (the launch world size per node, tp x pp //
                    nnodes, from the published config) with ``torch.distributed.is_initialized``
                    answering True inside it, as on a launched server; a profile that states
                    ``ranks_per_host`` (a boot log's reading) gives that value instead.
"""
from __future__ import annotations

import contextlib
import logging
from types import SimpleNamespace

from cpu_workarounds import cpu_as_gpu, quiet_sglang_logs
from oracle import (GiB, SGLangRefused, _where, fake_gpu, mtp_draft_device_pools, resolve_for_sizing,
                    server_args_kwargs, shipped_config)

# Issue 19: `profile` and `raw` are the profile as the user wrote it plus the suite's hardware
# readings (profiles.hardware); nothing in here reads a glm-kv default or estimate.

# Profile fields (issue 11) that map 1:1 onto ServerArgs fields.
EXTRA_PASS_THROUGH = ("chunked_prefill_size", "cuda_graph_max_bs_decode", "max_prefill_tokens",
                      "disaggregation_mode", "moe_a2a_backend", "language_only", "enable_prefill_cp",
                      "cp_strategy", "attn_cp_size", "enable_linear_replayssm_spec", "linear_replayssm_cache_len",
                      "enable_two_batch_overlap", "cuda_graph_backend_prefill",
                      "disaggregation_decode_enable_radix_cache")


def kwargs_for(profile: dict, raw: dict) -> dict:
    """ServerArgs kwargs: oracle.py's, the new flags, and hicache_ratio only when the user gave it."""
    kw = server_args_kwargs(profile)
    for name in EXTRA_PASS_THROUGH:
        v = profile.get(name)
        if v is not None and v is not False and not (name == "disaggregation_mode" and v == "null") \
                and not (name == "moe_a2a_backend" and v == "none") \
                and not (name == "max_prefill_tokens" and v == 16384) \
                and not (name == "attn_cp_size" and v == 1) \
                and not (name == "linear_replayssm_cache_len" and not profile.get("enable_linear_replayssm_spec")):
            kw[name] = v
    if "hicache_ratio" not in raw:
        kw.pop("hicache_ratio", None)
    return kw


@contextlib.contextmanager
def fake_free_memory(state: dict):
    """W3b: SGLang's get_available_gpu_memory runs unpatched over a fake CUDA device."""
    import torch

    import sglang.srt.mem_cache.kv_cache_configurator as kvc_mod
    import sglang.srt.utils.common as common

    saved = [(torch.cuda, "mem_get_info"), (torch.cuda, "device_count"), (torch.cuda, "current_device"),
             (torch.cuda, "get_device_properties"), (common, "empty_device_cache"),
             (torch.distributed, "all_reduce"), (kvc_mod, "get_available_gpu_memory")]
    originals = [(o, n, getattr(o, n)) for o, n in saved]
    try:
        torch.cuda.mem_get_info = lambda *a, **k: (state["free"], state["total"])
        torch.cuda.device_count = lambda *a, **k: 1
        torch.cuda.current_device = lambda *a, **k: 0
        torch.cuda.get_device_properties = lambda *a, **k: SimpleNamespace(is_integrated=False)
        common.empty_device_cache = lambda *a, **k: None
        torch.distributed.all_reduce = lambda *a, **k: None
        real = common.get_available_gpu_memory
        # the configurator runs on device="cpu" (W6); its reading is the CUDA one
        kvc_mod.get_available_gpu_memory = lambda device, gpu_id, **k: real("cuda", gpu_id, **k)
        yield
    finally:
        for o, n, v in originals:
            setattr(o, n, v)


@contextlib.contextmanager
def meta_host_memory(host_memory_bytes: int | None, ranks: int | None):
    """W8: host buffers on the meta device; host RAM and ranks per host from the profile."""
    import torch

    import sglang.srt.mem_cache.host_memory as host_memory
    import sglang.srt.mem_cache.hicache_auto_size as auto
    import sglang.srt.mem_cache.pool_host.base as base
    import sglang.srt.mem_cache.pool_host.common as common

    saved = [(common.HostTensorAllocator, "allocate"), (host_memory, "available_host_memory_bytes"),
             (base, "available_host_memory_bytes"), (base, "ranks_per_host"), (auto, "ranks_per_host"),
             (torch, "empty")]
    originals = [(o, n, getattr(o, n)) for o, n in saved]
    real_empty = torch.empty

    def empty(*a, **k):  # staging buffers of the host pools: on meta when asked for the CPU
        if k.get("device") in ("cpu", None) and k.pop("pin_memory", False) is not None:
            k["device"] = "meta"
        return real_empty(*a, **k)

    try:
        common.HostTensorAllocator.allocate = lambda self, dims, dtype, device: real_empty(
            dims, dtype=dtype, device="meta")
        ram = (host_memory_bytes if host_memory_bytes is not None else 1 << 50)
        host_memory.available_host_memory_bytes = lambda *a, **k: ram
        base.available_host_memory_bytes = lambda *a, **k: ram
        real_ranks = originals[3][2]

        def sglang_ranks() -> int:   # SGLang's own count on a launched server (distributed initialised)
            if ranks is not None:
                return ranks
            real_init = torch.distributed.is_initialized
            torch.distributed.is_initialized = lambda: True
            try:
                return real_ranks()
            finally:
                torch.distributed.is_initialized = real_init

        base.ranks_per_host = sglang_ranks
        auto.ranks_per_host = sglang_ranks
        yield
    finally:
        for o, n, v in originals:
            setattr(o, n, v)


@contextlib.contextmanager
def capture_logs():
    """Every message SGLang's loggers emit (INFO and up), in order, as SGLang formats them."""
    records: list[str] = []

    class Grab(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    root = logging.getLogger("sglang")
    handler, level = Grab(level=logging.INFO), root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield records
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def sglang_memory(profile: dict, raw: dict, *, pre_model_load_bytes: int | None,
                  weights_bytes: int | None, config: dict | None = None, pool_log: bool = False) -> dict:
    """SGLang's fraction, rest, pool sizes and host sizes for a profile (errors like oracle.py)."""
    quiet_sglang_logs()
    gpu = fake_gpu(profile)
    state = {"free": pre_model_load_bytes or 0, "total": int(gpu.memory_mib * (1 << 20))}
    with cpu_as_gpu(gpu), fake_free_memory(state), capture_logs() as records:
        try:
            out = _memory(profile, raw, gpu, state, pre_model_load_bytes, weights_bytes,
                          config or shipped_config(), pool_log)
            out["log"] = list(records)
            return out
        except SGLangRefused as e:
            return {"errors": {"stage": e.stage, "type": type(e.exc).__name__,
                               "message": str(e.exc), "where": _where(e.exc)}}


def _memory(profile, raw, gpu, state, pre_bytes, weights, config, pool_log=False) -> dict:
    import sglang.srt.utils.common as common
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
    from sglang.srt.runtime_context import get_schedule, linear_attn_tp_size

    r = resolve_for_sizing(config, kwargs_for(profile, raw))
    v, par, mc, configurator = r.v, r.par, r.mc, r.configurator
    from sglang.srt.runtime_context import get_disagg

    if get_disagg().disaggregation_decode_retraction_backup == "host_pool":
        # host-pool retraction, given or resolved by a host receive threshold below 1 (handle_pd_disaggregation):
        # SGLang's tree cache refuses it for this Mamba-state model once the pools are built
        # (registry.create_unified_radix_cache, run by SGLang's own function: models_contract_oracle)
        from models_contract_oracle import tree_cache_refusals

        try:
            tree_cache_refusals(mc, SimpleNamespace(req_to_token_pool=None), None, False, 0)
        except Exception as e:  # noqa: BLE001
            raise SGLangRefused("host_pools", e)

    out: dict = {"resolved": {"mem_fraction_static": v.mem_fraction_static,
                              "chunked_prefill_size": v.chunked_prefill_size,
                              "context_len": int(mc.context_len),
                              "is_multimodal": bool(mc.is_multimodal)},
                 "parallel": {"linear_attn_tp_size": linear_attn_tp_size(),
                              "attn_tp_size": par.attn_tp_size}}
    kvc = configurator()
    try:
        slot = kvc.mambaish_config.mamba2_cache_params.mamba_cache_per_req
    except Exception as e:  # noqa: BLE001
        raise SGLangRefused("model_state_shape", e)
    out["request"] = {"state_slot_bytes": int(slot)}
    if profile.get("available_bytes") is None and weights is None:
        return out
    seen: dict = {}
    original = KVCacheConfigurator._handle_max_mamba_cache

    def spy(self, rest):
        seen["rest_gib"] = rest
        after = original(self, rest)
        seen["after_gib"] = after
        return after

    world = v.tp_size * v.pp_size
    try:
        KVCacheConfigurator._handle_max_mamba_cache = spy
        if profile.get("available_bytes") is not None:
            rest_bytes = int(kvc._handle_max_mamba_cache(profile["available_bytes"] / GiB) * GiB)
        else:
            state["free"] = pre_bytes
            pre = common.get_available_gpu_memory("cuda", 0, distributed=world > 1, cpu_group=None)
            state["free"] = pre_bytes - weights
            with par.override(world_group=SimpleNamespace(cpu_group=None)):
                rest_bytes = kvc._profile_available_bytes(pre_model_load_memory=pre)
        config_ = kvc.config_from_budget(rest_bytes)
        max_reqs = kvc.resolve_max_num_reqs(config_.max_total_num_tokens)
    except Exception as e:  # noqa: BLE001
        raise SGLangRefused("pool_sizing", e)
    finally:
        KVCacheConfigurator._handle_max_mamba_cache = original
    K = get_schedule().max_mamba_cache_size
    # --enable-linear-replayssm-spec: every slot of the pool carries SGLang's replay ring
    # (replayssm_ring_bytes_per_req, mamba_utils.py), the pool MambaPool allocates; no verify scratch
    ring = (int(kvc.mambaish_config.mamba2_cache_params.replayssm_ring_bytes_per_req(
        record_len=v.linear_replayssm_cache_len)) if getattr(v, "enable_linear_replayssm_spec", False) else 0)
    out["capacity"] = {
        "mem_fraction_static": v.mem_fraction_static,
        "available_bytes": int(seen["rest_gib"] * GiB),
        "rest_bytes": int(seen["rest_gib"] * GiB),
        "max_mamba_cache_size": K,
        "mamba_pool_bytes": (K + 1) * (slot + ring),
        "spec_scratch_bytes": int(round((seen["rest_gib"] - seen["after_gib"]) * GiB - (K + 1) * (slot + ring))),
        "token_pool_budget_bytes": rest_bytes,
        "max_total_num_tokens": config_.max_total_num_tokens,
        "max_running_requests": max_reqs,
    }
    if profile.get("enable_hierarchical_cache") or pool_log:   # full-size pools on meta (W8)
        out["host"] = _host(configurator, profile, config_.max_total_num_tokens, max_reqs, v,
                            host=bool(profile.get("enable_hierarchical_cache")), r=r)
        if not profile.get("enable_hierarchical_cache"):
            del out["host"]
    return out


def _host(configurator, profile, tokens, max_reqs, v, host: bool = True, r=None) -> dict | None:
    """The host pool group at full size (device pools on meta, W8), with SGLang's log lines."""
    from sglang.srt.mem_cache.kv_cache_configurator import _PoolSizes
    from sglang.srt.mem_cache.hicache_auto_size import auto_size_hicache
    from sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler import build_hybrid_mamba_stack
    from sglang.srt.runtime_context import get_memory

    from cpu_workarounds import stub_cache_controller

    try:
        with meta_host_memory(profile.get("host_memory_bytes"), profile.get("ranks_per_host")):
            kvc = configurator("meta")
            req = kvc._build_req_to_token_pool(max_num_reqs=max_reqs)
            sizes = _PoolSizes(
                max_total_num_tokens=tokens, max_running_requests=max_reqs,
                full_max_total_num_tokens=None, swa_max_total_num_tokens=None,
                c4_max_total_num_tokens=0, c128_max_total_num_tokens=0,
                c4_state_pool_size=0, c128_state_pool_size=0, c4_state_dtype=None, c128_state_dtype=None)
            kv = kvc._build_token_to_kv_pool(sizes=sizes, is_dsa_model=True, is_dsv4_model=False,
                                             req_to_token_pool=req)
            if not host:
                return None
            mapping = kv.full_attention_layer_id_mapping
            full_layer_mapping = ({layer - kv.start_layer: i for i, layer in enumerate(mapping)}
                                  if isinstance(mapping, (list, tuple)) else
                                  {layer - kv.start_layer: i for layer, i in mapping.items()})
            # the MTP draft worker's own device pools, built by SGLang's draft-worker path (oracle.py)
            drafts = mtp_draft_device_pools(r, device="meta", max_total_num_tokens=tokens,
                                            max_running_requests=max_reqs, req_to_token_pool=req,
                                            target_kv=kv)
            params = SimpleNamespace(
                page_size=v.page_size, req_to_token_pool=req,
                token_to_kv_pool_allocator=SimpleNamespace(get_kvcache=lambda: kv),
                mtp_draft_device_pools=drafts, mtp_draft_mamba_pools=(), tp_cache_group=None,
                attn_cp_cache_group=None, attn_tp_cache_group=None, pp_cache_group=None)
            if v.disaggregation_mode == "decode":
                # a decode server resolves its retraction backup and HiCache ratio against the built pools
                # (kv_cache_builder.build_kv_cache -> resolve_decode_retraction_backup), SGLang's own function
                # here with the tp worker's views of those pools
                from sglang.srt.mem_cache.kv_cache_builder import resolve_decode_retraction_backup

                resolve_decode_retraction_backup(tp_worker=SimpleNamespace(
                    get_memory_pool=lambda: (req, params.token_to_kv_pool_allocator), is_hybrid_swa=False,
                    model_runner=SimpleNamespace(model_config=r.mc, mtp_draft_device_pools=drafts,
                                                 spec_algorithm=r.spec)))
            fraction = get_memory().hicache_host_memory_fraction
            sidecar = dflash_sidecar_pool(kvc, v, tokens, r)
            plan = None if sidecar is None else SimpleNamespace(mode="sidecar", device_pools=(sidecar,))
            with auto_size_hicache(params, plan, enabled=True), stub_cache_controller():
                group, _c, _cfg = build_hybrid_mamba_stack(
                    params=params, decls=kv.host_pool_decls(), mamba_pool=req.mamba_pool,
                    full_layer_mapping=full_layer_mapping, start_layer=kv.start_layer,
                    load_cache_event=None, storage_backend=None, use_mla=kv.use_mla)
            draft_host = None
            if sidecar is not None:   # maybe_register_hicache_draft, after the target's group (no auto-size scope)
                from sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler import build_full_draft_pools

                controller = SimpleNamespace(mem_pool_host=group, page_size=v.page_size,
                                             transfer_layer_id_max=int(r.mc.num_hidden_layers))
                _specs, entries = build_full_draft_pools(
                    draft_kv_pool=sidecar, tree_cache=SimpleNamespace(cache_controller=controller))
                draft_host = entries[0].host_pool
    except Exception as e:  # noqa: BLE001
        raise SGLangRefused("host_pools", e)
    by = {e.name.value: e.host_pool for e in group.entries}
    kvh, idx, mh = by["kv"], by.get("indexer"), by["mamba"]

    def nbytes(ts):
        return sum(t.numel() * t.element_size() for t in (ts if isinstance(ts, (list, tuple)) else [ts]))

    idx_bytes = 0 if idx is None else sum(nbytes(getattr(idx, a)) for a in ("index_k_with_scale_buffer",)
                                          if hasattr(idx, a))
    out = {
        "kv_tokens": int(kvh.size), "kv_bytes": int(kvh.size * kvh.size_per_token),
        "kv_layers": int(kvh.layer_num),
        "indexer_bytes": int(idx_bytes) if idx is not None else 0,
        "mamba_slots": int(mh.size), "mamba_bytes": int(mh.size * mh.size_per_token),
        # the ratio SGLang resolved (handle_hicache_ratio_default), also when --hicache-size sizes the pools
        "hicache_ratio": None if get_memory().hicache_ratio is None else float(get_memory().hicache_ratio),
        "auto_sized": fraction is not None,
    }
    out["draft_tokens"] = 0 if draft_host is None else int(draft_host.size)
    out["draft_bytes"] = 0 if draft_host is None else int(draft_host.size * draft_host.size_per_token)
    out["total_bytes"] = out["kv_bytes"] + out["indexer_bytes"] + out["mamba_bytes"] + out["draft_bytes"]
    return out


def dflash_sidecar_pool(kvc, v, tokens: int, r):
    """W12: the DFLASH / DSPARK draft worker's own device KV pool, which HiCache backs up as a sidecar
    (``HiCacheDraftMode.SIDECAR``): SGLang's ``MHATokenToKVPool`` on meta with the draft's per-rank
    geometry from SGLang's own aux config and configurator (layers, KV heads over draft_attn_tp_size,
    head dims, the target's KV dtype), at the target's token count (the draft worker shares the target's
    allocator). None without DFLASH or DSPARK."""
    if (v.speculative_algorithm or "").upper() not in ("DFLASH", "DSPARK"):   # the DFLASH family
        return None
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool

    import torch

    aux = kvc.spec_aux_config
    dm = aux.draft_model_config
    real = torch.get_device_module
    # the pool asks for its device's module (streams, events); meta has none: the CPU's answers (no byte
    # depends on it)
    torch.get_device_module = lambda d=None: torch.cpu if str(d) == "meta" else real(d)
    try:
        return MHATokenToKVPool(tokens, v.page_size, r.kv_dtype, dm.get_num_kv_heads(kvc.draft_attn_tp_size),
                                dm.head_dim, aux.dflash_draft_num_layers, "meta", False, v_head_dim=dm.v_head_dim,
                                enable_alt_stream=False)
    finally:
        torch.get_device_module = real
