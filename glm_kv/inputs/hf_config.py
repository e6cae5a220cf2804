"""Any hybrid model's ``config.json``, read the way Hugging Face reads it (issue 22).

Why a second reader beside ``model.py``: that one holds GLM-5.3-Flash's fields and refuses
anything else, while this one takes any model SGLang 0.5.23 serves in the families glm-kv
models (MLA + DSA, MLA + KDA, GQA + Gated DeltaNet, GQA + Mamba-2), returns the raw dicts, and
leaves the layer kinds to ``glm_kv.ledgers.layers``. Reading rules, as ``transformers`` does:

* ``json.loads`` with Python's defaults: NVIDIA's Nemotron config holds ``Infinity``
  (``time_step_limit``), which HF reads as ``float('inf')``; so do we.
* A VLM wrapper keeps its language model under ``text_config``; a top-level config without
  ``text_config`` is the text config itself (DeepSeek, GLM-5.1, Nemotron-H).
* A ModelOpt checkpoint's ``hf_quant_config.json`` beside ``config.json`` is read too: its
  ``kv_cache_quant_algo`` decides SGLang's ``--kv-cache-dtype auto``.

Unknown ``model_type``: refused naming it and listing the supported ones (exit 2 at the CLI).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import ProfileError, shown
from .model import CONFIG_MAX_BYTES, PACKAGE_DIR, _check_path_text, read_input_file

MODELS_DIR = PACKAGE_DIR / "models"

# top-level model_type -> the family whose layer kinds SGLang 0.5.23 allocates (hybrid_arch.py:
# kimi_linear_config / glm5_next_config -> KDA, hybrid_gdn_config -> Gated DeltaNet, mamba2_config
# -> Mamba-2; is_deepseek_dsa -> MLA + DSA indexer).
SUPPORTED_MODEL_TYPES: dict[str, str] = {
    "glm5_next": "mla_dsa+kda",        # GLM-5.3-Flash (Glm5NextForConditionalGeneration)
    "kimi_k3": "mla+kda",              # Kimi-K3 (text_config: kimi_linear)
    "kimi_linear": "mla+kda",          # Kimi-Linear (text config at top level)
    "qwen3_5_moe": "gqa+gdn",          # Qwen3.5 MoE (text_config: qwen3_5_moe_text)
    "qwen3_5": "gqa+gdn",              # Qwen3.5 dense
    "qwen3_next": "gqa+gdn",           # Qwen3-Next
    "nemotron_h": "gqa+mamba2",        # Nemotron-H / Nemotron-3
    "deepseek_v32": "mla_dsa",         # DeepSeek-V3.2 (DeepseekV32ForCausalLM)
    "glm_moe_dsa": "mla_dsa",          # GLM-5 / GLM-5.1 (GlmMoeDsaForCausalLM)
    "jet_nemotron": "gqa+jet",         # Jet-Nemotron (JetNemotronForCausalLM): GQA + JetBlock (issue 32)
    "gpt_oss": "gqa_swa",              # gpt-oss (GptOssForCausalLM): GQA full pool + sliding-window GQA SWA pool
    "gemma4": "gqa_swa",               # Gemma-4 (Gemma4ForConditionalGeneration, text_config gemma4_text): the same
    "mimo_v2_flash": "gqa_swa",        # MiMo-V2-Flash (MiMoV2FlashForCausalLM): hybrid_layer_pattern, K 192 / V 128
    "llama4": "gqa_swa",               # Llama-4 (Llama4ForConditionalGeneration): chunked attention in the SWA pool
}

# The six models glm-kv ships configs for: short name -> (file stem, Hugging Face id).
SHIPPED: dict[str, tuple[str, str]] = {
    "glm-5.3-flash": ("", "zai-org/GLM-5.3-Flash"),   # glm_kv/inputs/data/glm-5.3-flash.json
    "kimi-k3": ("moonshotai--Kimi-K3", "moonshotai/Kimi-K3"),
    "qwen3.5-35b-a3b": ("Qwen--Qwen3.5-35B-A3B", "Qwen/Qwen3.5-35B-A3B"),
    "nemotron-3-super-120b-a12b-fp8": ("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8",
                                       "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8"),
    "deepseek-v3.2": ("deepseek-ai--DeepSeek-V3.2", "deepseek-ai/DeepSeek-V3.2"),
    "glm-5.1": ("zai-org--GLM-5.1", "zai-org/GLM-5.1"),
    # issue 32: real configs of architectures SGLang 0.5.23 serves in the families above
    "qwen3-next-80b-a3b-thinking": ("Qwen--Qwen3-Next-80B-A3B-Thinking", "Qwen/Qwen3-Next-80B-A3B-Thinking"),
    "qwen3.5-27b": ("Qwen--Qwen3.5-27B", "Qwen/Qwen3.5-27B"),
    "nemotron-h-56b-base-8k": ("nvidia--Nemotron-H-56B-Base-8K", "nvidia/Nemotron-H-56B-Base-8K"),
    "nemotron-3-nano-30b-a3b-bf16": ("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
                                     "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"),
    "nemotron-3-ultra-550b-a55b-bf16": ("nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
                                        "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16"),
    "qwen3.5-122b-a10b": ("Qwen--Qwen3.5-122B-A10B", "Qwen/Qwen3.5-122B-A10B"),
    "qwen3.5-397b-a17b": ("Qwen--Qwen3.5-397B-A17B", "Qwen/Qwen3.5-397B-A17B"),
    "jet-nemotron-2b": ("jet-ai--Jet-Nemotron-2B", "jet-ai/Jet-Nemotron-2B"),
    "jet-nemotron-4b": ("jet-ai--Jet-Nemotron-4B", "jet-ai/Jet-Nemotron-4B"),
    "qwen3.6-35b-a3b": ("Qwen--Qwen3.6-35B-A3B", "Qwen/Qwen3.6-35B-A3B"),
    # ModelOpt MIXED_PRECISION checkpoints (NVFP4 MLPs / experts, FP8 projections, FP8 KV): the quantization
    # in config.json's quantization_config (Qwen3.6) or in hf_quant_config.json beside it (Nemotron-3.5)
    "qwen3.6-27b-nvfp4": ("nvidia--Qwen3.6-27B-NVFP4", "nvidia/Qwen3.6-27B-NVFP4"),
    "nemotron-3.5-lightning-30b-a3b-nvfp4": ("nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4",
                                             "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"),
    # a hybrid-SWA model (is_hybrid_swa_model): the full pool and the SWA pool beside it
    "gpt-oss-120b": ("openai--gpt-oss-120b", "openai/gpt-oss-120b"),
    "gpt-oss-20b": ("openai--gpt-oss-20b", "openai/gpt-oss-20b"),
    # Gemma-4 (issue 32): the SWA pool with its own heads and head dim (SGLang's swa_* from the config's shapes)
    "gemma-4-26b-a4b": ("google--gemma-4-26B-A4B", "google/gemma-4-26B-A4B"),
    "mimo-v2-flash": ("XiaomiMiMo--MiMo-V2-Flash", "XiaomiMiMo/MiMo-V2-Flash"),
    "llama-4-scout-17b-16e-instruct": ("meta-llama--Llama-4-Scout-17B-16E-Instruct",
                                       "meta-llama/Llama-4-Scout-17B-16E-Instruct"),
    "llama-4-maverick-17b-128e-instruct": ("meta-llama--Llama-4-Maverick-17B-128E-Instruct",
                                           "meta-llama/Llama-4-Maverick-17B-128E-Instruct"),
}
# provenance files of the vendored configs: SOURCE.json (the aiconfigurator-core 0.12.0 wheel),
# SOURCE_GITHUB.json (files of a public GitHub repository at a stated commit, not in that wheel) and
# SOURCE_GITHUB_NVLABS.json (Jet-Nemotron's configs from NVlabs/Jet-Nemotron's code repository)
PROVENANCE_FILES = ("SOURCE.json", "SOURCE_GITHUB.json", "SOURCE_GITHUB_NVLABS.json")


@lru_cache(maxsize=1)
def vendored_sources() -> dict[str, str]:
    """Vendored file name -> where it came from, in words, read from the provenance files."""
    out: dict[str, str] = {}
    for fname in PROVENANCE_FILES:
        doc = json.loads((MODELS_DIR / fname).read_text())
        for name, meta in doc["files"].items():
            if "path_in_wheel" in meta:
                # the path under the package folder (the label plans have always carried)
                out[name] = f"{doc['package']} {doc['version']} wheel, {meta['path_in_wheel'].split('/', 1)[1]}"
            else:
                out[name] = f"github.com/{doc['repository']} {meta['path']} at commit {meta['commit']}"
    return out


@dataclass(frozen=True)
class HfConfig:
    """A model's config.json as dicts: ``top`` (the file), ``text`` (its language model's part)."""

    name: str
    source: str
    model_type: str
    family: str
    architectures: tuple[str, ...]
    top: dict = field(repr=False, hash=False, compare=False)
    text: dict = field(repr=False, hash=False, compare=False)
    quant: dict | None = field(default=None, repr=False, hash=False, compare=False)

    @property
    def is_multimodal(self) -> bool:
        return "text_config" in self.top

    @property
    def num_nextn_predict_layers(self) -> int:
        """MTP layers the checkpoint ships (SGLang's NEXTN draft); 0 without any."""
        v = self.text.get("num_nextn_predict_layers", 0)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0

    @property
    def vocab_size(self) -> int:
        v = self.text.get("vocab_size", self.top.get("vocab_size", 0))
        return v if isinstance(v, int) and not isinstance(v, bool) else 0

    @property
    def kv_cache_quant_algo(self) -> str | None:
        """ModelOpt's ``kv_cache_quant_algo`` as SGLang 0.5.23 reads it: config.json's
        ``quantization_config`` first (``_parse_quant_hf_config``), where a flat ModelOpt section states
        ``kv_cache_scheme`` (float 8 bits: "FP8", 4 bits: "NVFP4", else "auto"; ``ModelOpt*Config.from_config``)
        or ``kv_cache_quant_algo``; without one, hf_quant_config.json's ``quantization`` section."""
        q = self.top.get("quantization_config") or self.text.get("quantization_config")
        if isinstance(q, dict) and q.get("quant_algo") is not None and isinstance(q.get("kv_cache_scheme"), dict):
            scheme = q["kv_cache_scheme"]
            if scheme.get("type") == "float" and scheme.get("num_bits") in (8, 4):
                return "FP8" if scheme["num_bits"] == 8 else "NVFP4"
            return "auto"
        for owner in (q,) if isinstance(q, dict) else ((self.quant or {}).get("quantization") or {},):
            algo = owner.get("kv_cache_quant_algo") if isinstance(owner, dict) else None
            if isinstance(algo, str):
                return algo
        return None


def shipped_name(model: str) -> str | None:
    """The shipped short name for ``model`` (a short name or a Hugging Face id), else None."""
    key = model.strip().lower()
    for name, (_stem, hf_id) in SHIPPED.items():
        if key in (name, hf_id.lower()):
            return name
    return None


def parse_hf_json(text: str, what: str, field_name: str) -> Any:
    """``json.loads`` as transformers calls it: ``Infinity``/``NaN`` are floats, last key wins."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ProfileError(field_name, f"{what} is not valid JSON (line {e.lineno}: {e.msg})") from None
    except (RecursionError, MemoryError, ValueError):
        raise ProfileError(field_name, f"{what} cannot be read (nested too deeply or a huge number)") from None


def _text_part(cfg: dict, where: str) -> dict:
    text = cfg.get("text_config", cfg)
    if not isinstance(text, dict):
        raise ProfileError(f"{where}.text_config", f"must be a JSON object, got {shown(text)}")
    return text


def hf_config_from_dict(cfg: Any, name: str, source: str, quant: dict | None = None,
                        where: str = "model") -> HfConfig:
    """Classify a config.json dict by its top-level ``model_type`` (SGLang's config class)."""
    if not isinstance(cfg, dict):
        raise ProfileError(where, f"config must be a JSON object, got {shown(cfg)}")
    mt = cfg.get("model_type")
    if mt not in SUPPORTED_MODEL_TYPES:
        raise ProfileError(f"{where}.model_type", f"{shown(mt)} is not a model glm-kv knows; supported: "
                                                  f"{', '.join(sorted(SUPPORTED_MODEL_TYPES))}")
    text = _text_part(cfg, where)
    arch = cfg.get("architectures") or text.get("architectures") or []
    if not isinstance(arch, list) or not all(isinstance(a, str) for a in arch):
        raise ProfileError(f"{where}.architectures", f"must be a list of names, got {shown(arch)}")
    return HfConfig(name=name, source=source, model_type=mt, family=SUPPORTED_MODEL_TYPES[mt],
                    architectures=tuple(arch), top=cfg, text=text, quant=quant)


def _read_json_file(path: Path, field_name: str) -> Any:
    text, _ = read_input_file(str(path), field_name, CONFIG_MAX_BYTES, kind="config.json",
                              hint="no such config file (use a shipped model name or a path to a config.json)")
    return parse_hf_json(text, f"config file {shown(str(path))}", field_name)


def _quant_beside(config_path: Path, field_name: str) -> dict | None:
    q = config_path.with_name(config_path.name.replace("config.json", "hf_quant_config.json")) \
        if config_path.name.endswith("_config.json") else config_path.parent / "hf_quant_config.json"
    try:
        if not q.is_file():
            return None
    except OSError:
        return None
    doc = _read_json_file(q, field_name)
    return doc if isinstance(doc, dict) else None


@lru_cache(maxsize=32)
def load_hf_config(model: str) -> HfConfig:
    """A shipped model (short name or Hugging Face id), or a path to a config.json (or its folder)."""
    if not isinstance(model, str) or not model.strip():
        raise ProfileError("model", f"must be a shipped model or a path to a config.json, got {shown(model)}")
    name = shipped_name(model)
    if name == "glm-5.3-flash":
        path = PACKAGE_DIR / "data" / "glm-5.3-flash.json"
        cfg = json.loads(path.read_text())
        return hf_config_from_dict(cfg, name, "shipped with glm_kv (glm_kv/inputs/data/glm-5.3-flash.json)")
    if name is not None:
        path = MODELS_DIR / f"{SHIPPED[name][0]}_config.json"
        return hf_config_from_dict(_read_json_file(path, "model"), name, vendored_sources()[path.name],
                                   quant=_quant_beside(path, "model"))
    _check_path_text(model, "model")
    path = Path(model)
    try:
        if path.is_dir():
            path = path / "config.json"
    except OSError:
        pass
    if not path.exists() and "/" not in model and not model.endswith(".json"):
        raise ProfileError("model", f"{shown(model)} is neither a shipped model ({', '.join(SHIPPED)}) "
                                    f"nor a path to a config.json")
    cfg = _read_json_file(path, "model")
    return hf_config_from_dict(cfg, path.parent.name or str(path), str(path),
                               quant=_quant_beside(path, "model"))


@lru_cache(maxsize=32)
def glm_hf_config(model: str) -> HfConfig:
    """GLM-5.3-Flash's config as any model's (``HfConfig``), for the model ``inputs.model.load_model``
    has already read and checked: the shipped one, or a user's config.json whose ``model_type`` may
    be left out (that reader's rule: no ``model_type`` means GLM-5.3-Flash)."""
    if shipped_name(model) == "glm-5.3-flash":
        return load_hf_config("glm-5.3-flash")
    path = Path(model)
    if path.is_dir():
        path = path / "config.json"
    cfg = _read_json_file(path, "model")
    if isinstance(cfg, dict) and "model_type" not in cfg:
        cfg = {**cfg, "model_type": "glm5_next"}
    return hf_config_from_dict(cfg, path.parent.name or str(path), str(path), quant=_quant_beside(path, "model"))


def names_other_model(model: str) -> bool:
    """True when ``model`` is not GLM-5.3-Flash's family: a shipped other model, or a config.json
    whose ``model_type`` is given and is not ``glm5_next`` (unknown types are then refused by
    ``load_hf_config`` listing the supported ones). A config without ``model_type`` keeps the
    GLM-5.3-Flash reader (``model.py``) and its checks."""
    name = shipped_name(model) if isinstance(model, str) else None
    if name is not None:
        return name != "glm-5.3-flash"
    try:
        path = Path(model)
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file() or path.stat().st_size > CONFIG_MAX_BYTES:
            return False
        cfg = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError, RecursionError, TypeError):
        return False   # the GLM-5.3-Flash reader names the problem
    return isinstance(cfg, dict) and "model_type" in cfg and cfg["model_type"] != "glm5_next"


def config_int(text: dict, key: str, where: str, default: int | None = None, lo: int = 1) -> int:
    """``text[key]`` as a config dimension: an integer in [lo, 2**24], else a ProfileError naming
    ``where.key``. Here, in the inputs, so that the ledgers and the tensors (which must not share
    the ledgers' code) read a config with the same rule."""
    v = text.get(key, default)
    if v is None:
        raise ProfileError(f"{where}.{key}", "missing from config")
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= 1 << 24:
        raise ProfileError(f"{where}.{key}", f"must be an integer between {lo} and {1 << 24:,}, got {shown(v)}")
    return v


# NemotronHConfig (SGLang 0.5.23 configs/nemotron_h.py): layers_block_type's names and the one-letter
# hybrid_override_pattern they stand for (M Mamba-2, * attention, - MLP, E MoE)
NEMOTRON_BLOCK_LETTERS = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def nemotron_pattern(text: dict, where: str) -> str:
    """A Nemotron-H config's layers as the one-letter pattern, read as ``NemotronHConfig`` does: the
    canonical ``layers_block_type`` list when given (Nemotron-3 Ultra, 3.5 Lightning: no
    ``num_hidden_layers``), else the legacy ``hybrid_override_pattern`` string. Here, in the inputs,
    so the ledgers and the tensors read the layers with one rule."""
    blocks = text.get("layers_block_type")
    if blocks is not None:
        if (not isinstance(blocks, list) or not blocks or len(blocks) > 4096
                or not all(isinstance(b, str) and b in NEMOTRON_BLOCK_LETTERS for b in blocks)):
            raise ProfileError(f"{where}.layers_block_type",
                               f"must be a list of {', '.join(NEMOTRON_BLOCK_LETTERS)} (at most 4,096), "
                               f"got {shown(blocks)}")
        return "".join(NEMOTRON_BLOCK_LETTERS[b] for b in blocks)
    pattern = text.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or not pattern or len(pattern) > 4096 or set(pattern) - set("M*E-"):
        raise ProfileError(f"{where}.hybrid_override_pattern",
                           f"must be a string of M, *, E and - (Mamba-2, attention, MoE, MLP), got {shown(pattern)}")
    return pattern


def config_where(cfg: HfConfig) -> str:
    """How messages name the config part the dimensions live in (``model.head_dim``)."""
    return "model(text_config)" if cfg.is_multimodal else "model"


# arg_groups/overrides.py _MAMBA_EXTRA_BUFFER_ARCHS (SGLang 0.5.23): the architectures whose MambaPool can
# keep the extra_buffer strategy's snapshots; elsewhere auto resolves to no_buffer (and turns the overlap
# schedule off) and an explicit extra_buffer is refused by validate_mamba_extra_buffer
MAMBA_EXTRA_BUFFER_ARCHS = frozenset({
    "KimiLinearForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM", "Qwen3NextForCausalLM", "Qwen4ExpForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration", "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM",
    "Glm5NextForConditionalGeneration", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
    "NemotronH_Omni_Reasoning_V3", "KimiK3ForConditionalGeneration", "InklingForConditionalGeneration",
    "InklingForConditionalGenerationMTP"})


def extra_buffer_strategy(requested: str, resolved: str, architectures: tuple[str, ...], page_size: int) -> str:
    """``supports_mamba_cache_extra_buffer`` for the first architecture (issue 32: Jet-Nemotron has none):
    ``resolved`` as it is when the architecture supports extra_buffer; else auto resolves to no_buffer
    (``_mamba_radix_cache_resolution``), and an explicit extra_buffer is refused in SGLang's words."""
    if not architectures:   # a config naming none (GLM-5.3-Flash's reader allows it): as before
        return resolved
    arch = architectures[0]
    if resolved not in ("extra_buffer", "extra_buffer_lazy") or arch in MAMBA_EXTRA_BUFFER_ARCHS:
        return resolved
    if requested in ("extra_buffer", "extra_buffer_lazy"):
        raise ProfileError("mamba_scheduler_strategy", f"SGLang 0.5.23 refuses it: \"extra_buffer is not supported "
                                                       f"for {arch}; use no_buffer.\" (arg_groups/mamba_hook.py)")
    if page_size > 1:
        raise ProfileError("page_size", f"SGLang 0.5.23 refuses it: \"no_buffer only supports page_size=1.\" "
                                        f"(arg_groups/mamba_hook.py): {arch} has no extra_buffer strategy, so "
                                        f"auto resolves to no_buffer")
    return "no_buffer"


# arg_groups/model_overrides/nemotron_h.py (SGLang 0.5.23): the override registered for these architectures reads
# ``hf_config.quantization_config["quantized_layers"]`` whenever the checkpoint resolves to modelopt_mixed
NEMOTRON_H_OVERRIDE_ARCHS = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM")


def model_override_refusal(cfg: HfConfig) -> str | None:
    """What SGLang 0.5.23's model override refuses for the checkpoint whatever the flags, in its words (None
    when it starts).

    A Nemotron-H checkpoint whose ModelOpt MIXED_PRECISION quantization (with NVFP4 layers: SGLang's
    ``modelopt_mixed``) is stated only in hf_quant_config.json, its config.json holding no
    ``quantization_config`` (Nemotron-3.5-Lightning-30B-A3B-NVFP4 as aiconfigurator-core 0.12.0 ships it):
    ``_nemotron_h_overrides`` looks for the W4A16_NVFP4 MoE layers in ``hf_config.quantization_config``,
    an attribute ``NemotronHConfig`` does not have, and the server does not start."""
    if not cfg.architectures or cfg.architectures[0] not in NEMOTRON_H_OVERRIDE_ARCHS:
        return None
    if "quantization_config" in cfg.top:
        return None
    section = (cfg.quant or {}).get("quantization")
    if not isinstance(section, dict) or section.get("quant_algo") != "MIXED_PRECISION":
        return None
    layers = section.get("quantized_layers") or {}
    if not any(isinstance(i, dict) and str(i.get("quant_algo", "")).upper() in ("NVFP4", "W4A16_NVFP4")
               for i in layers.values()):
        return None
    return ("SGLang 0.5.23 refuses it: \"'NemotronHConfig' object has no attribute 'quantization_config'\" "
            "(arg_groups/model_overrides/nemotron_h.py: a modelopt_mixed checkpoint whose config.json has no "
            "quantization_config, its quantization only in hf_quant_config.json)")


def refuse_model_override(cfg: HfConfig) -> None:
    """``model_override_refusal`` as the plan's refusal (field ``model``)."""
    why = model_override_refusal(cfg)
    if why is not None:
        raise ProfileError("model", why)


# DeepSeek-V4 (issue 32): its vendored configs (aiconfigurator-core 0.12.0, SOURCE.json). SGLang 0.5.23 sizes
# its own pools for it (DSV4PoolConfigurator; glm_kv.ledgers.dsv4), not the pools of SUPPORTED_MODEL_TYPES'
# families, so it is read here and not through hf_config_from_dict's families.
DSV4_SHIPPED: dict[str, tuple[str, str]] = {
    "deepseek-v4-flash": ("deepseek-ai--DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Flash"),
    "deepseek-v4-pro": ("deepseek-ai--DeepSeek-V4-Pro", "deepseek-ai/DeepSeek-V4-Pro"),
}
DSV4_MODEL_TYPE, DSV4_ARCHITECTURE = "deepseek_v4", "DeepseekV4ForCausalLM"


def dsv4_shipped_name(model: str) -> str | None:
    """The DeepSeek-V4 short name for ``model`` (a short name or a Hugging Face id), else None."""
    key = model.strip().lower() if isinstance(model, str) else ""
    return next((n for n, (_s, hf) in DSV4_SHIPPED.items() if key in (n, hf.lower())), None)


def _dsv4_path(model: str) -> Path | None:
    """The config.json a model names when it is a DeepSeek-V4 one (a shipped name, or a path whose config's
    ``model_type`` is deepseek_v4), else None."""
    name = dsv4_shipped_name(model)
    if name is not None:
        return MODELS_DIR / f"{DSV4_SHIPPED[name][0]}_config.json"
    try:
        path = Path(model)
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file() or path.stat().st_size > CONFIG_MAX_BYTES:
            return None
        cfg = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError, RecursionError, TypeError):
        return None
    return path if isinstance(cfg, dict) and cfg.get("model_type") == DSV4_MODEL_TYPE else None


def is_dsv4_model(model: str) -> bool:
    """True for a DeepSeek-V4 model (SGLang sizes its own pools: glm_kv.ledgers.dsv4 / dsv4_plan)."""
    return isinstance(model, str) and _dsv4_path(model) is not None


def load_dsv4_config(model: str) -> HfConfig:
    """A DeepSeek-V4 config (shipped short name, Hugging Face id, or a config.json path) as an ``HfConfig``
    (family ``dsv4``)."""
    path = _dsv4_path(model) if isinstance(model, str) else None
    if path is None:
        raise ProfileError("model", f"{shown(model)} is not a DeepSeek-V4 config ({', '.join(DSV4_SHIPPED)}, or a "
                                    f"config.json of model_type {DSV4_MODEL_TYPE})")
    cfg = _read_json_file(path, "model")
    arch = cfg.get("architectures") or []
    if cfg.get("model_type") != DSV4_MODEL_TYPE or not isinstance(arch, list) or DSV4_ARCHITECTURE not in arch:
        raise ProfileError("model.architectures", f"a {DSV4_MODEL_TYPE} config glm-kv sizes names "
                                                  f"{DSV4_ARCHITECTURE}, got {shown(arch)}")
    name = dsv4_shipped_name(model)
    source = vendored_sources()[path.name] if name else str(path)
    return HfConfig(name=name or path.parent.name or str(path), source=source, model_type=DSV4_MODEL_TYPE,
                    family="dsv4", architectures=tuple(arch), top=cfg, text=cfg)
