"""The device pools' import path from before issue 31, kept for the book's notebooks and the tests.

Issue 31 made one geometry and one builder for every model: ``model_pools`` (``ModelGeometry`` -- still
``PoolGeometry`` -- ``model_geometry`` / ``pool_geometry``, ``ModelDevicePools`` and SGLang's object tree over
its tensors, ``DevicePools``), with SGLang's pool objects, free lists and shape rules in ``pool_objects``.
This module only re-exports them; nothing inside glm_kv imports it, so it adds no import cycle.
"""
from __future__ import annotations

from .model_pools import DevicePools, ModelDevicePools, ModelGeometry, PoolGeometry, model_geometry, pool_geometry
from .pool_objects import (CONV_STATE_DTYPE, DSA_QUANT_BLOCK_SIZE, DSA_ROPE_STORAGE_BYTES, FP8_SCALE_ITEM_BYTES,
                           LAYOUTS, REQ_TO_TOKEN_BASE_EXTRA, REQ_TO_TOKEN_DTYPE, DSATokenToKVPool, HybridLinearKVPool,
                           IndexKeyCache, MambaPool, MambaSlotAllocator, PagedTokenToKVPoolAllocator, RankPoolSizes,
                           ReqToTokenPool, _alloc, default_device, host_pool_size, kv_store_dtype, mla_kv_cache_dim,
                           req_to_token_extra_context_len, torch_dtype, write_reduced_model_config)

__all__ = ["CONV_STATE_DTYPE", "DSA_QUANT_BLOCK_SIZE", "DSA_ROPE_STORAGE_BYTES", "FP8_SCALE_ITEM_BYTES", "LAYOUTS",
           "REQ_TO_TOKEN_BASE_EXTRA", "REQ_TO_TOKEN_DTYPE", "DSATokenToKVPool", "DevicePools", "HybridLinearKVPool",
           "IndexKeyCache", "MambaPool", "MambaSlotAllocator", "ModelDevicePools", "ModelGeometry",
           "PagedTokenToKVPoolAllocator", "PoolGeometry", "RankPoolSizes", "ReqToTokenPool", "_alloc", "default_device",
           "host_pool_size", "kv_store_dtype", "mla_kv_cache_dim", "model_geometry", "pool_geometry",
           "req_to_token_extra_context_len", "torch_dtype", "write_reduced_model_config"]
