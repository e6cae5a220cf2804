"""Ask SGLang 0.5.23 what it allocates for any of the six shipped hybrid models (issue 22).

SGLang gets only the model's files (config.json, and hf_quant_config.json where the checkpoint
has one) and the launch arguments; it never sees a glm-kv number. Everything returned comes from
SGLang's own code: ``ServerArgs.resolve_once()`` (page size, kv dtype flag, DSA backends, mamba
strategy), ``configure_kv_cache_dtype`` (``auto`` with the checkpoint's quant config),
``KVCacheConfigurator`` + ``create_memory_pool_configurator`` (``_cell_size``),
``mamba2_cache_params`` (``mamba_cache_per_req``), ``_calculate_mamba_ratio``, the sizing
(``_handle_max_mamba_cache``, ``config_from_budget``, ``resolve_max_num_reqs``), and the pools
themselves built on the CPU at small sizes (W6 of cpu_workarounds.py), bytes read off their
tensors.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

from cpu_workarounds import cpu_as_gpu, quiet_sglang_logs
from oracle import SGLangRefused, fake_gpu

GiB = 1 << 30
# SGLang's ModelOpt quantization methods: their kv_cache_quant_algo decides --kv-cache-dtype auto (the
# loader's get_quant_config reads it: config.json's quantization_config, else hf_quant_config.json); issue 32
# adds the MIXED_PRECISION checkpoints (modelopt_mixed: Qwen3.6-27B-NVFP4, Nemotron-3.5-Lightning-NVFP4)
MODELOPT = ("modelopt_fp8", "modelopt_fp4", "modelopt_mixed")
ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "glm_kv" / "inputs" / "models"
STEMS = {"kimi-k3": "moonshotai--Kimi-K3", "qwen3.5-35b-a3b": "Qwen--Qwen3.5-35B-A3B",
         "nemotron-3-super-120b-a12b-fp8": "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8",
         "deepseek-v3.2": "deepseek-ai--DeepSeek-V3.2", "glm-5.1": "zai-org--GLM-5.1",
         # issue 32: the real configs added in families glm-kv already sizes
         "qwen3-next-80b-a3b-thinking": "Qwen--Qwen3-Next-80B-A3B-Thinking", "qwen3.5-27b": "Qwen--Qwen3.5-27B",
         "nemotron-h-56b-base-8k": "nvidia--Nemotron-H-56B-Base-8K",
         "nemotron-3-nano-30b-a3b-bf16": "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
         "nemotron-3-ultra-550b-a55b-bf16": "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
         "qwen3.5-122b-a10b": "Qwen--Qwen3.5-122B-A10B", "qwen3.5-397b-a17b": "Qwen--Qwen3.5-397B-A17B",
         "jet-nemotron-2b": "jet-ai--Jet-Nemotron-2B", "jet-nemotron-4b": "jet-ai--Jet-Nemotron-4B",
         "qwen3.6-35b-a3b": "Qwen--Qwen3.6-35B-A3B", "qwen3.6-27b-nvfp4": "nvidia--Qwen3.6-27B-NVFP4",
         "nemotron-3.5-lightning-30b-a3b-nvfp4": "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4",
         "gpt-oss-120b": "openai--gpt-oss-120b", "gpt-oss-20b": "openai--gpt-oss-20b",
         "gemma-4-26b-a4b": "google--gemma-4-26B-A4B", "mimo-v2-flash": "XiaomiMiMo--MiMo-V2-Flash",
         "llama-4-scout-17b-16e-instruct": "meta-llama--Llama-4-Scout-17B-16E-Instruct",
         "llama-4-maverick-17b-128e-instruct": "meta-llama--Llama-4-Maverick-17B-128E-Instruct"}
_PASS = ("tp_size", "dp_size", "enable_dp_attention", "kv_cache_dtype", "dsa_prefill_backend", "dsa_decode_backend", "page_size",
         "mamba_ssm_dtype", "disable_radix_cache", "disable_overlap_schedule", "max_running_requests",
         "max_total_tokens", "max_mamba_cache_size", "mamba_full_memory_ratio", "context_length",
         "disable_cuda_graph", "disable_decode_cuda_graph", "disable_prefill_cuda_graph",
         "cuda_graph_backend_decode", "cuda_graph_backend_prefill")


def model_dir(name: str) -> str:
    """A folder laid out as a checkpoint: config.json (+ hf_quant_config.json), nothing of ours."""
    d = Path(tempfile.mkdtemp(prefix="glm-kv-model-"))
    if Path(name).is_dir():   # a checkpoint folder a test wrote (config.json, hf_quant_config.json): as it is
        for f in Path(name).glob("*.json"):
            shutil.copy(f, d / f.name)
        return str(d)
    if name == "glm-5.3-flash":
        cfg = json.loads((ROOT / "glm_kv" / "inputs" / "data" / "glm-5.3-flash.json").read_text())
        (d / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if not k.startswith("_")}))
        return str(d)
    stem = STEMS[name]
    shutil.copy(MODELS / f"{stem}_config.json", d / "config.json")
    q = MODELS / f"{stem}_hf_quant_config.json"
    if q.exists():
        shutil.copy(q, d / "hf_quant_config.json")
    return str(d)


def _nbytes(t) -> int:
    return 0 if t is None else t.numel() * t.element_size()


def sglang_model_plan(name: str, profile: dict) -> dict:
    """SGLang's numbers for one model and launch profile (gpu, tp_size, kv_cache_dtype, ...)."""
    quiet_sglang_logs()
    gpu = fake_gpu(profile)
    d = model_dir(name)
    try:
        with cpu_as_gpu(gpu):
            return _plan(d, profile)
    except SGLangRefused as e:
        return {"errors": {"stage": e.stage, "message": str(e.exc)}}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _plan(path: str, profile: dict) -> dict:
    import torch

    from sglang.srt.arg_groups.overrides import resolved_view
    from sglang.srt.configs.model_config import AttentionArch, ModelConfig, is_deepseek_dsa
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
    from sglang.srt.mem_cache.kv_cache_dtype import configure_kv_cache_dtype
    from sglang.srt.model_executor.model_runner_components.layer_setup import ModelLayerInfo
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import SpecAuxHiddenStateConfig
    from sglang.srt.model_executor.pool_configurator import create_memory_pool_configurator
    from sglang.srt.runtime_context import get_context, get_parallel, get_schedule
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    kw = {k: profile[k] for k in _PASS if profile.get(k) is not None}
    if profile.get("mamba_scheduler_strategy") is not None:   # 0.5.23's name for the flag
        kw["mamba_radix_cache_strategy"] = profile["mamba_scheduler_strategy"]
    try:
        sa = ServerArgs(model_path=path, device="cuda", **kw)
        sa.resolve_once()
        # the launch's own checks right after the resolution, as entrypoints/engine.py runs them (found
        # missing by --enable-two-batch-overlap without DP attention, which check_server_args refuses)
        sa.check_server_args()
    except Exception as e:  # noqa: BLE001
        raise SGLangRefused("server_args", e)
    v = resolved_view(sa)
    get_context().set_server_args(sa)
    par = get_parallel()
    mc = ModelConfig.from_server_args(sa)
    quant_algo = None
    if mc.quantization in MODELOPT:   # ModelOpt's kv_cache_quant_algo (hf_quant_config.json or quantization_config)
        # get_quant_config reads hf_quant_config.json as the loader does (the model class, which
        # only adds packed-module names, cannot be imported without CUDA kernels)
        from sglang.srt.configs.load_config import LoadConfig
        from sglang.srt.model_loader.weight_utils import get_quant_config
        qc = get_quant_config(mc, LoadConfig(), {})
        quant_algo = getattr(qc, "kv_cache_quant_algo", None)
    kv_str, kv_dtype = configure_kv_cache_dtype(
        server_args_kv_cache_dtype=v.kv_cache_dtype,
        model=SimpleNamespace(quant_config=SimpleNamespace(kv_cache_quant_algo=quant_algo)),
        model_dtype=torch.bfloat16, is_draft_worker=False, is_dflash=False,
        speculative_draft_attention_backend=None)
    n = mc.num_hidden_layers
    use_mla = mc.attention_arch == AttentionArch.MLA

    def configurator():
        return KVCacheConfigurator(
            device="cpu", gpu_id=0, attn_dp_size=par.attn_dp_size, pp_size=1, pp_group=None, model=None,
            model_config=mc, server_args=sa, kv_cache_dtype=kv_dtype, kv_cache_dtype_str=v.kv_cache_dtype,
            model_dtype=torch.bfloat16, page_size=v.page_size, sliding_window_size=None,
            spec_algorithm=SpeculativeAlgorithm.from_string(None), is_draft_worker=False,
            post_capture_kv_active=False, spec_aux_config=SpecAuxHiddenStateConfig(),
            is_hybrid_swa=False, is_hybrid_swa_compress=False, use_mla_backend=use_mla,
            layer_info=ModelLayerInfo(start_layer=0, end_layer=n, num_effective_layers=n),
            forward_stream=None, req_to_token_pool=None, token_to_kv_pool_allocator=None,
            memory_pool_config=None)

    kvc = configurator()
    hybrid = kvc.mambaish_config is not None
    try:
        cell = create_memory_pool_configurator(kvc)._cell_size
        per_req = kvc.mambaish_config.mamba2_cache_params.mamba_cache_per_req if hybrid else 0
        ratio = kvc._calculate_mamba_ratio() if hybrid else 0
    except Exception as e:  # noqa: BLE001
        raise SGLangRefused("pool_sizing", e)
    out = {
        "page_size": v.page_size,
        "kv_cache_dtype": {torch.bfloat16: "bfloat16", torch.float8_e4m3fn: "fp8_e4m3"}[kv_dtype],
        "dsa_prefill_backend": v.dsa_prefill_backend if is_deepseek_dsa(mc.hf_config) else None,
        "dsa_decode_backend": v.dsa_decode_backend if is_deepseek_dsa(mc.hf_config) else None,
        "mamba_strategy": (v.mamba_radix_cache_strategy if not v.disable_radix_cache else "none") if hybrid else None,
        "attn_tp_size": par.attn_tp_size,
        "num_hidden_layers": n,
        "bytes_per_token": int(cell),
        "bytes_per_slot": int(per_req),
        "slots_per_request": int(ratio),
        "bytes_per_request": int(per_req) * int(ratio),
        "full_attention_layers": (sorted(kvc.mambaish_config.full_attention_layer_ids) if hybrid
                                  else list(range(n))),
        "state_layers": sorted(kvc.mambaish_config.mamba2_cache_params.layers) if hybrid else [],
    }
    if profile.get("available_bytes") is not None:
        try:
            rest = profile["available_bytes"] / GiB
            if hybrid:
                rest = kvc._handle_max_mamba_cache(rest)
            rest_bytes = int(rest * GiB)
            config = kvc.config_from_budget(rest_bytes)
            out["max_total_num_tokens"] = config.max_total_num_tokens
            out["max_running_requests"] = kvc.resolve_max_num_reqs(config.max_total_num_tokens)
            out["max_mamba_cache_size"] = get_schedule().max_mamba_cache_size if hybrid else None
        except Exception as e:  # noqa: BLE001
            raise SGLangRefused("pool_sizing", e)
    out.update(_measure(kvc, configurator, v, mc, hybrid, is_deepseek_dsa(mc.hf_config)))
    return out


def _measure(kvc, configurator, v, mc, hybrid: bool, dsa: bool) -> dict:
    """Build the pools at two small sizes; per-token / per-slot bytes from their tensors (W6)."""
    from sglang.srt.mem_cache.kv_cache_configurator import _PoolSizes
    from sglang.srt.runtime_context import get_context

    page = v.page_size
    saved = mc.context_len
    mc.context_len = 64
    rows = []
    try:
        for slots, pages in ((1, 2), (2, 4)):
            k = configurator()
            if hybrid:
                get_context().override("glm-kv models oracle: small pools (W6)", max_mamba_cache_size=slots)
            req = k._build_req_to_token_pool(max_num_reqs=2)
            tokens = pages * max(page, 64)
            sizes = _PoolSizes(max_total_num_tokens=tokens, max_running_requests=2, full_max_total_num_tokens=None,
                               swa_max_total_num_tokens=None, c4_max_total_num_tokens=0, c128_max_total_num_tokens=0,
                               c4_state_pool_size=0, c128_state_pool_size=0, c4_state_dtype=None, c128_state_dtype=None)
            kv = k._build_token_to_kv_pool(sizes=sizes, is_dsa_model=dsa, is_dsv4_model=False, req_to_token_pool=req)
            full = getattr(kv, "full_kv_pool", kv)
            kv_b = sum(_nbytes(t) for t in getattr(full, "kv_buffer", []) or []) + \
                sum(_nbytes(t) for t in getattr(full, "k_buffer", []) or []) + \
                sum(_nbytes(t) for t in getattr(full, "v_buffer", []) or [])
            idx = getattr(full, "index_key_cache", None)
            ix_b = sum(_nbytes(t) for t in idx.buffer) if idx is not None else 0
            st_b = 0
            if hybrid:
                st = req.mamba_pool.mamba_cache
                st_b = sum(_nbytes(c) for c in st.conv) + _nbytes(st.temporal)
            rows.append((slots, tokens, kv_b, ix_b, st_b, type(kv).__name__, type(full).__name__))
            if hybrid and slots == 2:
                host = _measure_host(kv, req, page, tokens, slots)
            del kv, req
    finally:
        mc.context_len = saved
    (s1, t1, k1, i1, m1, _, _), (s2, t2, k2, i2, m2, cls, full_cls) = rows
    out = {"host": host} if hybrid else {}
    return {**out, "measured_kv_bytes_per_token": (k2 - k1) // (t2 - t1),
            "measured_indexer_bytes_per_token": (i2 - i1) // (t2 - t1),
            "measured_bytes_per_slot": (m2 - m1) // (s2 - s1) if hybrid else 0,
            "pool_classes": [cls, full_cls]}


def _measure_host(kv, req_pool, page: int, tokens: int, slots: int) -> dict:
    """HiCache's host pool group for a hybrid pool (build_hybrid_mamba_stack, W4/W5), sized by
    hicache_ratio 2.0 from the small device pools: what each host pool holds and per unit."""
    from cpu_workarounds import stub_cache_controller
    from sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler import build_hybrid_mamba_stack
    from sglang.srt.runtime_context import get_context

    params = SimpleNamespace(
        page_size=page, req_to_token_pool=req_pool, token_to_kv_pool_allocator=None,
        mtp_draft_device_pools=(), mtp_draft_mamba_pools=(), tp_cache_group=None,
        attn_cp_cache_group=None, attn_tp_cache_group=None, pp_cache_group=None)
    mapping = kv.full_attention_layer_id_mapping
    full_layer_mapping = ({layer - kv.start_layer: i for i, layer in enumerate(mapping)}
                          if isinstance(mapping, (list, tuple))
                          else {layer - kv.start_layer: i for layer, i in mapping.items()})
    get_context().override("glm-kv models oracle: small host pools (W6)", hicache_size=0, hicache_ratio=2.0,
                           hicache_mem_layout="page_first")
    with stub_cache_controller():
        group, _controller, _config = build_hybrid_mamba_stack(
            params=params, decls=kv.host_pool_decls(), mamba_pool=req_pool.mamba_pool,
            full_layer_mapping=full_layer_mapping, start_layer=kv.start_layer, load_cache_event=None,
            storage_backend=None, use_mla=kv.use_mla)
    by_name = {e.name.value: e.host_pool for e in group.entries}
    kv_host, mamba_host = by_name["kv"], by_name["mamba"]
    return {"entries": sorted(by_name), "device_tokens": tokens, "device_slots": slots,
            "kv_host_tokens": int(kv_host.size), "kv_host_bytes_per_token": int(kv_host.size_per_token),
            "mamba_host_slots": int(mamba_host.size), "mamba_host_slot_bytes": int(mamba_host.size_per_token)}


def sglang_server_args_refusal(name: str, gpu: str, **kw) -> str | None:
    """SGLang's refusal (its message) of ``ServerArgs(model_path=<name's files>, **kw).resolve_once()``
    on a fake ``gpu``, or None when it resolves: for start-up rules the pool builders never reach."""
    quiet_sglang_logs()
    d = model_dir(name)
    try:
        with cpu_as_gpu(fake_gpu({"gpu": gpu})):
            from sglang.srt.server_args import ServerArgs

            try:
                ServerArgs(model_path=d, device="cuda", **kw).resolve_once()
            except Exception as e:  # noqa: BLE001
                return f"{type(e).__name__}: {e}"
            return None
    finally:
        shutil.rmtree(d, ignore_errors=True)
