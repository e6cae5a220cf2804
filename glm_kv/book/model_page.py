""""Your model, layer by layer": the one page that reads the same for every model glm-kv plans.

The chapters walk GLM-5.3-Flash's ledgers by name (KDA, the DSA indexer, the compress tail); a user whose
profile names another hybrid model (``model:``) still asks the same two questions: how many tokens and
requests fit on one rank, and which layers hold what. This page answers both from the one plan
(``tables.capacity_plan``: exactly what ``glm-kv plan`` prints), whatever the layer kinds. It is in every
book: the GLM-5.3-Flash book lists it beside the plan page, and ``glm-kv book --profile`` with another model
builds a book rooted at it (``MODEL_BOOK_DOCUMENTS``: this page, choosing flags where the model keeps
per-request state, the calculator, and the notation page with its glossary).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..ledgers.layers import STATE, SWA, TOKEN

if TYPE_CHECKING:
    from ..inputs.profile import Profile
    from ..ledgers.plan import Plan

# what a layer kind holds, in the book's words (book/notation.md); the kind's name is SGLang-facing glm-kv's
KIND_WORDS = {
    "mla_kv": "MLA latent KV (kv_buffer)",
    "dsa_indexer_k": "DSA indexer K (IndexKeyCache)",
    "gqa_kv": "GQA / MHA KV (k_buffer + v_buffer)",
    "sliding_window_kv": "sliding-window KV (the SWA pool)",
    "kda_state": "KDA conv + recurrent state (MambaPool)",
    "mamba2_state": "Mamba-2 conv + SSM state (MambaPool)",
    "gdn_state": "Gated DeltaNet conv + recurrent state (MambaPool)",
    "jet_state": "JetBlock conv + recurrent state (MambaPool)",
    "mamba1_state": "Mamba-1 conv + SSM state (MambaPool)",
    "short_conv_state": "short-convolution state (MambaPool)",
    "lightning_state": "lightning-attention state (MambaPool)",
    "zaya_cca_state": "CCA conv state (MambaPool)",
}
GROWS_WITH = {TOKEN: "tokens (every token, every layer)", SWA: "tokens inside the sliding window",
              STATE: "state slots (a few per request, whatever its length)"}
UNIT = {TOKEN: "B/token", SWA: "B/token", STATE: "B/slot"}

# the documents of a book for a model other than GLM-5.3-Flash (runner.model_book_toc), root first
MODEL_PAGE = "book/model"
STATE_ONLY = ("notebooks/06b_choosing_flags",)   # its pages size the state pool against the KV pool
MODEL_BOOK_DOCUMENTS = (MODEL_PAGE, "notebooks/06b_choosing_flags", "book/calculator", "book/notation")


def is_glm53(plan: "Plan") -> bool:
    """GLM-5.3-Flash's plan carries its ``ModelConfig`` (``plan.model``); any other model's is None."""
    return plan.model is not None


def keeps_state(plan: "Plan") -> bool:
    """True when the model keeps per-request state slots (a MambaPool): the flags chapter sizes them."""
    return bool(plan.request.slots_per_request)


def model_book_documents(plan: "Plan") -> tuple[str, ...]:
    """The book's documents for this plan's model when it is not GLM-5.3-Flash, root first."""
    return tuple(d for d in MODEL_BOOK_DOCUMENTS if d not in STATE_ONLY or keeps_state(plan))


def model_facts(profile: "str | Profile") -> dict:
    """The page's glued words: model, architecture, families, GPU, parallelism, layer counts."""
    from .tables import capacity_plan

    plan, _ = capacity_plan(profile)
    cfg = plan.config
    kinds = plan.layers.by_kind()
    return {
        "model_name": cfg.name, "model_architecture": (cfg.architectures or ["?"])[0],
        "model_layers": sum(d["layers"] for d in kinds.values()),
        "model_kinds": ", ".join(f"{d['layers']} x {KIND_WORDS.get(k, k)}" for k, d in kinds.items()),
        "model_gpu": plan.gpu.name, "model_tp": plan.profile.tp_size,
        "model_attn_dp": plan.parallel.attn_dp_size,
    }


def layer_rows(plan: "Plan") -> list[dict]:
    """One row per layer kind: what it holds, what it grows with, bytes per layer and over its layers."""
    return [{"layer kind": KIND_WORDS.get(kind, kind), "layers": d["layers"], "grows with": GROWS_WITH[d["pool"]],
             "per layer": f"{d['bytes_per_layer']:,} {UNIT[d['pool']]}",
             "over its layers": f"{d['bytes']:,} {UNIT[d['pool']]}"}
            for kind, d in plan.layers.by_kind().items()]


def layer_table(profile: "str | Profile"):
    """``layer_rows`` as the page's table (per rank: TP has already split heads and state)."""
    import pandas as pd

    from .tables import capacity_plan, show

    plan, _ = capacity_plan(profile)
    return show(pd.DataFrame(layer_rows(plan)),
                caption=f"{plan.config.name}: what each layer kind keeps, per rank (tp {plan.profile.tp_size})")


def pool_rows(plan: "Plan") -> list[dict]:
    """The pools the layer kinds fill on one rank: slots and bytes, in SGLang's boot-log words. A hybrid-SWA
    model's full pool holds its full layers' rows and the SWA pool its window layers' (slots x row bytes;
    the page of padding SGLang adds is not in its count either); the state pool holds one slot more than
    ``max_mamba_cache_size`` (SGLang's padding slot), in ``mamba_pool_bytes``."""
    cap, tok, req = plan.capacity, plan.token, plan.request
    swa = cap.swa_max_total_num_tokens is not None and tok.swa_kv_bytes_per_token is not None
    per_token = tok.kv_bytes_per_token + tok.indexer_bytes_per_token if swa else tok.cell_size_bytes
    rows = [{"pool": "KV pool (token slots)", "SGLang's name": "max_total_num_tokens",
             "slots": cap.max_total_num_tokens, "bytes per slot": per_token,
             "bytes": cap.max_total_num_tokens * per_token if swa else cap.token_pool_bytes}]
    if swa:
        rows.append({"pool": "SWA pool (window tokens)", "SGLang's name": "swa_max_total_num_tokens",
                     "slots": cap.swa_max_total_num_tokens, "bytes per slot": tok.swa_kv_bytes_per_token,
                     "bytes": cap.swa_max_total_num_tokens * tok.swa_kv_bytes_per_token})
    if keeps_state(plan):
        rows.append({"pool": "state pool (MambaPool slots)", "SGLang's name": "max_mamba_cache_size",
                     "slots": cap.max_mamba_cache_size, "bytes per slot": req.state_slot_bytes,
                     "bytes": cap.mamba_pool_bytes})
    return rows


def pool_table(profile: "str | Profile"):
    """``pool_rows`` as a table."""
    import pandas as pd

    from .tables import capacity_plan, show

    plan, _ = capacity_plan(profile)
    df = pd.DataFrame(pool_rows(plan))
    for c in ("slots", "bytes per slot", "bytes"):
        df[c] = df[c].map(lambda v: f"{v:,}")
    return show(df, caption=f"The pools on one {plan.gpu.name} rank")
