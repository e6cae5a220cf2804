"""Real tensors for every model's pools, GLM-5.3-Flash's included, shaped and named like SGLang 0.5.23's
(issues 22, 31): one geometry and one builder.

Why: ``glm_kv.tensors.measure.measure_profile`` compares every buffer SGLang allocates with the
plan's ledgers. One geometry (``ModelGeometry``, still importable as ``memory_pool.PoolGeometry``: shapes
for given pool sizes, ``shape_table`` / ``shape_bytes`` / ``with_sizes``, nothing allocated) and one
builder (``ModelDevicePools``: every tensor of the shape table, ``named_buffers`` with SGLang's object
paths) serve every architecture, so a rule is fixed in one place and ``measure_profile`` runs one engine
for every model: per buffer rows against the ledgers, two reduced sizes and the extrapolation, the full
profile, the CUDA caching allocator's model. GLM-5.3-Flash is data here: its MLA rows, DSA indexer
(kpool paging, the compress tail) and KDA state are read from its config.json like Kimi's or
DeepSeek-V3.2's. ``DevicePools`` (SGLang's HybridLinearKVPool tree, which the RadixTree and the HiCache
``HostPoolGroup`` walk) names the same tensors; ``ModelHostPools`` allocates every host tensor.

Shapes are restated here from the config (``glm_kv.inputs.hf_config``) and the resolved launch
facts (``plan.args``: kv dtype, DSA backends, attention and linear-attention TP, page size, SSM
dtype); no plan byte field is read. After SGLang's constructors:

* ``MLATokenToKVPool`` / ``DSATokenToKVPool`` (``full_kv_pool.kv_buffer[i]``): (size + page, 1,
  kv_cache_dim), bf16 or uint8 (fp8); DSA rows per ``calculate_mla_kv_cache_dim``.
* ``IndexKeyCache`` (``full_kv_pool.index_key_cache.buffer[i]``): ((size + page + 1) // page,
  page // kpool x (d + d / 128 x 4)) uint8 (the article's layout: page x (d + d / 128 x 4)); 0 rows for a
  layer whose ``indexer_types`` is "shared". With ``index_kpool`` > 1 and ``index_kpool_compress`` the
  compress tail ``_compress_tail_k[i]`` / ``_compress_tail_score[i]``: (max_reqs + 2, kpool + draft, d) bf16.
* ``MHATokenToKVPool`` (``full_kv_pool.k_buffer[i]`` / ``v_buffer[i]``): (size + page, kv heads per
  rank, head dim). 0.5.23's ``_create_buffers_normal``: when K and V have one shape they are the two
  halves of ONE allocation per layer, (2, size + page, heads, dim) - the views share a storage;
  otherwise all K buffers, then all V buffers.
* ``SWAKVPool`` (gpt-oss): the full pool above for the full-attention layers and a second
  ``MHATokenToKVPool`` (``swa_kv_pool.k_buffer[i]`` / ``v_buffer[i]``) for the sliding-window layers,
  with the SWA heads per rank and SWA head dims (the config's own when it names none).
* ``MambaPool`` (``mamba_pool.conv[0]`` / ``temporal``): (state layers, slots + 1, *conv) bf16 and
  (state layers, slots + 1, *ssm) in the SSM dtype; KDA's speculative verify scratch
  (``intermediate_ssm`` / ``intermediate_conv_window[0]``) in its dense layout.
* ``ReqToTokenPool.req_to_token``: (max_reqs + 1, context_len + extra) int32.
* HiCache (``ModelHostPools``, page_first, sized by ``hicache_ratio``): ``MHATokenToKVPoolHost`` (2, host
  tokens, layers, heads, dim), ``MLATokenToKVPoolHost`` (host tokens, layers, 1, row), ``DSAIndexerPoolHost``
  (pages, indexed layers, 1, page bytes), ``MambaPoolHost`` (host slots, layers, 1, *state); none for SWAKVPool.

What is not built is refused by name (``NotBuilt``, a ``ProfileError``): never skipped silently.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Iterator, Optional

import torch

from ..errors import ProfileError
from ..inputs.hf_config import HfConfig, config_where, config_int as _int, nemotron_pattern  # the config rules
from ..inputs.rules import RULES, SglangRules, rules_for
from ..inputs.swa import sglang_swa_view
from ..units import FP8_SCALE_BYTES, FP8_SCALE_GROUP, index_page_count
from .budget import check_budget, storage_bytes
from .pool_objects import (CONV_STATE_DTYPE, DSATokenToKVPool, HybridLinearKVPool, MambaPool, MambaSlotAllocator,
                           PagedTokenToKVPoolAllocator, RankPoolSizes, ReqToTokenPool, _alloc, default_device,
                           host_pool_size, kv_store_dtype, mla_kv_cache_dim, req_to_token_extra_context_len,
                           torch_dtype)

TORCH = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16, "uint8": torch.uint8}
KDA_FAMILIES = ("mla+kda", "mla_dsa+kda")


class NotBuilt(ProfileError):
    """A part of a launch whose SGLang tensors this module does not build: refused by name."""


# --------------------------------------------------------------------------- the config's layers


def _layer_kinds(cfg: HfConfig, hybrid_swa: bool = True) -> tuple[list[int], list[int]]:
    """(full-attention layer ids, state layer ids), restated from each config class."""
    t = cfg.text
    if cfg.family in KDA_FAMILIES:
        n = t["num_hidden_layers"]
        kda = t["linear_attn_config"].get("kda_layers")
        if kda is None:   # a GLM-5.3-Flash config may name its layers by layer_types only
            return ([i for i, x in enumerate(t["layer_types"]) if x != "linear_attention"],
                    [i for i, x in enumerate(t["layer_types"]) if x == "linear_attention"])
        one_based = cfg.model_type in ("kimi_k3", "kimi_linear")
        state = [i for i in range(n) if (i + 1 if one_based else i) in kda]
    elif cfg.family == "gqa+gdn":
        n, every = t["num_hidden_layers"], t.get("full_attention_interval", 4)
        state = [i for i in range(n) if (i + 1) % every]
    elif cfg.family == "gqa+mamba2":
        pattern = nemotron_pattern(t, config_where(cfg))
        return [i for i, c in enumerate(pattern) if c == "*"], [i for i, c in enumerate(pattern) if c == "M"]
    elif cfg.family == "gqa+jet":   # JetNemotronConfig (issue 32): "jet" state layers, "attn" / "swa" full
        types = t["layer_types"]
        return [i for i, x in enumerate(types) if x in ("attn", "swa")], [i for i, x in enumerate(types) if x == "jet"]
    elif cfg.family == "gqa_swa" and hybrid_swa:   # get_hybrid_layer_ids (SWA_SINK_ARCHS): the full pool's; no state
        return [i for i, x in enumerate(t["layer_types"]) if x == "full_attention"], []
    else:
        n, state = t["num_hidden_layers"], []
    return [i for i in range(n) if i not in state], state


def _swa_layers(cfg: HfConfig, hybrid_swa: bool = True) -> list[int]:
    """SWAKVPool's sliding-window layers; none under --disable-hybrid-swa-memory (one full pool)."""
    if cfg.family != "gqa_swa" or not hybrid_swa:
        return []
    return [i for i, x in enumerate(cfg.text["layer_types"]) if x == "sliding_attention"]


def _indexed(cfg: HfConfig, layers: list[int]) -> list[bool]:
    """Per full layer: True when its index K and tail have 0 rows (``indexer_types`` "shared")."""
    types = cfg.text.get("indexer_types")
    return [isinstance(types, list) and i < len(types) and types[i] == "shared" for i in layers]


# --------------------------------------------------------------------------- geometry


@dataclass(frozen=True)
class ModelGeometry(RankPoolSizes):
    """Every shape of one rank's device buffers, for any model (GLM-5.3-Flash's too: ``PoolGeometry``).

    What ``measure``, the builders and the book read: the sizes (``size``, ``mamba_size``,
    ``spec_state_size``, ``max_running_requests_per_worker``, ``context_len``), ``with_sizes``,
    ``shape_table`` (one row per storage, in SGLang's allocation order) and ``shape_bytes``.
    """

    family: str
    size: int                                   # full pool token slots (a multiple of page_size)
    page_size: int
    full_attention_layer_ids: tuple[int, ...]
    linear_attention_layer_ids: tuple[int, ...]
    swa_layer_ids: tuple[int, ...]
    store_dtype: str
    mla_dim: int                                # MLA row width (0: MHA k/v)
    kv_heads: int                               # MHA: K/V heads per rank
    head_dim: int
    v_head_dim: int
    swa_heads: int
    swa_head_dim: int
    swa_v_head_dim: int
    swa_size: int                               # SWA pool token slots
    index_row_bytes: int                        # DSA IndexKeyCache row (0: no indexer)
    skip_topk_layers: tuple[bool, ...]
    conv_state_shapes: tuple[tuple[int, ...], ...]
    temporal_state_shape: tuple[int, ...]
    conv_dtype: str
    temporal_dtype: str
    max_running_requests_per_worker: int
    context_len: int
    extra_context_len: int
    mamba_size: int
    speculative_num_draft_tokens: int = 0
    spec_state_size: int = 0
    conv_window_dedup: bool = False             # the verify scratch's conv windows share one buffer (CUDA)
    conv_kernel: int = 0                        # the state layers' conv kernel K (windows are K - 1 wide)
    profile_name: str = ""
    notes: tuple[str, ...] = field(default=())
    # appended (issue 31): what a DSA indexer with kpool paging and the compress tail, and HiCache's host KV
    # row, need -- GLM-5.3-Flash's config reads them like any other model's (1 / False / 0 where absent)
    layout: str = "0.5.23"                      # sglang_layout: which SGLang version's rules (rules_for)
    index_head_dim: int = 0
    index_kpool: int = 1                        # the config's index_kpool (pooled rows per page under 0.5.23)
    index_kpool_compress: bool = False
    tail_width: int = 0                         # index_kpool + speculative draft tokens
    host_kv_row_width: int = 0                  # MLA host KV row, in elements of the store dtype
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0

    def __post_init__(self):
        if self.layout not in RULES:
            raise ValueError(f"sglang_layout must be one of {tuple(RULES)}, got {self.layout!r}")
        if self.size <= 0 or self.size % self.page_size:
            raise ValueError(f"size {self.size} must be a positive multiple of page_size {self.page_size}")
        if self.swa_layer_ids and (self.swa_size <= 0 or self.swa_size % self.page_size):
            raise ValueError(f"swa_size {self.swa_size} must be a positive multiple of page_size {self.page_size}")
        if self.page_size % self.index_kpool:
            raise ValueError(f"page_size {self.page_size} must be a multiple of index_kpool {self.index_kpool}")
        if self.linear_attention_layer_ids and self.mamba_size < 1:
            raise ValueError(f"mamba_size must be >= 1, got {self.mamba_size}")
        if len(self.skip_topk_layers) != len(self.full_attention_layer_ids):
            raise ValueError("skip_topk_layers needs one entry per full-attention layer")

    # -- derived, per SGLang's constructors (the layer counts and request rows: RankPoolSizes) --
    @property
    def rules(self) -> SglangRules:
        """This layout's SGLang version facts (pooled or unpooled index rows, which host pools exist)."""
        return rules_for(self.layout)

    @property
    def kv_cache_dim(self) -> int:
        """The MLA row width (``calculate_mla_kv_cache_dim``; 0 for an MHA pool)."""
        return self.mla_dim

    @property
    def index_bytes_per_token_unpooled(self) -> int:
        """index_head_dim + index_head_dim / 128 x 4 (fp8 key + one fp32 scale per 128)."""
        return self.index_head_dim + self.index_head_dim // FP8_SCALE_GROUP * FP8_SCALE_BYTES

    @property
    def index_page_bytes(self) -> int:
        """One IndexKeyCache buffer row = one page of one layer (0: no indexer)."""
        return self.index_row_bytes

    @property
    def num_pages(self) -> int:
        """Token pages the allocator hands out (page 0 is padding)."""
        return self.size // self.page_size

    @property
    def tail_rows(self) -> int:
        """Compress-tail rows: ``req_to_token.shape[0] + 1`` (the pool gets the req_to_token rows as
        max_running_requests and adds one sentinel row) = max_running_requests + 2."""
        return self.req_to_token_rows + 1

    @property
    def kpool_use_compress(self) -> bool:
        """``DSATokenToKVPool``: the compress-tail pair exists when the indexer pools k > 1 keys and compresses."""
        return bool(self.index_row_bytes) and self.index_kpool > 1 and self.index_kpool_compress

    @property
    def kv_row_bytes(self) -> int:
        return self.kv_cache_dim * torch_dtype(self.store_dtype).itemsize

    @property
    def host_kv_row_bytes(self) -> int:
        return self.host_kv_row_width * torch_dtype(self.store_dtype).itemsize

    @property
    def num_swa_layers(self) -> int:
        return len(self.swa_layer_ids)

    @property
    def mha(self) -> bool:
        return not self.mla_dim

    def conv_window_axis(self) -> int:
        """``MambaPool._detect_conv_window_axis``: the conv shape's axis of length K - 1, the trailing one
        when both match (GDN / Mamba-2: (dim, K - 1) -> -1)."""
        axes, win = set(), self.conv_kernel - 1
        for c in self.conv_state_shapes:
            axes.add(len(c) - 1 if c[-1] == win else 0 if c[0] == win else None)
        if len(axes) != 1 or None in axes:
            raise NotBuilt("speculative_algorithm", f"conv shapes {self.conv_state_shapes} have no common window axis")
        return axes.pop()

    def conv_window_phys_shape(self, conv: tuple[int, ...]) -> tuple[int, ...]:
        """``_allocate_deduplicated_conv_window``: the window axis holds D + K - 2 columns, shared by the D steps."""
        axis, out = self.conv_window_axis(), list(conv)
        out[axis] = self.speculative_num_draft_tokens + conv[axis] - 1
        return tuple(out)

    @staticmethod
    def fused(k_shape: tuple[int, ...], v_shape: tuple[int, ...]) -> bool:
        """``_create_buffers_normal``: K and V of one shape are the halves of one allocation."""
        return k_shape == v_shape

    def kv_shapes(self, swa: bool = False) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(k_shape, v_shape) of one layer of the full (or SWA) MHA pool: (size + page, heads, dim)."""
        if swa:
            rows = self.swa_size + self.page_size
            return (rows, self.swa_heads, self.swa_head_dim), (rows, self.swa_heads, self.swa_v_head_dim)
        rows = self.size + self.page_size
        return (rows, self.kv_heads, self.head_dim), (rows, self.kv_heads, self.v_head_dim)

    def with_sizes(self, *, size: Optional[int] = None, mamba_size: Optional[int] = None,
                   max_running_requests_per_worker: Optional[int] = None, context_len: Optional[int] = None,
                   spec_state_size: Optional[int] = None, swa_size: Optional[int] = None) -> "ModelGeometry":
        """The same geometry with other pool sizes (shapes per slot unchanged). The SWA pool follows
        ``size`` unless given."""
        new_size = self.size if size is None else size
        return replace(
            self, size=new_size, mamba_size=self.mamba_size if mamba_size is None else mamba_size,
            swa_size=(swa_size if swa_size is not None else new_size if size is not None else self.swa_size)
            if self.swa_layer_ids else 0,
            max_running_requests_per_worker=(self.max_running_requests_per_worker
                                             if max_running_requests_per_worker is None
                                             else max_running_requests_per_worker),
            context_len=self.context_len if context_len is None else context_len,
            spec_state_size=self.spec_state_size if spec_state_size is None else spec_state_size)

    def _kv_table(self, prefix: str, layers: int, swa: bool) -> list[tuple[str, tuple[int, ...], str]]:
        k, v = self.kv_shapes(swa)
        if self.fused(k, v):
            return [(f"{prefix}.k_buffer[{i}]", (2, *k), self.store_dtype) for i in range(layers)]
        return ([(f"{prefix}.k_buffer[{i}]", k, self.store_dtype) for i in range(layers)]
                + [(f"{prefix}.v_buffer[{i}]", v, self.store_dtype) for i in range(layers)])

    def shape_table(self) -> list[tuple[str, tuple[int, ...], str]]:
        """(buffer name, shape, dtype) of every device storage, in allocation order (a fused K/V pair
        is one storage, named by its K view)."""
        out: list[tuple[str, tuple[int, ...], str]] = [
            ("req_to_token_pool.req_to_token", (self.req_to_token_rows, self.max_context_len), "int32")]
        n = self.num_linear_layers
        if n:
            for i, c in enumerate(self.conv_state_shapes):
                out.append((f"mamba_pool.conv[{i}]", (n, self.mamba_size + 1, *c), self.conv_dtype))
            out.append(("mamba_pool.temporal", (n, self.mamba_size + 1, *self.temporal_state_shape),
                        self.temporal_dtype))
            if self.speculative_num_draft_tokens:
                d, rows = self.speculative_num_draft_tokens, self.spec_state_size + 1
                out.append(("mamba_pool.intermediate_ssm", (n, rows, d, *self.temporal_state_shape),
                            self.temporal_dtype))
                for i, c in enumerate(self.conv_state_shapes):   # dedup: the physical buffer a view reads
                    shape = (n, rows, *self.conv_window_phys_shape(c)) if self.conv_window_dedup else (n, rows, d, *c)
                    out.append((f"mamba_pool.intermediate_conv_window[{i}]", shape, self.conv_dtype))
        if self.mha:
            out += self._kv_table("full_kv_pool", self.num_full_layers, swa=False)
        else:
            out += [(f"full_kv_pool.kv_buffer[{i}]", (self.size + self.page_size, 1, self.mla_dim), self.store_dtype)
                    for i in range(self.num_full_layers)]
        if self.index_row_bytes:
            out += [(f"full_kv_pool.index_key_cache.buffer[{i}]",
                     (0 if skip else self.index_num_pages, self.index_row_bytes), "uint8")
                    for i, skip in enumerate(self.skip_topk_layers)]
        if self.kpool_use_compress:   # _compress_tail_k, then _compress_tail_score: 0 rows where top-k is skipped
            out += [(f"full_kv_pool.{name}[{i}]", (0 if skip else self.tail_rows, self.tail_width,
                                                   self.index_head_dim), "bfloat16")
                    for name in ("_compress_tail_k", "_compress_tail_score")
                    for i, skip in enumerate(self.skip_topk_layers)]
        if self.swa_layer_ids:
            out += self._kv_table("swa_kv_pool", self.num_swa_layers, swa=True)
        return out

    def shape_bytes(self) -> int:
        return sum(math.prod(shape) * torch_dtype(dt).itemsize for _, shape, dt in self.shape_table())


def model_geometry(plan, *, max_running_requests_per_worker: Optional[int] = None, size: Optional[int] = None,
                   mamba_size: Optional[int] = None, spec_state_size: Optional[int] = None,
                   context_len: Optional[int] = None, profile_name: Optional[str] = None) -> ModelGeometry:
    """The shapes SGLang 0.5.23's constructors give every buffer of any model -- GLM-5.3-Flash's included --
    from its config (``args.config``) and the resolved arguments (never from the plan's byte fields).

    ``plan``: a ``Plan`` or the resolved ``ServerArgs`` alone (the book and the pool tests build pools
    with no plan). ``size`` (tokens) defaults to 4 pages and ``mamba_size`` to 1 slot: a small real
    allocation. ``max_running_requests_per_worker`` defaults to the resolved per-worker count (refused
    when it is automatic: then the capacity decides it, and the caller must pass it).

    Refuses by name (``NotBuilt``) what it does not build: ReplaySSM rings and HiSparse.
    """
    args = getattr(plan, "args", plan)
    cfg = sglang_swa_view(args.config)   # Gemma-4: SGLang's full / SWA shapes
    p = args.profile
    reqs = max_running_requests_per_worker if max_running_requests_per_worker is not None else args.requests_per_worker
    if reqs is None:
        raise ProfileError("max_running_requests", "the pools need a request count: set "
                                                   "max_running_requests or available_bytes in the profile")
    t, tp, state_tp, page = cfg.text, args.attn_tp_size, args.linear_attn_tp_size, args.page_size
    rules = args.rules or rules_for(p.sglang_layout)
    hybrid_swa = not getattr(p, "disable_hybrid_swa_memory", False)   # --disable-hybrid-swa-memory: one full pool
    full, state = _layer_kinds(cfg, hybrid_swa)
    swa_layers = _swa_layers(cfg, hybrid_swa)
    store = kv_store_dtype(args.kv_cache_dtype)
    dsa = cfg.family in ("mla_dsa", "mla_dsa+kda")
    if args.replayssm_active:
        raise NotBuilt("enable_linear_replayssm_spec", f"measure does not build the ReplaySSM ring pools "
                                                       f"for {cfg.family} models")
    if getattr(p, "enable_hisparse", False):
        raise NotBuilt("enable_hisparse", "measure does not build HiSparse's pools for this model")
    mla_dim = heads = hd = vhd = sh = shd = svd = 0
    if cfg.family.startswith("mla"):
        lora, rope = t["kv_lora_rank"], t["qk_rope_head_dim"]
        # calculate_mla_kv_cache_dim's row: the local role's backend decides on a disaggregated server
        mla_dim = (mla_kv_cache_dim(SimpleNamespace(kv_lora_rank=lora, qk_rope_head_dim=rope), args.kv_cache_dtype,
                                    args.dsa_prefill_backend, args.dsa_decode_backend,
                                    getattr(p, "disaggregation_mode", "null"))
                   if dsa else lora + rope)
    else:
        heads = max(1, t.get("num_key_value_heads", t["num_attention_heads"]) // tp)
        # ModelConfig._derive_model_shapes: head_dim None -> hidden // heads; v_head_dim None or 0 -> head_dim
        where = config_where(cfg)
        hd = (_int(t, "head_dim", where) if t.get("head_dim") is not None
              else t["hidden_size"] // t["num_attention_heads"])
        vd = t.get("v_head_dim")
        vhd = hd if vd is None or (type(vd) is int and vd == 0) else _int(t, "v_head_dim", where)
        if swa_layers:   # SWAKVPool's SWA pool: swa_* when the config names them
            sh = max(1, t["swa_num_key_value_heads"] // tp) if "swa_num_key_value_heads" in t else heads
            shd = t.get("swa_head_dim") or hd
            svd = t.get("swa_v_head_dim") or (t.get("swa_head_dim") or vhd)
    index_row = index_d = 0
    kpool, compress = 1, False
    if dsa:
        # IndexKeyCache: a page of fp8 keys + one fp32 scale per 128, per token; under 0.5.23 (indexer_pooled_rows)
        # a row holds page // index_kpool pooled keys (get_dsa_index_kpool: the config's index_kpool, 1 when absent)
        index_d, kpool = t["index_head_dim"], int(t.get("index_kpool") or 1)
        compress = bool(t.get("index_kpool_compress", False))
        keys = page // kpool if rules.indexer_pooled_rows else page
        index_row = keys * (index_d + index_d // FP8_SCALE_GROUP * FP8_SCALE_BYTES)
    conv: tuple[tuple[int, ...], ...] = ()
    temporal: tuple[int, ...] = ()
    k = 0
    ssm = p.mamba_ssm_dtype
    if state:
        if "mamba_ssm_dtype" not in p.model_fields_set and cfg.family in ("gqa+gdn", "gqa+mamba2", "gqa+jet"):
            ssm = t.get("mamba_ssm_dtype") or ssm
            ssm = ssm if ssm in TORCH else "float32"
        if cfg.family in KDA_FAMILIES:   # KimiLinearStateShape
            lac = t["linear_attn_config"]
            h, hd_kda, k = lac["num_heads"], lac["head_dim"], lac["short_conv_kernel_size"]
            if 3 * h * hd_kda % state_tp or h % state_tp:
                raise ValueError(f"linear-attention TP {state_tp} does not divide the KDA projection ({h * hd_kda})")
            conv, temporal = ((k - 1, 3 * h * hd_kda // state_tp),), (h // state_tp, hd_kda, hd_kda)
        else:                            # Mamba2StateShape (GDN and JetBlock reuse it)
            if cfg.family == "gqa+gdn":
                h, d, groups, st, k = (t["linear_num_value_heads"], t["linear_value_head_dim"],
                                       t["linear_num_key_heads"], t["linear_key_head_dim"], t["linear_conv_kernel_dim"])
            elif cfg.family == "gqa+jet":   # JetBlock: heads = groups, v dim = int(k dim x expand_v)
                jet = t["efficient_attention_config"]["jet"]
                h = groups = jet["num_heads"]
                st, k = jet["head_dim"], jet["conv_size"]
                d = int(st * jet["expand_v"])
            else:
                h, d, st = t["mamba_num_heads"], t["mamba_head_dim"], t["ssm_state_size"]
                groups, k = t.get("n_groups", t.get("mamba_n_groups", 8)), t.get("conv_kernel", t.get("mamba_d_conv", 4))
            if groups % state_tp:
                groups = state_tp
            conv, temporal = (((h * d + 2 * groups * st) // state_tp, k - 1),), (h // state_tp, d, st)
    draft = args.verify_state_draft_tokens if state else 0
    # conv_window_dedup_enabled on CUDA: a linear draft chain (topk <= 1) of a non-KDA state model shares one
    # (D + K - 2)-column conv window buffer per (layer, slot); KDA and EAGLE tree verify keep dense windows
    topk = getattr(p, "speculative_eagle_topk", None)
    dedup = bool(draft) and cfg.family not in KDA_FAMILIES and (topk is None or topk <= 1)
    size = int(size) if size is not None else 4 * page
    mamba_size = int(mamba_size) if mamba_size is not None else 1
    # HiCache's MLA host row: 0.5.23's MLATokenToKVPoolHost takes the device row; the article's build_kv_host_pool
    # passes no override_kv_cache_dim (kv_lora_rank + qk_rope_head_dim: the fp8 scales are not backed up)
    lora, rope = (t["kv_lora_rank"], t["qk_rope_head_dim"]) if mla_dim else (0, 0)
    host_row = mla_dim if rules.host_row_is_device_row else lora + rope
    return ModelGeometry(
        family=cfg.family, size=size, page_size=page, full_attention_layer_ids=tuple(full),
        linear_attention_layer_ids=tuple(state), swa_layer_ids=tuple(swa_layers), store_dtype=store,
        mla_dim=mla_dim, kv_heads=heads, head_dim=hd, v_head_dim=vhd, swa_heads=sh, swa_head_dim=shd,
        swa_v_head_dim=svd, swa_size=size if swa_layers else 0, index_row_bytes=index_row,
        skip_topk_layers=tuple(_indexed(cfg, full)) if dsa else tuple(False for _ in full),
        conv_state_shapes=conv, temporal_state_shape=temporal, conv_dtype=CONV_STATE_DTYPE,
        temporal_dtype=ssm if state else "float32",
        max_running_requests_per_worker=int(reqs),
        context_len=int(context_len if context_len is not None else args.context_length),
        extra_context_len=req_to_token_extra_context_len(args),
        mamba_size=mamba_size, speculative_num_draft_tokens=draft, conv_window_dedup=dedup, conv_kernel=k,
        spec_state_size=(int(spec_state_size) if spec_state_size is not None else (1 if draft else 0)),
        profile_name=profile_name if profile_name is not None else p.label,
        layout=p.sglang_layout, index_head_dim=index_d, index_kpool=kpool, index_kpool_compress=compress,
        tail_width=kpool + args.draft_tokens,   # index_kpool + max_speculative_num_draft_tokens
        host_kv_row_width=host_row, kv_lora_rank=lora, qk_rope_head_dim=rope)


PoolGeometry = ModelGeometry   # GLM-5.3-Flash's geometry was its own class before issue 31; the name stays


def pool_geometry(args, *, size: Optional[int] = None, mamba_size: Optional[int] = None,
                  max_running_requests_per_worker: Optional[int] = None, context_len: Optional[int] = None,
                  spec_state_size: Optional[int] = None, profile_name: Optional[str] = None) -> ModelGeometry:
    """``model_geometry`` from the resolved arguments alone (no plan): the entry the book's notebooks, the
    RadixTree and the pool tests use."""
    return model_geometry(args, size=size, mamba_size=mamba_size,
                          max_running_requests_per_worker=max_running_requests_per_worker,
                          context_len=context_len, spec_state_size=spec_state_size, profile_name=profile_name)


def plan_requests_per_worker(plan) -> int:
    """Requests the pools are sized for on one worker (a count, not a byte figure); refused when unknown."""
    value = plan.requests_per_worker
    if value is None:
        raise ProfileError("max_running_requests", "the pools need a request count: set "
                                                   "max_running_requests or available_bytes in the profile")
    return int(value)


def geometry_for(plan, *, max_running_requests_per_worker: int, profile_name: Optional[str] = None) -> ModelGeometry:
    """The one entry for ``measure``: every model's ``ModelGeometry`` (GLM-5.3-Flash's from its config like any
    other's), at the default small sizes."""
    return model_geometry(plan, max_running_requests_per_worker=max_running_requests_per_worker,
                          profile_name=profile_name)


# --------------------------------------------------------------------------- allocation


class ModelDevicePools:
    """One rank's device pools for a ``ModelGeometry``, named by SGLang's object paths."""

    def __init__(self, geometry: ModelGeometry, device: Optional[str] = None, fill: str = "zeros",
                 budget: Optional[int] = None):
        self.geometry = g = geometry
        self.device = device or default_device()
        check_budget(g.shape_bytes(), self.device, budget, what=f"the pools of profile {g.profile_name or '?'}")
        self.req_to_token_pool = ReqToTokenPool(g.max_running_requests_per_worker, g.max_context_len,
                                                self.device, fill)
        self._buffers: list[tuple[str, torch.Tensor]] = []
        for name, shape, dtype in g.shape_table()[1:]:   # req_to_token first, as above
            t = _alloc(shape, torch_dtype(dtype), self.device, fill)
            if ".k_buffer[" in name and len(shape) == 4 and shape[0] == 2:   # one storage, two views
                self._buffers.append((name, t[0]))
                self._buffers.append((name.replace(".k_buffer[", ".v_buffer["), t[1]))
            elif name.startswith("mamba_pool.intermediate_conv_window[") and g.conv_window_dedup:
                self._buffers.append((name, _window_view(g, t)))
            else:
                self._buffers.append((name, t))

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Every device tensor in allocation order, named by its path in SGLang's object tree (a fused
        layer's V view right after its K view: both name the one storage)."""
        yield "req_to_token_pool.req_to_token", self.req_to_token_pool.req_to_token
        yield from self._buffers


def _window_view(g: ModelGeometry, phys: torch.Tensor) -> torch.Tensor:
    """The overlapping ``as_strided`` view (layers, slots + 1, D, *conv) over the shared window buffer:
    step t's window starts t columns along the window axis."""
    axis = g.conv_window_axis()
    inner = phys.stride()[2:]
    conv = list(phys.shape[2:])
    conv[axis] = conv[axis] - g.speculative_num_draft_tokens + 1
    return phys.as_strided((phys.shape[0], phys.shape[1], g.speculative_num_draft_tokens, *conv),
                           (phys.stride(0), phys.stride(1), inner[axis], *inner))


def build_device_pools(geometry: ModelGeometry, device: Optional[str] = None, fill: str = "zeros",
                       budget: Optional[int] = None) -> ModelDevicePools:
    """The one builder, for every model's geometry (``measure`` reads only the named buffers)."""
    return ModelDevicePools(geometry, device=device, fill=fill, budget=budget)


class DevicePools(ModelDevicePools):
    """SGLang's object tree of a hybrid MLA + state-layer rank (GLM-5.3-Flash's, Kimi's) over the tensors the one
    builder allocated: ``token_to_kv_pool`` (HybridLinearKVPool: full_kv_pool + mamba_pool), the allocators,
    and the byte access the RadixTree and HiCache model use.

    ``fill='zeros'`` mirrors SGLang (torch.zeros); ``fill='empty'`` allocates the same storage
    without touching it (what measurement needs, and fast).
    """

    def __init__(self, geometry: ModelGeometry, device: Optional[str] = None, fill: str = "zeros",
                 budget: Optional[int] = None):
        g = geometry
        if g.mha or g.swa_layer_ids or not g.num_linear_layers or not g.index_row_bytes:
            raise NotBuilt("DevicePools", f"SGLang's HybridLinearKVPool over a DSATokenToKVPool is built for MLA + "
                                          f"DSA + state-layer models, not {g.family}: use ModelDevicePools")
        super().__init__(g, device=device, fill=fill, budget=budget)   # refused before allocating: check_budget
        b = dict(self._buffers)
        convs = range(len(g.conv_state_shapes))
        mamba_pool = MambaPool(size=g.mamba_size, mamba_layer_ids=g.linear_attention_layer_ids, device=self.device,
                               conv=[b[f"mamba_pool.conv[{i}]"] for i in convs], temporal=b["mamba_pool.temporal"],
                               intermediate_ssm=b.get("mamba_pool.intermediate_ssm"),
                               intermediate_conv_window=[b[f"mamba_pool.intermediate_conv_window[{i}]"] for i in convs]
                               if "mamba_pool.intermediate_ssm" in b else None)
        self.token_to_kv_pool = HybridLinearKVPool(g, self.device, DSATokenToKVPool(g, self.device, b), mamba_pool)
        self.token_to_kv_pool_allocator = PagedTokenToKVPoolAllocator(g.size, g.page_size)
        self.mamba_allocator = MambaSlotAllocator(g.mamba_size)

    @property
    def full_kv_pool(self) -> DSATokenToKVPool:
        return self.token_to_kv_pool.full_kv_pool

    @property
    def mamba_pool(self) -> MambaPool:
        return self.token_to_kv_pool.mamba_pool

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Every device tensor, named by its path in SGLang's object tree (req_to_token, the token pools, the
        state pool: the tree's order; the storages are the ones ``ModelDevicePools`` allocated)."""
        for name, t in self.req_to_token_pool.named_buffers():
            yield f"req_to_token_pool.{name}", t
        yield from self.token_to_kv_pool.named_buffers()

    def free_counts(self) -> dict[str, int]:
        return {"token_slots": self.token_to_kv_pool_allocator.available_size(),
                "mamba_slots": self.mamba_allocator.available_size(),
                "req_slots": self.req_to_token_pool.available_size()}

    # ---- byte access used by the RadixTree / HiCache model ----
    def read_token_rows(self, indices: torch.Tensor) -> list[torch.Tensor]:
        """Per full layer, the kv_buffer rows of these token slots, as uint8 (n, row_bytes)."""
        idx = indices.to(self.device)
        return [b[idx].view(torch.uint8).reshape(len(idx), -1) for b in self.full_kv_pool.kv_buffer]

    def write_token_rows(self, indices: torch.Tensor, rows: list[torch.Tensor]) -> None:
        idx = indices.to(self.device)
        for b, r in zip(self.full_kv_pool.kv_buffer, rows):
            b.view(torch.uint8).view(b.shape[0], -1)[idx, : r.shape[1]] = r.to(self.device)

    def read_index_pages(self, indices: torch.Tensor) -> list[torch.Tensor]:
        """Per full layer, the IndexKeyCache pages holding these (page-aligned) token slots."""
        pages = (indices.view(-1)[:: self.geometry.page_size] // self.geometry.page_size).to(self.device)
        return [b[pages] for b in self.full_kv_pool.index_key_cache.buffer if b.shape[0]]

    def write_index_pages(self, indices: torch.Tensor, rows: list[torch.Tensor]) -> None:
        pages = (indices.view(-1)[:: self.geometry.page_size] // self.geometry.page_size).to(self.device)
        live = [b for b in self.full_kv_pool.index_key_cache.buffer if b.shape[0]]
        for b, r in zip(live, rows):
            b[pages] = r.to(self.device)

    def read_mamba_slot(self, slot: int) -> list[torch.Tensor]:
        """One state slot across all state layers: [conv..., temporal], each (layers, ...) as uint8."""
        return [t[:, slot].contiguous().view(torch.uint8) for t in self.mamba_pool.state_tensors()]

    def write_mamba_slot(self, slot: int, parts: list[torch.Tensor]) -> None:
        for t, p in zip(self.mamba_pool.state_tensors(), parts):
            t[:, slot] = p.to(self.device).view(t.dtype).view(t[:, slot].shape)


# --------------------------------------------------------------------------- HiCache host pools


def host_sizes(g: ModelGeometry, ratio: float) -> tuple[int, int]:
    """(host KV tokens, host state slots): ``HostKVCache.__init__`` without ``--hicache-size``,
    (int(capacity x ratio) // page + 1) x page, and MambaPoolHost's page of one slot."""
    return host_pool_size(g.size, g.page_size, ratio), (host_pool_size(g.mamba_size, 1, ratio)
                                                        if g.num_linear_layers else 0)


def host_shape_table(g: ModelGeometry, ratio: float) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, dtype) of every host buffer of the HostPoolGroup SGLang 0.5.23 builds, page_first
    (``pool_host/mha.py``: (2, size, layers, heads, dim); ``mla.py``: (size, layers, 1, host row);
    ``dsa.py``: (pages, indexed layers, 1, page bytes); ``mamba.py``: (slots, layers, 1, *state))."""
    tokens, slots = host_sizes(g, ratio)
    out: list[tuple[str, tuple[int, ...], str]] = []
    if g.mha:
        out.append(("MHATokenToKVPoolHost[kv].kv_buffer",
                    (2, tokens, g.num_full_layers, g.kv_heads, g.head_dim), g.store_dtype))
    else:
        out.append(("MLATokenToKVPoolHost[kv].kv_buffer", (tokens, g.num_full_layers, 1, g.host_kv_row_width),
                    g.store_dtype))
    live = sum(1 for s in g.skip_topk_layers if not s)
    # the article's hybrid HostPoolGroup has KV + MAMBA entries only (rules.host_indexer_pool)
    if g.index_row_bytes and live and g.rules.host_indexer_pool:
        out.append(("DSAIndexerPoolHost[indexer].index_k_with_scale_buffer",
                    (index_page_count(tokens, g.page_size), live, 1, g.index_row_bytes), "uint8"))
    if slots:
        n = g.num_linear_layers
        out += [(f"MambaPoolHost[mamba].conv_buffer[{i}]", (slots, n, 1, *c), g.conv_dtype)
                for i, c in enumerate(g.conv_state_shapes)]
        out.append(("MambaPoolHost[mamba].temporal_buffer", (slots, n, 1, *g.temporal_state_shape), g.temporal_dtype))
    return out


def check_host_buildable(plan, g: ModelGeometry) -> None:
    """Refuse by name the host pools this module does not build."""
    p = plan.args.profile
    if g.swa_layer_ids:
        raise NotBuilt("--host", f"measure builds no HiCache host pools for SWAKVPool ({plan.config.family})")
    if g.mha and g.head_dim != g.v_head_dim:
        raise NotBuilt("--host", "measure does not build AsymmetricMHATokenToKVPoolHost (K and V of two head dims)")
    if getattr(p, "hicache_mem_layout", None) not in (None, "page_first"):
        raise NotBuilt("hicache_mem_layout", "measure builds the page_first host layout only")


@dataclass
class _HostPart:
    size: int


class ModelHostPools:
    """The host buffers of a ``ModelDevicePools`` (CPU memory, pinned when CUDA is present), named as
    ``HostPoolGroup.named_buffers`` names GLM-5.3-Flash's: ``<pool class>[<entry>].<buffer>``."""

    def __init__(self, pools: ModelDevicePools, ratio: float, fill: str = "zeros", pin_memory: Optional[bool] = None):
        g = pools.geometry
        pin = torch.cuda.is_available() if pin_memory is None else pin_memory
        tokens, slots = host_sizes(g, ratio)
        self.kv, self.mamba = _HostPart(tokens), (_HostPart(slots) if slots else None)
        alloc = {"zeros": torch.zeros, "empty": torch.empty}[fill]
        self._buffers = [(name, alloc(shape, dtype=torch_dtype(dt), device="cpu", pin_memory=pin))
                         for name, shape, dt in host_shape_table(g, ratio)]

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        yield from self._buffers


# --------------------------------------------------------------------------- per-unit bytes (issue 22's view)

_GROUPS = {"kv": (".kv_buffer[", "full_kv_pool.k_buffer[", "full_kv_pool.v_buffer["),
           "index": (".index_key_cache.",), "state": ("mamba_pool.conv[", "mamba_pool.temporal"),
           "swa": ("swa_kv_pool.",)}


def _group_bytes(pools) -> dict[str, int]:
    named = list(pools.named_buffers())
    return {g: storage_bytes(t for n, t in named if any(x in n for x in keys)) for g, keys in _GROUPS.items()}


def measure_model(plan, device: str = "cpu") -> dict:
    """Per-token KV, per-token indexer, per-slot and (hybrid SWA) SWA per-token bytes, measured from two
    allocations of the one builder (``build_device_pools``), beside the plan's figures;
    ``differences`` names every key where they disagree."""
    base = geometry_for(plan, max_running_requests_per_worker=plan_requests_per_worker(plan))
    page = base.page_size
    small = max(page, 64)
    sizes = []
    for tokens, slots in ((2 * small, 1), (4 * small, 2)):
        pools = build_device_pools(base.with_sizes(size=tokens, mamba_size=slots), device, fill="empty")
        sizes.append(_group_bytes(pools))
        del pools
    a, b = sizes
    dt = 2 * small
    measured = {"kv_bytes_per_token": (b["kv"] - a["kv"]) // dt,
                "indexer_bytes_per_token": (b["index"] - a["index"]) // dt,
                "state_slot_bytes": b["state"] - a["state"]}
    planned = {"kv_bytes_per_token": plan.token.kv_bytes_per_token,
               "indexer_bytes_per_token": plan.token.indexer_bytes_per_token,
               "state_slot_bytes": plan.request.state_slot_bytes}
    if plan.token.swa_kv_bytes_per_token is not None:   # hybrid SWA (issue 32): the SWA pool's bytes per token
        measured["swa_kv_bytes_per_token"] = (b["swa"] - a["swa"]) // dt
        planned["swa_kv_bytes_per_token"] = plan.token.swa_kv_bytes_per_token
    return {"measured": measured, "plan": planned,
            "differences": {k: (planned[k], measured[k]) for k in planned if planned[k] != measured[k]}}
