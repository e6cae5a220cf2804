"""Which hybrid architectures glm-kv plans, from which vendored configs, and which it does not (issue 32).

Why a module: ``glm-kv models`` and the README's model table must say the same thing, and neither
may type a family or a file by hand. The planned rows are read from the configs themselves
(``hf_config.SHIPPED``, each loaded through ``load_hf_config``: its ``architectures``, its
``model_type``, the family that gives, its provenance from ``SOURCE.json`` / ``SOURCE_GITHUB.json``).
The rows not planned are SGLang 0.5.23's own dispatch (``configs/hybrid_arch.py``:
``mamba2_config``, ``hybrid_gdn_config``, ``hybrid_kda_config``, ``hybrid_lightning_config``; the
``linear_attn_model_registry``; ``model_config.is_hybrid_swa_model``) less what glm-kv plans, each
with the one reason: no public config here, or a layer kind glm-kv does not model.
"""
from __future__ import annotations

from .hf_config import (DSV4_SHIPPED, MODELS_DIR, SHIPPED, SUPPORTED_MODEL_TYPES, load_dsv4_config, load_hf_config,
                        model_override_refusal)

# glm-kv's family names in words: the token-pool layers / the state-pool layers
FAMILY_LAYERS: dict[str, str] = {
    "mla_dsa+kda": "MLA + DSA indexer / KDA",
    "mla+kda": "MLA / KDA",
    "gqa+gdn": "GQA / Gated DeltaNet",
    "gqa+mamba2": "GQA / Mamba-2",
    "mla_dsa": "MLA + DSA indexer",
    "gqa+jet": "GQA / JetBlock",
    "gqa_swa": "GQA + sliding-window GQA (SWA pool)",
    # DeepSeek-V4 (issue 32): SGLang 0.5.23's own pools (DSV4PoolConfigurator), planned by `glm-kv plan` only
    "dsv4": "sliding-window latent KV + c4 / c128 compressed KV, indexer K and compress states (DeepSeek-V4's pools)",
}

NO_CONFIG = "no public config here"
NOT_MODELLED = "layer kind not modelled"
# (SGLang 0.5.23 config class or architecture, model_type, why glm-kv does not plan it, detail)
NOT_PLANNED: tuple[tuple[str, str, str, str], ...] = (
    ("Step3p7ForConditionalGeneration", "step3p7", NO_CONFIG,
     "SGLang 0.5.23 sizes Step-3.7's VL wrapper with the SWA pool (its SWA heads from attention_other_setting), "
     "but the only public config here (aiconfigurator-core 0.12.0: Step-3.7-Flash and -FP8) names "
     "Step3p7FlashForCausalLM: not one of is_hybrid_swa_model's architectures (SGLang would build one full pool) "
     "and no model class SGLang registers (ModelRegistry falls back to TransformersForCausalLM)"),
    ("InklingModelConfig / InklingMMConfig", "inkling_model, inkling_mm_model", NO_CONFIG,
     "no published config.json is shipped by a package here (aiconfigurator-core 0.12.0 ships none); its "
     "conv-state layer kind beside sliding-window attention (is_hybrid_swa_model, InklingConvStateShape) is "
     "not a spec yet either: one would be written against InklingConvStateShape with a real config to check"),
    ("FalconH1Config", "falcon_h1", NO_CONFIG,
     "GQA and Mamba-2 in every layer (both layer kinds are modelled: GqaKv, Mamba2State); no published "
     "config.json is shipped by a package here"),
    ("Lfm2Config / Lfm2MoeConfig / Lfm2VlConfig", "lfm2, lfm2_moe, lfm2_vl", NO_CONFIG,
     "GQA + short convolution (the layer kind is modelled: ShortConvState, checked against Lfm2Config); "
     "no published config.json is shipped by a package here"),
    ("MambaConfig / FalconMambaConfig", "mamba, falcon_mamba", NO_CONFIG,
     "Mamba-1 state layers only (the layer kind is modelled: Mamba1State, checked against "
     "Mamba2StateShape.create_full_rank; a model without attention layers has no token pool, not sized yet); "
     "no published config.json is shipped by a package here (transformers' MambaConfig defaults, hidden 768 x 32 "
     "layers, are not documented as any checkpoint's dimensions: its docstring names state-spaces/mamba-2.8b)"),
    ("Mamba2Config", "mamba2", NO_CONFIG,
     "Mamba-2 state layers only (Mamba2State is modelled; a model without attention layers has no token pool, "
     "not sized yet); no published config.json is shipped by a package here"),
    ("BailingHybridConfig / MiniCPMHybridConfig (lightning)", "bailing_hybrid, minicpm_sala", NO_CONFIG,
     "GQA or MLA + lightning attention (the layer kind is modelled: LightningState, checked against both "
     "config classes); no published config.json is shipped by a package here"),
    ("ZayaConfig", "zaya", NO_CONFIG,
     "CCA attention layers with a conv state beside their KV (the layer kind is modelled: ZayaCcaState, "
     "checked against ZayaConfig); no published config.json is shipped by a package here"),
    ("JetVLMConfig", "jet_vlm", NO_CONFIG, "Jet-Nemotron (GQA + JetBlock) under a VL wrapper (text_config)"),
    ("GraniteMoeHybridConfig", "granitemoehybrid", NO_CONFIG,
     "GQA + Mamba-2 by layer_types, not read by glm-kv yet"),
    ("NemotronH_Nano_VL_V2_Config", "NemotronH_Nano_VL_V2", NO_CONFIG,
     "Nemotron-H (GQA + Mamba-2) under a VL wrapper (llm_config)"),
    ("InternS2PreviewConfig", "intern_s2_preview", NO_CONFIG, "GQA + Gated DeltaNet"),
    ("GigaChat35Config (linear_attn_model_registry)", "gigachat3_5", NO_CONFIG,
     "GQA + Gated DeltaNet, through SGLang's registry"),
    ("BailingHybridConfig (use_kda)", "bailing_hybrid", NO_CONFIG, "MLA / KDA (kimi_linear_config)"),
)


def planned() -> list[dict]:
    """One row per architecture string glm-kv plans: its model_type(s), family, layers, vendored files."""
    rows: dict[str, dict] = {}
    for name, (stem, _hf_id) in SHIPPED.items():
        cfg = load_hf_config(name)
        files = [f"{stem}_config.json"] + ([f"{stem}_hf_quant_config.json"]
                                           if (MODELS_DIR / f"{stem}_hf_quant_config.json").is_file() else [])
        if not stem:
            files = ["glm_kv/inputs/data/glm-5.3-flash.json"]
        for arch in cfg.architectures or ("(none)",):
            row = rows.setdefault(arch, {"architecture": arch, "model_types": [], "family": cfg.family,
                                         "layers": FAMILY_LAYERS[cfg.family], "configs": []})
            if cfg.model_type not in row["model_types"]:
                row["model_types"].append(cfg.model_type)
            # a vendored checkpoint SGLang 0.5.23 does not start (its words; every plan of it is refused alike)
            row["configs"].append({"model": name, "files": files, "source": cfg.source,
                                   "sglang_refuses": model_override_refusal(cfg)})
    for name, (stem, _hf_id) in DSV4_SHIPPED.items():   # issue 32: its own plan (ledgers/dsv4_plan.py)
        cfg = load_dsv4_config(name)
        row = rows.setdefault(cfg.architectures[0], {"architecture": cfg.architectures[0],
                                                     "model_types": [cfg.model_type], "family": cfg.family,
                                                     "layers": FAMILY_LAYERS[cfg.family], "configs": []})
        row["configs"].append({"model": name, "files": [f"{stem}_config.json"], "source": cfg.source,
                               "sglang_refuses": None})
    seen = {t for r in rows.values() for t in r["model_types"]}
    for mt, fam in SUPPORTED_MODEL_TYPES.items():   # read, with no vendored config to name
        if mt not in seen:
            rows[f"model_type {mt}"] = {"architecture": None, "model_types": [mt], "family": fam,
                                        "layers": FAMILY_LAYERS[fam], "configs": []}
    return list(rows.values())


def not_planned() -> list[dict]:
    return [{"sglang": cls, "model_types": mt, "reason": why, "detail": detail}
            for cls, mt, why, detail in NOT_PLANNED]


def starts_under_sglang(name: str) -> bool:
    """False for a shipped config SGLang 0.5.23 refuses whatever the flags (the book leaves it off its pages)."""
    return model_override_refusal(load_hf_config(name)) is None


def catalog() -> dict:
    return {"sglang_version": "0.5.23", "planned": planned(), "not_planned": not_planned()}
