"""Ask vLLM 0.33.0 how it sizes the KV cache, through its own code, on a machine without a GPU.

Runs only in ``.venv-vllm`` (scripts/vllm-env.sh). Recipe: ../shared/reference/vllm-0.33.md. vLLM gets a
checkpoint-like folder (config.json, hf_quant_config.json where the checkpoint has one) and the launch
flags; it never sees a glm-kv number. What this harness supplies instead of a GPU:

* a stand-in platform (``NonNvmlCudaPlatform`` subclass) that answers device name, capability, total
  memory and SM count from ``GPUS`` below (this suite's own table, each entry with its source);
* a ``TorchFunctionMode`` that puts every tensor on ``meta`` (vLLM builds models on meta itself in
  ``weight_cache/ipc_loader.py``), dummy CUDA streams/events, and a stub ``libcuda.so.1`` so vLLM's
  compiled extensions load (their ops are registered at import; none runs);
* a one-process gloo world whose TP group then claims ``tp`` ranks: rank 0's view of TP=N;
* the per-rank KV memory as an input (``kv_cache_memory_bytes``, vLLM's own flag that skips profiling):
  ``determine_available_memory`` profiles a forward pass on a GPU and cannot run here.

Then the engine's own order (v1/executor/uniproc_executor.py, v1/engine/core.py ``_initialize_kv_caches``):
``update_block_size_for_backend``, ``register_all_kvcache_specs``, the runner's ``get_kv_cache_spec``,
``resolve_kv_cache_layout``, ``get_global_kv_cache_groups``, ``get_kv_cache_configs``,
``generate_scheduler_kv_cache_config``, ``get_kv_cache_capacity``.

CLI (what tests/vllm/test_oracle.py runs in a subprocess): ``python oracle.py '<launch json>'`` prints one
JSON line, prefixed ``ORACLE-RESULT ``, with the plan or ``{"refused": {"stage", "type", "message"}}``.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MODELS = ROOT / "glm_kv" / "inputs" / "models"
GLM53_EXCERPT = ROOT / "glm_kv" / "inputs" / "data" / "glm-5.3-flash.json"
MiB = 1 << 20
GiB = 1 << 30

# This suite's GPU table. capability: NVIDIA's CUDA compute-capability list (developer.nvidia.com/cuda-gpus:
# H200 9.0, B200 10.0). total memory: CUDA's total as nvidia-smi prints it, public printouts recorded in
# ../shared/reference/sglang-0.5.23.md ("H200 143,771 MiB; B200 183,359 MiB"). SMs: NVIDIA's Hopper
# (H100/H200 SXM: 132 SMs) and Blackwell (B200: 148 SMs) architecture documents. The KV sizing reads the
# capability (backend choice, config.py's per-GPU KV dtype); the total memory only matters without
# kv_cache_memory_bytes (never here); the SM count is read by some kernels' planners, not by the sizing.
GPUS = {
    "H200": {"name": "NVIDIA H200", "capability": (9, 0), "total_memory_bytes": 143771 * MiB, "sms": 132,
             "source": "cuda-gpus list (9.0); nvidia-smi 143,771 MiB (sglang-0.5.23.md); Hopper whitepaper 132 SMs"},
    "B200": {"name": "NVIDIA B200", "capability": (10, 0), "total_memory_bytes": 183359 * MiB, "sms": 148,
             "source": "cuda-gpus list (10.0); nvidia-smi 183,359 MiB (sglang-0.5.23.md); Blackwell datasheet 148 SMs"},
}

# name -> (vendored stem under glm_kv/inputs/models, or None for GLM-5.3-Flash's excerpt)
MODEL_FILES = {
    "glm-5.3-flash": None,
    "kimi-k3": "moonshotai--Kimi-K3",
    "qwen3.5-35b-a3b": "Qwen--Qwen3.5-35B-A3B",
    "nemotron-3-super-120b-a12b-fp8": "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8",
    "deepseek-v3.2": "deepseek-ai--DeepSeek-V3.2",
    "glm-5.1": "zai-org--GLM-5.1",
}

# Documented overrides (vllm-0.33.md section 2); the vendored files are never edited.
# GLM-5.3-Flash: the memory excerpt lacks 5 fields vLLM's Glm5Next classes read. These are CHOICES, not
# checkpoint values; only mla_use_nope touches attention, and it agrees with qk_rope_head_dim=0.
GLM53_TEXT_OVERRIDES = {"mhc": False, "mla_use_nope": True, "indexer_rope_interleave": False,
                        "scoring_func": "sigmoid", "topk_method": "noaux_tc"}
# Nemotron: aiconfigurator's hf_quant_config.json has no producer; ModelOpt's own files carry
# {"producer": {"name": "modelopt"}}, without which vLLM does not detect ModelOpt and keeps a bf16 KV cache.
NEMOTRON_QUANT_PRODUCER = {"name": "modelopt"}

# launch keys -> EngineArgs fields (None: not passed, vLLM's default)
FLAGS = ("kv_cache_dtype", "mamba_cache_dtype", "mamba_ssm_cache_dtype", "enable_prefix_caching", "block_size",
         "max_model_len", "max_num_seqs", "speculative_config", "kv_cache_memory_bytes",
         "disable_hybrid_kv_cache_manager", "decode_context_parallel_size", "dcp_kv_cache_interleave_size",
         "cp_kv_cache_interleave_size")


class Refused(Exception):
    def __init__(self, stage: str, exc: BaseException):
        super().__init__(f"{stage}: {type(exc).__name__}: {exc}")
        self.stage, self.exc = stage, exc


def model_dir(name: str, text_overrides: dict | None = None) -> str:
    """A folder laid out as a checkpoint: config.json (+ hf_quant_config.json), overrides applied.
    ``text_overrides``: a launch's ``config_overrides``, set in the config's text part (``text_config`` where
    there is one): a checkpoint no vendored file is, e.g. Kimi-K3 with one MTP layer."""
    if name not in MODEL_FILES:
        raise ValueError(f"model: unknown {name!r}; one of {sorted(MODEL_FILES)}")
    d = Path(tempfile.mkdtemp(prefix="glm-kv-vllm-model-"))
    stem = MODEL_FILES[name]
    if stem is None:
        cfg = {k: v for k, v in json.loads(GLM53_EXCERPT.read_text()).items() if not k.startswith("_")}
        cfg["text_config"] = {**cfg["text_config"], **GLM53_TEXT_OVERRIDES}
    else:
        cfg = json.loads((MODELS / f"{stem}_config.json").read_text())
    (cfg["text_config"] if "text_config" in cfg else cfg).update(text_overrides or {})
    (d / "config.json").write_text(json.dumps(cfg))
    if stem is None:
        return str(d)
    q = MODELS / f"{stem}_hf_quant_config.json"
    if q.exists():
        qc = json.loads(q.read_text())
        if name.startswith("nemotron"):
            qc.setdefault("producer", NEMOTRON_QUANT_PRODUCER)
        (d / "hf_quant_config.json").write_text(json.dumps(qc))
    return str(d)


# ----------------------------------------------------------------------------------------------------
# CPU stand-ins
# ----------------------------------------------------------------------------------------------------

def _load_stub_libcuda() -> None:
    stub = Path(sys.prefix) / "stubcuda" / "libcuda.so.1"
    if not stub.exists():
        raise RuntimeError(f"{stub} missing: run scripts/vllm-env.sh")
    ctypes.CDLL(str(stub), mode=ctypes.RTLD_GLOBAL)


def _fake_platform(gpu: dict):
    import vllm.platforms as platforms
    from vllm.platforms.cuda import NonNvmlCudaPlatform
    from vllm.platforms.interface import DeviceCapability

    cap = DeviceCapability(*gpu["capability"])

    class OraclePlatform(NonNvmlCudaPlatform):
        @classmethod
        def get_device_capability(cls, device_id: int = 0):
            return cap

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return gpu["name"]

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return gpu["total_memory_bytes"]

        @classmethod
        def device_count(cls) -> int:
            return 8

        @classmethod
        def current_device(cls) -> int:
            return 0

        @classmethod
        def num_compute_units(cls, device_id: int = 0) -> int:
            return gpu["sms"]

        @classmethod
        def is_integrated_gpu(cls, device_id: int = 0) -> bool:
            return False

    platforms._current_platform = OraclePlatform()
    return platforms._current_platform


class _Dummy:
    """torch.cuda.Stream / Event stand-in: every method is a no-op."""

    def __init__(self, *a, **k):
        pass

    def __getattr__(self, name):
        return lambda *a, **k: None

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


@contextlib.contextmanager
def _cuda_as_meta(gpu: dict):
    """Every tensor factory, .cuda() and .to(cuda) lands on meta; CUDA streams/events are dummies; the
    device queries kernels make while layers are built (FlashInfer's SM count) answer from ``gpu``."""
    import torch
    from torch.overrides import TorchFunctionMode

    factories = {torch.empty, torch.zeros, torch.ones, torch.full, torch.arange, torch.rand, torch.randn,
                 torch.randint, torch.tensor, torch.as_tensor, torch.empty_strided, torch.linspace,
                 torch.eye, torch.empty_like, torch.zeros_like, torch.ones_like, torch.full_like,
                 torch.rand_like, torch.randn_like}

    def _is_device(x) -> bool:
        return isinstance(x, (torch.device, int)) or (isinstance(x, str) and x.split(":")[0] in (
            "cuda", "cpu", "meta"))

    class MetaMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in factories:
                kwargs["device"] = "meta"
                kwargs.pop("pin_memory", None)
            elif func is torch.Tensor.cuda:
                return args[0].to("meta")
            elif func is torch.Tensor.to:
                args = tuple("meta" if (i > 0 and _is_device(a) and not isinstance(a, bool)) else a
                             for i, a in enumerate(args))
                if "device" in kwargs:
                    kwargs["device"] = "meta"
            elif func is torch.Tensor.pin_memory:
                return args[0]
            return func(*args, **kwargs)

    from types import SimpleNamespace

    props = SimpleNamespace(name=gpu["name"], major=gpu["capability"][0], minor=gpu["capability"][1],
                            total_memory=gpu["total_memory_bytes"], multi_processor_count=gpu["sms"],
                            is_integrated=False)
    saved = {k: getattr(torch.cuda, k) for k in ("Stream", "Event", "current_stream", "stream", "synchronize",
                                                 "get_device_properties", "get_device_capability",
                                                 "get_device_name", "current_device", "device_count")}
    torch.cuda.get_device_properties = lambda *a, **k: props
    torch.cuda.get_device_capability = lambda *a, **k: tuple(gpu["capability"])
    torch.cuda.get_device_name = lambda *a, **k: gpu["name"]
    torch.cuda.current_device = lambda: 0
    torch.cuda.device_count = lambda: 8
    torch.cuda.Stream = _Dummy
    torch.cuda.Event = _Dummy
    torch.cuda.current_stream = lambda *a, **k: _Dummy()
    torch.cuda.stream = lambda *a, **k: contextlib.nullcontext()
    torch.cuda.synchronize = lambda *a, **k: None
    try:
        with MetaMode(), torch.device("meta"):
            yield
    finally:
        for k, v in saved.items():
            setattr(torch.cuda, k, v)


def _one_process_world(vllm_config, tp: int) -> None:
    """gloo world of one; the TP group then reports tp ranks (rank 0's view), and the DCP group (which reuses
    TP ranks without PCP, config/parallel.py) the launch's decode_context_parallel_size."""
    import vllm.distributed.parallel_state as ps

    port = 20000 + os.getpid() % 20000
    ps.init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                    distributed_init_method=f"tcp://127.0.0.1:{port}", backend="gloo")
    ps.ensure_model_parallel_initialized(1, 1, backend="gloo")
    ps._TP.world_size = tp
    ps._TP.rank_in_group = 0
    ps._DCP.world_size = vllm_config.parallel_config.decode_context_parallel_size
    ps._DCP.rank_in_group = 0
    if ps._DCP.world_size > 1:
        # The DCP backends decide, while they are built, whether their collectives use symmetric-memory
        # workspaces (v1/attention/ops/cp_common.py direct_cp_enabled: probes the node and allocates with
        # torch's symmetric memory, which a meta tensor cannot have). The stand-in has none, as a torch
        # without torch.distributed._symmetric_memory: the ring collectives (ag_rs / a2a through NCCL)
        # instead. Communication buffers only; no KV sizing reads them.
        import vllm.v1.attention.ops.cp_common as cp_common

        cp_common.symm_mem_available = False


# ----------------------------------------------------------------------------------------------------
# the plan
# ----------------------------------------------------------------------------------------------------

def _spec_dict(spec) -> dict:
    import torch

    out = {"kind": type(spec).__name__, "page_size_bytes": int(spec.page_size_bytes),
           "block_size": int(spec.block_size)}
    for k in ("num_kv_heads", "head_size", "dtype", "cache_dtype_str", "shapes", "dtypes", "mamba_type",
              "num_speculative_blocks", "sliding_window", "page_size_padded", "tokens_per_state"):
        if hasattr(spec, k):
            v = getattr(spec, k)
            if isinstance(v, torch.dtype):
                v = str(v).removeprefix("torch.")
            elif isinstance(v, (tuple, list)):
                v = [str(x).removeprefix("torch.") if isinstance(x, torch.dtype) else
                     (list(x) if isinstance(x, tuple) else x) for x in v]
            elif v is not None and not isinstance(v, (int, float, str, bool)):
                v = str(v)
            out[k] = v
    return out


def vllm_plan(launch: dict, prepared: "Prepared | None" = None) -> dict:
    """vLLM 0.33.0's KV sizing for one launch: model, gpu, tp, and the FLAGS (missing: vLLM's default).
    ``prepared``: the process state of ``prepare(gpu)`` (the server's children get it from their parent)."""
    unknown = set(launch) - {"model", "gpu", "tp", "config_overrides", "what_if", *FLAGS}
    if unknown:
        raise ValueError(f"launch: unknown key(s) {sorted(unknown)}")
    if set(launch.get("what_if", ())) - set(WHAT_IF):
        raise ValueError(f"launch: unknown what_if {sorted(set(launch['what_if']) - set(WHAT_IF))}")
    if launch.get("kv_cache_memory_bytes") is None:
        raise ValueError("launch: kv_cache_memory_bytes is required (no GPU memory profile on a CPU)")
    gpu = GPUS[launch["gpu"]]
    if prepared is not None and prepared.gpu is not gpu:
        raise ValueError(f"launch: gpu {launch['gpu']!r}, but this process was prepared for {prepared.gpu['name']}")
    tp = int(launch.get("tp", 1))
    path = model_dir(launch["model"], launch.get("config_overrides"))
    try:
        return _plan(path, launch, prepared or prepare(gpu), tp)
    except Refused as e:
        import traceback

        traceback.print_exception(e.exc, file=sys.stderr)   # stderr: shown only when a test fails
        return {"refused": {"stage": e.stage, "type": type(e.exc).__name__, "message": str(e.exc)}}
    finally:
        shutil.rmtree(path, ignore_errors=True)


class Prepared:
    """What every launch on one GPU does first, before anything that depends on the launch."""

    def __init__(self, gpu: dict, warm: bool = False):
        _load_stub_libcuda()
        self.gpu = gpu
        self.platform = _fake_platform(gpu)
        import vllm.model_executor.models.registry as registry

        registry._run_in_subprocess = lambda fn: fn()   # the child would not see the stand-in platform

        from vllm.config import set_current_vllm_config
        from vllm.engine.arg_utils import EngineArgs

        self.set_current_vllm_config, self.EngineArgs = set_current_vllm_config, EngineArgs
        if warm:
            import importlib

            for name in WARM_MODULES:
                importlib.import_module(name)


def prepare(gpu: dict, warm: bool = False) -> Prepared:
    return Prepared(gpu, warm)


# The fork server's children import these anyway on every launch, whatever the model: the modules this
# harness calls, and the model loader and attention layers every model module imports (about 4 s of
# imports a launch). The server imports them once, after the stand-in platform is in place, as a new
# process does. That a launch through the server equals the same launch in a new process without them
# is a test of its own (tests/vllm/test_oracle.py::test_the_server_changes_nothing).
WARM_MODULES = (
    "vllm.model_executor.model_loader", "vllm.model_executor.model_loader.utils",
    "vllm.model_executor.layers.attention", "vllm.model_executor.layers.attention_layer_base",
    "vllm.compilation.backends", "vllm.v1.worker.workspace", "vllm.utils.torch_utils",
    "vllm.distributed.kv_transfer.kv_connector.utils", "vllm.v1.attention.backends.utils",
    "vllm.v1.core.kv_cache_planning", "vllm.v1.core.kv_cache_utils", "vllm.v1.core.single_type_kv_cache_manager",
    "vllm.v1.worker.gpu.attn_utils",
)


def _plan(path: str, launch: dict, prepared: Prepared, tp: int) -> dict:
    gpu, platform = prepared.gpu, prepared.platform
    set_current_vllm_config, EngineArgs = prepared.set_current_vllm_config, prepared.EngineArgs

    kw = {k: launch[k] for k in FLAGS if launch.get(k) is not None}
    try:
        args = EngineArgs(model=path, tensor_parallel_size=tp, skip_tokenizer_init=True,
                          load_format="dummy", **kw)
        vllm_config = args.create_engine_config()
    except Exception as e:  # noqa: BLE001
        raise Refused("engine_config", e)

    with set_current_vllm_config(vllm_config):
        _one_process_world(vllm_config, tp)
    with set_current_vllm_config(vllm_config), _cuda_as_meta(gpu):
        try:
            model, draft = _build_models(vllm_config)
        except Exception as e:  # noqa: BLE001
            raise Refused("model", e)
        return _size(vllm_config, platform, model, launch.get("what_if", ()))


def _build_models(vllm_config):
    import torch
    from vllm.v1.worker.workspace import init_workspace_manager

    # the worker does this before loading the model (v1/worker/gpu_worker.py); B200's MLA backends use it
    init_workspace_manager(torch.device("cuda", 0))
    from vllm.compilation.backends import set_model_tag
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.config import get_layers_from_vllm_config
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    # as the loaders do (model_loader/base_loader.py): layers read the default dtype
    with set_default_torch_dtype(vllm_config.model_config.dtype):
        model = initialize_model(vllm_config=vllm_config, model_config=vllm_config.model_config)
    draft = None
    spec = vllm_config.speculative_config
    if spec is not None and spec.draft_model_config is not None:
        target = set(get_layers_from_vllm_config(vllm_config, AttentionLayerBase))
        draft_config = replace(vllm_config, attention_config=replace(vllm_config.attention_config,
                                                                      backend=spec.attention_backend))
        with set_model_tag("eagle_head"), set_default_torch_dtype(spec.draft_model_config.dtype):
            draft = initialize_model(vllm_config=draft_config, model_config=spec.draft_model_config)
        for name, layer in get_layers_from_vllm_config(vllm_config, AttentionLayerBase).items():
            if name not in target:
                layer.is_draft_layer = True
    return model, draft


# Test-only counterfactuals (a launch's ``what_if``): vLLM 0.33.0's own sizing with one of its terms taken out
# of every layer's spec right after the runner's get_kv_cache_spec, to measure what that term moves (the
# recipes #906 anchor in test_glm_kv_plan.py). Never in a launch that glm-kv's plan is compared against.
WHAT_IF = {
    # MambaSpec.num_prefill_checkpoint_blocks (align mode: 2 + speculative + checkpoint blocks per request,
    # v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes) set to 0, as a build without it
    "no_prefill_checkpoint_blocks": lambda s: (replace(s, num_prefill_checkpoint_blocks=0)
                                               if hasattr(s, "num_prefill_checkpoint_blocks") else s),
    # KVCacheSpec.block_stride_alignment (sparse_utils.align_blocks_to_rows, the indexer's row) set to None:
    # the bytes per block not rounded up to the lcm of the row alignments
    "no_block_stride_alignment": lambda s: replace(s, block_stride_alignment=None),
}


def _size(vllm_config, platform, model, what_if=()) -> dict:
    from vllm.distributed.kv_transfer.kv_connector.utils import get_current_attn_backends
    from vllm.v1.attention.backends.utils import (get_supported_kv_cache_layouts, record_kv_cache_layout,
                                                  resolve_kv_cache_layout)
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
    from vllm.v1.core.kv_cache_utils import (generate_scheduler_kv_cache_config, get_kv_cache_capacity,
                                             update_kv_cache_capacity)
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs
    from vllm.v1.worker.cp_utils import check_attention_cp_compatibility

    stage = "update_block_size_for_backend"
    try:
        platform.update_block_size_for_backend(vllm_config)
        stage = "get_kv_cache_spec"
        register_all_kvcache_specs(vllm_config)
        specs = _kv_cache_spec(vllm_config)
        for name in what_if:
            specs = {layer: WHAT_IF[name](s) for layer, s in specs.items()}
        stage = "resolve_kv_cache_layout"
        # the worker's get_supported_kv_cache_layouts, the core's resolve, the worker's set_kv_cache_layout
        supported = [lay.name for lay in get_supported_kv_cache_layouts(get_current_attn_backends(vllm_config))]
        layout = resolve_kv_cache_layout(vllm_config, [supported], list(specs.values()))
        stage = "get_kv_cache_configs"
        groups = get_global_kv_cache_groups(vllm_config, [specs])
        vllm_config.adjust_dcp_kv_cache_interleave_size(groups)
        record_kv_cache_layout(vllm_config.cache_config, layout.name)
        avail = int(vllm_config.cache_config.kv_cache_memory_bytes)
        with _vllm_log() as log:
            configs = get_kv_cache_configs(vllm_config, [specs], [avail], groups)
            sched = generate_scheduler_kv_cache_config(configs)
            stage = "get_kv_cache_capacity"
            tokens, concurrency = get_kv_cache_capacity(vllm_config, sched)
            # the engine core's own report (v1/engine/core.py _initialize_kv_caches): the boot-log line
            update_kv_cache_capacity(vllm_config, sched)
        # what the engine core and the worker check next, before any KV tensor is allocated: the block size
        # against DCP's interleave (v1/engine/core.py: validate_block_size after the capacity, with the block
        # size set to the smallest prefix-cacheable group's), then the worker's initialize_kv_cache
        # (v1/worker/gpu/model_runner.py: check_attention_cp_compatibility, every attention layer's impl
        # against DCP / MTP with a cp interleave; with DCP every layer is checked, as with target names None)
        stage = "validate_block_size"
        participating = [g.kv_cache_spec.block_size for g in sched.kv_cache_groups if g.kv_cache_spec.prefix_cacheable]
        reported = vllm_config.cache_config.block_size   # this harness's cache_block_size key: the block it sized
        vllm_config.cache_config.block_size = min(participating or [g.kv_cache_spec.block_size
                                                                   for g in sched.kv_cache_groups])
        vllm_config.validate_block_size()
        vllm_config.cache_config.block_size = reported
        stage = "initialize_kv_cache"
        check_attention_cp_compatibility(vllm_config)
    except Exception as e:  # noqa: BLE001
        raise Refused(stage, e)
    cc = vllm_config.cache_config
    per_layer = {name: _spec_dict(s) for name, s in specs.items()}
    return {
        "vllm_version": __import__("vllm").__version__,
        "gpu_capability": list(platform.get_device_capability()),
        "tp": vllm_config.parallel_config.tensor_parallel_size,
        "max_model_len": vllm_config.model_config.max_model_len,
        "kv_cache_memory_bytes": avail,
        "cache_block_size": cc.block_size,
        "mamba_block_size": getattr(cc, "mamba_block_size", None),
        "mamba_cache_mode": str(getattr(cc, "mamba_cache_mode", None)),
        "kv_cache_dtype": str(cc.cache_dtype),
        "enable_prefix_caching": bool(cc.enable_prefix_caching),
        "num_speculative_tokens": (vllm_config.speculative_config.num_speculative_tokens
                                   if vllm_config.speculative_config else 0),
        "layout": str(getattr(layout, "name", layout)),
        "attention_backends": sorted({type(l).__name__ + ":" + l.get_attn_backend().get_name()
                                      for l in _attn_layers(vllm_config).values()
                                      if hasattr(l, "get_attn_backend")}),
        "layers": per_layer,
        "groups": [{"layer_names": list(g.layer_names), **_spec_dict(g.kv_cache_spec)}
                   for g in sched.kv_cache_groups],
        "num_blocks": int(sched.num_blocks),
        # one backing allocation of size_bytes; layer l of block b at offset + l*layer_stride + b*block_stride
        "kv_cache_tensors": [{"size_bytes": int(t.size), "layers": list(t.layers), "offset_bytes": int(t.offset),
                              "layer_stride_bytes": int(t.layer_stride), "block_stride_bytes": int(t.block_stride),
                              "num_blocks": int(configs[0].num_blocks_of(t))}
                             for t in configs[0].kv_cache_tensors],
        "gpu_kv_cache_size_tokens": int(tokens),
        "maximum_concurrency": float(concurrency),
        "maximum_concurrency_printed": f"{concurrency:.2f}x",
        # what vLLM's own loggers printed while sizing, through vLLM's own formatter (not a sizing key:
        # tests/vllm/test_vllm_verify.py feeds it to glm-kv's verify; test_glm_kv_plan.py leaves it out)
        "vllm_log": log,
    }


@contextlib.contextmanager
def _vllm_log():
    """Collect the INFO+ lines vLLM's ``vllm`` loggers emit inside the block, formatted by vLLM's own
    NewLineFormatter with logger.py's ``_FORMAT`` / ``_DATE_FORMAT`` (the text a server prints), the process
    named ``EngineCore`` as the engine core names itself (v1/engine/core.py:1476-1484, ``decorate_logs``).
    The harness runs with VLLM_LOGGING_LEVEL=WARNING (``_environment``): the ``vllm`` logger is lowered to
    INFO for the block only, and its own stream handler keeps its WARNING level, so nothing more is shown."""
    import logging

    import vllm.logger as vlog
    from vllm.logging_utils import NewLineFormatter
    from vllm.utils.system_utils import decorate_logs

    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.extend(self.format(record).splitlines())

    decorate_logs("EngineCore")
    handler = Collect(logging.INFO)
    handler.setFormatter(NewLineFormatter(vlog._FORMAT, vlog._DATE_FORMAT, log_level="INFO"))
    root = logging.getLogger("vllm")
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        root.setLevel(level)
        root.removeHandler(handler)


def _attn_layers(vllm_config) -> dict:
    from vllm.config import get_layers_from_vllm_config
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase

    return get_layers_from_vllm_config(vllm_config, AttentionLayerBase)


def _kv_cache_spec(vllm_config) -> dict:
    """The runner's own get_kv_cache_spec (V2 runner's function, or V1's method)."""
    if vllm_config.use_v2_model_runner:
        from vllm.v1.worker.gpu.attn_utils import get_kv_cache_spec

        return get_kv_cache_spec(vllm_config)
    from types import SimpleNamespace

    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    return GPUModelRunner.get_kv_cache_spec(SimpleNamespace(vllm_config=vllm_config, shared_kv_cache_layers={}))


def _environment() -> None:
    os.environ.setdefault("VLLM_KIMI_K3_GEMM_AR", "0")   # else Kimi-K3 imports the cutlass DSL GEMM path
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    # An empty CUDA_VISIBLE_DEVICES is vLLM's "distributed start-up" case (triton_utils/importing.py): triton
    # counts as present with no active driver, as on a GPU host, instead of being replaced by placeholders
    # (which break the Mamba kernels' module imports and switch off Model Runner V2).
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import torch  # noqa: F401  - before the stub libcuda, as in the study's recipe


SERVE = "ORACLE-SERVE "


def serve(gpu_name: str, warm: bool = True) -> int:
    """A fork server for one GPU: ``prepare(gpu)`` once (torch, the stub driver, the stand-in platform and
    vLLM's engine-argument modules: about 6 s of imports, the same for every launch on that GPU), then one
    forked child per launch, so every launch starts from that same fresh state, as a new process would,
    and none sees another's. Requests on stdin, one per line: ``<id> <dir> <launch json>``; the child
    writes ``<dir>/<id>.out`` (the ``ORACLE-RESULT`` line) and ``<dir>/<id>.err``. On stdout, prefixed
    ``ORACLE-SERVE ``: ``ready``, ``started <id> <pid>``, ``done <id> <exit status>``. EOF on stdin: the
    server waits for its children and exits."""
    import select

    _environment()
    prepared = prepare(GPUS[gpu_name], warm)
    children: dict[int, str] = {}

    def say(*words) -> None:
        os.write(1, (SERVE + " ".join(map(str, words)) + "\n").encode())

    sys.stdout.flush()
    sys.stderr.flush()
    say("ready", gpu_name)
    buf, eof = b"", False
    while not eof or children:
        if not eof and select.select([0], [], [], 0.05)[0]:
            chunk = os.read(0, 1 << 16)
            eof = not chunk
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if not line.strip():
                    continue
                ident, folder, launch = line.decode().split(" ", 2)
                pid = os.fork()
                if pid == 0:   # the child: one launch, then out
                    code = 1
                    try:
                        base = os.path.join(folder, ident)
                        for fd, suffix in ((1, ".out"), (2, ".err")):
                            f = os.open(base + suffix, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                            os.dup2(f, fd)
                            os.close(f)
                        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                        out = vllm_plan(json.loads(launch), prepared)
                        print("ORACLE-RESULT " + json.dumps(out), flush=True)
                        code = 0
                    except BaseException:  # noqa: BLE001 - the harness's own crash: its traceback, exit 1
                        import traceback

                        traceback.print_exc()
                    finally:
                        sys.stdout.flush()
                        sys.stderr.flush()
                        os._exit(code)
                children[pid] = ident
                say("started", ident, pid)
        elif eof:
            select.select([], [], [], 0.05)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            say("done", children.pop(pid), os.waitstatus_to_exitcode(status))
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--serve":
        return serve(argv[1], warm=os.environ.get("GLM_KV_VLLM_WARM", "1") != "0")
    if len(argv) != 1:
        print("usage: oracle.py '<launch json>'  |  oracle.py --serve GPU", file=sys.stderr)
        return 2
    _environment()
    out = vllm_plan(json.loads(argv[0]))
    print("ORACLE-RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
