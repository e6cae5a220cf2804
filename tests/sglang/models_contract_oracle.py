"""SGLang 0.5.23's answer for one launch of any shipped model, keyed by plan-contract keys (issue 31).

``sglang_contract(name, launch)`` gives SGLang the model's files (``models_oracle.model_dir``: its
config.json, and hf_quant_config.json where the checkpoint has one) and the launch flags, plus the
two hardware readings the suite states itself (``pre_model_load_bytes``, ``weights_bytes``: free
memory before the weights, and the weights per rank). Nothing glm-kv computes goes in. Every value
comes out of SGLang's own code, run on the CPU:

* ``ServerArgs(...).resolve_once()``: page size, kv dtype flag, DSA backends, mamba strategy,
  ``mem_fraction_static``, its start-up validators (a refusal is the answer);
* ``configure_kv_cache_dtype`` (``auto`` with the checkpoint's quant config),
  ``DefaultPoolConfigurator._cell_size``, ``calculate_mla_kv_cache_dim``,
  ``mamba2_cache_params.mamba_cache_per_req``, ``_calculate_mamba_ratio``;
* capacity FROM GPU MEMORY: both free-memory readings through SGLang's ``get_available_gpu_memory``
  (W3b, ``oracle_memory.fake_free_memory``), ``KVCacheConfigurator._profile_available_bytes``
  (``_handle_max_mamba_cache`` for the hybrids, spied for the rest before the mamba pool),
  ``config_from_budget``, ``resolve_max_num_reqs``;
* the device pools built by the configurator's own builders at small sizes on ``cpu`` (W6): bytes
  per token / slot / row, shapes, dtypes, layers, the compress tail, read off their tensors;
* with HiCache: the device pools at FULL size on ``meta`` and the host pool group assembled by the
  strategy SGLang selects for that pool (``hybrid_pool_assembler._select_strategy``:
  ``_MambaStrategy``, ``_DsaStrategy``, ``_PlainKvStrategy``) under ``auto_size_hicache`` (W4, W5, W8).

A launch SGLang refuses returns ``{"errors": {"stage", "type", "message", "where"}}``.
"""
from __future__ import annotations

import contextlib
import shutil
from types import SimpleNamespace

from cpu_workarounds import cpu_as_gpu, quiet_sglang_logs, stub_cache_controller
from models_oracle import MODELOPT, model_dir
from oracle import GiB, SGLangRefused, _where, fake_gpu, max_running_requests_per_worker

# launch fields handed to ServerArgs as they are (the profile's names are SGLang's)
PASS = ("tp_size", "dp_size", "enable_dp_attention", "kv_cache_dtype", "page_size", "mamba_ssm_dtype",
        "disable_radix_cache", "disable_overlap_schedule", "max_running_requests", "max_total_tokens",
        "max_mamba_cache_size", "chunked_prefill_size", "disable_cuda_graph", "disable_decode_cuda_graph",
        "disable_prefill_cuda_graph", "cuda_graph_backend_decode", "cuda_graph_backend_prefill",
        "enable_hierarchical_cache", "hicache_ratio", "hicache_size", "context_length", "enable_two_batch_overlap",
        # speculative decoding with the model's own MTP / NextN layers (issue 31): no draft checkpoint of its own
        "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
        # the ReplaySSM spec-verify ring (issue 31): per slot for KDA, fixed per-request scratch for Gated DeltaNet
        "enable_linear_replayssm_spec", "linear_replayssm_cache_len",
        # context parallel (issue 31): the attention CP width, prefill CP and its strategy
        "attn_cp_size", "enable_prefill_cp", "cp_strategy",
        # a DFLASH / DSPARK draft checkpoint (issue 31): its folder and the block size flags
        "speculative_draft_model_path", "speculative_dflash_block_size", "speculative_dspark_block_size",
        # hybrid sliding-window models (issue 32): the SWA pool's share of the full pool's tokens, and no SWA pool
        "swa_full_tokens_ratio", "disable_hybrid_swa_memory",
        # PD disaggregation (issue 32: a decode server's SWA request cap), as oracle_memory hands them over
        "disaggregation_mode", "disaggregation_decode_extra_slots", "disaggregation_decode_enable_radix_cache",
        # a decode server's retraction backup (host_pool builds host pools without HiCache) and what resolves it
        "disaggregation_decode_retraction_backup", "disaggregation_decode_host_receive_threshold",
        "enable_priority_scheduling", "disable_priority_preemption",
        # no profile field: read by DeepSeek-V4's configurator only (the inert proof below hands it to SGLang alone)
        "swa_prefix_tails")


def _nbytes(t) -> int:
    return 0 if t is None else t.numel() * t.element_size()


def _dtype(t) -> str:
    return str(t.dtype).replace("torch.", "")


def register_mxfp4_as_on_cuda() -> None:
    """W13: SGLang 0.5.23 registers the ``mxfp4`` quantization method (gpt-oss's checkpoint format) at import
    only on a CUDA, CPU-engine, gfx95 or XPU platform (``layers/quantization/__init__.py``); this CPU box is
    none of them, so ``ModelConfig`` would refuse the checkpoint ("Unknown quantization method: mxfp4") where a
    CUDA server reads it. Register SGLang's own ``Mxfp4Config`` under that name, as the CUDA import does."""
    import sglang.srt.layers.quantization as q

    for table in (q.BASE_QUANTIZATION_METHODS, q.QUANTIZATION_METHODS):
        table.setdefault("mxfp4", q.Mxfp4Config)


def sglang_contract(name: str, launch: dict) -> dict:
    """SGLang's contract-keyed answer for ``launch`` (flags + gpu + pre_model_load_bytes + weights_bytes)."""
    quiet_sglang_logs()
    register_mxfp4_as_on_cuda()
    gpu = fake_gpu(launch)
    d = model_dir(name)
    try:
        with cpu_as_gpu(gpu):
            return _contract(d, launch, gpu)
    except SGLangRefused as e:
        return {"errors": {"stage": e.stage, "type": type(e.exc).__name__, "message": str(e.exc),
                           "where": _where(e.exc)}}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def model_class_window(mc) -> int:
    """SGLang's own ``resolve_sliding_window_size`` (load_model_utils.py) on a stand-in for the model: the model
    class SGLang registers for the architecture (``ModelRegistry.resolve_model_cls``), no weights built. Its
    ``get_attention_sliding_window_size`` is called on a stand-in holding the config SGLang loaded when the class
    has one (GptOssForCausalLM, Gemma4ForConditionalGeneration: sliding_window - 1); without one SGLang reads
    ``ModelConfig.sliding_window_size`` (MiMo-V2-Flash: 128), else ``attention_chunk_size`` (Llama-4: 8192)."""
    from sglang.srt.model_executor.model_runner_components.load_model_utils import resolve_sliding_window_size
    from sglang.srt.models.registry import ModelRegistry

    cls, arch = ModelRegistry.resolve_model_cls(mc.hf_config.architectures)
    if arch not in mc.hf_config.architectures:   # the Transformers fallback: SGLang's own class failed to import here
        raise RuntimeError(f"SGLang's model registry resolves {mc.hf_config.architectures} to {arch} in this process: "
                           "a model module failed to import when the registry was loaded (tests/sglang/conftest.py "
                           "pytest_sessionstart loads it first)")
    model = SimpleNamespace()
    if hasattr(cls, "get_attention_sliding_window_size"):
        this = SimpleNamespace(config=mc.hf_config)
        model.get_attention_sliding_window_size = lambda: cls.get_attention_sliding_window_size(this)
    return resolve_sliding_window_size(model, mc)


def _contract(path: str, launch: dict, gpu) -> dict:
    import torch

    import sglang.srt.utils.common as common
    from oracle_memory import fake_free_memory
    from sglang.srt.arg_groups.overrides import resolved_view
    from sglang.srt.configs.model_config import AttentionArch, ModelConfig, is_deepseek_dsa
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator, calculate_mla_kv_cache_dim
    from sglang.srt.mem_cache.kv_cache_dtype import configure_kv_cache_dtype
    from sglang.srt.model_executor.model_runner_components.layer_setup import ModelLayerInfo
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
        resolve_spec_aux_hidden_state_config,
    )
    from sglang.srt.model_executor.pool_configurator import create_memory_pool_configurator
    from sglang.srt.runtime_context import get_context, get_parallel, get_schedule, linear_attn_tp_size
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    kw = {k: launch[k] for k in PASS if launch.get(k) is not None}
    if launch.get("mamba_scheduler_strategy") is not None:   # 0.5.23's name for the flag
        kw["mamba_radix_cache_strategy"] = launch["mamba_scheduler_strategy"]
    try:
        sa = ServerArgs(model_path=path, device="cuda", **kw)
        sa.resolve_once()
        # the launch's own checks right after the resolution, as entrypoints/engine.py runs them (found
        # missing by --enable-two-batch-overlap without DP attention, which check_server_args refuses)
        sa.check_server_args()
    except Exception as e:  # noqa: BLE001 - any refusal is an answer
        raise SGLangRefused("server_args", e)
    v = resolved_view(sa)
    get_context().set_server_args(sa)
    par = get_parallel()
    try:
        mc = ModelConfig.from_server_args(sa)
        quant_algo = None
        if mc.quantization in MODELOPT:   # ModelOpt's kv_cache_quant_algo (hf_quant_config.json or quantization_config)
            from sglang.srt.configs.load_config import LoadConfig
            from sglang.srt.model_loader.weight_utils import get_quant_config
            quant_algo = getattr(get_quant_config(mc, LoadConfig(), {}), "kv_cache_quant_algo", None)
        kv_str, kv_dtype = configure_kv_cache_dtype(
            server_args_kv_cache_dtype=v.kv_cache_dtype,
            model=SimpleNamespace(quant_config=SimpleNamespace(kv_cache_quant_algo=quant_algo)),
            model_dtype=torch.bfloat16, is_draft_worker=False, is_dflash=False,
            speculative_draft_attention_backend=None)
    except Exception as e:  # noqa: BLE001
        raise SGLangRefused("model_config", e)
    n = mc.num_hidden_layers
    use_mla = mc.attention_arch == AttentionArch.MLA
    dsa = bool(is_deepseek_dsa(mc.hf_config))
    spec = SpeculativeAlgorithm.from_string(v.speculative_algorithm)
    try:  # the target runner's aux config, as ModelRunner.init_spec_aux_hidden_state resolves it: the EAGLE / MTP
        # draft layers SGLang folds into the target's cell size (spec_aux_hidden_state.py, the NextN layer count)
        aux = resolve_spec_aux_hidden_state_config(server_args=sa, model_config=mc, spec_algorithm=spec,
                                                   is_draft_worker=False)
    except Exception as e:  # noqa: BLE001 - any refusal is an answer
        raise SGLangRefused("spec_aux_config", e)
    swa = bool(mc.is_hybrid_swa)   # issue 32: the SWA pool beside the full pool (gpt-oss)
    # model_runner.resolve_sliding_window_size: the model class's window (GptOssForCausalLM: sliding_window - 1)
    window = None
    if swa:
        window = model_class_window(mc)
    # layer_setup.resolve_layer_indices without pipeline parallelism: every layer, split as the config splits them
    info = ModelLayerInfo(start_layer=0, end_layer=n, num_effective_layers=n,
                          swa_attention_layer_ids=mc.swa_attention_layer_ids if swa else None,
                          full_attention_layer_ids=mc.full_attention_layer_ids if swa else None)

    def configurator(device: str = "cpu"):
        return KVCacheConfigurator(
            device=device, gpu_id=0, attn_dp_size=par.attn_dp_size, pp_size=1, pp_group=None, model=None,
            model_config=mc, server_args=sa, kv_cache_dtype=kv_dtype, kv_cache_dtype_str=v.kv_cache_dtype,
            model_dtype=torch.bfloat16, page_size=v.page_size, sliding_window_size=window,
            spec_algorithm=spec, is_draft_worker=False,
            post_capture_kv_active=False, spec_aux_config=aux,
            is_hybrid_swa=swa, is_hybrid_swa_compress=bool(getattr(mc, "is_hybrid_swa_compress", False)),
            use_mla_backend=use_mla,   # model_runner.py hands ModelConfig's own flag (Gemma-4: True)
            layer_info=info, forward_stream=None, req_to_token_pool=None, token_to_kv_pool_allocator=None,
            memory_pool_config=None)

    kvc = configurator()
    hybrid = kvc.mambaish_config is not None
    try:
        pool_conf = create_memory_pool_configurator(kvc)
        cell = pool_conf._cell_size
        params = kvc.mambaish_config.mamba2_cache_params if hybrid else None
        per_req = int(params.mamba_cache_per_req) if hybrid else 0
        ratio = int(kvc._calculate_mamba_ratio()) if hybrid else 0
    except Exception as e:  # noqa: BLE001
        raise SGLangRefused("pool_sizing", e)

    out: dict = {
        "model": {"num_hidden_layers": int(n)},
        "gpu": {"sm": gpu.sm, "memory_bytes": int(round(gpu.memory_mib * (1 << 20)))},
        "parallel": {"attn_dp_size": par.attn_dp_size, "attn_tp_size": par.attn_tp_size,
                     "linear_attn_tp_size": linear_attn_tp_size(),
                     "max_running_requests_per_worker": max_running_requests_per_worker(kvc, v.max_running_requests)},
        "token": {"kv_cache_dtype": {torch.bfloat16: "bfloat16", torch.float8_e4m3fn: "fp8_e4m3"}[kv_dtype],
                  "page_size": v.page_size, "cell_size_bytes": int(cell),
                  "draft_layers": int(aux.eagle_draft_num_layers or 0) if spec.is_eagle() else 0},
        "request": {"state_slot_bytes": per_req, "state_bytes_per_request": per_req * ratio},
        "memory": {"mem_fraction_static": v.mem_fraction_static},
        # no speculative algorithm: no draft tokens (SGLang leaves the count None); the draft layers SGLang folds
        # into the target's cell size (pool_configurator.py: EAGLE / STANDALONE, the aux config's NextN count)
        "speculative": {"draft_tokens": v.speculative_num_draft_tokens if v.speculative_algorithm else 0,
                        "draft_layers": int(aux.eagle_draft_num_layers or 0) if spec.is_eagle() else 0},
    }
    if dsa:
        out["token"].update(dsa_prefill_backend=v.dsa_prefill_backend, dsa_decode_backend=v.dsa_decode_backend)
    if use_mla:
        out["token"]["kv_cache_dim"] = int(calculate_mla_kv_cache_dim(model_config=mc, kv_cache_dtype=kv_dtype))
    # ReplaySSM's ring (_handle_max_mamba_cache): on every state slot for a KDA config, fixed request scratch for
    # a Gated DeltaNet one (it lands in spec_scratch_bytes below), none otherwise; its bytes from SGLang's own
    # replayssm_ring_bytes_per_req
    ring_per_slot = 0
    if hybrid and v.enable_linear_replayssm_spec and kvc.hybrid_kda_config is not None:
        ring_per_slot = int(params.replayssm_ring_bytes_per_req(record_len=v.linear_replayssm_cache_len))
    if swa:   # HybridSWAPoolConfigurator's own figures (its float _cell_size's integer part is cell_size_bytes)
        out["model"]["swa_attention_layers"] = sorted(int(i) for i in mc.swa_attention_layer_ids)
        out["token"].update(swa_kv_bytes_per_token=int(pool_conf._swa_cell_bytes()),
                            num_swa_layers=int(pool_conf._swa_layers_num),
                            swa_full_tokens_ratio=float(pool_conf._swa_full_tokens_ratio),
                            sliding_window_size=int(window))
    if hybrid:
        out["request"].update(
            slots_per_request=ratio, linear_attn_tp_size=linear_attn_tp_size(),
            # radix cache off: no strategy runs (the plan's "none")
            mamba_strategy=v.mamba_radix_cache_strategy if not v.disable_radix_cache else "none",
            replayssm_ring_bytes_per_slot=ring_per_slot)

    # ---- capacity from GPU memory: SGLang's two free-memory readings and _profile_available_bytes
    seen: dict = {}
    original = KVCacheConfigurator._handle_max_mamba_cache

    def spy(self, rest):   # the rest before the mamba pool takes its share
        seen["rest_gib"] = rest
        after = original(self, rest)
        seen["after_gib"] = after
        return after

    # the draft's weights (MTP / NextN: the model's own predict layers) are loaded before the pools are sized:
    # free memory then is less both (oracle.py does the same for GLM-5.3-Flash's MTP)
    pre_b, w_b = launch["pre_model_load_bytes"], launch["weights_bytes"] + launch.get("draft_weights_bytes", 0)
    state = {"free": pre_b, "total": int(gpu.memory_mib * (1 << 20))}
    world = v.tp_size * v.pp_size
    try:
        KVCacheConfigurator._handle_max_mamba_cache = spy
        with fake_free_memory(state), par.override(world_group=SimpleNamespace(cpu_group=None)):
            pre = common.get_available_gpu_memory("cuda", 0, distributed=world > 1, cpu_group=None)
            state["free"] = pre_b - w_b
            rest_bytes = kvc._profile_available_bytes(pre_model_load_memory=pre)
        config = kvc.config_from_budget(rest_bytes)
        max_reqs = kvc.resolve_max_num_reqs(config.max_total_num_tokens)
    except Exception as e:  # noqa: BLE001
        raise SGLangRefused("pool_sizing", e)
    finally:
        KVCacheConfigurator._handle_max_mamba_cache = original
    before = int(seen["rest_gib"] * GiB) if hybrid else int(rest_bytes)
    cap = {"mem_fraction_static": v.mem_fraction_static, "available_bytes": before, "rest_bytes": before,
           "token_pool_budget_bytes": int(rest_bytes), "max_total_num_tokens": int(config.max_total_num_tokens),
           "max_running_requests": int(max_reqs), "context_length": int(mc.context_len)}
    if swa:
        cap.update(full_max_total_num_tokens=int(config.full_max_total_num_tokens),
                   swa_max_total_num_tokens=int(config.swa_max_total_num_tokens))
    if hybrid:
        K = get_schedule().max_mamba_cache_size
        slot = per_req + ring_per_slot
        cap.update(max_mamba_cache_size=K, mamba_pool_bytes=(K + 1) * slot,
                   spec_scratch_bytes=int(round((seen["rest_gib"] - seen["after_gib"]) * GiB - (K + 1) * slot)))
    out["capacity"] = cap

    # the host group first: the small pools below override max_mamba_cache_size (W6); a PD decode server resolves
    # its retraction backup against the built pools first, and host_pool builds the host pools without HiCache
    if launch.get("enable_hierarchical_cache") or v.disaggregation_mode == "decode":
        out["host"] = _host(configurator, sa, v, hybrid, dsa, int(config.max_total_num_tokens), int(max_reqs),
                            SimpleNamespace(spec=spec, sa=sa, mc=mc, kv_quant_algo=quant_algo,
                                            host_memory_bytes=launch.get("host_memory_bytes"),
                                            ranks_per_host=launch.get("ranks_per_host")),
                            swa_tokens=int(config.swa_max_total_num_tokens) if swa else None)
    try:   # MambaPool's own checks at allocation (the KDA ring's length) refuse here
        pools = _measure(configurator, v, mc, hybrid, dsa, int(max_reqs), swa)
    except ValueError as e:
        raise SGLangRefused("pool_build", e)
    for section, values in pools.items():
        out.setdefault(section, {}).update(values)
    checks = out["checks"]   # SGLang's tensors against its own sizing functions
    if "kv_cache_dim" in checks:
        checks["kv_cache_dim"][1] = out["token"]["kv_cache_dim"]
    if "swa_bytes_per_token_vs_sizing" in checks:
        checks["swa_bytes_per_token_vs_sizing"][1] = out["token"]["swa_kv_bytes_per_token"]
    if "slot_bytes_vs_mamba_cache_per_req" in checks:
        checks["slot_bytes_vs_mamba_cache_per_req"][1] = per_req
    return out


def _kv_tensors(full):
    """(per-layer tensors, row elements, storage dtype) of an MLA or MHA device pool."""
    if getattr(full, "kv_buffer", None):
        bufs = list(full.kv_buffer)
        return bufs, int(bufs[0].shape[-1]), bufs[0]
    ks, vs = list(full.k_buffer), list(full.v_buffer)
    return ks + vs, int(ks[0][0].numel() + vs[0][0].numel()), ks[0]


def _measure(configurator, v, mc, hybrid: bool, dsa: bool, n_reqs: int, swa: bool = False) -> dict:
    """Device pools at two small sizes (W6): per-token / per-slot bytes and shapes from their tensors."""
    from sglang.srt.mem_cache.kv_cache_configurator import _PoolSizes
    from sglang.srt.runtime_context import get_context

    page = v.page_size
    saved = mc.context_len
    mc.context_len = 64
    rows = []
    # a decode server's HybridMambaDecodeReqToTokenPool raises its MambaPool to (requests + pre-allocated rows) x
    # slots per request, over the small sizes: measured above that floor there (slot counts on meta cost nothing)
    base = 1 << 16 if hybrid and v.disaggregation_mode == "decode" else 0
    try:
        for slots, pages in ((base + 1, 2), (base + 2, 4)):
            # on meta (W12): every figure below is a shape, a dtype or numel x element_size, which meta
            # tensors carry unallocated; on the CPU one Nemotron-H-56B TP 1 state slot is 0.9 GB of zeros
            k = configurator("meta")
            if hybrid:
                get_context().override("glm-kv contract oracle: small pools (W6)", max_mamba_cache_size=slots)
            with meta_device_module():
                req = k._build_req_to_token_pool(max_num_reqs=2)
            tokens = pages * max(page, 64)
            sizes = _PoolSizes(max_total_num_tokens=tokens, max_running_requests=2,
                               full_max_total_num_tokens=tokens if swa else None,
                               swa_max_total_num_tokens=tokens if swa else None,
                               c4_max_total_num_tokens=0, c128_max_total_num_tokens=0,
                               c4_state_pool_size=0, c128_state_pool_size=0, c4_state_dtype=None, c128_state_dtype=None)
            try:
                with meta_device_module():
                    kv = k._build_token_to_kv_pool(sizes=sizes, is_dsa_model=dsa, is_dsv4_model=False,
                                                   req_to_token_pool=req)
            except Exception as e:  # noqa: BLE001
                raise SGLangRefused("pool_build", e)
            full = getattr(kv, "full_kv_pool", kv)
            bufs, row_elems, first = _kv_tensors(full)
            idx = getattr(full, "index_key_cache", None)
            st = req.mamba_pool.mamba_cache if hybrid else None
            sw = sum(_nbytes(t) for t in _kv_tensors(kv.swa_kv_pool)[0]) if swa else 0
            rows.append(dict(slots=slots, tokens=tokens, kv=sum(_nbytes(t) for t in bufs), sw=sw,
                             ix=sum(_nbytes(t) for t in idx.buffer) if idx is not None else 0,
                             st=(sum(_nbytes(c) for c in st.conv) + _nbytes(st.temporal)) if hybrid else 0,
                             full=full, req=req, kv_pool=kv, row_elems=row_elems, first=first, idx=idx, stc=st))
    finally:
        mc.context_len = saved
    a, b = rows
    dt = b["tokens"] - a["tokens"]
    full, first, idx, st = b["full"], b["first"], b["idx"], b["stc"]
    layer_ids = b["kv_pool"].full_attention_layer_id_mapping if hybrid else None
    out = {
        "model": {
            "full_attention_layers": (sorted(int(i) for i in (layer_ids if isinstance(layer_ids, (list, tuple))
                                                               else layer_ids.keys())) if hybrid
                                      else sorted(int(i) for i in mc.full_attention_layer_ids) if swa
                                      else list(range(int(mc.num_hidden_layers)))),
            "linear_attention_layers": sorted(int(i) for i in mc_state_layers(configurator)) if hybrid else [],
        },
        "token": {
            "kv_storage_dtype": _dtype(first), "kv_item_bytes": int(first.element_size()),
            "kv_row_bytes": b["row_elems"] * int(first.element_size()),
            "num_full_layers": len(full.kv_buffer) if getattr(full, "kv_buffer", None) else len(full.k_buffer),
            "kv_bytes_per_token": (b["kv"] - a["kv"]) // dt,
            "indexer_bytes_per_token": (b["ix"] - a["ix"]) * page // dt // page,
            "indexer_page_bytes": int(idx.buffer[0].shape[1]) * idx.buffer[0].element_size() if idx is not None else 0,
            "indexer_tokens_per_page": int(full.page_size) if idx is not None else 0,
        },
        "checks": {"kv_rows": [int(first.shape[0]), b["tokens"] + page]},
    }
    if swa:   # the SWA pool's tensors against HybridSWAPoolConfigurator's SWA bytes per token
        out["checks"]["swa_bytes_per_token_vs_sizing"] = [(b["sw"] - a["sw"]) // dt, None]
    if not getattr(full, "kv_buffer", None):   # GQA: the row is K heads + V heads
        out["token"]["kv_cache_dim"] = b["row_elems"]
    else:
        out["checks"]["kv_cache_dim"] = [b["row_elems"], None]
    tail_k = getattr(full, "_compress_tail_k", None) or []
    live = [t for t in tail_k if t.shape[0] > 0]
    if live:
        small_rows = int(live[0].shape[0])
        per_row = (sum(_nbytes(t) for t in tail_k) + sum(_nbytes(t) for t in full._compress_tail_score)) // small_rows
        trows = n_reqs + (small_rows - 2)
        out["tail"] = {"rows": trows, "width": int(live[0].shape[1]), "head_dim": int(live[0].shape[2]),
                       "dtype": _dtype(live[0]), "num_layers": len(live), "bytes_per_row": int(per_row),
                       "bytes": trows * int(per_row)}
    else:   # SGLang allocates no compress tail for this pool: it holds nothing
        out["tail"] = {"rows": 0, "num_layers": 0, "bytes_per_row": 0, "bytes": 0}
    if hybrid:
        conv_layer = sum(c[0, 0].numel() * c.element_size() for c in st.conv)
        temporal_layer = st.temporal[0, 0].numel() * st.temporal.element_size()
        slot_bytes = (b["st"] - a["st"]) // (b["slots"] - a["slots"])
        out["request"] = {
            "conv_state_shape": list(st.conv[0].shape[2:]), "temporal_state_shape": list(st.temporal.shape[2:]),
            "conv_dtype": _dtype(st.conv[0]), "temporal_dtype": _dtype(st.temporal),
            "num_linear_layers": int(st.temporal.shape[0]), "conv_state_bytes": int(conv_layer),
            "temporal_state_bytes": int(temporal_layer), "state_bytes_per_layer": int(conv_layer + temporal_layer)}
        out["checks"]["slot_bytes_vs_mamba_cache_per_req"] = [int(slot_bytes), None]
    return out


def mc_state_layers(configurator):
    return configurator().mambaish_config.mamba2_cache_params.layers


@contextlib.contextmanager
def meta_device_module():
    """W12: ``MHATokenToKVPool`` asks ``torch.get_device_module(self.device)`` for its streams; ``meta``
    has none, so it gets torch.cpu's (the buffers stay on meta; no stream is used here). Under speculative
    decoding (``enable_kv_cache_copy``) the pool also tiles its KV-copy kernel from a stride it reads with
    ``.item()`` (``_init_kv_copy_and_warmup``), which a meta tensor cannot answer: that tiling is a kernel's
    launch config, no pool byte, so on meta it is left unset (``_kv_copy_config = None``, as SGLang does for
    a pool without the copy)."""
    import torch

    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool

    real, real_copy = torch.get_device_module, MHATokenToKVPool._init_kv_copy_and_warmup

    def copy_config(self):
        if str(self.device) == "meta":
            self._kv_copy_config = None
            return
        real_copy(self)

    torch.get_device_module = lambda device=None: torch.cpu if str(device) == "meta" else real(device)
    MHATokenToKVPool._init_kv_copy_and_warmup = copy_config
    try:
        yield
    finally:
        torch.get_device_module = real
        MHATokenToKVPool._init_kv_copy_and_warmup = real_copy


def _host(configurator, sa, v, hybrid: bool, dsa: bool, tokens: int, max_reqs: int, r,
          swa_tokens: int | None = None) -> dict:
    """The host pool group SGLang's strategy assembles over the full-size device pools (on meta), with the
    MTP draft worker's own device pools SGLang packs into it (``oracle.mtp_draft_device_pools``: the draft
    worker's configurator; none without EAGLE / NEXTN). A hybrid-SWA model (``swa_tokens``: its SWA pool's
    tokens) gets ``SWAKVPool`` at both pools' sizes and ``_SwaStrategy``'s KV + SWA host pools (issue 32)."""
    from oracle import mtp_draft_device_pools
    from oracle_memory import dflash_sidecar_pool, meta_host_memory
    from sglang.srt.mem_cache.hicache_auto_size import auto_size_hicache
    from sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler import _select_strategy
    from sglang.srt.mem_cache.kv_cache_configurator import _PoolSizes
    from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
    from sglang.srt.runtime_context import get_memory

    try:
        # the host's RAM and ranks where the launch states them (none: SGLang's auto-size never binds, W8)
        with meta_host_memory(getattr(r, "host_memory_bytes", None), getattr(r, "ranks_per_host", None)), \
                meta_device_module():
            kvc = configurator("meta")
            req = kvc._build_req_to_token_pool(max_num_reqs=max_reqs)
            swa = swa_tokens is not None
            sizes = _PoolSizes(max_total_num_tokens=tokens, max_running_requests=max_reqs,
                               full_max_total_num_tokens=tokens if swa else None, swa_max_total_num_tokens=swa_tokens,
                               c4_max_total_num_tokens=0, c128_max_total_num_tokens=0, c4_state_pool_size=0,
                               c128_state_pool_size=0, c4_state_dtype=None, c128_state_dtype=None)
            kv = kvc._build_token_to_kv_pool(sizes=sizes, is_dsa_model=dsa, is_dsv4_model=False,
                                             req_to_token_pool=req)
            drafts = mtp_draft_device_pools(r, device="meta", max_total_num_tokens=tokens,
                                            max_running_requests=max_reqs, req_to_token_pool=req, target_kv=kv,
                                            kv_quant_algo=r.kv_quant_algo)
            params = SimpleNamespace(
                page_size=v.page_size, req_to_token_pool=req,
                # the SWA stack's device allocation hook (build_hybrid_swa_stack): never called while assembling
                token_to_kv_pool_allocator=SimpleNamespace(get_kvcache=lambda: kv, swa_attn_allocator=None),
                mtp_draft_device_pools=drafts,
                mtp_draft_mamba_pools=(), tp_cache_group=None, attn_cp_cache_group=None,
                attn_tp_cache_group=None, pp_cache_group=None)
            backup = None
            if v.disaggregation_mode == "decode":
                # kv_cache_builder.build_kv_cache -> resolve_decode_retraction_backup, SGLang's own function, with the
                # tp worker's views of the pools built above (issue 30 / 32 follow-up: host-pool retraction)
                from sglang.srt.mem_cache.kv_cache_builder import resolve_decode_retraction_backup

                backup = resolve_decode_retraction_backup(tp_worker=SimpleNamespace(
                    get_memory_pool=lambda: (req, params.token_to_kv_pool_allocator), is_hybrid_swa=swa,
                    get_tokens_per_layer_info=lambda: (tokens if swa else None, swa_tokens),
                    model_runner=SimpleNamespace(model_config=r.mc, mtp_draft_device_pools=drafts,
                                                 spec_algorithm=r.spec)))
                if backup == "host_pool":   # registry.create_unified_radix_cache's own refusals (Mamba, pure SWA)
                    tree_cache_refusals(r.mc, params, sa, swa, tokens)
                if backup != "host_pool" and not get_memory().enable_hierarchical_cache:
                    return {"retraction_backup": backup}
            components = ({ComponentType.FULL, ComponentType.MAMBA} if hybrid else
                          {ComponentType.FULL, ComponentType.SWA} if swa else {ComponentType.FULL})
            strategy = _select_strategy(kv, components)
            cache = SimpleNamespace(evict_host=lambda *a, **k: None, _enable_metrics_flag=False)
            # a DFLASH / DSPARK draft's own device pool, which HiCache backs up as a sidecar
            # (oracle_memory.dflash_sidecar_pool), in the KV dtype its draft worker resolves
            # (draft_kv_budget.resolve_dflash_draft_cell_size: the server's flag over the draft's own dtype)
            sidecar = None
            if r.spec.is_dflash_family():
                from sglang.srt.mem_cache.kv_cache_dtype import configure_kv_cache_dtype
                from sglang.srt.runtime_context import get_spec

                _, draft_dtype = configure_kv_cache_dtype(
                    server_args_kv_cache_dtype=v.kv_cache_dtype,
                    speculative_draft_kv_cache_dtype=get_spec().speculative_draft_kv_cache_dtype, model=None,
                    model_dtype=kvc.spec_aux_config.draft_model_config.dtype, is_draft_worker=True, is_dflash=True,
                    speculative_draft_attention_backend=get_spec().speculative_draft_attention_backend)
                sidecar = dflash_sidecar_pool(kvc, v, tokens, SimpleNamespace(kv_dtype=draft_dtype))
            plan = None if sidecar is None else SimpleNamespace(mode="sidecar", device_pools=(sidecar,))
            with auto_size_hicache(params, plan, enabled=True), stub_cache_controller():
                result = strategy.build(cache=cache, kvcache=kv, params=params, server_args=sa,
                                        load_cache_event=None)
            if backup == "host_pool":   # kv_cache_builder: the tree cache must hold an MHA or hybrid-SWA host stack
                from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

                UnifiedRadixCache.validate_retraction_host_capacity(SimpleNamespace(
                    cache_controller=object(), host_pool_group=result.host_pool_group,
                    supports_mamba=lambda: hybrid, supports_swa=lambda: swa, sidecar_pool_specs=[],
                    token_to_kv_pool_allocator=params.token_to_kv_pool_allocator,
                    supports_retraction_backup=lambda: UnifiedRadixCache.supports_retraction_backup(SimpleNamespace(
                        cache_controller=object(), host_pool_group=result.host_pool_group,
                        supports_mamba=lambda: hybrid, supports_swa=lambda: swa,
                        token_to_kv_pool_allocator=params.token_to_kv_pool_allocator))))
            draft_host = None
            if sidecar is not None:   # maybe_register_hicache_draft, after the target's group (no auto-size scope)
                from sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler import build_full_draft_pools

                controller = SimpleNamespace(mem_pool_host=result.host_pool_group, page_size=v.page_size,
                                             transfer_layer_id_max=int(r.mc.num_hidden_layers))
                _specs, entries = build_full_draft_pools(
                    draft_kv_pool=sidecar, tree_cache=SimpleNamespace(cache_controller=controller))
                draft_host = entries[0].host_pool
    except Exception as e:  # noqa: BLE001
        raise SGLangRefused("host_pools", e)
    group = result.host_pool_group
    names = [e.name.value for e in group.entries]
    by = {e.name.value: e.host_pool for e in group.entries}
    kvh, idx, mh, sw = by["kv"], by.get("indexer"), by.get("mamba"), by.get("swa")
    # the MTP draft layers SGLang packs into the KV / indexer host pools count in their sizes (kv_layers and the
    # byte totals); the per-token and per-page figures are the target's layers', as the plan contract defines
    # them (host.kv_bytes_per_token: 11 layers' rows for GLM-5.3-Flash, 12 with the draft packed in kv_layers)
    packed = int(kvh.layer_num) - int(getattr(kv, "full_kv_pool", kv).layer_num)

    def nbytes(pool, attr):
        ts = getattr(pool, attr)
        return sum(_nbytes(t) for t in (ts if isinstance(ts, (list, tuple)) else [ts]))

    kv_b = int(kvh.size * kvh.size_per_token)
    idx_b = nbytes(idx, "index_k_with_scale_buffer") if idx is not None else 0
    m_slots = int(mh.size) if mh is not None else 0
    m_b = int(mh.size * mh.size_per_token) if mh is not None else 0
    out = {"entries": names, "entry_classes": [type(by[n]).__name__ for n in names],
           "kv_row_bytes": int(kvh.size_per_token // kvh.layer_num),
           "kv_bytes_per_token": int(kvh.size_per_token // kvh.layer_num * (kvh.layer_num - packed)),
           "kv_page_size": int(kvh.page_size),
           "indexer_bytes_per_token": (int(idx.size_per_token // idx.layer_num * (idx.layer_num - packed))
                                       if idx is not None else 0),
           "mamba_slot_bytes": int(mh.size_per_token) if mh is not None else 0, "mem_layout": v.hicache_mem_layout,
           "kv_tokens": int(kvh.size), "kv_bytes": kv_b, "kv_layers": int(kvh.layer_num), "indexer_bytes": idx_b,
           "mamba_slots": m_slots, "mamba_bytes": m_b, "total_bytes": kv_b + idx_b + m_b,
           "hicache_ratio": None if get_memory().hicache_ratio is None else float(get_memory().hicache_ratio)}
    if backup is not None:
        out["retraction_backup"] = backup
    if mh is not None:
        out["mamba_page_size"] = int(mh.page_size)
    # the DFLASH-family draft's host sidecar (issue 30), registered beside the target's group (0 without one)
    draft_b = 0 if draft_host is None else int(draft_host.size * draft_host.size_per_token)
    out.update(draft_tokens=0 if draft_host is None else int(draft_host.size), draft_bytes=draft_b,
               total_bytes=out["total_bytes"] + draft_b)
    if sw is not None:   # hybrid SWA (issue 32): the SWA host pool beside the KV one, in the host total
        sw_b = int(sw.size * sw.size_per_token)
        out.update(swa_tokens=int(sw.size), swa_bytes_per_token=int(sw.size_per_token), swa_bytes=sw_b,
                   swa_layers=int(sw.layer_num), total_bytes=out["total_bytes"] + sw_b)
    # one DSAIndexerPoolHost page over every indexed layer (no indexer pool: it holds nothing)
    out["indexer_page_bytes"] = (int(idx.indexer_page_stride_size) * (int(idx.layer_num) - packed)
                                 if idx is not None else 0)
    # the contract's older names for the same host sizes (plan-contract aliases): SGLang's same figures
    out.update(kv_host_tokens=out["kv_tokens"], kv_host_bytes=kv_b, indexer_host_bytes=idx_b,
               mamba_host_slots=m_slots, mamba_host_bytes=m_b, total_host_bytes=out["total_bytes"])
    return out


class _TreeCacheBuilt(Exception):
    """Raised in place of building the UnifiedRadixCache: create_unified_radix_cache's checks have passed."""


def tree_cache_refusals(mc, params, sa, swa: bool, tokens: int) -> None:
    """SGLang's ``registry.create_unified_radix_cache`` up to the cache itself: its host-pool retraction refusals
    ("... does not support Mamba models." / "... pure-SWA models."), run by SGLang's own function on the build
    context ``kv_cache_builder`` hands it; the cache class it then builds is a stand-in that stops there."""
    from sglang.srt.mem_cache.kv_cache_builder import uses_ssm_state
    from sglang.srt.mem_cache.registry import create_unified_radix_cache

    def stop(_params):
        raise _TreeCacheBuilt

    ctx = SimpleNamespace(server_args=sa, params=SimpleNamespace(**vars(params)),
                          is_hybrid_ssm=uses_ssm_state(mc), is_hybrid_swa=swa,
                          full_tokens_per_layer=tokens if swa else None)
    try:
        create_unified_radix_cache(ctx, cache_class=stop)
    except _TreeCacheBuilt:
        pass
