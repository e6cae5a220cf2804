"""Ask SGLang 0.5.23's own code what it allocates for a glm-kv deployment profile.

`sglang_plan(profile)` takes a profile as a dict of plan-contract input fields
(the same names `glm_kv.inputs.profile` accepts) and returns a nested dict keyed by
plan-contract keys, with every value produced by SGLang:

* server-argument resolution (page size, kv dtype, DSA backends, mamba strategy,
  overlap, default mem_fraction_static, speculative defaults) and its start-up
  validators: `ServerArgs(...).resolve_once()`, the real pipeline;
* the pool sizing: `KVCacheConfigurator._profile_available_bytes` /
  `_handle_max_mamba_cache`, `config_from_budget`, `resolve_max_num_reqs`,
  `_calculate_mamba_ratio`, `DefaultPoolConfigurator._cell_size`,
  `calculate_mla_kv_cache_dim`;
* the pools themselves, built on device="cpu" by the configurator's own builders
  (`HybridReqToTokenPool` + `MambaPool`, `HybridLinearKVPool` + `DSATokenToKVPool`
  with its `IndexKeyCache` and compress tail) and the HiCache host pool group
  (`build_hybrid_mamba_stack`: `MLATokenToKVPoolHost`, `DSAIndexerPoolHost`,
  `MambaPoolHost`); byte counts are measured from their tensors.

A profile SGLang refuses returns {"errors": {"stage": ..., "type": ..., "message": ...}}.

Where SGLang has a function for a rule, the oracle calls it rather than restating it: the per-worker
request count (`max_running_requests_per_worker`), the speculative aux config with the EAGLE/MTP draft
layer count (`resolve_for_sizing`), the MTP draft worker's device pools (`mtp_draft_device_pools`).

The CPU workarounds live in `cpu_workarounds.py` (W1..W11); nothing here patches SGLang.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

from cpu_workarounds import (FakeGpu, GPU_FACTS, cpu_as_gpu, quiet_sglang_logs, stub_cache_controller,
                             uncapped_request_count)

GiB = 1 << 30

# W6: small pool sizes for the tensor measurements.
SMALL_TOKENS_PAGES = (2, 4)  # token pools of 2 and 4 pages: per-token bytes from the difference
SMALL_MAMBA_SLOTS = (1, 2)  # mamba pools of 1 and 2 slots (+1 padding each): per-slot bytes
SMALL_REQS = 2  # request slots for the req pool and the compress tail
SMALL_CONTEXT = 64  # req_to_token row length

# Profile fields that map 1:1 onto ServerArgs fields.
_PASS_THROUGH = (
    "tp_size", "dp_size", "enable_dp_attention", "kv_cache_dtype",
    "dsa_prefill_backend", "dsa_decode_backend", "mamba_ssm_dtype", "linear_attn_backend",
    "disable_overlap_schedule", "disable_radix_cache", "max_running_requests",
    "max_total_tokens", "max_mamba_cache_size", "mamba_full_memory_ratio", "page_size",
    "speculative_algorithm", "speculative_num_draft_tokens", "speculative_num_steps",
    "speculative_eagle_topk", "mem_fraction_static", "enable_hierarchical_cache",
    "hicache_ratio", "hicache_size", "hicache_mem_layout", "hicache_io_backend", "context_length",
    "nnodes", "disaggregation_decode_extra_slots",
)


class SGLangRefused(Exception):
    def __init__(self, stage: str, exc: BaseException):
        super().__init__(f"{stage}: {type(exc).__name__}: {exc}")
        self.stage = stage
        self.exc = exc


def model_dir(config: dict) -> str:
    """A directory holding the model's config.json, the way SGLang reads a model."""
    d = Path(tempfile.gettempdir()) / "glm-kv-sglang-model"
    d.mkdir(exist_ok=True)
    clean = {k: v for k, v in config.items() if not k.startswith("_")}
    # written atomically: concurrent oracle processes (flag_table.py shards, a test run) share the folder
    tmp = d / f".config.{os.getpid()}.json"
    tmp.write_text(json.dumps(clean))
    os.replace(tmp, d / "config.json")
    return str(d)


# The model config a user serves (shipped with glm-kv as a data file; read as a file, as SGLang does).
CONFIG_PATH = Path(__file__).resolve().parents[2] / "glm_kv" / "inputs" / "data" / "glm-5.3-flash.json"


def shipped_config() -> dict:
    return json.loads(CONFIG_PATH.read_text())


def fake_gpu(profile: dict) -> FakeGpu:
    """The GPU facts SGLang would read on the profile's GPU (this suite's table, not glm-kv's)."""
    name = profile.get("gpu")
    stated = profile.get("memory_bytes") is not None and profile.get("sm") is not None
    if name in GPU_FACTS:
        facts = dict(GPU_FACTS[name])
    elif stated:  # a GPU this suite has no facts for, its hardware stated (memory and SM)
        facts = dict(sm=0, capability=(0, 0), memory_mib=0.0)
    elif name is None:
        raise KeyError("profile names no gpu and not both memory_bytes and sm: state the hardware "
                       "(profiles.hardware does)")
    else:
        raise KeyError(f"{name}: this suite has no facts for it; state memory_bytes and sm")
    if profile.get("memory_bytes"):
        facts["memory_mib"] = profile["memory_bytes"] / (1 << 20)
    if profile.get("sm"):
        sm = int(profile["sm"])
        facts.update(sm=sm, capability=(sm // 10, sm % 10))
    return FakeGpu(**facts)


def server_args_kwargs(profile: dict) -> dict:
    kw = {}
    for name in _PASS_THROUGH:
        if profile.get(name) is not None:
            kw[name] = profile[name]
    strategy = profile.get("mamba_radix_cache_strategy") or profile.get("mamba_scheduler_strategy")
    if strategy is not None:
        kw["mamba_radix_cache_strategy"] = strategy
    if (profile.get("attn_cp_size") or 1) > 1:
        kw["attn_cp_size"] = profile["attn_cp_size"]
    # `max_running_requests: null` means "SGLang's automatic value": pass nothing.
    return kw


def _nbytes(t) -> int:
    return 0 if t is None else t.numel() * t.element_size()


def _sum_bytes(ts) -> int:
    return sum(_nbytes(t) for t in ts)


def sglang_plan(profile: dict, measured: dict | None = None, config: dict | None = None) -> dict:
    """SGLang's answer for a profile given as the user wrote it (launch arguments, no defaults
    filled in by glm-kv) plus the hardware readings (``profiles.hardware``): the GPU, and for a
    profile sized from its weights, ``pre_model_load_bytes`` and ``measured["draft_weights_bytes"]``.
    """
    quiet_sglang_logs()
    gpu = fake_gpu(profile)
    with cpu_as_gpu(gpu):
        if profile.get("mamba_skip_decode_lock"):
            os.environ["SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK"] = "1"
        try:
            return _plan(profile, dict(measured or {}), gpu, config or shipped_config())
        except SGLangRefused as e:
            return {"errors": {"stage": e.stage, "type": type(e.exc).__name__,
                               "message": str(e.exc), "where": _where(e.exc)}}


def _where(exc: BaseException) -> str:
    """file:line inside sglang where it refused (bare asserts carry no message)."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/sglang/" in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f"sglang/{f.filename.split('/sglang/', 1)[1]}:{f.lineno}"


def resolve_for_sizing(config: dict, kwargs: dict) -> SimpleNamespace:
    """SGLang's own ServerArgs resolution for a profile, published as the scheduler does, and a
    factory for the ``KVCacheConfigurator`` the model runner would build (shared by both oracles).

    ``configurator(device="cpu", layers=None)``: ``layers`` = (start, end) for a sub-range of layers.
    """
    import torch

    from sglang.srt.arg_groups.overrides import resolved_view
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
    from sglang.srt.model_executor.model_runner_components.layer_setup import ModelLayerInfo
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
        resolve_spec_aux_hidden_state_config,
    )
    from sglang.srt.runtime_context import get_context, get_parallel
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    try:
        sa = ServerArgs(model_path=model_dir(config), device="cuda", **kwargs)
        sa.resolve_once()
        # the launch's own checks right after the resolution (entrypoints/engine.py: resolve_once, then
        # check_server_args before the config is published): tp divisible by nnodes, chunk vs page, ...
        sa.check_server_args()
    except Exception as e:  # noqa: BLE001 - any refusal is an answer
        raise SGLangRefused("server_args", e)
    v = resolved_view(sa)
    ctx = get_context()
    ctx.set_server_args(sa)
    par = get_parallel()
    mc = ModelConfig.from_server_args(sa)
    kv_dtype = {"bfloat16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn}[v.kv_cache_dtype]
    spec = SpeculativeAlgorithm.from_string(v.speculative_algorithm)
    n = mc.num_hidden_layers
    try:  # the target runner's aux config, as ModelRunner.init_spec_aux_hidden_state resolves it
        # (model_runner.py:596): EAGLE/MTP draft layers = the NextN layer count it reads
        # (spec_aux_hidden_state.py:174), DFLASH from the draft checkpoint
        aux = resolve_spec_aux_hidden_state_config(server_args=sa, model_config=mc, spec_algorithm=spec,
                                                   is_draft_worker=False)
    except Exception as e:  # noqa: BLE001 - any refusal is an answer
        raise SGLangRefused("spec_aux_config", e)

    def configurator(device: str = "cpu", layers: tuple[int, int] | None = None):
        start, end = layers or (0, n)
        return KVCacheConfigurator(
            device=device, gpu_id=0, attn_dp_size=par.attn_dp_size, pp_size=1, pp_group=None,
            model=None, model_config=mc, server_args=sa, kv_cache_dtype=kv_dtype,
            kv_cache_dtype_str=v.kv_cache_dtype, model_dtype=torch.bfloat16,
            page_size=v.page_size, sliding_window_size=None, spec_algorithm=spec,
            is_draft_worker=False, post_capture_kv_active=False, spec_aux_config=aux,
            is_hybrid_swa=False, is_hybrid_swa_compress=False, use_mla_backend=True,
            layer_info=ModelLayerInfo(start_layer=start, end_layer=end, num_effective_layers=end - start),
            forward_stream=None, req_to_token_pool=None, token_to_kv_pool_allocator=None,
            memory_pool_config=None,
        )

    return SimpleNamespace(sa=sa, v=v, ctx=ctx, par=par, mc=mc, kv_dtype=kv_dtype, spec=spec, aux=aux,
                           configurator=configurator)


def max_running_requests_per_worker(kvc, max_running_requests: int | None) -> int | None:
    """SGLang's per-DP-worker request count for ``--max-running-requests`` (None: SGLang's automatic
    value, sized later from the pool): ``KVCacheConfigurator.resolve_max_num_reqs`` (its
    ``requested_per_worker``, kv_cache_configurator.py:3128) with caps that cannot bind (W10)."""
    if max_running_requests is None:
        return None
    try:
        with uncapped_request_count(kvc, max_running_requests) as token_capacity:
            return kvc.resolve_max_num_reqs(token_capacity)
    except Exception as e:  # noqa: BLE001
        raise SGLangRefused("pool_sizing", e)


def mtp_draft_device_pools(r: SimpleNamespace, *, device: str, max_total_num_tokens: int,
                           max_running_requests: int, req_to_token_pool, target_kv, kv_quant_algo=None) -> tuple:
    """The device KV pools SGLang hands the HiCache host group as ``mtp_draft_device_pools``.

    SGLang: the draft ``TpModelWorker`` (tp_worker.py ``_init_model_config``: the draft-mode
    ``ModelConfig``), its ``ModelRunner`` (``configure_kv_cache_dtype``, ``resolve_layer_indices``,
    ``init_spec_aux_hidden_state``, a ``KVCacheConfigurator`` with ``is_draft_worker=True``, the
    target's pool config, req_to_token pool and allocator) builds ``token_to_kv_pool`` through
    ``_derive_pool_sizes`` / ``_init_pools``; ``_build_hicache_draft_plan`` (base_spec_worker.py)
    packs those pools into the host group when ``_can_pack_hicache_mtp`` says so, else none.
    All of that runs here unpatched but for W11 (no ``ModelRunner``: ``model=None``, the target's
    allocator a stand-in). Empty for a launch without a draft runner. ``kv_quant_algo``: the checkpoint's
    ModelOpt ``kv_cache_quant_algo`` (hf_quant_config.json), which the path-less draft reads from the same
    checkpoint as the target (its ``quant_config``; W11 has no model to carry it).
    """
    import torch

    from sglang.srt.configs.model_config import AttentionArch, ModelConfig
    from sglang.srt.mem_cache import kv_cache_dtype as kv_cache_dtype_mod
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
    from sglang.srt.model_executor.model_runner_components.layer_setup import resolve_layer_indices
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
        resolve_spec_aux_hidden_state_config,
    )
    from sglang.srt.model_executor.pool_configurator import MemoryPoolConfig
    from sglang.srt.runtime_context import get_model, get_parallel, get_schedule, get_spec
    from sglang.srt.speculative.base_spec_worker import _can_pack_hicache_mtp

    spec = r.spec
    # BaseSpecWorker._draft_model_runners (base_spec_worker.py:177): no draft runner without an
    # algorithm, for NGRAM and for FROZEN_KV_MTP; one runner for EAGLE/NEXTN (a multi-layer EAGLE
    # worker's one runner per step is not modelled) and for the DFLASH family
    if spec.is_none() or spec.is_ngram() or spec.is_frozen_kv_mtp():
        return ()
    draft_mc = ModelConfig.from_server_args(
        r.sa, model_path=get_spec().speculative_draft_model_path,
        model_revision=get_spec().speculative_draft_model_revision, is_draft_model=True,
        context_length=r.mc.context_len)
    draft_runner = SimpleNamespace(model_config=draft_mc)
    if not _can_pack_hicache_mtp(spec, (draft_runner,)):
        return ()
    # model_runner.resolve_draft_attention_backend gives this for EAGLE's draft runner (built with no
    # backend of its own); model_runner.py itself does not import here (uvicorn), and the value is
    # read only for a DFLASH-family draft (kv_cache_dtype.py:31, :97).
    draft_backend = get_spec().speculative_draft_attention_backend
    model = None if kv_quant_algo is None else SimpleNamespace(
        quant_config=SimpleNamespace(kv_cache_quant_algo=kv_quant_algo))
    dtype_str, kv_dtype = kv_cache_dtype_mod.configure_kv_cache_dtype(
        server_args_kv_cache_dtype=get_model().kv_cache_dtype, model=model, model_dtype=torch.bfloat16,
        is_draft_worker=True, is_dflash=spec.is_dflash_family(),
        speculative_draft_attention_backend=draft_backend,
        speculative_draft_kv_cache_dtype=get_spec().speculative_draft_kv_cache_dtype)
    aux = resolve_spec_aux_hidden_state_config(server_args=r.sa, model_config=draft_mc, spec_algorithm=spec,
                                               is_draft_worker=True)
    allocator = SimpleNamespace(get_kvcache=lambda: target_kv)  # W11
    config = MemoryPoolConfig(max_total_num_tokens=max_total_num_tokens,
                              max_running_requests=max_running_requests)
    kvc = KVCacheConfigurator(
        device=device, gpu_id=0, attn_dp_size=get_parallel().attn_dp_size, pp_size=1, pp_group=None,
        model=None, model_config=draft_mc, server_args=r.sa, kv_cache_dtype=kv_dtype,
        kv_cache_dtype_str=dtype_str if dtype_str is not None else get_model().kv_cache_dtype,
        model_dtype=torch.bfloat16, page_size=get_schedule().page_size, sliding_window_size=None,
        spec_algorithm=spec, is_draft_worker=True, post_capture_kv_active=False, spec_aux_config=aux,
        is_hybrid_swa=draft_mc.is_hybrid_swa, is_hybrid_swa_compress=draft_mc.is_hybrid_swa_compress,
        use_mla_backend=draft_mc.attention_arch == AttentionArch.MLA,
        layer_info=resolve_layer_indices(model=None, model_config=draft_mc, is_draft_worker=True),
        forward_stream=None, req_to_token_pool=req_to_token_pool, token_to_kv_pool_allocator=allocator,
        memory_pool_config=config)
    pools = kvc._init_pools(sizes=kvc._derive_pool_sizes(config=config), req_to_token_pool=req_to_token_pool,
                            token_to_kv_pool_allocator=allocator)
    return (pools.token_to_kv_pool,)


def _plan(profile: dict, measured: dict, gpu: FakeGpu, config: dict) -> dict:
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator, calculate_mla_kv_cache_dim
    from sglang.srt.model_executor.pool_configurator import create_memory_pool_configurator
    from sglang.srt.runtime_context import linear_attn_tp_size

    # ---- 1. server arguments: SGLang's resolution pipeline and its validators
    r = resolve_for_sizing(config, server_args_kwargs(profile))
    v, ctx, par, mc, kv_dtype = r.v, r.ctx, r.par, r.mc, r.kv_dtype
    configurator = r.configurator

    kvc = configurator()
    try:  # KimiLinearStateShape.create divides the KDA projection by the linear-attention TP
        cache_params = kvc.mambaish_config.mamba2_cache_params
    except Exception as e:  # noqa: BLE001
        raise SGLangRefused("model_state_shape", e)
    try:
        slots_per_request = kvc._calculate_mamba_ratio()
    except Exception as e:  # noqa: BLE001
        raise SGLangRefused("pool_sizing", e)
    cell_size = create_memory_pool_configurator(kvc)._cell_size
    kv_cache_dim = calculate_mla_kv_cache_dim(model_config=mc, kv_cache_dtype=kv_dtype)

    out: dict = {
        "gpu": {"sm": gpu.sm, "memory_bytes": int(round(gpu.memory_mib * (1 << 20)))},
        "parallel": {
            "attn_dp_size": par.attn_dp_size,
            "attn_tp_size": par.attn_tp_size,
            "linear_attn_tp_size": linear_attn_tp_size(),
            "max_running_requests_per_worker": max_running_requests_per_worker(kvc, v.max_running_requests),
        },
        "token": {
            "kv_cache_dtype": v.kv_cache_dtype,
            "dsa_prefill_backend": v.dsa_prefill_backend,
            "dsa_decode_backend": v.dsa_decode_backend,
            "page_size": v.page_size,
            "kv_cache_dim": kv_cache_dim,
            "cell_size_bytes": cell_size,
        },
        "speculative": {
            # no speculative algorithm: no draft tokens (SGLang leaves the count None)
            "draft_tokens": v.speculative_num_draft_tokens if v.speculative_algorithm else 0,
        },
        "request": {
            "linear_attn_tp_size": linear_attn_tp_size(),
            # radix cache off: _mamba_radix_cache_resolution returns {} and the flag stays "auto",
            # unused - no strategy runs (the plan's "none")
            "mamba_strategy": v.mamba_radix_cache_strategy if not v.disable_radix_cache else "none",
            "slots_per_request": slots_per_request,
            # --enable-linear-replayssm-spec: SGLang's own ring size per KDA slot (mamba_utils.py)
            "replayssm_ring_bytes_per_slot": (
                int(cache_params.replayssm_ring_bytes_per_req(record_len=v.linear_replayssm_cache_len))
                if getattr(v, "enable_linear_replayssm_spec", False) else 0),
        },
        # ServerArgs.mem_fraction_static as SGLang resolves it at launch (the profile's, else its
        # default-fraction heuristic), with or without weights
        "memory": {"mem_fraction_static": v.mem_fraction_static},
        "resolved": {
            "mem_fraction_static": v.mem_fraction_static,
            "disable_overlap_schedule": v.disable_overlap_schedule,
            "max_running_requests": v.max_running_requests,
            "speculative_num_draft_tokens": v.speculative_num_draft_tokens,
            "speculative_num_steps": v.speculative_num_steps,
            "speculative_eagle_topk": v.speculative_eagle_topk,
            "context_len": mc.context_len,
        },
    }

    # ---- 2. pool sizing from the bytes left for pools (SGLang's "rest")
    n_workers_reqs = out["parallel"]["max_running_requests_per_worker"]
    capacity = None
    if profile.get("available_bytes") is not None or profile.get("weights_bytes") is not None:
        capacity = _sizing(kvc, profile, measured, gpu, KVCacheConfigurator)
        # the context the pools are sized for (ModelConfig.context_len, before W6 shortens it below)
        out["capacity"] = {**capacity, "context_length": mc.context_len}
        n_workers_reqs = capacity["max_running_requests"]

    # ---- 3. the pools, on CPU at small sizes (W6), bytes from their tensors
    try:
        pools = _measure_pools(configurator, v, ctx, mc, cache_params, n_workers_reqs, slots_per_request,
                               kv_cache_dim)
    except (ValueError, AssertionError) as e:
        # SGLang's refusal while it allocates the pools (MambaPool's replay-ring checks: "spec-verify ring too
        # small", found by seed 99 on a co-located DSPARK + ReplaySSM launch), not a failure of the oracle
        if "sglang/srt/mem_cache/" not in _where(e):
            raise
        raise SGLangRefused("pools", e) from e
    for section, values in pools.items():
        out.setdefault(section, {}).update(values)
    return out


def _sizing(kvc, profile, measured, gpu, KVCacheConfigurator) -> dict:
    from sglang.srt.runtime_context import get_parallel, get_schedule

    per_req = kvc.mambaish_config.mamba2_cache_params.mamba_cache_per_req
    seen = {}
    original = KVCacheConfigurator._handle_max_mamba_cache

    def spy(self, total_rest_memory):  # records SGLang's rest before/after the mamba pool
        seen["rest_gib"] = total_rest_memory
        out = original(self, total_rest_memory)
        seen["after_gib"] = out
        return out

    try:
        KVCacheConfigurator._handle_max_mamba_cache = spy
        if profile.get("available_bytes") is not None:
            rest_after = kvc._handle_max_mamba_cache(profile["available_bytes"] / GiB)
            rest_bytes = int(rest_after * GiB)
            source = "available_bytes"
        else:
            # _profile_available_bytes: free-after-weights (W3) minus the non-static slack.
            # It names the WORLD group for a multi-rank free-memory reduce (W3 answers
            # for one rank, so the group is only a placeholder).
            # Issue 11: the pre-load reading and the free memory after target + draft weights go
            # through SGLang's own get_available_gpu_memory (W3b, oracle_memory.py). Issue 19: the
            # readings are the profile's (pre_model_load_bytes, weights_bytes) and the suite's MTP
            # draft reading, never a glm-kv estimate.
            import sglang.srt.utils.common as common
            from oracle_memory import fake_free_memory

            pre_b = profile["pre_model_load_bytes"]  # KeyError: hardware() states it
            w_b = profile["weights_bytes"] + measured.get("draft_weights_bytes", 0)
            state = {"free": pre_b, "total": int(gpu.memory_mib * (1 << 20))}
            world = get_parallel().tp_size * get_parallel().pp_size
            with fake_free_memory(state), get_parallel().override(world_group=SimpleNamespace(cpu_group=None)):
                pre = common.get_available_gpu_memory("cuda", 0, distributed=world > 1, cpu_group=None)
                state["free"] = pre_b - w_b
                rest_bytes = kvc._profile_available_bytes(pre_model_load_memory=pre)
            source = "gpu x mem_fraction_static - weights"
        config = kvc.config_from_budget(rest_bytes)
        max_reqs = kvc.resolve_max_num_reqs(config.max_total_num_tokens)
    except Exception as e:  # noqa: BLE001
        raise SGLangRefused("pool_sizing", e)
    finally:
        KVCacheConfigurator._handle_max_mamba_cache = original

    K = get_schedule().max_mamba_cache_size
    # --enable-linear-replayssm-spec: every slot carries SGLang's replay ring (replayssm_ring_bytes_per_req),
    # as MambaPool allocates it (the published flags, as the configurator reads them; oracle_memory does the same)
    from sglang.srt.runtime_context import get_exec
    ring = 0
    mamba = getattr(get_exec(), "mamba", None)
    if getattr(mamba, "enable_linear_replayssm_spec", False):
        ring = int(kvc.mambaish_config.mamba2_cache_params.replayssm_ring_bytes_per_req(
            record_len=mamba.linear_replayssm_cache_len))
    mamba_pool_bytes = (K + 1) * (per_req + ring)
    used_gib = seen["rest_gib"] - seen["after_gib"]
    spec_scratch = int(round(used_gib * GiB - mamba_pool_bytes))
    return {
        "available_bytes": int(seen["rest_gib"] * GiB),
        "available_source": source,
        "max_mamba_cache_size": K,
        "mamba_pool_bytes": mamba_pool_bytes,
        "spec_scratch_bytes": spec_scratch,
        "token_pool_budget_bytes": rest_bytes,
        "max_total_num_tokens": config.max_total_num_tokens,
        "max_running_requests": max_reqs,
    }


def _measure_pools(configurator, v, ctx, mc, cache_params, n_reqs, slots_per_request,
                   calc_kv_cache_dim) -> dict:
    from sglang.srt.mem_cache.kv_cache_configurator import _PoolSizes

    page = v.page_size
    saved_ctx_len = mc.context_len
    mc.context_len = SMALL_CONTEXT  # W6: short req_to_token rows
    try:
        n_small = SMALL_REQS

        def kv_bytes(kv):
            return _sum_bytes(kv.full_kv_pool.kv_buffer)

        def index_bytes(kv):
            return _sum_bytes(kv.full_kv_pool.index_key_cache.buffer)

        def state_bytes(req):
            st = req.mamba_pool.mamba_cache
            return _sum_bytes(st.conv) + _nbytes(st.temporal)

        sums = []
        for k_slots, pages in zip(SMALL_MAMBA_SLOTS, SMALL_TOKENS_PAGES):
            req2 = kv2 = None  # free the previous build first (spec scratch is large)
            kvc = configurator()
            ctx.override("glm-kv oracle: small pools (W6)", max_mamba_cache_size=k_slots)
            req2 = kvc._build_req_to_token_pool(max_num_reqs=n_small)
            tokens = pages * page
            sizes = _PoolSizes(
                max_total_num_tokens=tokens, max_running_requests=n_small,
                full_max_total_num_tokens=None, swa_max_total_num_tokens=None,
                c4_max_total_num_tokens=0, c128_max_total_num_tokens=0,
                c4_state_pool_size=0, c128_state_pool_size=0,
                c4_state_dtype=None, c128_state_dtype=None,
            )
            kv2 = kvc._build_token_to_kv_pool(
                sizes=sizes, is_dsa_model=True, is_dsv4_model=False, req_to_token_pool=req2
            )
            sums.append((k_slots, tokens, kv_bytes(kv2), index_bytes(kv2), state_bytes(req2)))
        (k1, t1, kvb1, ixb1, stb1), (k2, t2, kvb2, ixb2, stb2) = sums

        full = kv2.full_kv_pool
        kv_per_token = (kvb2 - kvb1) // (t2 - t1)
        index_per_token_x_page = (ixb2 - ixb1) * page // (t2 - t1)
        slot_bytes = (stb2 - stb1) // (k2 - k1)
        st = req2.mamba_pool.mamba_cache
        tail_rows_small = full._compress_tail_k[0].shape[0]
        tail_bytes_small = _sum_bytes(full._compress_tail_k) + _sum_bytes(full._compress_tail_score)
        tail_row_bytes = tail_bytes_small // tail_rows_small
        rows = None if n_reqs is None else n_reqs + (tail_rows_small - n_small)
        checks = {
            # W6 linearity: kv_buffer is (size + page, 1, dim); IndexKeyCache (size+page+1)//page rows
            "kv_buffer_rows": [int(full.kv_buffer[0].shape[0]), t2 + page],
            "index_pages": [int(full.index_key_cache.buffer[0].shape[0]), (t2 + page + 1) // page],
            "mamba_pool_slots": [int(st.temporal.shape[1]), k2 + 1],
            "slot_bytes_vs_mamba_cache_per_req": [slot_bytes, cache_params.mamba_cache_per_req],
            "tail_rows_is_reqs_plus_2": [tail_rows_small, n_small + 2],
            "kv_cache_dim_vs_kv_buffer": [int(full.kv_buffer[0].shape[-1]), int(calc_kv_cache_dim)],
        }
        conv_slot_layer = sum(c[0, 0].numel() * c.element_size() for c in st.conv)
        temporal_slot_layer = st.temporal[0, 0].numel() * st.temporal.element_size()
        tail_k = full._compress_tail_k
        layer_ids = kv2.full_attention_layer_id_mapping
        out = {
            "model": {
                "num_hidden_layers": int(mc.num_hidden_layers),
                "full_attention_layers": sorted(int(i) for i in (
                    layer_ids if isinstance(layer_ids, (list, tuple)) else layer_ids.keys())),
                "linear_attention_layers": sorted(int(i) for i in cache_params.layers),
            },
            "token": {
                "kv_storage_dtype": str(full.kv_buffer[0].dtype).replace("torch.", ""),
                "kv_item_bytes": int(full.kv_buffer[0].element_size()),
                "kv_row_bytes": int(full.kv_buffer[0].shape[-1]) * full.kv_buffer[0].element_size(),
                "num_full_layers": len(full.kv_buffer),
                "kv_bytes_per_token": int(kv_per_token),
                "indexer_page_bytes": int(full.index_key_cache.buffer[0].shape[1])
                * full.index_key_cache.buffer[0].element_size(),
                "indexer_tokens_per_page": int(full.page_size),
                "indexer_bytes_per_token": int(index_per_token_x_page // page),
                "pool_classes": [type(kv2).__name__, type(full).__name__, type(req2).__name__,
                                 type(req2.mamba_pool).__name__],
            },
            "request": {
                "conv_state_shape": list(st.conv[0].shape[2:]),
                "temporal_state_shape": list(st.temporal.shape[2:]),
                "conv_dtype": str(st.conv[0].dtype).replace("torch.", ""),
                "temporal_dtype": str(st.temporal.dtype).replace("torch.", ""),
                "num_linear_layers": int(st.temporal.shape[0]),
                "state_slot_bytes": int(slot_bytes),
                "state_bytes_per_request": int(slot_bytes) * slots_per_request,
                "conv_state_bytes": int(conv_slot_layer),
                "temporal_state_bytes": int(temporal_slot_layer),
                "state_bytes_per_layer": int(conv_slot_layer + temporal_slot_layer),
            },
            "tail": {
                "rows": rows,
                "width": int(full._compress_tail_k[0].shape[1]),
                "head_dim": int(tail_k[0].shape[2]),
                "dtype": str(tail_k[0].dtype).replace("torch.", ""),
                "num_layers": sum(1 for t in tail_k if t.shape[0] > 0),
                "bytes_per_row": int(tail_row_bytes),
                "bytes": None if rows is None else rows * int(tail_row_bytes),
            },
            "host": {**_measure_host(kv2, req2, page), "mem_layout": v.hicache_mem_layout},
            "checks": checks,
        }
        return out
    finally:
        mc.context_len = saved_ctx_len


def _measure_host(kv, req_pool, page) -> dict:
    """The HiCache host pool group SGLang assembles for this hybrid pool (W4, W5)."""
    from sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler import build_hybrid_mamba_stack

    params = SimpleNamespace(
        page_size=page, req_to_token_pool=req_pool, token_to_kv_pool_allocator=None,
        mtp_draft_device_pools=(), mtp_draft_mamba_pools=(), tp_cache_group=None,
        attn_cp_cache_group=None, attn_tp_cache_group=None, pp_cache_group=None,
    )
    full_layer_mapping = {
        layer - kv.start_layer: i for i, layer in enumerate(kv.full_attention_layer_id_mapping)
    } if isinstance(kv.full_attention_layer_id_mapping, (list, tuple)) else {
        layer - kv.start_layer: i for layer, i in kv.full_attention_layer_id_mapping.items()
    }
    from sglang.srt.runtime_context import get_context

    # W6: the host pools are measured per token / per slot at the small device pools;
    # a fixed --hicache-size (GB) would size them at full scale, so size by ratio here.
    get_context().override("glm-kv oracle: small host pools (W6)", hicache_size=0, hicache_ratio=2.0)
    with stub_cache_controller():
        group, _controller, _config = build_hybrid_mamba_stack(
            params=params, decls=kv.host_pool_decls(), mamba_pool=req_pool.mamba_pool,
            full_layer_mapping=full_layer_mapping, start_layer=kv.start_layer,
            load_cache_event=None, storage_backend=None, use_mla=kv.use_mla,
        )
    entries = [e.name.value for e in group.entries]
    by_name = {e.name.value: e.host_pool for e in group.entries}
    kv_host = by_name.get("kv")
    idx_host = by_name.get("indexer")
    mamba_host = by_name.get("mamba")
    layer_num = kv_host.layer_num
    return {
        "entries": entries,
        "entry_classes": [type(by_name[n]).__name__ for n in entries],
        "kv_row_bytes": int(kv_host.size_per_token // layer_num),
        "kv_bytes_per_token": int(kv_host.size_per_token),
        "kv_page_size": int(kv_host.page_size),
        "indexer_bytes_per_token": int(idx_host.size_per_token) if idx_host is not None else 0,
        "mamba_slot_bytes": int(mamba_host.size_per_token),
        "mamba_page_size": int(mamba_host.page_size),
    }
