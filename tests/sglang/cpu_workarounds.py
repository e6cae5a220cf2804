"""Every workaround needed to run SGLang 0.5.23's own code on a CPU-only machine.

This is the ONLY place the agreement suite touches SGLang's behaviour. Each
workaround is named, says why it is needed, and is as small as it can be. None
of them changes a formula: they answer the hardware questions SGLang asks
(which GPU, how much memory) with the profile's GPU, and they turn off the two
calls that need a CUDA driver (pinned host memory, the HiCache transfer
controller). Sizes, shapes, dtypes, validators and sizing functions all run
unpatched.

  W1 PLATFORM_FACTS     SGLang's own test hook `runtime_context.override_platform`
                        says "this is a CUDA SM90 / SM100 machine".
                        `cuda_graph_config.default_prefill_backend()` asks
                        `sglang.srt.utils.is_cuda()` directly (CUDA: breakable prefill
                        graphs on, which adds 1.5 GiB to the default
                        mem_fraction_static reservation for MLA); it is called with that
                        probe answering True. (Answering True process-wide is not
                        possible: kernel imports would follow.)
  W2 DEVICE_CAPABILITY  `torch.cuda.get_device_capability()` is called directly by
                        the DSA kv-dtype / backend resolution; without a driver it
                        raises. Answer with the profile GPU's (major, minor).
  W3 DEVICE_MEMORY      `get_device_memory_capacity()` (MiB, drives the default
                        mem_fraction_static) and `get_available_gpu_memory()` (GiB,
                        what `_profile_available_bytes` reads after weights load)
                        answer with the profile GPU's memory and weights.
  W4 NO_PINNED_MEMORY   `pool_host.common._cuda_host_register` (cudaHostRegister of
                        HiCache host buffers) is a no-op: no CUDA runtime here.
  W5 NO_CACHE_CONTROLLER `HybridCacheController` (CUDA streams, transfer threads) is
                        replaced by a stub when assembling the HiCache host pool group;
                        the host pools themselves are SGLang's classes, unpatched.
  W6 SMALL_POOLS        Pools are instantiated at small sizes (a few pages, a few
                        state slots, a short req_to_token row) so they fit in RAM;
                        byte counts are measured from the tensors and scaled
                        linearly (per token, per slot, per row). Linearity is
                        checked by measuring at two sizes.
  W7 PROCESS_STATE      SGLang keeps some settings in process-wide environment
                        variables (`--mamba-ssm-dtype` sets SGLANG_MAMBA_SSM_DTYPE);
                        they are reset before each profile so profiles do not leak
                        into each other.
  W8 DIRECT_IO_OPS      (radix_driver.py, HiCache on) The host-pool modules bind
                        sgl-kernel's `direct` io copies only on CUDA/ROCm
                        (pool_host/mla.py, dsa.py, mamba.py); `install_direct_io_ops`
                        supplies the three as plain torch indexed copies. The
                        default `kernel` io backend and `page_first` layout need
                        CUDA pointer kernels and are not covered on a CPU.
  W10 UNCAPPED_REQUEST_COUNT  SGLang computes the per-DP-worker request count of
                        ``--max-running-requests`` only inside
                        ``KVCacheConfigurator.resolve_max_num_reqs``
                        (kv_cache_configurator.py:3128, ``requested_per_worker``),
                        which then caps it by the token pool (``token_capacity // 2``)
                        and the mamba state pool (``max_mamba_cache_size // ratio``).
                        ``uncapped_request_count`` calls it with a token capacity and
                        a (scoped) mamba pool size that cannot bind, so its answer is
                        SGLang's uncapped per-worker count; the rule itself runs
                        unpatched.
  W11 DRAFT_RUNNER_WITHOUT_MODEL  The MTP/NextN draft worker's device pool is built by
                        the draft ``ModelRunner``'s ``KVCacheConfigurator``
                        (is_draft_worker=True) from its draft-mode ``ModelConfig``,
                        ``resolve_layer_indices``, ``configure_kv_cache_dtype`` and
                        ``resolve_spec_aux_hidden_state_config``, all called here as
                        SGLang calls them; the ``ModelRunner`` itself (weights,
                        NCCL, CUDA graphs) cannot be built on a CPU, so ``model`` is
                        None (the draft loads no quantized KV scales; its layer range
                        is ``num_nextn_predict_layers`` from the config) and the
                        target's allocator is a stand-in that only answers
                        ``get_kvcache`` (a non-unified, non-HiSparse allocator, which
                        SGLang's draft path passes through untouched).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

# GPU facts for the profiles' `gpu` field: this suite's own table, so that SGLang is never handed
# glm-kv's gpus.json (a wrong entry there would otherwise agree with itself). Memory is what CUDA
# reports (torch.cuda.mem_get_info total), in MiB, the unit SGLang's get_device_memory_capacity()
# returns; the SM is the CUDA compute capability (NVIDIA's "CUDA GPUs" list). Each has its source
# in GPU_FACT_SOURCES; tests/sglang/test_gpu_defaults.py holds glm-kv's table to this one.
GPU_FACTS = {
    "A100": dict(sm=80, capability=(8, 0), memory_mib=81920),
    "L40S": dict(sm=89, capability=(8, 9), memory_mib=46068),
    "H100": dict(sm=90, capability=(9, 0), memory_mib=81559),
    "H20": dict(sm=90, capability=(9, 0), memory_mib=97871),
    "H200": dict(sm=90, capability=(9, 0), memory_mib=143771),
    "B200": dict(sm=100, capability=(10, 0), memory_mib=183359),
    "GB200": dict(sm=100, capability=(10, 0), memory_mib=189471),
    # B300 SXM6 as CUDA reports it (public printouts; reference sglang-0.5.23.md): an input fact.
    "B300": dict(sm=103, capability=(10, 3), memory_mib=275_040),
    "GB300": dict(sm=103, capability=(10, 3), memory_mib=275_040),
    "RTX PRO 6000": dict(sm=120, capability=(12, 0), memory_mib=97887),
    # integrated (unified) memory: the system total CUDA reports, 128,501,256,192 B
    "GB10": dict(sm=121, capability=(12, 1), memory_mib=128_501_256_192 / (1 << 20)),
}
_SM = "SM: NVIDIA's CUDA GPUs list (compute capability)"
GPU_FACT_SOURCES = {
    "A100": f"{_SM} 8.0; nvidia-smi total 81,920 MiB, A100 SXM4 80GB (modal-labs/modal-client PR #2797)",
    "L40S": f"{_SM} 8.9; nvidia-smi total 46,068 MiB (modal-labs/modal-client PR #2797)",
    "H100": f"{_SM} 9.0; nvidia-smi total 81,559 MiB, H100 SXM (reference sglang-0.5.23.md, public printouts)",
    "H20": f"{_SM} 9.0; nvidia-smi total 97,871 MiB (NVIDIA/nvtrust issue #128, driver 580.95.05)",
    "H200": f"{_SM} 9.0; nvidia-smi total 143,771 MiB (reference sglang-0.5.23.md, public printouts)",
    "B200": f"{_SM} 10.0; nvidia-smi total 183,359 MiB (reference sglang-0.5.23.md, public printouts)",
    "GB200": f"{_SM} 10.0; 189,471 MiB NOMINAL: no public CUDA printout found, a datasheet-derived figure",
    "B300": f"{_SM} 10.3; nvidia-smi total 275,040 MiB, B300 SXM6 (reference sglang-0.5.23.md)",
    "GB300": f"{_SM} 10.3; NOMINAL: taken equal to B300 SXM6 (same die and HBM), no public printout found",
    "RTX PRO 6000": f"{_SM} 12.0; 97,887 MiB NOMINAL: no public CUDA printout found here",
    "GB10": f"{_SM} 12.1; unified memory, system total 128,501,256,192 B that CUDA reports "
            "(leptonai/gpud PR #1170; nvidia-smi prints [N/A])",
}
NOMINAL_GPU_FACTS = {"GB200", "GB300", "RTX PRO 6000"}  # not a CUDA reading: memory compared loosely


def gpu_memory_bytes(name: str) -> int:
    """Device memory of a GPU of this suite's table, in bytes."""
    return int(GPU_FACTS[name]["memory_mib"] * (1 << 20))


# W7: process-wide environment variables SGLang reads or writes.
SGLANG_ENV_VARS = (
    "SGLANG_MAMBA_SSM_DTYPE",
    "SGLANG_MAMBA_CONV_DTYPE",
    "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK",
)


@dataclass
class FakeGpu:
    sm: int
    capability: tuple
    memory_mib: float
    # GiB free after the weights are loaded (None: not needed for this profile).
    free_after_weights_gib: float | None = None


@contextlib.contextmanager
def cpu_as_gpu(gpu: FakeGpu):
    """W1-W4 for one profile; restores everything on exit."""
    import torch

    import sglang.srt.arg_groups.memory_hook as memory_hook
    import sglang.srt.mem_cache.kv_cache_configurator as kvc_mod
    import sglang.srt.mem_cache.pool_host.common as host_common
    import sglang.srt.model_executor.cuda_graph_config as graph_config
    import sglang.srt.utils as utils
    import sglang.srt.utils.common as common
    from sglang.srt.runtime_context import override_platform

    sm100 = gpu.sm >= 100
    # W1
    platform = override_platform(
        is_cuda=True, is_hip=False, is_npu=False, is_xpu=False, is_musa=False,
        is_mps=False, is_sm90=gpu.sm == 90, is_sm100=sm100,
        is_sm100_or_sm110=sm100, is_sm110=False, is_sm120=False,
        is_blackwell=sm100, is_hopper_with_cuda_12_3=gpu.sm == 90,
        has_flashinfer=False, has_amx=False, device_sm=gpu.sm,
        device_capability=gpu.capability,
    )

    def capacity_mib(*_a, **_k):  # W3
        return float(gpu.memory_mib)

    def free_gib(*_a, **_k):  # W3
        if gpu.free_after_weights_gib is None:
            raise RuntimeError("free GPU memory asked for but the profile gives no weights")
        return gpu.free_after_weights_gib

    saved = [
        (torch.cuda, "get_device_capability"),
        (graph_config, "default_prefill_backend"),
        (common, "get_device_memory_capacity"),
        (memory_hook, "get_device_memory_capacity"),
        (kvc_mod, "get_device_memory_capacity"),
        (kvc_mod, "get_available_gpu_memory"),
        (host_common, "_cuda_host_register"),
    ]
    originals = [(obj, name, getattr(obj, name)) for obj, name in saved]
    env_saved = {k: os.environ.get(k) for k in SGLANG_ENV_VARS}
    try:
        for k in SGLANG_ENV_VARS:  # W7
            os.environ.pop(k, None)
        platform.install()
        original_default_prefill_backend = graph_config.default_prefill_backend

        def default_prefill_backend_on_cuda():  # W1
            probe = utils.is_cuda
            utils.is_cuda = lambda *a, **k: True
            try:
                return original_default_prefill_backend()
            finally:
                utils.is_cuda = probe

        graph_config.default_prefill_backend = default_prefill_backend_on_cuda
        torch.cuda.get_device_capability = lambda *a, **k: gpu.capability  # W2
        common.get_device_memory_capacity = capacity_mib
        memory_hook.get_device_memory_capacity = capacity_mib
        kvc_mod.get_device_memory_capacity = capacity_mib
        kvc_mod.get_available_gpu_memory = free_gib
        host_common._cuda_host_register = lambda *a, **k: None  # W4
        yield
    finally:
        for obj, name, value in originals:
            setattr(obj, name, value)
        platform.restore()
        for k, v in env_saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def stub_cache_controller():
    """W5: HybridCacheController needs CUDA streams; the host pools do not."""
    import sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler as assembler

    original = assembler.HybridCacheController
    assembler.HybridCacheController = lambda *a, **k: None
    try:
        yield
    finally:
        assembler.HybridCacheController = original


def quiet_sglang_logs():
    """SGLang warns loudly about CPU-only imports; keep the test output readable."""
    import logging
    import warnings

    warnings.filterwarnings("ignore", message=".*support.*currently.*")
    logging.getLogger("sglang").setLevel(logging.ERROR)


# W8: the `direct` io backend's copies in torch. Host page_first_direct buffers are
# (pages, layers, page_size, ...): host token t lives at [t // page, layer, t % page].
def _direct_transfer_kv(src_layers, dst_layers, src_indices, dst_indices, page_size):
    for s, d in zip(src_layers, dst_layers):
        d[dst_indices.to(d.device).long()] = s[src_indices.to(s.device).long()].to(d.device)


def _direct_all_layer_lf_pf(src_ptrs, dst_ptrs, src_indices, dst_indices, page_size):
    host = dst_ptrs[0]
    di = dst_indices.long().cpu()
    si = src_indices.long()
    for layer, src in enumerate(src_ptrs):
        host[di // page_size, layer, di % page_size] = src[si.to(src.device)].to(host.device)


def _direct_per_layer_pf_lf(src_ptrs, dst_ptrs, src_indices, dst_indices, layer_id, page_size):
    host, dst = src_ptrs[0], dst_ptrs[0]
    si = src_indices.long().cpu()
    dst[dst_indices.long().to(dst.device)] = host[si // page_size, layer_id, si % page_size].to(dst.device)


def install_direct_io_ops():
    """W8: bind the three direct io copies where SGLang left them unbound (CPU only)."""
    import importlib

    ops = {"transfer_kv_direct": _direct_transfer_kv,
           "transfer_kv_all_layer_direct_lf_pf": _direct_all_layer_lf_pf,
           "transfer_kv_per_layer_direct_pf_lf": _direct_per_layer_pf_lf}
    for m in ("mla", "dsa", "mamba", "mha"):
        mod = importlib.import_module(f"sglang.srt.mem_cache.pool_host.{m}")
        for name, fn in ops.items():
            if name not in vars(mod):
                setattr(mod, name, fn)


@contextlib.contextmanager
def uncapped_request_count(kvc, requested: int):
    """W10: a token capacity (yielded) and a scoped ``max_mamba_cache_size`` under which
    ``kvc.resolve_max_num_reqs`` returns SGLang's per-worker count of ``requested`` uncapped.

    ``requested_per_worker <= requested``; the token cap is ``(2 * requested) // 2 = requested``
    and the mamba cap ``(requested * ratio) // ratio = requested``: neither is below it.
    """
    from sglang.srt.runtime_context import get_schedule

    ratio = kvc._calculate_mamba_ratio() if kvc.mambaish_config is not None else 1
    with get_schedule().override(max_mamba_cache_size=requested * ratio):
        yield 2 * requested
