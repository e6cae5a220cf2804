"""The ledgers for any shipped hybrid model: token, request, capacity, host (issue 22).

Why a separate plan: GLM-5.3-Flash's plan (``plan.py``) carries GLM-only detail (the compress
tail, MTP, DFLASH, the weights estimate); the other models need only the sums of their layer
specs. Both follow SGLang 0.5.23's sizing order: per token = ``cell_size`` (the token-pool specs),
per state slot = ``mamba_cache_per_req`` (the state specs), and the pools from the bytes left
for them (``capacity.pool_sizes`` for hybrid models, ``DefaultPoolConfigurator.calculate_pool_sizes``
+ ``resolve_max_num_reqs`` for attention-only ones). Launch facts SGLang resolves by GPU (page
size, kv dtype, DSA backends, mamba strategy) come from ``glm_kv.inputs.rules``.

Modelled flags only: a profile field that would change these pools but is not modelled for
these models (speculative decoding, context parallel, the article layout, ``hicache_size``)
is refused by name. The CUDA-graph switches (the three disables, the per-phase backends) are taken:
they move only the default fraction and the profiled rest, i.e. ``available_bytes``, given here
(tests/sglang/test_models.py: SGLang's pools do not move with them).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..errors import ProfileError
from ..inputs.gpus import Gpu, resolve_gpu
from ..inputs.hf_config import HfConfig, config_int as _int, config_where, load_hf_config
from ..inputs.resolve import resolve_dsa_backends, resolve_kv_dtype
from ..inputs.rules import RULES, SglangRules, rules_for
from ..units import GiB, index_page_count
from .capacity import AUTO_REQS_MAX, AUTO_REQS_MIN, AUTO_REQS_PER_CONTEXT, BINDING_LABELS, pool_point, refusal
from .host import host_size
from .model_layers import CacheArgs, ModelLayers, build_layers, is_dsa
from .request import slots_per_request

# Profile fields refused for these models: they change the pools and are not modelled here.
NOT_MODELLED = {
    "speculative_algorithm": "speculative decoding's draft pools are modelled for GLM-5.3-Flash only",
    "speculative_draft_model_path": "speculative decoding's draft pools are modelled for GLM-5.3-Flash only",
    "attn_cp_size": "context parallel is modelled for GLM-5.3-Flash only",
    "hicache_size": "HiCache's --hicache-size split is modelled for GLM-5.3-Flash only (give hicache_ratio)",
    "mem_fraction_static": "the device-to-rest path (weights, pre-load memory) is modelled for GLM-5.3-Flash "
                           "only; give available_bytes",
    "weights_bytes": "the device-to-rest path is modelled for GLM-5.3-Flash only; give available_bytes",
    "pre_model_load_bytes": "the device-to-rest path is modelled for GLM-5.3-Flash only; give available_bytes",
    # MambaPool allocates a replay ring per state slot with it (mem_cache/memory_pool.py, _replayssm_on)
    "enable_linear_replayssm_spec": "the replay-SSM ring is modelled for GLM-5.3-Flash only",
    "linear_replayssm_cache_len": "the replay-SSM ring is modelled for GLM-5.3-Flash only",
}


@dataclass(frozen=True)
class ModelTokenLedger:
    kv_cache_dtype: str
    page_size: int
    attn_tp_size: int
    num_full_layers: int
    kv_bytes_per_token: int          # MLA latent rows or GQA K+V, all full-attention layers
    indexer_bytes_per_token: int     # DSA indexer K (0 without DSA)
    cell_size_bytes: int             # SGLang's cell_size: what the token budget divides by
    mla_row: str | None              # "bf16", "fp8_raw", "fp8_scaled" (None: no MLA layer)
    kv_row_bytes: int                # one full-attention layer, one token (KV part)


@dataclass(frozen=True)
class ModelRequestLedger:
    num_state_layers: int
    state_kind: str | None           # "kda_state", "gdn_state", "mamba2_state" (None: no state)
    conv_state_shape: tuple[int, ...]
    temporal_state_shape: tuple[int, ...]
    state_bytes_per_layer: int
    state_slot_bytes: int            # SGLang's mamba_cache_per_req
    mamba_strategy: str              # resolved ("none": radix cache off or no state layers)
    slots_per_request: int
    state_bytes_per_request: int


@dataclass(frozen=True)
class ModelCapacityLedger:
    available_bytes: int
    max_mamba_cache_size: int | None
    mamba_pool_bytes: int
    token_pool_budget_bytes: int
    max_total_num_tokens: int
    token_pool_bytes: int
    max_running_requests: int
    binding_limit: str


@dataclass(frozen=True)
class ModelHostLedger:
    enabled: bool
    hicache_ratio: float
    entries: tuple[str, ...]         # HostPoolGroup entries: kv (+ indexer for DSA) (+ mamba for hybrids)
    kv_bytes_per_token: int          # host KV rows, all full-attention layers (MLA/MHA host pool)
    indexer_page_bytes: int          # one DSAIndexerPoolHost page, all indexed layers (0 without DSA)
    mamba_slot_bytes: int
    kv_tokens: int | None = None
    kv_bytes: int | None = None
    indexer_bytes: int | None = None
    mamba_slots: int | None = None
    mamba_bytes: int | None = None
    total_bytes: int | None = None


@dataclass(frozen=True)
class ModelPlan:
    profile: object
    config: HfConfig
    gpu: Gpu
    layers: ModelLayers
    args: CacheArgs
    attn_dp_size: int
    requests_per_worker: int | None
    context_length: int
    token: ModelTokenLedger
    request: ModelRequestLedger
    capacity: ModelCapacityLedger | None
    host: ModelHostLedger
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return model_plan_to_dict(self)


UNMODELLED_DEFAULTS = {"speculative_algorithm": None, "speculative_draft_model_path": None,
                       "attn_cp_size": 1, "hicache_size": 0, "mem_fraction_static": None,
                       "weights_bytes": None, "pre_model_load_bytes": None,
                       "enable_linear_replayssm_spec": False, "linear_replayssm_cache_len": 16}


def _refuse_unmodelled(p, rules: SglangRules) -> None:
    if not rules.other_models:
        modelled = ", ".join(v for v, r in RULES.items() if r.other_models)
        raise ProfileError("sglang_layout", f"other models are modelled for SGLang {modelled} only (the "
                                            f"{rules.version} layout describes GLM-5.3-Flash)")
    for name, default in UNMODELLED_DEFAULTS.items():
        if getattr(p, name) != default:
            raise ProfileError(name, f"is not modelled for this model: {NOT_MODELLED[name]}")


def resolve_cache_args(p, cfg: HfConfig, gpu: Gpu, rules: SglangRules) -> tuple[CacheArgs, int, int]:
    """(CacheArgs, attn_dp, page_size): the launch facts as SGLang 0.5.23 resolves them."""
    attn_dp = p.dp_size if p.enable_dp_attention else 1
    if p.tp_size % attn_dp:
        raise ProfileError("dp_size", f"must divide tp_size ({p.tp_size}) under DP attention")
    attn_tp = p.tp_size // attn_dp
    if is_dsa(cfg):   # the same resolution as GLM-5.3-Flash's (checked per GPU against the wheel)
        kv = resolve_kv_dtype(p, gpu)
        pre, dec = resolve_dsa_backends(p, gpu, kv)
    else:  # configure_kv_cache_dtype: the checkpoint's kv_cache_quant_algo FP8, else the model dtype
        rules.check_kv_dtype(cfg.family, gpu.sm, p.kv_cache_dtype)
        kv = p.kv_cache_dtype if p.kv_cache_dtype != "auto" else (
            "fp8_e4m3" if (cfg.kv_cache_quant_algo or "").upper() == "FP8" else "bfloat16")
        pre, dec = p.dsa_prefill_backend or "", p.dsa_decode_backend or ""
    args = CacheArgs(kv_cache_dtype=kv, dsa_prefill_backend=pre, dsa_decode_backend=dec, attn_tp=attn_tp,
                     ssm_dtype=p.mamba_ssm_dtype,
                     ssm_dtype_from_config="mamba_ssm_dtype" not in p.model_fields_set)
    page = rules.page_size(cfg.family, gpu.sm, p.page_size)
    return args, attn_dp, page


def _token(m: ModelLayers, args: CacheArgs, page: int) -> ModelTokenLedger:
    from .layers import DsaIndexerK, GqaKv, MlaKv, SlidingWindowKv

    kv_specs = m.specs((MlaKv, GqaKv, SlidingWindowKv))
    idx = m.bytes_per_token_of(DsaIndexerK)
    mla = [s for s in kv_specs if isinstance(s, MlaKv)]
    return ModelTokenLedger(
        kv_cache_dtype=args.kv_cache_dtype, page_size=page, attn_tp_size=args.attn_tp,
        num_full_layers=len(m.full_attention_layers),
        kv_bytes_per_token=sum(s.bytes_per_token for s in kv_specs), indexer_bytes_per_token=idx,
        cell_size_bytes=m.bytes_per_token, mla_row=mla[0].row if mla else None,
        kv_row_bytes=kv_specs[0].bytes_per_token if kv_specs else 0)


def _request(m: ModelLayers, p, strategy: str) -> ModelRequestLedger:
    from .layers import STATE_KINDS

    states = m.specs(STATE_KINDS)
    if not states:
        return ModelRequestLedger(0, None, (), (), 0, 0, "none", 0, 0)
    s = states[0]
    spr = slots_per_request(p, strategy)
    return ModelRequestLedger(
        num_state_layers=len(states), state_kind=s.kind, conv_state_shape=tuple(s.conv_shape),
        temporal_state_shape=tuple(s.temporal_shape), state_bytes_per_layer=s.bytes_per_slot,
        state_slot_bytes=m.bytes_per_slot, mamba_strategy=strategy, slots_per_request=spr,
        state_bytes_per_request=spr * m.bytes_per_slot)


def _capacity(p, tok: ModelTokenLedger, req: ModelRequestLedger, attn_dp: int, per_worker: int | None,
              context: int) -> ModelCapacityLedger | None:
    if p.available_bytes is None:
        return None
    avail = p.available_bytes
    if req.state_slot_bytes:   # hybrid: SGLang 0.5.23's mamba-first order (capacity.pool_sizes)
        v = pool_point(p, rest_gib=avail / GiB, slot=req.state_slot_bytes, ratio=req.slots_per_request,
                       cell_size=tok.cell_size_bytes, page_size=tok.page_size, draft_tokens=0, attn_dp=attn_dp,
                       requests_per_worker=per_worker, context_len=context)
        K = v["max_mamba_cache_size"]
        return ModelCapacityLedger(
            available_bytes=avail, max_mamba_cache_size=K, mamba_pool_bytes=(K + 1) * req.state_slot_bytes,
            token_pool_budget_bytes=v["token_pool_budget_bytes"], max_total_num_tokens=v["max_total_num_tokens"],
            token_pool_bytes=v["max_total_num_tokens"] * tok.cell_size_bytes,
            max_running_requests=v["max_running_requests"], binding_limit=BINDING_LABELS[v["binding"]])
    # attention only: DefaultPoolConfigurator.calculate_pool_sizes, then resolve_max_num_reqs
    tokens = avail // tok.cell_size_bytes // tok.page_size * tok.page_size
    if p.max_total_tokens is not None and p.max_total_tokens < tokens:
        tokens = p.max_total_tokens // tok.page_size * tok.page_size
    if tokens <= 0:
        raise refusal(6)
    est = max(min(int(tokens / context * AUTO_REQS_PER_CONTEXT), AUTO_REQS_MAX), AUTO_REQS_MIN)
    requested = per_worker if per_worker is not None else est
    nreq = min(requested, tokens // 2)
    binding = "tokens" if nreq < requested else "requested" if per_worker is not None else "auto"
    return ModelCapacityLedger(
        available_bytes=avail, max_mamba_cache_size=None, mamba_pool_bytes=0, token_pool_budget_bytes=avail,
        max_total_num_tokens=tokens, token_pool_bytes=tokens * tok.cell_size_bytes,
        max_running_requests=nreq, binding_limit=binding)


def host_pools(device_tokens: int, device_slots: int, *, page_size: int, ratio: float, kv_bytes_per_token: int,
               indexer_page_bytes: int, slot_bytes: int) -> dict:
    """HiCache host pools sized by ``hicache_ratio`` (``HostKVCache``: ratio x the device pool, one
    page more; ``MambaPoolHost`` the same over state slots; ``DSAIndexerPoolHost`` one index page
    per host page, plus SGLang's spare page)."""
    tokens = host_size(device_tokens, page_size, ratio, 0, kv_bytes_per_token)
    slots = host_size(device_slots, 1, ratio, 0, slot_bytes) if slot_bytes else 0
    kv_b, m_b = tokens * kv_bytes_per_token, slots * slot_bytes
    idx_b = index_page_count(tokens, page_size) * indexer_page_bytes if indexer_page_bytes else 0
    return {"kv_tokens": tokens, "kv_bytes": kv_b, "indexer_bytes": idx_b, "mamba_slots": slots,
            "mamba_bytes": m_b, "total_bytes": kv_b + idx_b + m_b}


def _host(p, m: ModelLayers, tok: ModelTokenLedger, req: ModelRequestLedger,
          cap: ModelCapacityLedger | None) -> ModelHostLedger:
    """HiCache's host side by ratio (checked against SGLang's host pool group for the hybrids in
    tests/sglang/test_models.py)."""
    from .layers import DsaIndexerK

    ratio = p.hicache_ratio
    idx = m.specs((DsaIndexerK,))
    page_bytes = sum(s.bytes_per_token * tok.page_size for s in idx)   # pooled rows of one page, every layer
    entries = ("kv",) + (("indexer",) if idx else ()) + (("mamba",) if req.state_slot_bytes else ())
    base = dict(enabled=bool(p.enable_hierarchical_cache), hicache_ratio=ratio, entries=entries,
                kv_bytes_per_token=tok.kv_bytes_per_token, indexer_page_bytes=page_bytes,
                mamba_slot_bytes=req.state_slot_bytes)
    if not p.enable_hierarchical_cache or cap is None:
        return ModelHostLedger(**base)
    sizes = host_pools(cap.max_total_num_tokens, cap.max_mamba_cache_size or 0, page_size=tok.page_size, ratio=ratio,
                       kv_bytes_per_token=tok.kv_bytes_per_token, indexer_page_bytes=page_bytes,
                       slot_bytes=req.state_slot_bytes)
    return ModelHostLedger(**base, **sizes)


def model_plan(p, rules: SglangRules | None = None) -> ModelPlan:
    """Every ledger for a profile whose ``model`` is one of the other shipped models (or a config)."""
    rules = rules or rules_for(p)
    _refuse_unmodelled(p, rules)
    cfg = load_hf_config(p.model)
    gpu = resolve_gpu(p)
    args, attn_dp, page = resolve_cache_args(p, cfg, gpu, rules)
    layers = build_layers(cfg, args, rules)
    hybrid = bool(layers.state_layers)
    if not hybrid:
        strategy = "none"
    elif p.disable_radix_cache:
        strategy = "none"
    else:
        strategy = rules.mamba_strategy(p.mamba_scheduler_strategy, p.disable_overlap_schedule, page)
    if hybrid and strategy == "no_buffer" and not p.disable_overlap_schedule:
        raise ProfileError("mamba_scheduler_strategy", "no_buffer does not support the overlap schedule in SGLang "
                                                       "0.5.23 (set disable_overlap_schedule)")
    if hybrid and strategy == "extra_buffer_lazy" and p.disable_overlap_schedule:
        raise ProfileError("mamba_scheduler_strategy", "extra_buffer_lazy requires the overlap schedule "
                                                       "(disable_overlap_schedule is incompatible)")
    if hybrid and strategy == "no_buffer" and page != 1:
        raise ProfileError("mamba_scheduler_strategy", f"no_buffer only supports page_size=1 (this model runs with {page})")
    per_worker = None if p.max_running_requests is None else max(1, p.max_running_requests // attn_dp)
    if p.context_length:
        context = p.context_length
    elif cfg.text.get("max_position_embeddings") is None:
        raise ProfileError("context_length", "give it: the config has no max_position_embeddings")
    else:   # a bad value is refused naming the config key (it was int()-ed: 1.5 -> 1, "x" a traceback)
        context = _int(cfg.text, "max_position_embeddings", config_where(cfg))
    tok = _token(layers, args, page)
    req = _request(layers, p, strategy)
    cap = _capacity(p, tok, req, attn_dp, per_worker, context)
    notes = []
    if p.page_size is not None and p.page_size != page:
        notes.append(f"page_size {p.page_size} is overridden: SGLang 0.5.23 runs this model with {page} on a {gpu.name}")
    if cap is None:
        notes.append("capacity not sized: give available_bytes (SGLang's rest after weights, per rank); "
                     "weights are estimated for GLM-5.3-Flash only")
    if p.enable_hierarchical_cache and "hicache_ratio" not in p.model_fields_set:
        notes.append("HiCache ratio 2.0: SGLang 0.5.23 auto-sizes it from the host's free RAM when neither "
                     "hicache_ratio nor hicache_size is given; give hicache_ratio")
    if p.enable_hierarchical_cache and p.hicache_mem_layout not in ("page_first", "page_first_direct", "page_first_kv_split") \
            and req.state_slot_bytes:
        raise ProfileError("hicache_mem_layout", f"{p.hicache_mem_layout!r} fails MambaPoolHost's layout assert "
                                                 f"in SGLang 0.5.23 (page_first or page_first_direct)")
    return ModelPlan(profile=p, config=cfg, gpu=gpu, layers=layers, args=args, attn_dp_size=attn_dp,
                     requests_per_worker=per_worker, context_length=context, token=tok, request=req,
                     capacity=cap, host=_host(p, layers, tok, req, cap), notes=tuple(notes))


def model_plan_to_dict(plan: ModelPlan) -> dict:
    """The plan-contract shape (``token``, ``request``, ``capacity``, ``host``), plus ``layers``."""
    p, m = plan.profile, plan.layers
    d = {
        "profile": {"name": p.label, **p.model_dump(exclude={"name"})},
        "model": {"name": plan.config.name, "source": plan.config.source, "model_type": plan.config.model_type,
                  "family": plan.config.family, "num_hidden_layers": m.num_hidden_layers,
                  "full_attention_layers": list(m.full_attention_layers),
                  "linear_attention_layers": list(m.state_layers)},
        "gpu": asdict(plan.gpu),
        "parallel": {"attn_tp_size": plan.args.attn_tp, "attn_dp_size": plan.attn_dp_size,
                     "linear_attn_tp_size": plan.args.attn_tp,
                     "max_running_requests_per_worker": plan.requests_per_worker},
        "token": asdict(plan.token),
        "request": {**asdict(plan.request), "conv_state_shape": list(plan.request.conv_state_shape),
                    "temporal_state_shape": list(plan.request.temporal_state_shape)},
        "host": {**asdict(plan.host), "entries": list(plan.host.entries)},
        "layers": m.by_kind(),
        "notes": list(plan.notes),
    }
    if plan.capacity is not None:
        d["capacity"] = asdict(plan.capacity)
    return d
