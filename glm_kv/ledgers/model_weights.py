"""The weights of any shipped model on one rank, ESTIMATED from its config.json and quantization.

SGLang measures weights (``Load weight end ... mem usage``), it never estimates them; this module
is glm-kv's estimate for a profile that states no ``weights_bytes`` and names no local checkpoint
with safetensors headers. Every figure it gives is labelled "estimate" by the caller.

Parameters are counted per layer kind from the config and the layer specs
(``glm_kv.ledgers.model_layers.build_layers``), and split the way SGLang's layers partition them:

* ``over_tp``: MoE experts (routed + shared: TP or EP, 1/tp per rank either way), dense MLPs, lm_head;
* ``over_attn_tp``: the attention projections split over the attention-TP group (MLA q_b / kv_b /
  o and Kimi's output gate, GQA q / k / v / o);
* ``over_linear_tp``: linear-attention projections (KDA, Gated DeltaNet, Mamba-2) over the linear
  attention TP group (= attention TP in 0.5.23);
* ``replicated``: MLA q_a / kv_a, the DSA indexer, MoE routers, Kimi's latent MoE projections;
* ``embed``: embed_tokens (over attention TP with DP attention, else over TP).

Each partition is counted twice: parameters stored at the checkpoint's quantized width and
parameters the checkpoint keeps in bf16 (embeddings, lm_head, routers, modules on the
quantization config's ignore list). Left out (small or not in SGLang's device weights): norms,
biases, conv/A/dt vectors below 0.1 %, and the vision tower of multimodal checkpoints.

A ModelOpt MIXED_PRECISION checkpoint (Qwen3.6-27B-NVFP4, Nemotron-3.5-Lightning-NVFP4) gives each weight
group its own width, read from ``quantized_layers`` as SGLang resolves each Linear
(``inputs.weights.mixed_precision_widths``): attention, linear-attention, MLP / experts and lm_head, each
at FP8, NVFP4 or bf16 when none of its Linears is listed; embeddings and routers stay bf16. A Linear a
group leaves unlisted beside listed ones (Qwen3.6's in_proj_ba, under 1 % of a Gated DeltaNet layer) is
counted at the group's width.

GLM-5.3-Flash (``model_type`` glm5_next) keeps the estimate it always had: its shipped config is an
excerpt without ``quantization_config``, and every parameter is counted at FP8's 1 B + block
scales (``quantization_of``'s "fp8 when the config names none").
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ProfileError
from ..inputs.hf_config import HfConfig, config_where, nemotron_pattern
from ..inputs.weights import BYTES_PER_PARAM, mixed_precision_section, mixed_precision_widths, quantization_of
from .layers import (DsaIndexerK, GatedDeltaNetState, GqaKv, JetBlockState, KdaState, Mamba2State, MlaKv,
                     SlidingWindowKv)
from .model_layers import ModelLayers

PARTS = ("over_tp", "over_attn_tp", "over_linear_tp", "replicated", "embed")


@dataclass(frozen=True)
class WeightCounts:
    """Parameter counts by partition (see the module docstring), quantized and kept in bf16."""

    over_tp: int = 0
    over_attn_tp: int = 0
    over_linear_tp: int = 0
    replicated: int = 0
    embed: int = 0

    @property
    def total(self) -> int:
        return self.over_tp + self.over_attn_tp + self.over_linear_tp + self.replicated + self.embed

    def __add__(self, o: "WeightCounts") -> "WeightCounts":
        return WeightCounts(*(getattr(self, k) + getattr(o, k) for k in PARTS))


@dataclass(frozen=True)
class CheckpointWeights:
    """What the estimate counts: parameters at the quantized width and in bf16, and the widths."""

    quantized: WeightCounts
    kept: WeightCounts
    quantization: str              # a key of BYTES_PER_PARAM (or "fp8" for GLM-5.3-Flash's rule), or "modelopt_mixed"
    quantized_bytes_per_param: float
    kept_bytes_per_param: float
    # MIXED_PRECISION: the other weight groups, each at its own width (attention, linear attention, lm_head)
    others: tuple[tuple[WeightCounts, float], ...] = ()

    def _parts(self) -> tuple[tuple[WeightCounts, float], ...]:
        return ((self.quantized, self.quantized_bytes_per_param), (self.kept, self.kept_bytes_per_param),
                *self.others)

    @property
    def total_params(self) -> int:
        return sum(w.total for w, _b in self._parts())

    @property
    def whole_bytes(self) -> float:
        """The checkpoint on one GPU (no split): the denominator of the safetensors split."""
        return sum(w.total * b for w, b in self._parts())

    def per_rank(self, tp: int, attn_tp: int, linear_tp: int | None = None, dp_attention: bool = False) -> int:
        """Bytes on one rank: each partition divided by its group, at its width."""
        lin = linear_tp or attn_tp

        def share(w: WeightCounts) -> float:
            return (w.over_tp / tp + w.over_attn_tp / attn_tp + w.over_linear_tp / lin + w.replicated
                    + w.embed / (attn_tp if dp_attention else tp))

        return int(sum(share(w) * b for w, b in self._parts()))


def _g(t: dict, key: str, default=0):
    v = t.get(key, default)
    return default if v is None else v


# ---------------------------------------------------------------------------------------------
# one layer of each kind: (partition -> count) as two WeightCounts, (quantizable, bf16-kept)


def mla_params(t: dict, heads: int, indexer: bool) -> tuple[int, int]:
    """(over attn_tp, replicated) of one MLA layer (DeepSeek-V2 layout), plus the DSA indexer
    (wq_b, wk, weights_proj: replicated) and Kimi's output gate (``mla_use_output_gate``)."""
    h = t["hidden_size"]
    q_lora = _g(t, "q_lora_rank", None)
    nope, rope = _g(t, "qk_nope_head_dim"), _g(t, "qk_rope_head_dim")
    v_dim, kv_lora = _g(t, "v_head_dim"), t["kv_lora_rank"]
    q_in = q_lora if q_lora else h
    part = q_in * heads * (nope + rope) + kv_lora * heads * (nope + v_dim) + heads * v_dim * h
    if t.get("mla_use_output_gate"):
        part += h * heads * v_dim
    repl = (h * q_lora if q_lora else 0) + h * (kv_lora + rope)
    if indexer:
        idx_heads, idx_dim = _g(t, "index_n_heads"), t["index_head_dim"]
        repl += (q_lora or h) * idx_heads * idx_dim + h * idx_dim + h * idx_heads
    return part, repl


def gqa_params(t: dict, spec: GqaKv) -> int:
    """q / k / v / o of one GQA layer (over attention TP); Qwen3.5's gated q doubles q_proj."""
    h, heads = t["hidden_size"], t["num_attention_heads"]
    q = h * heads * spec.head_dim * (2 if t.get("attn_output_gate") else 1)
    kv = h * spec.num_kv_heads * (spec.head_dim + spec.v_head_dim)
    return q + kv + heads * spec.v_head_dim * h


def kda_params(t: dict, spec: KdaState) -> int:
    """q, k, v, o of one KDA layer (heads x head_dim each), as GLM-5.3-Flash's estimate counts them."""
    return 4 * t["hidden_size"] * spec.num_heads * spec.head_dim


def gdn_params(t: dict) -> int:
    """One Gated DeltaNet layer: in_proj_qkvz, in_proj_ba, conv1d, out_proj."""
    h = t["hidden_size"]
    nk, dk = t["linear_num_key_heads"], t["linear_key_head_dim"]
    nv, dv = t["linear_num_value_heads"], t["linear_value_head_dim"]
    conv_dim = 2 * nk * dk + nv * dv
    return h * (2 * nk * dk + 2 * nv * dv) + h * 2 * nv + conv_dim * t.get("linear_conv_kernel_dim", 4) \
        + nv * dv * h


def mamba2_params(t: dict, spec: Mamba2State) -> int:
    """One Mamba-2 mixer: in_proj (z, x, B, C, dt), conv1d, out_proj."""
    h = t["hidden_size"]
    d_inner = spec.num_heads * spec.head_dim
    bc = 2 * spec.n_groups * spec.state_size
    return h * (2 * d_inner + bc + spec.num_heads) + (d_inner + bc) * spec.conv_kernel + d_inner * h


def jet_params(t: dict, spec: JetBlockState) -> int:
    """One JetBlock (Jet-Nemotron): q / k (heads x k dim), v and the output gate (heads x v dim), o, and the
    per-head a / b gates; the dynamic-convolution kernel generator (hidden / reduction wide) is left out."""
    h = t["hidden_size"]
    heads, k_dim, v_dim = spec.num_heads, spec.state_size, spec.head_dim
    return h * (2 * heads * k_dim + 2 * heads * v_dim + 2 * heads) + heads * v_dim * h


# ---------------------------------------------------------------------------------------------
# the MLP of each layer, per family


def _mlp_counts(cfg: HfConfig, layers: ModelLayers, q: str) -> tuple[WeightCounts, WeightCounts]:
    """(quantized, kept) counts of every layer's MLP / MoE. ``q``: the checkpoint's quantization."""
    t, fam = cfg.text, cfg.family
    h = t["hidden_size"]
    quant, kept = WeightCounts(), WeightCounts()
    # Kimi-K3's compressed-tensors ignore list keeps shared experts and dense MLPs in bf16
    ct_ignored = q == "mxfp4"
    if fam == "gqa+mamba2":   # Nemotron-H: 'E' MoE, '-' MLP (relu2: up + down), per hybrid_override_pattern
        pattern = nemotron_pattern(t, config_where(cfg))
        n_moe, n_mlp = pattern.count("E"), pattern.count("-")
        if n_moe:   # a dense Nemotron-H (56B: M and - only) has no expert fields
            inter = t["moe_intermediate_size"]
            latent = _g(t, "moe_latent_size", None)
            d = latent or h
            routed = t["n_routed_experts"] * 2 * d * inter
            shared = _g(t, "n_shared_experts", 1) * 2 * h * _g(t, "moe_shared_expert_intermediate_size", inter)
            lat = 2 * h * latent if latent else 0
            quant += WeightCounts(over_tp=n_moe * (routed + shared), replicated=n_moe * lat)
            kept += WeightCounts(replicated=n_moe * t["n_routed_experts"] * h)
        if n_mlp:
            quant += WeightCounts(over_tp=n_mlp * 2 * h * t["intermediate_size"])
        return quant, kept
    if fam == "gqa_swa" and cfg.model_type == "gemma4":   # Gemma-4: every layer a dense MLP, plus (enable_moe_block)
        n = layers.num_hidden_layers                      # num_experts x gate / up / down beside it; router bf16
        quant += WeightCounts(over_tp=n * 3 * h * t["intermediate_size"])
        if t.get("enable_moe_block") and _g(t, "num_experts", 0):
            quant += WeightCounts(over_tp=n * t["num_experts"] * 3 * h * t["moe_intermediate_size"])
            kept += WeightCounts(replicated=n * t["num_experts"] * h)
        return quant, kept
    if fam == "gqa_swa" and cfg.model_type == "mimo_v2_flash":   # moe_layer_freq[i] 1: MoE (no shared expert),
        freq = t.get("moe_layer_freq") or []                     # else a dense MLP; router bf16
        n = layers.num_hidden_layers
        n_moe = sum(1 for i in range(n) if i < len(freq) and freq[i])
        quant += WeightCounts(over_tp=n_moe * t["n_routed_experts"] * 3 * h * t["moe_intermediate_size"]
                              + (n - n_moe) * 3 * h * t["intermediate_size"])
        kept += WeightCounts(replicated=n_moe * t["n_routed_experts"] * h)
        return quant, kept
    if fam == "gqa_swa" and cfg.model_type == "llama4":   # Llama-4: every interleave_moe_layer_step-th layer MoE
        n, step = layers.num_hidden_layers, _g(t, "interleave_moe_layer_step", 1)   # (routed + one shared
        n_moe = sum(1 for i in range(n) if step and (i + 1) % step == 0)            # expert), else dense (0: none)
        e = t["num_local_experts"]
        quant += WeightCounts(over_tp=n_moe * (e + 1) * 3 * h * t["intermediate_size"]
                              + (n - n_moe) * 3 * h * _g(t, "intermediate_size_mlp", t["intermediate_size"]))
        kept += WeightCounts(replicated=n_moe * e * h)
        return quant, kept
    if fam == "gqa_swa":      # gpt-oss: every layer MoE, num_local_experts x (fused gate_up + down); router bf16
        n, n_experts = layers.num_hidden_layers, t["num_local_experts"]
        quant += WeightCounts(over_tp=n * n_experts * 3 * h * t["intermediate_size"])
        kept += WeightCounts(replicated=n * n_experts * h)
        return quant, kept
    if fam == "gqa+gdn":      # Qwen3.5 MoE: every layer MoE unless in mlp_only_layers
        n = layers.num_hidden_layers
        dense_ids = set(_g(t, "mlp_only_layers", []) or [])
        n_experts = _g(t, "num_experts", 0)
        if n_experts:
            n_moe, n_dense = n - len(dense_ids), len(dense_ids)
            routed = n_experts * 3 * h * t["moe_intermediate_size"]
            shared = 3 * h * _g(t, "shared_expert_intermediate_size", 0)
            quant += WeightCounts(over_tp=n_moe * (routed + shared) + n_dense * 3 * h * _g(t, "intermediate_size"))
            kept += WeightCounts(replicated=n_moe * (n_experts * h + (h if shared else 0)))
        else:   # dense Qwen3.5 / Qwen3-Next without experts
            quant += WeightCounts(over_tp=n * 3 * h * t["intermediate_size"])
        return quant, kept
    # DeepSeek-style (MLA families): first_k_dense_replace dense layers, then MoE every moe_layer_freq
    n = layers.num_hidden_layers
    k_dense = _g(t, "first_k_dense_replace", 0)
    freq = _g(t, "moe_layer_freq", 1) or 1
    n_routed = _g(t, "n_routed_experts", 0) or _g(t, "num_experts", 0)
    n_shared = _g(t, "n_shared_experts", 0) or _g(t, "num_shared_experts", 0)
    moe_ids = [i for i in range(n) if i >= k_dense and (i - k_dense) % freq == 0] if n_routed else []
    n_moe, n_dense = len(moe_ids), n - len(moe_ids)
    inter = _g(t, "moe_intermediate_size", 0)
    latent = _g(t, "routed_expert_hidden_size", None)
    routed = n_routed * 3 * (latent or h) * inter
    shared = n_shared * 3 * h * inter
    dense = 3 * h * _g(t, "intermediate_size", 0)
    lat = 2 * h * latent if latent else 0
    if ct_ignored:
        quant += WeightCounts(over_tp=n_moe * routed, replicated=n_moe * lat)
        kept += WeightCounts(over_tp=n_moe * shared + n_dense * dense)
    else:
        quant += WeightCounts(over_tp=n_moe * (routed + shared) + n_dense * dense, replicated=n_moe * lat)
    kept += WeightCounts(replicated=n_moe * n_routed * h)
    return quant, kept


# ---------------------------------------------------------------------------------------------


def checkpoint_quantization(cfg: HfConfig) -> str:
    """The checkpoint's weight format, from its config (and ``hf_quant_config.json``):

    * ``quantization_config`` of compressed-tensors with an ``mxfp4`` format -> "mxfp4" (Kimi-K3:
      4-bit e2m1 weights in groups of 32, one uint8 scale per group);
    * fp8 (``quant_method`` fp8 with 128 x 128 blocks: DeepSeek-V3.2; or ModelOpt FP8 in
      ``hf_quant_config.json``: Nemotron-3-Super-FP8) -> "fp8" / "fp8_tensor";
    * no quantization config -> the config's dtype (bf16: Qwen3.5-35B-A3B, GLM-5.1's zai-org/GLM-5.1
      config, whose dtype is bfloat16), except GLM-5.3-Flash (fp8, see the module docstring).
    """
    if cfg.model_type == "glm5_next":
        return quantization_of(cfg.top)
    if mixed_precision_section(cfg.top, cfg.text, cfg.quant) is not None:
        return "modelopt_mixed"
    algo = str(((cfg.quant or {}).get("quantization") or {}).get("quant_algo", "")).upper()
    if algo:
        if "FP4" in algo:
            return "nvfp4"
        if "FP8" in algo:
            return "fp8_tensor"
        raise ProfileError("model", f"hf_quant_config.json quant_algo {algo!r} is not modelled (FP8, NVFP4 are)")
    q = cfg.top.get("quantization_config") or cfg.text.get("quantization_config")
    if q is None:
        dtype = str(cfg.text.get("torch_dtype") or cfg.text.get("dtype") or cfg.top.get("torch_dtype")
                    or cfg.top.get("dtype") or "bfloat16")
        if dtype not in ("bfloat16", "float16"):
            raise ProfileError("model", f"checkpoint dtype {dtype!r} is not modelled (bfloat16, float16 are)")
        return "bf16"
    if str(q.get("quant_method", "")).lower() == "mxfp4":   # gpt-oss: MXFP4 experts (e2m1, one e8m0 per 32)
        return "mxfp4"
    if str(q.get("quant_method", "")).lower() == "compressed-tensors":
        fmt = str(q.get("format", "")).lower()
        if "mxfp4" in fmt:
            return "mxfp4"
        raise ProfileError("model", f"compressed-tensors format {fmt!r} is not modelled (mxfp4-pack-quantized is)")
    return quantization_of(cfg.top if cfg.top.get("quantization_config") else {"quantization_config": q})


def checkpoint_weights(cfg: HfConfig, layers: ModelLayers) -> CheckpointWeights:
    """Every parameter the estimate counts, by partition and width (see the module docstring)."""
    t = cfg.text
    h, vocab = t["hidden_size"], t["vocab_size"]
    q = checkpoint_quantization(cfg)
    heads = t.get("num_attention_heads")
    attn, linear, attn_k = WeightCounts(), WeightCounts(), WeightCounts()
    for _i, specs in layers.layers:
        kinds = {type(s) for s in specs}
        if MlaKv in kinds:
            part, repl = mla_params(t, heads, DsaIndexerK in kinds)
            attn += WeightCounts(over_attn_tp=part, replicated=repl)
        for s in specs:
            if type(s) in (GqaKv, SlidingWindowKv):
                attn += WeightCounts(over_attn_tp=gqa_params(t, s))
            elif type(s) is KdaState:
                linear += WeightCounts(over_linear_tp=kda_params(t, s))
            elif type(s) is JetBlockState:
                linear += WeightCounts(over_linear_tp=jet_params(t, s))
            elif type(s) is GatedDeltaNetState:
                linear += WeightCounts(over_linear_tp=gdn_params(t))
            elif type(s) is Mamba2State:
                linear += WeightCounts(over_linear_tp=mamba2_params(t, s))
    attn_q = attn + linear
    mlp_q, mlp_k = _mlp_counts(cfg, layers, q)
    tied = bool(t.get("tie_word_embeddings", cfg.top.get("tie_word_embeddings", False)))
    head = WeightCounts() if tied else WeightCounts(over_tp=vocab * h)
    embed = WeightCounts(embed=vocab * h)
    if q == "modelopt_mixed":   # each group at its own width; embeddings and routers bf16
        widths = mixed_precision_widths(mixed_precision_section(cfg.top, cfg.text, cfg.quant))
        bpp = {g: BYTES_PER_PARAM[w] for g, w in widths.items()}
        return CheckpointWeights(quantized=mlp_q, kept=mlp_k + embed, quantization=q,
                                 quantized_bytes_per_param=bpp["mlp"], kept_bytes_per_param=2.0,
                                 others=((attn, bpp["attention"]), (linear, bpp["linear_attention"]),
                                         (head, bpp["lm_head"])))
    if q == "mxfp4":   # ignore list (modules_to_not_convert for gpt-oss): self_attn, lm_head stay bf16
        attn_q, attn_k = WeightCounts(), attn_q + attn_k
    quantized = attn_q + mlp_q
    kept = attn_k + mlp_k + head + embed
    if cfg.model_type == "glm5_next":   # GLM-5.3-Flash's rule: every parameter at the checkpoint's width
        quantized, kept = quantized + kept, WeightCounts()
    qb = BYTES_PER_PARAM[q]
    return CheckpointWeights(quantized=quantized, kept=kept, quantization=q,
                             quantized_bytes_per_param=qb, kept_bytes_per_param=2.0)


def draft_layer_counts(cfg: HfConfig, layers: ModelLayers) -> tuple[int, int, int]:
    """(over tp, over attn_tp, replicated) parameters of one MTP / NextN decoder layer (MLA + its DSA
    indexer + MoE), for ``memory.estimate_draft_bytes_for``."""
    t = cfg.text
    h = t["hidden_size"]
    indexer = bool(layers.specs((DsaIndexerK,)))
    part, repl = mla_params(t, t["num_attention_heads"], indexer)
    n_routed = _g(t, "n_routed_experts", 0)
    experts = (n_routed + _g(t, "n_shared_experts", 0)) * 3 * h * _g(t, "moe_intermediate_size", 0)
    return experts, part, repl + n_routed * h
