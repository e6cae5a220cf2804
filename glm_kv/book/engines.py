"""The "SGLang or vLLM" page: the six models on H200 and B200, each engine's tokens and requests side by side.

Why a module: the page types no number. Both sides are the plans ``glm-kv compare`` prints: SGLang's
``ledgers.plan.load_plan`` for the model on the GPU at TP 8, and vLLM's ``ledgers.vllm.vllm_plan`` given the
same KV bytes per rank (what ``compare --same-kv-bytes`` does: vLLM's budget needs a GPU profile, and
``--kv-cache-memory-bytes`` is vLLM's own way to state it), read through ``ledgers.compare``'s
``sglang_side`` / ``vllm_side``. The SGLang pools are sized from a stated rest per rank after the weights
(the "Other hybrid models" page's ``REST_BYTES``), so the two pages price the same deployment.
"""
from __future__ import annotations

from functools import lru_cache

from ..inputs.hf_config import SHIPPED, load_hf_config
from ..inputs.profile import make_profile
from ..ledgers.compare import sglang_pool_bytes, sglang_side, vllm_side
from ..ledgers.plan import load_plan
from ..ledgers.vllm import VllmArgs, vllm_plan
from ..units import GiB
from .other_models import CONTEXT, GPUS, MODELS, REST_BYTES, TP

KV_SOURCE = "the SGLang plan's token + state pool bytes per rank (--same-kv-bytes)"


@lru_cache(maxsize=None)
def pair(model: str, gpu: str):
    """(SGLang plan, vLLM plan) for one model on one GPU at TP 8, vLLM given SGLang's pool bytes."""
    splan = load_plan(make_profile({"model": model, "gpu": gpu, "tp_size": TP, "available_bytes": REST_BYTES[gpu]}))
    vplan = vllm_plan(load_hf_config(model), VllmArgs(gpu=gpu, tp=TP, kv_cache_memory_bytes=sglang_pool_bytes(splan)))
    return splan, vplan


def vllm_bytes_per_token(vplan) -> tuple[float, float]:
    """(bytes per token of vLLM's attention layers, of which page padding): each layer's page over its block."""
    pages = [s for _, s in vplan.layers if s.is_attention and s.kind != "CircularBufferSpec"]
    total = sum(s.page_size_bytes / s.block_size for s in pages)
    padding = sum((s.page_size_bytes - s.unpadded_page_size_bytes) / s.block_size for s in pages)
    return total, padding


def vllm_state_bytes_per_request(vplan) -> int:
    """The Mamba groups' blocks one request holds, in bytes (their pages x blocks per request)."""
    return sum(s.page_size_bytes * s.blocks_per_request(vplan.max_model_len, vplan.mamba_cache_mode)
               for _, s in vplan.layers if s.kind == "MambaSpec")


def reason(splan, vplan) -> str:
    """The biggest reason the two engines' requests at the context differ, from the two plans' figures."""
    c, s_tok = splan.capacity, splan.token.cell_size_bytes
    v_tok, pad = vllm_bytes_per_token(vplan)
    if splan.hybrid:
        share = c.mamba_pool_bytes / sglang_pool_bytes(splan)
        return (f"state reserve: SGLang sizes {c.max_mamba_cache_size:,} state slots first ({share:.0%} of the "
                f"bytes, {splan.request.slots_per_request} per request); vLLM's one block pool holds a request's "
                f"state blocks only ({vllm_state_bytes_per_request(vplan) / 2**20:,.0f} MiB)")
    if round(v_tok) != s_tok:
        return (f"bytes per token: SGLang {s_tok:,} B ({splan.token.kv_cache_dtype}), vLLM {v_tok:,.0f} B "
                f"({vplan.kv_cache_dtype}{f', {pad:,.0f} B page padding' if pad >= 1 else ''})")
    return f"the same {s_tok:,} B per token and one pool on both"


def rows() -> list[dict]:
    """One row per model and GPU: KV bytes, tokens and requests at the context per engine, what binds, why."""
    out = []
    for name in MODELS:
        for gpu in GPUS:
            splan, vplan = pair(name, gpu)
            if vplan.refused is not None:
                raise ValueError(f"vLLM refuses {name} on {gpu}: {vplan.refused['message']}")
            if CONTEXT > min(vplan.max_model_len, splan.profile.context_length):   # compare's own refusal
                raise ValueError(f"{name}: requests of {CONTEXT:,} tokens are above an engine's context length")
            s = sglang_side(splan, CONTEXT)
            v = vllm_side(vplan, gpu, None, CONTEXT, KV_SOURCE)
            out.append({
                "model": SHIPPED[name][1], "GPU": gpu,
                "KV GiB per rank": f"{s.kv_bytes_per_rank / GiB:.1f}",
                "SGLang tokens": s.tokens_per_worker, "vLLM tokens": v.tokens_per_worker,
                f"SGLang {CONTEXT // 1024}K requests": s.requests_total,
                f"vLLM {CONTEXT // 1024}K requests": v.requests_total,
                "SGLang bound by": s.binds, "vLLM bound by": v.binds,
                "vLLM block (tokens)": vplan.cache_block_size,
                "why": reason(splan, vplan),
            })
    return out


def glued_values() -> dict:
    """The page's prose numbers."""
    rs = rows()
    k = f"{CONTEXT // 1024}K requests"
    more = [r for r in rs if r[f"vLLM {k}"] > r[f"SGLang {k}"]]
    fewer = [r for r in rs if r[f"vLLM {k}"] < r[f"SGLang {k}"]]
    glm = next(r for r in rs if r["model"] == SHIPPED["glm-5.3-flash"][1] and r["GPU"] == "H200")
    return {
        "en_tp": TP, "en_context": CONTEXT, "en_rows": len(rs), "en_n_models": len(MODELS),
        "en_rest_h200_gib": REST_BYTES["H200"] // GiB, "en_rest_b200_gib": REST_BYTES["B200"] // GiB,
        "en_vllm_more": len(more), "en_vllm_fewer": len(fewer), "en_same": len(rs) - len(more) - len(fewer),
        "en_glm_sglang": glm[f"SGLang {k}"], "en_glm_vllm": glm[f"vLLM {k}"],
        "en_glm_block": glm["vLLM block (tokens)"],
    }


def table():
    """The side-by-side table, for reading (thousands separators, model and GPU in view); the reasons are
    ``reasons_table``'s (a sentence per row does not fit beside ten numbers at 400 px)."""
    import pandas as pd

    from .tables import show

    return show(pd.DataFrame(rows()).drop(columns="why").set_index(["model", "GPU"]))


def reasons_table():
    """The largest reason each pair differs, one sentence per model and GPU."""
    import pandas as pd

    from .tables import show

    return show(pd.DataFrame(rows())[["model", "GPU", "why"]].set_index(["model", "GPU"]))
