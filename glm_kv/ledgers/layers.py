"""Layer kinds as code: one frozen spec per kind of cache SGLang 0.5.23 allocates (issue 22).

Why: a model is then data (the list of its layers' specs, built from config.json in
``model_layers.py``), and every ledger sums specs instead of knowing a model. Each spec knows its
bytes per token (token pools: SGLang's ``cell_size`` terms) or per state slot (``MambaPool``:
``mamba_cache_per_req`` terms), the way vLLM's ``kv_cache_interface`` specs know
``page_size_bytes``. The SGLang version's facts (row layouts, element sizes) come in as a
``SglangRules`` value; no spec branches on a version. No torch here (layering).

Names follow SGLang: ``calculate_mla_kv_cache_dim`` (MLA rows), ``_compute_dsa_indexer_cell_size``
(indexer K), ``get_num_kv_heads`` (GQA heads per rank), ``KimiLinearStateShape.create`` (KDA),
``Mamba2StateShape.create`` (Gated DeltaNet and Mamba-2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Union

from ..errors import ProfileError
from ..inputs.rules import SglangRules
from ..units import DTYPE_BYTES

TOKEN, STATE = "token", "state"
LINEAR_TP = "linear-attention TP"   # how a state spec names the TP that splits its heads


def _divide(n: int, d: int, what: str, tp: str = "attention TP") -> int:
    """SGLang's ``divide``: exact, else the server cannot start (refused naming tp_size)."""
    if d <= 0 or n % d:
        raise ProfileError("tp_size", f"{tp} {d} must divide the {what} ({n} is not divisible by {d})")
    return n // d


@dataclass(frozen=True)
class MlaKv:
    """MLA latent KV: one row of ``kv_lora_rank + qk_rope_head_dim`` per token and layer.

    ``row``: "bf16" (plain), "fp8_raw" (fp8 elements, trtllm/tilelang) or "fp8_scaled" (DSA
    models' FlashMLA layout: 512 fp8 + 512/128 x 4 B scales + 64 rope x 2 B = 656 B).
    """

    kv_lora_rank: int
    qk_rope_head_dim: int
    item_bytes: int
    row: str
    rules: SglangRules
    kind = "mla_kv"
    pool = TOKEN

    @property
    def kv_cache_dim(self) -> int:
        if self.row != "fp8_scaled":
            return self.kv_lora_rank + self.qk_rope_head_dim
        r = self.rules
        if self.kv_lora_rank % r.fp8_scale_group:
            raise ProfileError("model.kv_lora_rank", f"must be a multiple of {r.fp8_scale_group} for scaled fp8 rows")
        return (self.kv_lora_rank + self.kv_lora_rank // r.fp8_scale_group * r.fp8_scale_bytes
                + self.qk_rope_head_dim * r.scaled_rope_item_bytes)

    @property
    def bytes_per_token(self) -> int:
        return self.kv_cache_dim * self.item_bytes


@dataclass(frozen=True)
class DsaIndexerK:
    """DSA indexer K with its fp8 scales: 128 + 128/128 x 4 = 132 B, pooled over ``index_kpool``."""

    index_head_dim: int
    index_kpool: int
    rules: SglangRules
    index_topk: int = 0            # tokens the indexer keeps (scored as index_topk // index_kpool groups)
    kpool_compress: bool = False   # index_kpool_compress: GLM-5.3-Flash's pooled K (and its compress tail)
    kind = "dsa_indexer_k"
    pool = TOKEN

    @property
    def kpool_use_compress(self) -> bool:
        """``DSATokenToKVPool._init_kpool_compress_tail_buffers``: ``index_kpool > 1 and
        index_kpool_compress``; a kpool of 1 pools nothing, so no tail even with the flag set."""
        return self.index_kpool > 1 and self.kpool_compress

    @property
    def elements(self) -> int:
        """One token's indexer K with its fp8 scales, in storage elements: 128 + 128/128 x 4 = 132."""
        r = self.rules
        return self.index_head_dim + self.index_head_dim // r.fp8_scale_group * r.fp8_scale_bytes

    @property
    def unpooled_bytes(self) -> int:
        return self.elements * self.rules.indexer_item_bytes

    @property
    def bytes_per_token(self) -> int:
        """``_compute_dsa_indexer_cell_size``: ceil(132 / index_kpool) x element size (0.5.23's pooled
        rows); the article's layout reserves the unpooled 132 B row per token and layer."""
        r = self.rules
        if not r.indexer_pooled_rows:
            return self.unpooled_bytes
        return self.pooled_bytes

    @property
    def pooled_bytes(self) -> int:
        """What index_kpool pooling writes per token: one pooled K per index_kpool tokens."""
        return math.ceil(self.elements / self.index_kpool) * self.rules.indexer_item_bytes

    def page_bytes(self, page_size: int) -> int:
        """One IndexKeyCache page (a buffer row) of one layer: page_size // kpool pooled rows
        (0.5.23), or page_size unpooled rows (the article)."""
        if self.rules.indexer_pooled_rows:
            return page_size // self.index_kpool * self.unpooled_bytes
        return page_size * self.unpooled_bytes


@dataclass(frozen=True)
class GqaKv:
    """MHA/GQA KV (``MHATokenToKVPool``): K and V of ``max(1, kv_heads // attn_tp)`` heads."""

    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    item_bytes: int
    attn_tp: int
    kind = "gqa_kv"
    pool = TOKEN

    heads_per_rank = property(lambda self: _kv_heads_per_rank(self))
    bytes_per_token = property(lambda self: _kv_bytes_per_token(self))


def _kv_heads_per_rank(spec) -> int:
    """``get_num_kv_heads(attn_tp)``: the KV heads on one rank, at least one (replicated when TP exceeds them)."""
    return max(1, spec.num_kv_heads // spec.attn_tp)


def _kv_bytes_per_token(spec) -> int:
    """K and V rows of one token on one rank (``MHATokenToKVPool``, the SWA pool alike)."""
    return spec.heads_per_rank * (spec.head_dim + spec.v_head_dim) * spec.item_bytes


SWA = "swa"


@dataclass(frozen=True)
class SlidingWindowKv:
    """A sliding-window GQA layer of a hybrid-SWA model (``is_hybrid_swa_model``: gpt-oss, ...): its K and V
    live in SGLang's SWA pool beside the full pool (``SWAKVPool``), sized ``swa_full_tokens_ratio`` x the full
    pool's tokens. Bytes per token as ``HybridSWAPoolConfigurator._swa_per_token``:
    ``get_swa_num_kv_heads(attn_tp) x (swa_head_dim + swa_v_head_dim) x kv item size`` (the heads
    ``max(1, swa_num_key_value_heads // attn_tp)``, the config's KV heads when it names no SWA ones).
    ``window``: the attention's window (``get_attention_sliding_window_size``), which only SGLang's
    admission floor reads (``validate_swa_pool_size``)."""

    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    item_bytes: int
    attn_tp: int
    window: int
    kind = "sliding_window_kv"
    pool = SWA

    heads_per_rank = property(lambda self: _kv_heads_per_rank(self))
    bytes_per_token = property(lambda self: _kv_bytes_per_token(self))


class _ConvSsmState:
    """Bytes of one state slot from a conv and a temporal (SSM) tensor shape, as SGLang's
    ``MambaPool`` allocates them: conv in its dtype, temporal in the SSM dtype (one rule for the
    KDA, Mamba-2 and Gated DeltaNet specs, which differ only in their shapes)."""

    conv_shape: tuple[int, ...]
    temporal_shape: tuple[int, ...]
    conv_item_bytes: int
    ssm_item_bytes: int

    @property
    def conv_bytes(self) -> int:
        return math.prod(self.conv_shape) * self.conv_item_bytes

    @property
    def temporal_bytes(self) -> int:
        return math.prod(self.temporal_shape) * self.ssm_item_bytes

    @property
    def bytes_per_slot(self) -> int:
        return self.conv_bytes + self.temporal_bytes


@dataclass(frozen=True)
class KdaState(_ConvSsmState):
    """Kimi Delta Attention state (``KimiLinearStateShape.create``): conv (K-1, 3 x H x d / tp) in
    bf16 and temporal (H / tp, d, d) in the SSM dtype; k heads default to the v heads."""

    num_heads: int
    head_dim: int
    conv_kernel: int
    attn_tp: int
    conv_item_bytes: int
    ssm_item_bytes: int
    ssm_dtype: str = "float32"
    kind = "kda_state"
    pool = STATE

    @property
    def conv_shape(self) -> tuple[int, int]:
        proj = self.num_heads * self.head_dim
        part = _divide(proj, self.attn_tp, "KDA projection", LINEAR_TP)
        return (self.conv_kernel - 1, part + 2 * part)

    @property
    def temporal_shape(self) -> tuple[int, int, int]:
        return (_divide(self.num_heads, self.attn_tp, "KDA heads", LINEAR_TP), self.head_dim, self.head_dim)


@dataclass(frozen=True)
class Mamba2State(_ConvSsmState):
    """Mamba-2 state (``Mamba2StateShape.create``): conv (conv_dim / tp, K-1) with
    conv_dim = intermediate + 2 x n_groups x state (groups padded up to tp when tp does not divide
    them), and SSM (heads / tp, head_dim, state)."""

    intermediate_size: int
    n_groups: int
    num_heads: int
    head_dim: int
    state_size: int
    conv_kernel: int
    attn_tp: int
    conv_item_bytes: int
    ssm_item_bytes: int
    ssm_dtype: str = "float32"
    kind = "mamba2_state"
    pool = STATE

    @property
    def conv_dim(self) -> int:
        groups = self.n_groups
        if groups % self.attn_tp:
            groups += self.attn_tp - groups  # extra_groups_for_head_shards
        return self.intermediate_size + 2 * groups * self.state_size

    @property
    def conv_shape(self) -> tuple[int, int]:
        return (_divide(self.conv_dim, self.attn_tp, f"{self.kind} conv dim", LINEAR_TP), self.conv_kernel - 1)

    @property
    def temporal_shape(self) -> tuple[int, int, int]:
        return (_divide(self.num_heads, self.attn_tp, f"{self.kind} heads", LINEAR_TP), self.head_dim, self.state_size)


@dataclass(frozen=True)
class GatedDeltaNetState(Mamba2State):
    """Gated DeltaNet (Qwen3-Next / Qwen3.5): SGLang builds it with ``Mamba2StateShape.create``
    (intermediate = v heads x v dim, n_groups = k heads, state = k dim, heads = v heads)."""

    kind = "gdn_state"


@dataclass(frozen=True)
class JetBlockState(Mamba2State):
    """Jet-Nemotron's JetBlock (dynamic-convolution linear attention, issue 32): SGLang 0.5.23 sizes it
    with ``Mamba2StateShape.create`` (``JetNemotronConfig.mamba2_cache_params``) from
    ``efficient_attention_config["jet"]``: heads = n_groups = num_heads, head_dim = int(head_k_dim x
    expand_v) (the v dim), state = head_k_dim, intermediate = heads x v dim, conv kernel = conv_size;
    split over attention TP. Its own kind: the shapes are Mamba-2's, the layer is not."""

    kind = "jet_state"


@dataclass(frozen=True)
class Mamba1State(_ConvSsmState):
    """Mamba-1 state (MambaConfig, FalconMambaConfig: ``Mamba2StateShape.create_full_rank``): the conv over
    the intermediate channels only (B / C come after it), (intermediate / tp, K-1), and a full-rank SSM
    state (intermediate / tp, 1, state): head_dim 1. SGLang splits it over the whole TP (``tp_size``)
    and asserts that TP divides the intermediate size. No published config is vendored (issue 32)."""

    intermediate_size: int
    state_size: int
    conv_kernel: int
    attn_tp: int                   # here the whole TP (SGLang's parallel.tp_size), the name the ledgers read
    conv_item_bytes: int
    ssm_item_bytes: int
    ssm_dtype: str = "float32"
    kind = "mamba1_state"
    pool = STATE

    @property
    def conv_shape(self) -> tuple[int, int]:
        return (_divide(self.intermediate_size, self.attn_tp, "Mamba-1 intermediate size", "tensor parallel size"),
                self.conv_kernel - 1)

    @property
    def temporal_shape(self) -> tuple[int, int, int]:
        return (_divide(self.intermediate_size, self.attn_tp, "Mamba-1 intermediate size", "tensor parallel size"),
                1, self.state_size)


@dataclass(frozen=True)
class ShortConvState(_ConvSsmState):
    """LFM2's short-convolution layer (Lfm2Config / Lfm2MoeConfig / Lfm2VlConfig ``mamba2_cache_params``):
    ``Mamba2StateShape.create`` with intermediate = head_dim = hidden, one group (padded up to tp), heads
    = tp and state 0: a conv state (hidden / attention TP, conv_L_cache - 1) and an empty temporal state
    (1, hidden, 0). No published config is vendored (issue 32)."""

    hidden_size: int
    conv_kernel: int               # Lfm2Config.conv_L_cache, passed as conv_kernel
    attn_tp: int
    conv_item_bytes: int
    ssm_item_bytes: int
    ssm_dtype: str = "float32"
    kind = "short_conv_state"
    pool = STATE

    @property
    def conv_shape(self) -> tuple[int, int]:
        return (_divide(self.hidden_size, self.attn_tp, "LFM2 hidden size", LINEAR_TP), self.conv_kernel - 1)

    @property
    def temporal_shape(self) -> tuple[int, int, int]:
        return (1, self.hidden_size, 0)


@dataclass(frozen=True)
class LightningState(_ConvSsmState):
    """Lightning attention (BailingHybridConfig without KDA, MiniCPMHybridConfig's "lightning-attn" layers):
    ``Mamba2StateShape.create`` with no conv (intermediate 0, groups 0, kernel 1: a (0, 0) conv) and a
    (kv heads / attention TP, head_dim, head_dim) state. No published config is vendored (issue 32)."""

    num_heads: int                 # num_linear_key_value_heads / lightning_nkv
    head_dim: int
    attn_tp: int
    conv_item_bytes: int
    ssm_item_bytes: int
    ssm_dtype: str = "float32"
    kind = "lightning_state"
    pool = STATE

    @property
    def conv_shape(self) -> tuple[int, int]:
        return (0, 0)

    @property
    def temporal_shape(self) -> tuple[int, int, int]:
        return (_divide(self.num_heads, self.attn_tp, "lightning heads", LINEAR_TP), self.head_dim, self.head_dim)


@dataclass(frozen=True)
class ZayaCcaState(_ConvSsmState):
    """Zaya's CCA attention layers (ZayaConfig ``mamba2_cache_params``) keep two conv states beside their
    KV: the q/k left padding ((heads + kv heads) x head_dim / tp, (cca_time0 - 1) + (cca_time1 - 1)) and
    the previous hidden state (hidden, 1), replicated; the temporal state is empty (1, 1, 0). Split over
    the whole TP. No published config is vendored (issue 32)."""

    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    cca_time0: int
    cca_time1: int
    attn_tp: int                   # the whole TP (SGLang's parallel.tp_size)
    conv_item_bytes: int
    ssm_item_bytes: int
    ssm_dtype: str = "float32"
    kind = "zaya_cca_state"
    pool = STATE

    @property
    def conv_shapes(self) -> tuple[tuple[int, int], tuple[int, int]]:
        ch = (self.num_attention_heads + self.num_kv_heads) * self.head_dim
        return ((_divide(ch, self.attn_tp, "CCA channels", "tensor parallel size"),
                 (self.cca_time0 - 1) + (self.cca_time1 - 1)), (self.hidden_size, 1))

    @property
    def conv_shape(self) -> tuple[int, int]:
        return self.conv_shapes[0]

    @property
    def conv_bytes(self) -> int:
        return sum(math.prod(c) for c in self.conv_shapes) * self.conv_item_bytes

    @property
    def temporal_shape(self) -> tuple[int, int, int]:
        return (1, 1, 0)


LayerSpec = Union[MlaKv, DsaIndexerK, GqaKv, SlidingWindowKv, KdaState, Mamba2State, GatedDeltaNetState,
                  JetBlockState, Mamba1State, ShortConvState, LightningState, ZayaCcaState]
TOKEN_KINDS = (MlaKv, DsaIndexerK, GqaKv)
SWA_KINDS = (SlidingWindowKv,)   # the SWA pool's layers (hybrid-SWA models)
STATE_KINDS = (KdaState, Mamba2State, GatedDeltaNetState, JetBlockState, Mamba1State, ShortConvState,
               LightningState, ZayaCcaState)


def dtype_bytes(name: str) -> int:
    return DTYPE_BYTES[name]
