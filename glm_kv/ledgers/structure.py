"""What lives in HBM, as SGLang's objects name it: one HybridLinearKVPool, two sub-pools."""
from __future__ import annotations

from .plan import Plan


def pool_structure(plan: Plan) -> dict:
    """The default path's pool tree (no --enable-unified-memory, no draft pools)."""
    m, tok, req, tail = plan.model, plan.token, plan.request, plan.tail
    full = {
        "name": "full_kv_pool", "class": "DSATokenToKVPool", "parent": "MLATokenToKVPool",
        "layers": list(m.full_attention_layers), "grows_with": "tokens",
        "buffers": [
            {"name": "kv_buffer", "per": "layer", "row": f"{tok.kv_cache_dim} x {tok.store_dtype}",
             "grows_with": "tokens"},
            {"name": "IndexKeyCache.index_k_with_scale_buffer", "per": "layer",
             "row": f"{tok.indexer_page_bytes} B per {tok.indexer_tokens_per_page}-token page",
             "grows_with": "tokens"},
        ],
    }
    if tail.bytes:
        full["buffers"] += [
            {"name": "_compress_tail_k", "per": "layer", "row": f"{tail.width} x {tail.head_dim} bf16",
             "grows_with": "requests"},
            {"name": "_compress_tail_score", "per": "layer", "row": f"{tail.width} x {tail.head_dim} bf16",
             "grows_with": "requests"},
        ]
    mamba = {
        "name": "mamba_pool", "class": "MambaPool", "layers": list(m.linear_attention_layers),
        "grows_with": "state slots",
        "buffers": [
            {"name": "conv_state", "per": "all KDA layers", "row": f"{tuple(req.conv_state_shape)} bf16",
             "grows_with": "state slots"},
            {"name": "temporal_state", "per": "all KDA layers",
             "row": f"{tuple(req.temporal_state_shape)} {req.temporal_dtype}", "grows_with": "state slots"},
        ],
    }
    return {
        "name": "token_to_kv_pool", "class": "HybridLinearKVPool", "children": [full, mamba],
        "beside": [{"name": "req_to_token_pool", "class": "HybridReqToTokenPool",
                    "row": "context_len x int32", "grows_with": "requests"}],
    }
