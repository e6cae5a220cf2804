"""A model as the list of its layers' cache specs, built from config.json as SGLang 0.5.23 does.

Which layer holds what (SGLang 0.5.23, ``configs/``):

* KDA models (``KimiLinearConfig``, ``Glm5NextTextConfig``): a layer is KDA when it is in
  ``linear_attn_config.kda_layers`` - 1-based for Kimi (``is_kda_layer``: ``layer_idx + 1 in
  kda_layers``), 0-based for GLM-5.3-Flash; the others are full attention (MLA, plus the DSA
  indexer when the architecture is DSA and the config has ``index_topk``).
* Gated DeltaNet (``Qwen3NextConfig`` and the Qwen3.5 classes): full attention every
  ``full_attention_interval``-th layer (``layers_block_type``), GQA there, GDN elsewhere.
* Mamba-2 (``NemotronHConfig``): ``layers_block_type`` ("mamba", "attention", "moe", "mlp"), else
  the legacy ``hybrid_override_pattern`` "M" = Mamba-2, "*" = attention (GQA), "E"/"-" (MoE/MLP)
  hold no cache (``inputs.hf_config.nemotron_pattern``).
* DSA models (DeepSeek-V3.2, GLM-5.1: ``is_deepseek_dsa``): every layer MLA + indexer K, except
  layers whose ``indexer_types`` entry is "shared" (``dsa_layer_skips_topk``: 0-row index K).
* Jet-Nemotron (``JetNemotronConfig``, issue 32): ``layer_types`` "jet" = JetBlock (its state in the
  MambaPool), "attn" and "swa" = GQA in the full pool (``full_attention_layer_ids``: Jet-Nemotron is
  not one of ``is_hybrid_swa_model``'s architectures, so its sliding-window layers keep whole rows).
* Hybrid-SWA models (``is_hybrid_swa_model``; gpt-oss, issue 32): ``layer_types`` "full_attention" = GQA in
  the full pool, "sliding_attention" = sliding-window GQA in the SWA pool (``get_hybrid_layer_ids`` for the
  SWA_SINK_ARCHS); the window is ``get_attention_sliding_window_size`` (gpt-oss: ``sliding_window - 1``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ProfileError, shown
from ..inputs.hf_config import HfConfig, config_where, config_int as _int, nemotron_pattern
from ..inputs.model import LINEAR_LAYER_TYPES
from ..inputs.rules import SglangRules
from ..inputs.swa import sglang_swa_view
from ..units import DTYPE_BYTES
from .layers import (STATE_KINDS, SWA_KINDS, TOKEN_KINDS, DsaIndexerK, GatedDeltaNetState, GqaKv, JetBlockState,
                     KdaState, LayerSpec, Mamba2State, MlaKv, SlidingWindowKv)

# is_deepseek_dsa's architectures that glm-kv's families use (the config must also have index_topk)
DSA_ARCHITECTURES = ("DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "GlmMoeDsaForCausalLM",
                     "Glm5NextForConditionalGeneration")
TRTLLM_OR_TILELANG_RAW = "trtllm"


@dataclass(frozen=True)
class CacheArgs:
    """The resolved launch facts the specs need (SGLang's resolved ServerArgs, per rank)."""

    kv_cache_dtype: str            # "bfloat16" or "fp8_e4m3" (resolved, never "auto")
    dsa_prefill_backend: str
    dsa_decode_backend: str
    attn_tp: int
    ssm_dtype: str                 # "float32" or "bfloat16"
    ssm_dtype_from_config: bool    # True: the flag was not given (GDN/Mamba-2 read the config's)
    # the TP width that splits the linear-attention (state) heads: attn_tp, except under GLM-5.3-Flash's
    # CP-TP group sharing, where it is the whole TP (``linear_attn_tp_size()``); None: attn_tp
    linear_tp: int | None = None
    # "null", "prefill" or "decode": on a disaggregated server only the local role's DSA backend
    # picks the MLA row layout (calculate_mla_kv_cache_dim)
    disaggregation_mode: str = "null"
    # False under --disable-hybrid-swa-memory (ModelConfig.is_hybrid_swa): a hybrid-SWA model's sliding-window
    # layers keep their K and V in the full pool, as full-attention GQA rows (no SWA pool; issue 32)
    hybrid_swa: bool = True

    @property
    def state_tp(self) -> int:
        return self.linear_tp or self.attn_tp


@dataclass(frozen=True)
class ModelLayers:
    """Per layer id, the specs SGLang allocates for it (empty for MoE/MLP-only layers)."""

    name: str
    family: str
    num_hidden_layers: int
    layers: tuple[tuple[int, tuple[LayerSpec, ...]], ...]

    def specs(self, kinds: tuple = ()) -> list[LayerSpec]:
        return [s for _, specs in self.layers for s in specs if not kinds or isinstance(s, kinds)]

    def layer_ids(self, kind: type) -> tuple[int, ...]:
        return tuple(i for i, specs in self.layers if any(type(s) is kind for s in specs))

    @property
    def full_attention_layers(self) -> tuple[int, ...]:
        return tuple(i for i, specs in self.layers if any(isinstance(s, TOKEN_KINDS) for s in specs))

    @property
    def state_layers(self) -> tuple[int, ...]:
        return tuple(i for i, specs in self.layers if any(isinstance(s, STATE_KINDS) for s in specs))

    @property
    def swa_layers(self) -> tuple[int, ...]:
        """The layers whose KV lives in the SWA pool (``swa_attention_layer_ids``; none outside hybrid SWA)."""
        return tuple(i for i, specs in self.layers if any(isinstance(s, SWA_KINDS) for s in specs))

    @property
    def bytes_per_token(self) -> int:
        """SGLang's ``cell_size`` (no draft): every token-pool spec's bytes, summed over layers."""
        return sum(s.bytes_per_token for s in self.specs(TOKEN_KINDS))

    @property
    def bytes_per_slot(self) -> int:
        """SGLang's ``mamba_cache_per_req``: every state spec's bytes, summed over layers."""
        return sum(s.bytes_per_slot for s in self.specs(STATE_KINDS))

    def bytes_per_token_of(self, kind: type) -> int:
        return sum(s.bytes_per_token for s in self.specs() if type(s) is kind)

    def by_kind(self) -> dict[str, dict]:
        """kind -> {layers, per-layer bytes, total bytes per token or per slot}."""
        out: dict[str, dict] = {}
        for spec in self.specs():
            d = out.setdefault(spec.kind, {"pool": spec.pool, "layers": 0, "bytes_per_layer": None, "bytes": 0})
            b = spec.bytes_per_token if spec.pool in ("token", "swa") else spec.bytes_per_slot
            d["layers"] += 1
            d["bytes_per_layer"] = b
            d["bytes"] += b
        return out


def is_dsa(cfg: HfConfig) -> bool:
    return bool(set(cfg.architectures) & set(DSA_ARCHITECTURES)) and cfg.text.get("index_topk") is not None


def dsa_fp8_row(prefill: str, decode: str, disaggregation_mode: str = "null") -> str:
    """``calculate_mla_kv_cache_dim`` (CUDA) for a DSA model's fp8 KV: raw rows when the local role's
    backend is trtllm (a decode server: the decode backend; a prefill server: the prefill backend;
    otherwise either), or both backends are tilelang; scaled rows (per-128 fp32 scales, bf16 rope) else."""
    if disaggregation_mode == "decode":
        trtllm = decode == "trtllm"
    elif disaggregation_mode == "prefill":
        trtllm = prefill == "trtllm"
    else:
        trtllm = "trtllm" in (prefill, decode)
    return "fp8_raw" if trtllm or prefill == decode == "tilelang" else "fp8_scaled"


def mla_row(cfg: HfConfig, args: CacheArgs) -> str:
    """``calculate_mla_kv_cache_dim``: scaled fp8 rows only for DSA models off trtllm/tilelang."""
    if args.kv_cache_dtype != "fp8_e4m3":
        return "bf16"
    if not is_dsa(cfg):
        return "fp8_raw"
    return dsa_fp8_row(args.dsa_prefill_backend, args.dsa_decode_backend, args.disaggregation_mode)


def _mla(cfg: HfConfig, args: CacheArgs, rules: SglangRules, where: str) -> MlaKv:
    t = cfg.text
    return MlaKv(kv_lora_rank=_int(t, "kv_lora_rank", where), qk_rope_head_dim=_int(t, "qk_rope_head_dim", where, lo=0),
                 item_bytes=DTYPE_BYTES[args.kv_cache_dtype], row=mla_row(cfg, args), rules=rules)


def _indexer(cfg: HfConfig, rules: SglangRules, where: str) -> DsaIndexerK:
    t = cfg.text
    d = _int(t, "index_head_dim", where)
    if d % rules.fp8_scale_group:
        raise ProfileError(f"{where}.index_head_dim", f"must be a multiple of {rules.fp8_scale_group}, got {d}")
    return DsaIndexerK(index_head_dim=d, index_kpool=_int(t, "index_kpool", where, default=1), rules=rules,
                       index_topk=_int(t, "index_topk", where), kpool_compress=bool(t.get("index_kpool_compress", False)))


def _ssm_dtype(cfg: HfConfig, args: CacheArgs, reads_config: bool) -> str:
    """``mamba2_state_dtype``: the flag, else (GDN/Mamba-2 only) the config's mamba_ssm_dtype, else fp32."""
    dtype = args.ssm_dtype
    if args.ssm_dtype_from_config and reads_config:
        dtype = cfg.text.get("mamba_ssm_dtype") or cfg.top.get("mamba_ssm_dtype") or dtype
        if dtype not in ("float32", "bfloat16", "float16"):
            dtype = "float32"   # SGLang warns and uses its default
    return dtype


def _ssm_item(cfg: HfConfig, args: CacheArgs, reads_config: bool) -> dict:
    """The SSM element's size and name, as the state specs take them."""
    dtype = _ssm_dtype(cfg, args, reads_config)
    return {"ssm_item_bytes": DTYPE_BYTES[dtype], "ssm_dtype": dtype}


def _kda_layers(cfg: HfConfig, n: int, where: str) -> set[int]:
    lac = cfg.text.get("linear_attn_config")
    types = cfg.text.get("layer_types")
    if (cfg.model_type == "glm5_next" and isinstance(lac, dict) and lac.get("kda_layers") is None
            and isinstance(types, list)):   # Glm5NextTextConfig also reads layer_types (checked in inputs.model)
        return {i for i, kind in enumerate(types) if kind in LINEAR_LAYER_TYPES}
    if not isinstance(lac, dict) or not isinstance(lac.get("kda_layers"), list):
        raise ProfileError(f"{where}.linear_attn_config.kda_layers", "missing: a KDA model lists its KDA layers")
    kda = lac["kda_layers"]
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in kda):
        raise ProfileError(f"{where}.linear_attn_config.kda_layers", "must be a list of layer numbers")
    if cfg.model_type in ("kimi_k3", "kimi_linear"):
        return {i for i in range(n) if i + 1 in kda}      # KimiLinearConfig.is_kda_layer: 1-based
    return {i for i in range(n) if i in kda}              # Glm5NextTextConfig: 0-based


def build_layers(cfg: HfConfig, args: CacheArgs, rules: SglangRules) -> ModelLayers:
    """The model's layers as SGLang 0.5.23 allocates for them (see the module docstring)."""
    where = config_where(cfg)
    t = cfg.text
    fam = cfg.family
    layers: list[tuple[int, tuple]] = []
    if fam in ("mla+kda", "mla_dsa+kda"):
        n = _int(t, "num_hidden_layers", where)
        kda_ids = _kda_layers(cfg, n, where)
        lac = t["linear_attn_config"]
        kda = KdaState(num_heads=_int(lac, "num_heads", f"{where}.linear_attn_config"),
                       head_dim=_int(lac, "head_dim", f"{where}.linear_attn_config"),
                       conv_kernel=_int(lac, "short_conv_kernel_size", f"{where}.linear_attn_config", lo=2),
                       attn_tp=args.state_tp, conv_item_bytes=DTYPE_BYTES[rules.conv_state_dtype],
                       **_ssm_item(cfg, args, reads_config=False))
        full = (_mla(cfg, args, rules, where),) + ((_indexer(cfg, rules, where),) if is_dsa(cfg) else ())
        skip = _shared_indexer_layers(t, n)
        for i in range(n):
            layers.append((i, (kda,) if i in kda_ids else tuple(s for s in full if not (
                isinstance(s, DsaIndexerK) and i in skip))))
    elif fam == "gqa+gdn":
        n = _int(t, "num_hidden_layers", where)
        interval = _int(t, "full_attention_interval", where, default=4)
        gdn = GatedDeltaNetState(
            intermediate_size=_int(t, "linear_value_head_dim", where) * _int(t, "linear_num_value_heads", where),
            n_groups=_int(t, "linear_num_key_heads", where), num_heads=_int(t, "linear_num_value_heads", where),
            head_dim=_int(t, "linear_value_head_dim", where), state_size=_int(t, "linear_key_head_dim", where),
            conv_kernel=_int(t, "linear_conv_kernel_dim", where, lo=2), attn_tp=args.state_tp,
            conv_item_bytes=DTYPE_BYTES[rules.conv_state_dtype], **_ssm_item(cfg, args, True))
        gqa = _gqa(cfg, args, where)
        for i in range(n):
            layers.append((i, (gqa,) if (i + 1) % interval == 0 else (gdn,)))
    elif fam == "gqa+mamba2":
        pattern = nemotron_pattern(t, where)   # layers_block_type, else hybrid_override_pattern
        n = len(pattern)
        heads, hdim = _int(t, "mamba_num_heads", where), _int(t, "mamba_head_dim", where)
        m2 = Mamba2State(intermediate_size=heads * hdim,
                         n_groups=_int(t, "n_groups", where) if "n_groups" in t else
                         _int(t, "mamba_n_groups", where, default=8),
                         num_heads=heads, head_dim=hdim, state_size=_int(t, "ssm_state_size", where),
                         conv_kernel=_int(t, "conv_kernel", where, lo=2) if "conv_kernel" in t else
                         _int(t, "mamba_d_conv", where, default=4, lo=2),
                         attn_tp=args.state_tp, conv_item_bytes=DTYPE_BYTES[rules.conv_state_dtype],
                         **_ssm_item(cfg, args, True))
        gqa = _gqa(cfg, args, where)
        for i, c in enumerate(pattern):
            layers.append((i, (m2,) if c == "M" else (gqa,) if c == "*" else ()))
    elif fam == "mla_dsa":
        n = _int(t, "num_hidden_layers", where)
        if not is_dsa(cfg):
            raise ProfileError(f"{where}.architectures", f"{shown(list(cfg.architectures))} is not a DSA "
                                                         f"architecture SGLang knows ({', '.join(DSA_ARCHITECTURES)})")
        mla, idx = _mla(cfg, args, rules, where), _indexer(cfg, rules, where)
        skip = _shared_indexer_layers(t, n)
        for i in range(n):
            layers.append((i, (mla,) if i in skip else (mla, idx)))
    elif fam == "gqa+jet":
        types = jet_layer_types(t, where)
        n = len(types)
        jet = _jet_block(cfg, args, rules, where)
        gqa = _gqa(cfg, args, where)
        for i, kind in enumerate(types):
            layers.append((i, (jet,) if kind == "jet" else (gqa,)))
    elif fam == "gqa_swa":
        cfg = sglang_swa_view(cfg)   # Gemma-4: SGLang's full / SWA shapes from its SWA-first config
        t = cfg.text
        types = swa_layer_types(t, where)
        n = len(types)
        gqa = _gqa(cfg, args, where)
        swa = SlidingWindowKv(
            num_kv_heads=_int(t, "swa_num_key_value_heads", where) if "swa_num_key_value_heads" in t
            else gqa.num_kv_heads,
            head_dim=_int(t, "swa_head_dim", where) if t.get("swa_head_dim") is not None else gqa.head_dim,
            v_head_dim=_int(t, "swa_v_head_dim", where) if t.get("swa_v_head_dim") is not None else
            (_int(t, "swa_head_dim", where) if t.get("swa_head_dim") is not None else gqa.v_head_dim),
            item_bytes=gqa.item_bytes, attn_tp=gqa.attn_tp, window=sliding_window_size(cfg, where))
        for i, kind in enumerate(types):   # --disable-hybrid-swa-memory: every layer in the full pool
            layers.append((i, (gqa,) if kind == "full_attention" or not args.hybrid_swa else (swa,)))
    else:  # hf_config refuses unknown model types first; a new family must be added here
        raise ProfileError("model.model_type", f"layer kinds of family {fam!r} are not modelled")
    m = ModelLayers(name=cfg.name, family=fam, num_hidden_layers=n, layers=tuple(layers))
    if not m.full_attention_layers:
        raise ProfileError(f"{where}", "has no full-attention layer: the token pool would be empty")
    return m


SWA_LAYER_TYPES = ("full_attention", "sliding_attention")   # get_hybrid_layer_ids (SWA_SINK_ARCHS)


def swa_layer_types(t: dict, where: str) -> list[str]:
    """A hybrid-SWA config's ``layer_types`` (gpt-oss), one entry per layer, as SGLang splits them into
    ``full_attention_layer_ids`` and ``swa_attention_layer_ids``; another name (which SGLang would put in
    neither pool) is refused, and so is a list whose length is not ``num_hidden_layers``."""
    types = t.get("layer_types")
    if (not isinstance(types, list) or not types or len(types) > 4096
            or not all(isinstance(x, str) and x in SWA_LAYER_TYPES for x in types)):
        raise ProfileError(f"{where}.layer_types", f"must be a list of {', '.join(SWA_LAYER_TYPES)} "
                                                   f"(at most 4,096), got {shown(types)}")
    n = _int(t, "num_hidden_layers", where)
    if len(types) != n:
        raise ProfileError(f"{where}.layer_types", f"must name every one of the {n} layers "
                                                   f"(num_hidden_layers), got {len(types)}")
    if "sliding_attention" not in types:
        raise ProfileError(f"{where}.layer_types", "names no sliding_attention layer: SGLang's SWA pool "
                                                   "needs one (\"Hybrid SWA model must have at least one SWA layer\")")
    return types


def sliding_window_size(cfg: HfConfig, where: str) -> int:
    """``resolve_sliding_window_size``: the model class's ``get_attention_sliding_window_size``
    (GptOssForCausalLM, Gemma4ForConditionalGeneration: ``sliding_window - 1``); MiMoV2FlashForCausalLM has
    none, so SGLang takes ``ModelConfig.sliding_window_size`` (``sliding_window_size``, else ``sliding_window``,
    else ``window_size``: MiMo-V2-Flash's 128), and without any of them ``attention_chunk_size`` (Llama-4)."""
    if cfg.model_type in ("mimo_v2_flash", "llama4"):   # no such method: ModelConfig.sliding_window_size (the
        # first of these keys given), else ModelConfig.attention_chunk_size (Llama-4's chunked attention: 8192)
        key = next((k for k in ("sliding_window_size", "sliding_window", "window_size", "attention_chunk_size")
                    if cfg.text.get(k) is not None), "sliding_window_size")
        return _int(cfg.text, key, where, lo=1)
    return _int(cfg.text, "sliding_window", where, lo=2) - 1


JET_LAYER_TYPES = ("jet", "attn", "swa")   # JetNemotronConfig: linear_layer_ids / full_attention_layer_ids


def jet_layer_types(t: dict, where: str) -> list[str]:
    """Jet-Nemotron's ``layer_types``, each one SGLang places in a pool (an unknown name is refused:
    SGLang would allocate nothing for it while the model still runs a layer there)."""
    types = t.get("layer_types")
    if (not isinstance(types, list) or not types or len(types) > 4096
            or not all(isinstance(x, str) and x in JET_LAYER_TYPES for x in types)):
        raise ProfileError(f"{where}.layer_types", f"must be a list of {', '.join(JET_LAYER_TYPES)} "
                                                   f"(at most 4,096), got {shown(types)}")
    return types


def _jet_block(cfg: HfConfig, args: CacheArgs, rules: SglangRules, where: str) -> JetBlockState:
    """``JetNemotronConfig.mamba2_cache_params``: ``Mamba2StateShape.create`` over attention TP with
    heads = n_groups = num_heads, v dim = int(head_dim x expand_v), state = head_dim (the k dim)."""
    eac = cfg.text.get("efficient_attention_config")
    jet = eac.get("jet") if isinstance(eac, dict) else None
    at = f"{where}.efficient_attention_config.jet"
    if not isinstance(jet, dict):
        raise ProfileError(at, "missing: a Jet-Nemotron config gives its JetBlock's dimensions there")
    heads, k_dim = _int(jet, "num_heads", at), _int(jet, "head_dim", at)
    expand = jet.get("expand_v")
    if isinstance(expand, bool) or not isinstance(expand, (int, float)) or not 0 < expand <= 64:
        raise ProfileError(f"{at}.expand_v", f"must be a number in (0, 64], got {shown(expand)}")
    v_dim = int(k_dim * expand)   # JetNemotronConfig: int(head_k_dim * expand_v), Python's float product
    if v_dim < 1:
        raise ProfileError(f"{at}.expand_v", f"head_dim x expand_v gives a v dim of 0 ({k_dim} x {expand})")
    return JetBlockState(intermediate_size=heads * v_dim, n_groups=heads, num_heads=heads, head_dim=v_dim,
                         state_size=k_dim, conv_kernel=_int(jet, "conv_size", at, lo=2), attn_tp=args.state_tp,
                         conv_item_bytes=DTYPE_BYTES[rules.conv_state_dtype], **_ssm_item(cfg, args, True))


def _gqa(cfg: HfConfig, args: CacheArgs, where: str) -> GqaKv:
    t = cfg.text
    heads = _int(t, "num_attention_heads", where)
    kv = _int(t, "num_key_value_heads", where, default=heads)
    # ModelConfig._derive_model_shapes (SGLang 0.5.23): head_dim None -> hidden_size // heads;
    # v_head_dim None or 0 -> head_dim. Any value given is checked as every other dimension.
    if t.get("head_dim") is None:
        head_dim = _int(t, "hidden_size", where) // heads
        if head_dim < 1:
            raise ProfileError(f"{where}.hidden_size", f"hidden_size // num_attention_heads gives head_dim 0 "
                                                       f"({t['hidden_size']} // {heads}); give head_dim")
    else:
        head_dim = _int(t, "head_dim", where)
    vd = t.get("v_head_dim")
    v_head_dim = head_dim if vd is None or (type(vd) is int and vd == 0) else _int(t, "v_head_dim", where)
    return GqaKv(num_kv_heads=kv, head_dim=head_dim, v_head_dim=v_head_dim,
                 item_bytes=DTYPE_BYTES[args.kv_cache_dtype], attn_tp=args.attn_tp)


def _shared_indexer_layers(t: dict, n: int) -> set[int]:
    types = t.get("indexer_types")
    if not isinstance(types, list):
        return set()
    return {i for i in range(min(n, len(types))) if types[i] == "shared"}


def cache_args(args) -> CacheArgs:
    """The launch facts the specs need, from resolved ``ServerArgs``."""
    p = args.profile
    return CacheArgs(kv_cache_dtype=args.kv_cache_dtype, dsa_prefill_backend=args.dsa_prefill_backend,
                     dsa_decode_backend=args.dsa_decode_backend, attn_tp=args.attn_tp_size,
                     ssm_dtype=p.mamba_ssm_dtype, ssm_dtype_from_config="mamba_ssm_dtype" not in p.model_fields_set,
                     linear_tp=args.linear_attn_tp_size, disaggregation_mode=p.disaggregation_mode,
                     hybrid_swa=not p.disable_hybrid_swa_memory)


def layers_for(args) -> ModelLayers:
    """The model's layers for resolved ``ServerArgs`` (any model: its config and these arguments).

    The plan builds them once and hands them to every ledger; a ledger called on its own (the
    calculator, a test that changes one argument) builds them from the arguments it is given."""
    return build_layers(args.config, cache_args(args), args.rules)
