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

from .hf_config import MODELS_DIR, SHIPPED, SUPPORTED_MODEL_TYPES, load_hf_config

# glm-kv's family names in words: the token-pool layers / the state-pool layers
FAMILY_LAYERS: dict[str, str] = {
    "mla_dsa+kda": "MLA + DSA indexer / KDA",
    "mla+kda": "MLA / KDA",
    "gqa+gdn": "GQA / Gated DeltaNet",
    "gqa+mamba2": "GQA / Mamba-2",
    "mla_dsa": "MLA + DSA indexer",
}

NO_CONFIG = "no public config here"
NOT_MODELLED = "layer kind not modelled"
# (SGLang 0.5.23 config class or architecture, model_type, why glm-kv does not plan it, detail)
NOT_PLANNED: tuple[tuple[str, str, str, str], ...] = (
    ("JetNemotronConfig / JetVLMConfig", "jet_nemotron, jet_vlm", NOT_MODELLED,
     "JetBlock (dynamic-convolution linear attention): SGLang sizes its state through hybrid_gdn_config, "
     "but its conv and state shapes are not Qwen's Gated DeltaNet"),
    ("DeepseekV4ForCausalLM", "deepseek_v4", NOT_MODELLED,
     "compressed KV pools (c4 / c128 compress ratios) beside sliding-window attention"),
    ("FalconH1Config", "falcon_h1", NOT_MODELLED, "attention and Mamba-2 heads in the same layer"),
    ("Lfm2Config / Lfm2MoeConfig / Lfm2VlConfig", "lfm2, lfm2_moe, lfm2_vl", NOT_MODELLED,
     "short-convolution layers (a conv state, no SSM state)"),
    ("MambaConfig / FalconMambaConfig / Mamba2Config", "mamba, falcon_mamba, mamba2", NOT_MODELLED,
     "state layers only, no attention layer (and Mamba-1's state for mamba / falcon_mamba)"),
    ("BailingHybridConfig / MiniCPMHybridConfig (lightning)", "bailing_hybrid, minicpm_sala", NOT_MODELLED,
     "lightning attention layers (hybrid_lightning_config)"),
    ("ZayaConfig", "zaya", NOT_MODELLED, "Zaya's state layers"),
    ("InklingModelConfig / InklingMMConfig", "inkling_model, inkling_mm_model", NOT_MODELLED,
     "sliding-window attention beside its Mamba-2 layers (is_hybrid_swa_model)"),
    ("sliding-window hybrids (Gemma4, GptOss, MiMoV2Flash, Step3p7, Llama4, ...)",
     "gemma4, gpt_oss, mimo_v2_flash, step3p7, llama4", NOT_MODELLED,
     "the SWA pool beside the full-attention pool (is_hybrid_swa_model)"),
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
            row["configs"].append({"model": name, "files": files, "source": cfg.source})
    seen = {t for r in rows.values() for t in r["model_types"]}
    for mt, fam in SUPPORTED_MODEL_TYPES.items():   # read, with no vendored config to name
        if mt not in seen:
            rows[f"model_type {mt}"] = {"architecture": None, "model_types": [mt], "family": fam,
                                        "layers": FAMILY_LAYERS[fam], "configs": []}
    return list(rows.values())


def not_planned() -> list[dict]:
    return [{"sglang": cls, "model_types": mt, "reason": why, "detail": detail}
            for cls, mt, why, detail in NOT_PLANNED]


def catalog() -> dict:
    return {"sglang_version": "0.5.23", "planned": planned(), "not_planned": not_planned()}
