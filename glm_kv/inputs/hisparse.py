"""``--enable-hisparse`` (issue 30): hierarchical sparse attention as SGLang 0.5.23 sizes and refuses it.

With HiSparse a DSA model's device KV pool holds only ``1 / host_to_device_ratio`` of the tokens the
scheduler addresses: ``HiSparseTokenToKVPoolAllocator`` hands out ``size x ratio`` logical slots
(``size_full``) over ``size`` device slots, the rest living in a host copy the coordinator swaps in. What
moves the device budget (model_executor/pool_configurator.py ``_compute_dsa_indexer_cell_size`` and the
EAGLE draft arm): the indexer K buffer is allocated for every logical slot (``index_buf_size = size x
ratio``, ``HiSparseDSATokenToKVPool``) and on every full layer (no shared-top-k elision), and the MTP
draft's KV and indexer are indexed by logical IDs, so both carry the ratio too. The ratio comes from
``--hisparse-config`` (``mem_cache/sparsity/factory.py _parse_sparse_config``, default 2).

The refusals are SGLang's, in its words (arg_groups/hisparse_hook.py ``validate_hisparse``,
arg_groups/overrides.py ``_dsa_split_backend_resolution``'s HiSparse arm, pd_disaggregation_hook.py);
tests/sglang/test_flags_hisparse.py drives SGLang's own classes on the same launches.
"""
from __future__ import annotations

import json
from typing import Any

from ..errors import ProfileError, shown

HISPARSE_DEFAULT_RATIO = 2          # SparseConfig.host_to_device_ratio / _parse_sparse_config's default
HISPARSE_DEFAULT_TOP_K = 2048
HISPARSE_SWAP_BLOCK_MAX = 1024
HISPARSE_KV_CACHE_DTYPES = ("bfloat16", "fp8_e4m3")
# hisparse_hook.HISPARSE_CUDA_DSA_BACKENDS_BY_DTYPE (CUDA: glm-kv plans NVIDIA GPUs only)
HISPARSE_BACKENDS = {"bfloat16": ("flashmla_sparse",), "fp8_e4m3": ("flashinfer_sparse_mla", "flashmla_kv")}

SGLANG_SAYS = {
    "model": ("--enable-hisparse is only supported for DSA (DeepSeek Sparse Attention) models (e.g., DeepSeek "
              "V3.2, GLM-5), DeepSeek V4, and MiniMax M3 now. "),
    "radix": "Hierarchical sparse attention currently requires --disable-radix-cache.",
    "topk": "The minimal HiSparse spec integration supports linear speculation only; use --speculative-eagle-topk 1.",
    "tilelang_fp8": "CUDA TileLang FP8 KV does not support HiSparse.",
    "decode_radix": "--disaggregation-decode-enable-radix-cache is incompatible with --enable-hisparse",
    # mem_cache/allocator/hisparse.py HiSparseTokenToKVPoolAllocator.__init__: the allocator registers its
    # logical-to-device mapping on the KV pool, which a state hybrid's HybridLinearKVPool does not have
    "hybrid": "'HybridLinearKVPool' object has no attribute 'register_mapping'",
}


def _refuse(field: str, says: str, where: str) -> ProfileError:
    return ProfileError(field, f"SGLang 0.5.23 refuses it: \"{says}\" ({where})")


def hisparse_ratio(p) -> int:
    """The host-to-device ratio in force: 0 without ``--enable-hisparse`` (``--hisparse-config`` is then never
    read), else ``--hisparse-config``'s ``host_to_device_ratio`` (default 2), its JSON checked as
    ``_parse_sparse_config`` checks it when the pools are built (the server does not start otherwise)."""
    if not p.enable_hisparse:
        return 0
    raw = p.hisparse_config
    cfg: Any = {}
    if raw is not None:
        try:
            cfg = json.loads(raw)
        except ValueError as e:
            raise _refuse("hisparse_config", f"Failed to parse hisparse_config: {e}",
                          "mem_cache/sparsity/factory.py") from None
        if not isinstance(cfg, dict):   # SGLang pops keys off it: anything else fails before the pools
            raise ProfileError("hisparse_config", f"must be a JSON object (SGLang reads its keys), got "
                                                  f"{type(cfg).__name__}")
    top_k = cfg.get("top_k", HISPARSE_DEFAULT_TOP_K)
    buffer = cfg.get("device_buffer_size", 2 * top_k if _is_int(top_k) else top_k)
    if not (_is_int(top_k) and _is_int(buffer)):
        raise ProfileError("hisparse_config", f"top_k and device_buffer_size must be integers, got "
                                              f"{shown(top_k)} and {shown(buffer)}")
    if buffer < top_k:
        raise _refuse("hisparse_config", f"device_buffer_size ({buffer}) must be no smaller than top_k ({top_k})",
                      "mem_cache/sparsity/factory.py")
    block = cfg.get("swap_in_block_size", 960)
    if not _is_int(block):
        raise _refuse("hisparse_config", f"swap_in_block_size must be an integer, got {block!r}",
                      "mem_cache/sparsity/factory.py")
    if block <= 0 or block > HISPARSE_SWAP_BLOCK_MAX:
        raise _refuse("hisparse_config", f"swap_in_block_size ({block}) must be in the range [1, 1024]",
                      "mem_cache/sparsity/factory.py")
    ratio = cfg.get("host_to_device_ratio", HISPARSE_DEFAULT_RATIO)
    if isinstance(ratio, bool):   # JSON true is Python's 1 in SGLang's size x ratio
        ratio = int(ratio)
    if not _is_int(ratio) or ratio < 1:
        # the allocator sizes torch tensors with size x ratio (allocator/hisparse.py): a fraction or a
        # ratio below 1 fails there; glm-kv names it before
        raise ProfileError("hisparse_config", f"host_to_device_ratio must be a positive integer (SGLang's "
                                              f"HiSparse allocator sizes its slots as tokens x ratio), got "
                                              f"{shown(ratio)}")
    return ratio


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def hisparse_backends(p, kv_dtype: str) -> tuple[str, str] | None:
    """``_dsa_split_backend_resolution``'s HiSparse arm (CUDA): both DSA backends default to flashmla_kv
    with FP8 KV, flashmla_sparse otherwise (a backend the user set is kept); None without HiSparse."""
    if not p.enable_hisparse:
        return None
    default = "flashmla_kv" if kv_dtype == "fp8_e4m3" else "flashmla_sparse"
    prefill, decode = p.dsa_prefill_backend or default, p.dsa_decode_backend or default
    if kv_dtype == "fp8_e4m3" and "tilelang" in (prefill, decode):
        raise _refuse("dsa_prefill_backend" if prefill == "tilelang" else "dsa_decode_backend",
                      SGLANG_SAYS["tilelang_fp8"], "arg_groups/overrides.py")
    return prefill, decode


def validate_hisparse(p, is_dsa: bool, kv_dtype: str, prefill: str, decode: str, has_state_layers: bool = False) -> None:
    """``validate_hisparse`` (arg_groups/hisparse_hook.py) for a resolved launch, in its order: a DSA model,
    the radix cache off, linear speculation only, a bf16 / FP8 E4M3 KV cache, backends from HiSparse's list.
    The decode radix refusal (pd_disaggregation_hook.py) comes first, as that hook runs earlier.

    Past the validators, a DSA model with state layers (GLM-5.3-Flash: DSA + KDA) does not start either: its
    KV pool is ``HybridLinearKVPool`` (``_build_hybrid_linear_kv_pool``, not HiSparse's DSA pool) while the
    allocator is still ``HiSparseTokenToKVPoolAllocator``, whose constructor calls the pool's
    ``register_mapping``; the pool has none, and the server fails building its pools
    (tests/sglang/test_flags_hisparse.py builds SGLang's allocator over SGLang's pool on meta)."""
    if not p.enable_hisparse:
        return
    if p.disaggregation_mode == "decode" and p.disaggregation_decode_enable_radix_cache:
        raise ProfileError("disaggregation_decode_enable_radix_cache", f"SGLang 0.5.23 refuses it: \""
                           f"{SGLANG_SAYS['decode_radix']}\" (arg_groups/pd_disaggregation_hook.py)")
    if not is_dsa:
        raise _refuse("enable_hisparse", SGLANG_SAYS["model"].strip(), "arg_groups/hisparse_hook.py")
    if not p.disable_radix_cache:
        raise _refuse("enable_hisparse", SGLANG_SAYS["radix"], "arg_groups/hisparse_hook.py")
    if p.speculative_algorithm is not None and (p.speculative_eagle_topk or 1) != 1:
        raise _refuse("speculative_eagle_topk", SGLANG_SAYS["topk"], "arg_groups/hisparse_hook.py")
    if kv_dtype not in HISPARSE_KV_CACHE_DTYPES:
        raise _refuse("kv_cache_dtype", f"HiSparse requires one of {HISPARSE_KV_CACHE_DTYPES} KV cache dtypes, but got "
                                        f"--kv-cache-dtype={kv_dtype}. Please use --kv-cache-dtype=bfloat16 or "
                                        f"--kv-cache-dtype=fp8_e4m3.", "arg_groups/hisparse_hook.py")
    allowed = list(HISPARSE_BACKENDS[kv_dtype])
    for field, label, backend in (("dsa_prefill_backend", "prefill", prefill), ("dsa_decode_backend", "decode", decode)):
        if backend not in allowed:
            raise _refuse(field, f"HiSparse supports DSA {label} backend(s) {allowed} on this platform with "
                                 f"--kv-cache-dtype={kv_dtype}, but got --dsa-{label}-backend={backend}. Please use one "
                                 f"of {allowed}, or omit the option to let SGLang pick a backend for this platform.",
                          "arg_groups/hisparse_hook.py")
    if has_state_layers:
        hisparse_ratio(p)   # its JSON is parsed while the pools are sized, before the allocator fails
        raise ProfileError("enable_hisparse", f"SGLang 0.5.23 cannot start this model with it (DSA with state layers: "
                                              f"its KV pool is HybridLinearKVPool): building the token allocator it fails "
                                              f"with \"AttributeError: {SGLANG_SAYS['hybrid']}\" "
                                              f"(mem_cache/allocator/hisparse.py HiSparseTokenToKVPoolAllocator)")
