"""The "Other hybrid models" page: GLM-5.3-Flash and its hybrid cousins, ledgers side by side.

Every shipped config is on the page (``PAGE_MODELS``: the one list ``glm-kv models`` plans), each at the
largest TP up to 8 that SGLang starts it with (``page_tp``: Jet-Nemotron-2B's 12 JetBlock heads refuse
TP 8), and the families are compared by what their pools hold: what grows with tokens, what with
requests, and what HiCache copies to the host (``family_rows``, from plans with HiCache on).

Why a module: the page types no number. Every figure comes from the one plan
(``glm_kv.ledgers.plan.load_plan``), which sums the layer specs of each shipped config, GLM-5.3-Flash's
among them. The pools are sized from
a stated rest per rank (``REST_BYTES``): the bytes SGLang has left after the weights depend on
each checkpoint's weights, which glm-kv can only estimate from the config, so the page states the
budget instead of guessing it.
"""
from __future__ import annotations

from functools import lru_cache

from ..errors import ProfileError
from ..inputs.catalog import FAMILY_LAYERS, starts_under_sglang
from ..inputs.hf_config import DSV4_SHIPPED, SHIPPED, load_hf_config
from ..inputs.profile import make_profile
from ..ledgers.plan import load_plan
from ..units import GiB

# the six models the "SGLang or vLLM" page (engines.py) also compares
MODELS = ("glm-5.3-flash", "kimi-k3", "qwen3.5-35b-a3b", "nemotron-3-super-120b-a12b-fp8", "deepseek-v3.2", "glm-5.1")
GPUS = ("H200", "B200")
TP = 8
# stated inputs: the rest per rank after weights that the pools are sized from, per GPU
REST_BYTES = {"H200": 60 * GiB, "B200": 100 * GiB}
CONTEXT = 131_072     # the request length the per-request column prices
# sglang pull request 11309 (that PR's build, 2025-10-07): a DeepSeek-V3.2-Exp boot on 8 x B200 (fp8, FlashMLA
# scaled rows, --tp 8 --dp 8 --enable-dp-attention) logs this many tokens
# in this many GiB of KV (the log's figures, an input; the page recomputes the GiB)
ANCHOR_ISSUE, ANCHOR_TOKENS, ANCHOR_LOGGED_GIB = 11309, 975_424, "43.67"
FAMILY_WORDS = FAMILY_LAYERS   # glm-kv models' words for a family (one table)
# every config glm-kv ships, in glm-kv models' order (issue 32), less one SGLang 0.5.23 refuses whatever the flags
# (Nemotron-3.5-Lightning-NVFP4: its nemotron_h override; glm-kv models says so)
PAGE_MODELS = tuple(name for name in SHIPPED if starts_under_sglang(name))


@lru_cache(maxsize=None)
def page_tp(model: str) -> int:
    """The largest TP up to ``TP`` that the model starts with (a split its heads refuse is skipped)."""
    for tp in (TP, 4, 2, 1):
        try:
            _plan(model, "H200", tp=tp)
            return tp
        except ProfileError:
            continue
    raise ProfileError("tp_size", f"{model} starts at no TP of {TP}, 4, 2, 1")


def _plan(model: str, gpu: str, with_capacity: bool = True, tp: int | None = None, hicache: bool = False):
    fields = {"model": model, "gpu": gpu, "tp_size": tp or page_tp(model)}
    if with_capacity:
        fields["available_bytes"] = REST_BYTES[gpu]
    if hicache:
        fields["enable_hierarchical_cache"] = True
    return load_plan(make_profile(fields))


def ledger_rows(gpu: str = "H200") -> list[dict]:
    """Per token and per request, one row per model, at TP 8 on ``gpu``'s defaults."""
    rows = []
    for name in PAGE_MODELS:
        p = _plan(name, gpu)
        tok, req = p.token, p.request
        kinds = p.layers.by_kind()
        rows.append({
            "model": SHIPPED[name][1],
            "TP": page_tp(name),
            "layers (token / state)": FAMILY_WORDS[p.config.family],
            "full-attention layers": len(p.layers.full_attention_layers),
            "state layers": len(p.layers.state_layers),
            "KV dtype": tok.kv_cache_dtype,
            "bytes per token": tok.cell_size_bytes,
            "indexer share": tok.indexer_bytes_per_token,
            "state slot bytes": req.state_slot_bytes,
            "slots per request": req.slots_per_request,
            "state bytes per request": req.state_bytes_per_request,
            f"one {CONTEXT // 1024}K request": tok.cell_size_bytes * CONTEXT + req.state_bytes_per_request,
            "kinds": ", ".join(f"{k} x {v['layers']}" for k, v in kinds.items()),
        })
    return rows


def capacity_rows() -> list[dict]:
    """Tokens and requests that fit on one rank of each GPU (TP 8, the stated rest)."""
    rows = []
    for name in PAGE_MODELS:
        row = {"model": SHIPPED[name][1], "TP": page_tp(name)}
        for gpu in GPUS:
            c = _plan(name, gpu).capacity
            row[f"{gpu} tokens"] = c.max_total_num_tokens
            row[f"{gpu} requests"] = c.max_running_requests_per_worker
            # requests of CONTEXT tokens resident at once: the request cap (which already holds
            # the state-slot cap) and the token slots over the context length
            row[f"{gpu} {CONTEXT // 1024}K requests"] = min(c.max_running_requests_per_worker,
                                                            c.max_total_num_tokens // CONTEXT)
            row[f"{gpu} requests set by"] = c.binding_limit   # SGLang's cap (glossary: "set by", not "binds")
        rows.append(row)
    return rows


def host_bytes_per_token(host) -> int:
    """What HiCache copies to the host per token: the KV host row and the DSA indexer host share (and a
    hybrid-SWA model's SWA host row, one per SWA-pool token: issue 32)."""
    return host.kv_bytes_per_token + host.indexer_bytes_per_token + (host.swa_bytes_per_token or 0)


def family_rows(gpu: str = "H200") -> list[dict]:
    """One row per family: which layer kinds grow with tokens (token pool) and which with requests (state
    slots), what HiCache copies to the host (its host pools, from a plan with HiCache on) and the bytes it
    copies per token and per state slot; the family's first shipped model gives the bytes."""
    rows: dict[str, dict] = {}
    for name in PAGE_MODELS:
        fam = load_hf_config(name).family
        if fam in rows:
            rows[fam]["models"] += 1
            continue
        p = _plan(name, gpu, hicache=True)
        kinds = p.layers.by_kind()
        host = p.host
        rows[fam] = {
            "family": FAMILY_WORDS[fam], "models": 1, "bytes from": SHIPPED[name][1],
            # the SWA pool grows with tokens too (ratio x the full pool's), up to the window per request
            "grows with tokens": ", ".join(k for k, v in kinds.items() if v["pool"] in ("token", "swa")),
            "grows with requests": ", ".join(k for k, v in kinds.items() if v["pool"] == "state") or "-",
            "bytes per token": p.token.cell_size_bytes,
            "bytes per request (state)": p.request.state_bytes_per_request,
            "HiCache host pools": ", ".join(host.entries),
            "host bytes per token": host_bytes_per_token(host),
            "host bytes per state slot": host.mamba_slot_bytes,
        }
    return list(rows.values())


# a stated input: SGLang 0.5.23 starts DeepSeek-V4's HiCache only at an explicit --hicache-ratio (no auto-size)
DSV4_HICACHE_RATIO = 2


@lru_cache(maxsize=None)
def _dsv4(model: str, gpu: str, hicache: bool = False):
    """DeepSeek-V4's plan (its own pools, ``ledgers.dsv4_plan``) at TP ``TP`` on ``gpu``, from the stated rest
    (with HiCache at ``DSV4_HICACHE_RATIO``)."""
    from ..ledgers.dsv4_plan import dsv4_plan

    fields = {"model": model, "gpu": gpu, "tp_size": TP, "available_bytes": REST_BYTES[gpu]}
    if hicache:
        fields.update(enable_hierarchical_cache=True, hicache_ratio=DSV4_HICACHE_RATIO)
    return dsv4_plan(make_profile(fields))


def dsv4_rows() -> list[dict]:
    """DeepSeek-V4-Flash and -Pro (issue 32): per token, per request, and what fits on one rank of each GPU at
    TP ``TP`` from the stated rest, as SGLang 0.5.23's DSV4PoolConfigurator sizes its pools."""
    from ..ledgers.dsv4 import bytes_summary, requests_fit_at
    from ..ledgers.dsv4_plan import DSV4_PAGE_SIZE

    rows = []
    for name, (_stem, hf_id) in DSV4_SHIPPED.items():
        first = _dsv4(name, GPUS[0])
        m = first.layers
        b = bytes_summary(m, DSV4_PAGE_SIZE)
        row = {"model": hf_id, "TP": TP,
               "layers (SWA only / c4 / c128)": f"{m.layers_of(0)} / {m.layers_of(4)} / {m.layers_of(128)}",
               "SWA bytes per token": round(b["swa_bytes_per_token"]),
               "compressed bytes per token": round(b["compressed_bytes_per_full_token"]),
               "c128 state bytes per request": b["c128_state_bytes_per_request"]}
        for gpu in GPUS:
            plan = _dsv4(name, gpu)
            s = plan.sizes
            row[f"{gpu} tokens"] = s.full_max_total_num_tokens
            row[f"{gpu} SWA tokens"] = s.swa_max_total_num_tokens
            row[f"{gpu} requests"] = s.max_running_requests_per_worker
            row[f"{gpu} {CONTEXT // 1024}K requests"] = requests_fit_at(s, plan.layers, DSV4_PAGE_SIZE, CONTEXT)
        host = _dsv4(name, GPUS[0], hicache=True).host
        row["HiCache host pools"] = ", ".join(q.name for q in host.pools if q.nbytes)   # kv: index slots only
        row[f"{GPUS[0]} host bytes (ratio {DSV4_HICACHE_RATIO})"] = sum(q.nbytes for q in host.pools)
        rows.append(row)
    return rows


def dsv4_table():
    import pandas as pd

    from .tables import show

    return show(pd.DataFrame(dsv4_rows()).set_index("model"))


def glued_values() -> dict:
    """The page's prose numbers."""
    h = {r["model"]: r for r in ledger_rows("H200")}
    ds = _plan("deepseek-v3.2", "B200")
    from ..ledgers.model_layers import CacheArgs, build_layers
    from ..inputs.rules import SGLANG_0_5_23

    anchor = build_layers(load_hf_config("deepseek-v3.2"),
                          CacheArgs("fp8_e4m3", "flashmla_sparse", "flashmla_kv", 1, "float32", True), SGLANG_0_5_23)
    smallest = min(h.values(), key=lambda r: r["bytes per token"])
    largest_slot = max(h.values(), key=lambda r: r["state slot bytes"])
    return {
        "om_tp": TP, "om_rest_h200_gib": REST_BYTES["H200"] // GiB, "om_rest_b200_gib": REST_BYTES["B200"] // GiB,
        "om_context": CONTEXT,
        "om_smallest_token_model": smallest["model"], "om_smallest_token_bytes": smallest["bytes per token"],
        "om_largest_slot_model": largest_slot["model"],
        "om_largest_slot_bytes": largest_slot["state slot bytes"],
        "om_ds_anchor_bytes": anchor.bytes_per_token,
        "om_ds_anchor_gib": f"{ANCHOR_TOKENS * anchor.bytes_per_token / GiB:.2f}",
        "om_anchor_issue": str(ANCHOR_ISSUE), "om_anchor_tokens": ANCHOR_TOKENS,
        "om_anchor_logged_gib": ANCHOR_LOGGED_GIB, "om_ds_layers": len(anchor.full_attention_layers),
        "om_ds_scaled_row": anchor.specs()[0].bytes_per_token, "om_ds_indexer": anchor.specs()[1].bytes_per_token,
        "om_ds_raw_row": ds.token.kv_row_bytes,
        "om_ds_b200_bytes": ds.token.cell_size_bytes,
        "om_n_models": len(MODELS),
        "om_n_page_models": len(PAGE_MODELS), "om_n_families": len(family_rows()),
        **_dsv4_glue(),
    }


def _dsv4_glue() -> dict:
    """The DeepSeek-V4 section's prose numbers (DeepSeek-V4-Flash on an H200 rank)."""
    from ..ledgers.dsv4_plan import DSV4_PAGE_SIZE, DSV4_SWA_FULL_TOKENS_RATIO

    flash = _dsv4("deepseek-v4-flash", "H200")
    m = flash.layers
    return {"om_v4_n_models": len(DSV4_SHIPPED), "om_v4_layers": m.num_layers, "om_v4_window": m.window,
            "om_v4_page": DSV4_PAGE_SIZE, "om_v4_ratio": DSV4_SWA_FULL_TOKENS_RATIO,
            "om_v4_c4_layers": m.layers_of(4), "om_v4_c128_layers": m.layers_of(128), "om_v4_c128_ratio": 128,
            "om_v4_latent_row": m.latent.row_bytes, "om_v4_indexer_row": m.indexer.row_bytes,
            "om_v4_hicache_ratio": DSV4_HICACHE_RATIO}


def ledger_table(gpu: str = "H200"):
    """Per token and per request, for reading (thousands separators, the model column in view)."""
    import pandas as pd

    from .tables import show

    return show(pd.DataFrame(ledger_rows(gpu)).set_index("model"))


def capacity_table():
    import pandas as pd

    from .tables import show

    return show(pd.DataFrame(capacity_rows()).set_index("model"))


def family_table(gpu: str = "H200"):
    import pandas as pd

    from .tables import show

    return show(pd.DataFrame(family_rows(gpu)).set_index("family"))
