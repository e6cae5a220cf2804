"""The plan: every ledger for one (model, profile); typed inside, the contract JSON at the edge."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..errors import ProfileError
from ..inputs.gpus import Gpu
from ..inputs.hf_config import HfConfig
from ..inputs.ib_devices import check_ib_devices as ib_devices_note
from ..inputs.model import ModelConfig
from ..inputs.profile import Profile, load_profile, make_profile
from ..inputs.resolve import ServerArgs, req_to_token_extra_context_len, resolve
from ..inputs.retraction import retraction_backup
from ..units import MiB, fmt_bytes
from . import capacity as capacity_module
from . import token as token_module
from .capacity import (CapacityLedger, attention_capacity_ledger, capacity_ledger, swa_capacity_ledger,
                       swa_request_cap)
from .host import HostLedger, hisparse_host_pool, host_ledger, replayssm_conv_window_bytes
from .memory import (PRE_LOAD_ESTIMATE_NOTE, MemoryLedger, gpu_defaults, memory_ledger_for,
                     memory_plan_keys, pools_budget, sglang_no_memory_text, weights_estimate_note)
from .model_layers import ModelLayers, layers_for
from .parallel import ParallelLedger, parallel_ledger
from .request import RequestLedger, mamba_tracking_slots, replayssm_fixed_bytes, replayssm_pool_ring_bytes, request_ledger
from .tail import TailLedger, indexed_layers, tail_ledger
from .token import TokenLedger, token_ledger


@dataclass(frozen=True)
class Plan:
    """Every ledger of one deployment, for any model: the same fields, the same contract."""

    profile: Profile
    model: ModelConfig | None      # GLM-5.3-Flash's checked config reading (None for other models)
    gpu: Gpu
    args: ServerArgs
    parallel: ParallelLedger
    token: TokenLedger
    request: RequestLedger
    tail: TailLedger
    capacity: CapacityLedger | None
    host: HostLedger
    draft_tokens: int
    notes: tuple[str, ...] = field(default=())
    memory: MemoryLedger | None = None
    layers: ModelLayers | None = None
    hisparse_host: tuple[int, int] | None = None   # appended (issue 30): HiSparse's host KV copy (tokens, bytes)

    @property
    def config(self) -> HfConfig:
        return self.args.config

    @property
    def hybrid(self) -> bool:
        """Has state layers (a MambaPool): the request ledger and the mamba-first sizing apply."""
        return self.request.state_slot_bytes > 0

    @property
    def requests_per_worker(self) -> int | None:
        """Requests the pools are sized for on one worker: the resolved cap, else the requested count."""
        if self.capacity is not None:
            return self.capacity.max_running_requests_per_worker
        return self.parallel.max_running_requests_per_worker

    def to_dict(self) -> dict:
        return plan_to_dict(self)


def _memory(args: ServerArgs, layers: ModelLayers, overrides: dict | None = None) -> MemoryLedger:
    """The device-to-rest path (fraction, pre-load memory, weights) for resolved arguments, any model.

    ``overrides``: measured inputs (``pre_model_load_bytes``, ``target_weights_bytes``,
    ``draft_weights_bytes`` with their sources), e.g. read off a boot log by ``verify``.
    """
    p = args.profile
    if p.attn_cp_size != args.fraction_attn_cp_size:   # the fraction reads the width the user gave
        p = p.model_copy(update={"attn_cp_size": args.fraction_attn_cp_size})
    return memory_ledger_for(p, args.config, layers, args.gpu, args.attn_dp_size, p.max_running_requests,
                             args.attn_tp_size, **(overrides or {}))


def _capacity(args: ServerArgs, tok: TokenLedger, req: RequestLedger, avail: int, source: str,
              rest_gib: float, fixed_bytes: int = 0, mem: MemoryLedger | None = None) -> CapacityLedger:
    """The pools from the bytes left: mamba first for a hybrid, tokens only for an attention model. ``mem``: the
    device-to-rest path, whose readings SGLang's refusal names when nothing is left after the mamba pool."""
    p = args.profile
    if req.state_slot_bytes:
        return capacity_ledger(p, rest_gib=rest_gib, available_bytes=avail, available_source=source,
                               attn_dp=args.attn_dp_size, slot=req.budget_slot_bytes,
                               ratio=req.slots_per_request, cell_size=tok.cell_size_bytes,
                               page_size=tok.page_size, draft_tokens=args.verify_state_draft_tokens,
                               requests_per_worker=args.requests_per_worker, context_len=args.context_length,
                               fixed_bytes=fixed_bytes,
                               sglang_words=None if p.available_bytes is not None else lambda: sglang_no_memory_text(mem))
    if tok.swa_kv_bytes_per_token is not None:   # hybrid SWA (issue 32): the full pool and the SWA pool
        return swa_capacity_ledger(p, available_bytes=avail, available_source=source, cell_size=tok.swa_cell_size,
                                   ratio=tok.swa_full_tokens_ratio, window=tok.sliding_window_size,
                                   page_size=tok.page_size, requests_per_worker=args.requests_per_worker,
                                   context_len=args.context_length,
                                   full_bytes_per_token=tok.kv_bytes_per_token + tok.dflash_draft_bytes_per_token,
                                   swa_bytes_per_token=tok.swa_kv_bytes_per_token, request_cap=_swa_cap(args, tok))
    return attention_capacity_ledger(p, available_bytes=avail, available_source=source,
                                     cell_size=tok.cell_size_bytes, page_size=tok.page_size,
                                     requests_per_worker=args.requests_per_worker, context_len=args.context_length)


def swa_chunk(args: ServerArgs) -> int:
    """The prefill chunk the SWA request cap counts: the flag, else the GPU's default, over attention DP."""
    p = args.profile
    chunk = p.chunked_prefill_size if p.chunked_prefill_size is not None else gpu_defaults(
        args.gpu.memory_bytes / MiB, p.tp_size)[0]
    return chunk // args.attn_dp_size   # _handle_data_parallelism: DP attention divides the chunk


def _swa_cap(args: ServerArgs, tok: TokenLedger) -> int | None:
    """``SWARequestCapPoolConfigurator.is_applicable``: a --max-running-requests (given, or the 48 speculative
    decoding resets an unset one to) with the radix cache off (a PD decode server's default) and a chunked
    prefill (not asked of a decode server) sizes the SWA pool from the request cap (``compute_swa_request_cap``);
    None: the ratio path."""
    p = args.profile
    chunk = swa_chunk(args)
    decode = p.disaggregation_mode == "decode"
    mrr = args.max_running_requests_global
    if mrr is None or not p.disable_radix_cache or (chunk <= 0 and not decode):
        return None
    return swa_request_cap(page_size=tok.page_size, window=tok.sliding_window_size,
                           requests_per_worker=mrr // args.attn_dp_size,
                           chunked_prefill_size=chunk, overlap=not p.disable_overlap_schedule,
                           draft_tokens=args.draft_tokens, decode_server=decode,
                           decode_extra_slots=args.decode_extra_slots)


def plan_from_args(args: ServerArgs, memory_overrides: dict | None = None) -> Plan:
    """Every ledger for resolved server arguments, any model (``memory_overrides``: see ``_memory``).

    The layers are built once here, from the config and the resolved arguments, and every ledger
    sums them; the rules come resolved with the arguments."""
    p, rules = args.profile, args.rules
    layers = layers_for(args)
    par = parallel_ledger(args)
    tok = token_ledger(args, layers)
    req = request_ledger(args, par.linear_attn_tp_size, layers)
    notes: list[str] = []
    if p.disaggregation_ib_device is not None:   # issue 30: SGLang checks the devices on the machine it starts on
        notes.append(ib_devices_note(p.disaggregation_ib_device))
    mem = _memory(args, layers, memory_overrides)
    avail, source, rest_gib = pools_budget(args.profile, args.gpu, mem)
    if mem is not None and mem.rest_gib is not None and p.available_bytes is None \
            and mem.pre_model_load_source == "estimate":
        notes.append(PRE_LOAD_ESTIMATE_NOTE)
    if avail is not None and p.available_bytes is None and (note := weights_estimate_note(mem)):
        notes.append(note)
    cap, fixed = None, 0
    if avail is not None:   # the Gated DeltaNet ring's budget (SGLang refuses it without max_running_requests)
        fixed = replayssm_fixed_bytes(args, layers)
        cap = _capacity(args, tok, req, avail, source, rest_gib, fixed, mem)
        if cap.capped_message:
            notes.append(cap.capped_message)
    if args.max_running_requests_global != p.max_running_requests:
        notes.append(f"max_running_requests unset under speculative decoding: SGLang resets it to "
                     f"{args.max_running_requests_global}")
    reqs = cap.max_running_requests_per_worker if cap else args.requests_per_worker
    indexed = indexed_layers(layers)
    if reqs is None:
        if indexed.index_kpool > 1 and indexed.index_kpool_compress:
            notes.append("compress tail not sized: max_running_requests is automatic and capacity is unknown")
        tail = tail_ledger(indexed, 0, args.draft_tokens)
    else:
        tail = tail_ledger(indexed, reqs, args.draft_tokens, args.decode_extra_slots)
    mamba_pool_slots = _decode_mamba_pool_slots(args, cap)
    if cap is not None and mamba_pool_slots != cap.max_mamba_cache_size:
        notes.append(f"decode server: MambaPool holds {mamba_pool_slots:,} state slots, not the budget's "
                     f"{cap.max_mamba_cache_size:,} (HybridMambaDecodeReqToTokenPool raises it to (requests + "
                     f"pre-allocated rows) x slots per request): "
                     f"{fmt_bytes((mamba_pool_slots - cap.max_mamba_cache_size) * req.state_slot_bytes)} "
                     f"beyond the sized pools, and HiCache's host state pool follows the raised size")
    spec_rows_extra = _decode_spec_rows_extra(args, cap, mamba_pool_slots)
    scratch_per_row = req.state_slot_bytes * args.verify_state_draft_tokens   # 0 under ReplaySSM
    if spec_rows_extra and scratch_per_row:
        notes.append(f"decode server: MambaPool's speculative verify scratch covers the {spec_rows_extra:,} "
                     f"pre-allocated rows too (mamba_spec_state_size = requests + pre-allocated rows): "
                     f"{fmt_bytes(spec_rows_extra * scratch_per_row)} beyond the sized pools")
    host = host_ledger(layers, p, tok, req.state_slot_bytes,
                       cap.max_total_num_tokens if cap else None,
                       mamba_pool_slots,
                       mamba_device_bytes=_mamba_pool_own_bytes(args, cap, req, layers, fixed, mamba_pool_slots,
                                                                spec_rows_extra),
                       draft_layers=args.packed_draft_layers, rules=rules,
                       sidecar_draft_bytes_per_token=tok.dflash_draft_bytes_per_token,   # issue 30: DFLASH sidecar
                       swa_device_tokens=cap.swa_max_total_num_tokens if cap else None,   # issue 32: SWA host pool
                       # a PD decode server's retraction backup: host_pool builds the host pools without HiCache
                       retraction_backup=(retraction_backup(p, args.config.family)
                                          if rules.startup_refusals else None),   # 0.5.23's rule (not the article's)
                       max_context_len=args.context_length + req_to_token_extra_context_len(args))
    if host.retraction_backup == "host_pool" and not p.enable_hierarchical_cache:
        notes.append("decode server: SGLang 0.5.23 backs up retracted requests in host pools "
                     "(--disaggregation-decode-retraction-backup resolves to host_pool), built as HiCache's without "
                     "--enable-hierarchical-cache" + (": the host.* sizes hold them" if cap is not None else ""))
    if host.hicache_ratio_source == "default":
        notes.append("HiCache ratio 2.0: SGLang 0.5.23 auto-sizes it from the host's free RAM when neither "
                     "hicache_ratio nor hicache_size is given; give host_memory_bytes and ranks_per_host")
    if cap is not None and rules.capacity_note:
        notes.append(rules.capacity_note)
    if args.draft_tokens and args.draft_layers:
        notes.append("MTP: counted are the draft layer's KV + indexer in cell_size, the verify scratch "
                     "in the mamba budget and the wider compress tail; not modelled: the draft "
                     "worker's CUDA-graph buffers")
    elif args.packed_draft_layers:
        # issue 31: the target config names no NextN layer (Qwen3.5, Qwen3-Next), so SGLang 0.5.23 folds none into
        # the cell size; the draft worker still builds its own KV pool over the target's token slots
        # (kv_cache_configurator.py, is_draft_worker: the target's pool sizes), outside the sized budget
        extra = "" if cap is None else (f": {(cap.max_total_num_tokens + tok.page_size) * tok.kv_row_bytes * args.packed_draft_layers:,} B "
                                        f"on this rank")
        notes.append(f"MTP: the config names no NextN layer, so SGLang sizes the pools without the draft's KV; the "
                     f"draft worker's own pool ({args.packed_draft_layers} layer over the target's token slots) is "
                     f"allocated outside that budget, from the memory mem_fraction_static leaves{extra}")
    if p.page_size is not None and p.page_size != tok.page_size:
        notes.append(f"page_size {p.page_size} is overridden: this model runs with {tok.page_size}")
    hisparse = (hisparse_host_pool(p, cap.max_total_num_tokens, args.hisparse_ratio, tok)
                if args.hisparse_ratio and cap is not None else None)
    if args.hisparse_ratio:   # issue 30: what HiSparse allocates outside the sized pools
        notes.append("HiSparse: the device pool holds max_total_num_tokens of hisparse_logical_tokens, the rest in its "
                     "host KV copy (host.hisparse_kv_bytes); not counted: the coordinator's per-request device buffers "
                     "(HiSparseCoordinator: swap-in tables per layer and request slot, the request-to-host map over the "
                     "context), allocated after the pools from the memory mem_fraction_static leaves")
    return Plan(p, args.model, args.gpu, args, par, tok, req, tail, cap, host, args.draft_tokens, tuple(notes), mem,
                layers, hisparse)


def compute_plan(p: Profile) -> Plan:
    """Every ledger for a validated profile; raises ProfileError for combinations SGLang refuses."""
    return plan_from_args(resolve(p))


def _json(obj, renames: dict[str, str]) -> dict:
    """A ledger as contract JSON: field order kept, typed names mapped back to the contract's keys."""
    return {renames.get(k, k): v for k, v in asdict(obj).items()}


# keys of a hybrid-SWA model's SWA pool (issue 32): present for those models only, so that every other model's
# plan JSON stays byte-identical (tests/ledgers/test_plan_unchanged.py)
SWA_TOKEN_KEYS = ("swa_kv_bytes_per_token", "num_swa_layers", "swa_full_tokens_ratio", "sliding_window_size",
                  "hisparse_host_to_device_ratio")   # issue 30: HiSparse's, only with --enable-hisparse
SWA_HOST_KEYS = ("swa_bytes_per_token", "swa_layers", "swa_tokens", "swa_bytes")   # the SWA host pool, alike
# profile fields echoed only when given a value other than their default (issues 30, 32): every earlier plan reads
# the same
ECHO_WHEN_SET = {"enable_hisparse": False, "hisparse_config": None, "disaggregation_ib_device": None,
                 "swa_full_tokens_ratio": 0.8, "disable_hybrid_swa_memory": False,
                 "hicache_host_memory_mode": "cache", "hicache_storage_backend": None,
                 "hicache_host_memory_fraction": 0.8,
                 # a decode server's retraction backup and what resolves it (issue 30 / 32 follow-up)
                 "disaggregation_decode_retraction_backup": None, "disaggregation_decode_host_receive_threshold": 1.0,
                 "enable_priority_scheduling": False, "disable_priority_preemption": False}


def _mamba_pool_own_bytes(args, cap, req, layers, fixed: int, pool_slots: int | None,
                          spec_rows_extra: int) -> int | None:
    """MambaPool's own bytes (``MambaPool.get_kv_size_bytes``), which ``_split_hicache_size`` and the auto-size
    read: the budget's pool and verify scratch, less the ReplaySSM reservation the budget made (``fixed``), plus
    what MambaPool allocates beyond the budget: the Gated DeltaNet ring and ReplaySSM conv windows over its
    scratch rows, and on a decode server the raised slots (``_decode_mamba_pool_slots``) and the scratch over
    the pre-allocated rows (``_decode_spec_rows_extra``). None without a capacity."""
    if cap is None:
        return None
    spec_rows = cap.max_running_requests_per_worker + spec_rows_extra
    return (cap.mamba_pool_bytes + cap.spec_scratch_bytes - fixed
            + spec_rows_extra * req.state_slot_bytes * args.verify_state_draft_tokens
            + replayssm_pool_ring_bytes(args, spec_rows, layers)
            + replayssm_conv_window_bytes(args, req, spec_rows)
            + (pool_slots - cap.max_mamba_cache_size) * (cap.mamba_pool_bytes // (cap.max_mamba_cache_size + 1)))


def _decode_spec_rows_extra(args, cap, mamba_pool_slots: int | None) -> int:
    """The verify-scratch rows MambaPool holds beyond the budget's requests. On a PD decode server
    ``HybridMambaDecodeReqToTokenPool`` (disaggregation/decode.py) builds it with ``mamba_spec_state_size =
    size + pre_alloc_size``, so the intermediate states and conv windows (or the ReplaySSM ring and conv
    windows) cover the pre-allocated rows too; the budget counted the requests only. 0 elsewhere (a decode
    server's extra slots are 0 off one) and without a state pool."""
    return args.decode_extra_slots if (cap is not None and mamba_pool_slots) else 0


def _decode_mamba_pool_slots(args, cap) -> int | None:
    """The state slots MambaPool really holds. On a PD decode server ``HybridMambaDecodeReqToTokenPool``
    (disaggregation/decode.py) raises the configurator's ``max_mamba_cache_size`` to ``(size + pre_alloc_size) x
    (1 + get_mamba_tracking_slots(extra_buffer, overlap, lazy=False))`` when that is larger; the host state pool
    (``build_mamba_host_pool``: ``mamba_pool.size`` x ratio) follows the raised size. Elsewhere the budget's."""
    if cap is None or not cap.max_mamba_cache_size or args.profile.disaggregation_mode != "decode":
        return cap.max_mamba_cache_size if cap else None
    tracking = mamba_tracking_slots(extra_buffer=args.mamba_strategy in ("extra_buffer", "extra_buffer_lazy"),
                                    overlap=not args.profile.disable_overlap_schedule)   # lazy=False, as SGLang asks
    needed = (cap.max_running_requests_per_worker + args.decode_extra_slots) * (1 + tracking)
    return max(cap.max_mamba_cache_size, needed)


def plan_to_dict(plan: Plan) -> dict:
    """The plan-contract JSON, the same keys for every model: keys are never renamed or dropped;
    new keys may be added (appended at the end of their section)."""
    tok, req, tail, par, m = plan.token, plan.request, plan.tail, plan.parallel, plan.layers
    cfg = plan.config
    d = {
        "profile": {"name": plan.profile.label, **{k: v for k, v in plan.profile.model_dump(exclude={"name"}).items()
                                                   if k not in ECHO_WHEN_SET or v != ECHO_WHEN_SET[k]}},
        "model": {
            "name": cfg.name if plan.model is None else plan.model.name,
            "source": cfg.source if plan.model is None else plan.model.source,
            "num_hidden_layers": m.num_hidden_layers,
            "full_attention_layers": list(m.full_attention_layers),
            "linear_attention_layers": list(m.state_layers),
            # appended (issue 31): which config class and layer kinds
            "model_type": cfg.model_type, "family": cfg.family,
        },
        "gpu": asdict(plan.gpu),
        "parallel": asdict(par),
        "token": {k: v for k, v in _json(tok, token_module.JSON_NAMES).items() if k not in SWA_TOKEN_KEYS or v is not None},
        "request": {**{k: v for k, v in asdict(req).items() if k != "state_kind"},
                    "conv_state_shape": list(req.conv_state_shape),
                    "temporal_state_shape": list(req.temporal_state_shape),
                    # appended (issue 30): the verify scratch of one request (_handle_max_mamba_cache:
                    # mamba_cache_per_req x speculative_num_draft_tokens; 0 without speculative decoding,
                    # with ReplaySSM and on a PD prefill server)
                    "spec_scratch_bytes_per_request": req.state_slot_bytes * plan.args.verify_state_draft_tokens,
                    "state_kind": req.state_kind},   # appended (issue 31)
        "tail": asdict(tail),
        "host": {**{k: v for k, v in asdict(plan.host).items()
                    if k not in SWA_HOST_KEYS + ("retraction_backup",) or v is not None},   # decode servers only
                 "entries": list(plan.host.entries), "entry_classes": list(plan.host.entry_classes)},
        "speculative": {"draft_tokens": plan.draft_tokens, "draft_layers": tok.draft_layers},
        "notes": list(plan.notes),
    }
    if m.swa_layers:   # appended (issue 32), hybrid-SWA models only: the sliding-window layers (swa_attention_layer_ids)
        d["model"]["swa_attention_layers"] = list(m.swa_layers)
    if plan.memory is not None:   # appended (issue 30): SGLang resolves the fraction at launch, weights or not
        d["memory"] = {"mem_fraction_static": plan.memory.mem_fraction_static,
                       "mem_fraction_static_source": plan.memory.mem_fraction_source}
    if plan.capacity is not None:
        cap = _json(plan.capacity, capacity_module.JSON_NAMES)
        swa = {k: v for k in ("full_max_total_num_tokens", "swa_max_total_num_tokens") if (v := cap.pop(k)) is not None}
        # the SWA pools' keys after every earlier key of the section (appended, issue 32)
        d["capacity"] = {**cap, **memory_keys(plan), **answer_keys(plan), **swa}
        if plan.args.hisparse_ratio:   # appended (issue 30): the logical slots HiSparse schedules (size_full)
            d["capacity"]["hisparse_logical_tokens"] = plan.capacity.max_total_num_tokens * plan.args.hisparse_ratio
    if plan.hisparse_host is not None:   # appended (issue 30): its host KV copy per rank (HiSparseCoordinator)
        d["host"]["hisparse_kv_tokens"], d["host"]["hisparse_kv_bytes"] = plan.hisparse_host
    d["layers"] = m.by_kind()     # appended (issue 31): per layer kind, its layers and bytes
    return d


def answer_keys(plan: Plan) -> dict:
    """capacity.* keys of the book's answer (appended, issue 29): the requests of the profile's context
    that fit at once on a rank and which limit binds them (``derivations.requests_fit``), so that every
    consumer (the first page, the calculator check, comparisons) reads the plan's own figure."""
    c, ctx = plan.capacity, int(plan.profile.context_length)
    n, binds = capacity_module.requests_fit_at(c.requested_max_running_requests_per_worker, c.max_total_num_tokens,
                                               ctx, c.max_mamba_cache_size, plan.request.slots_per_request)
    return {"context_length": ctx, "requests_fit_at_context": n, "binds_at_context": binds}


def memory_keys(plan: Plan) -> dict:
    """capacity.* keys of the device-to-rest path (appended; null where the rest was given)."""
    if plan.memory is None:
        return {}
    return memory_plan_keys(plan.memory, plan.capacity.available_bytes, plan.profile.available_bytes is not None)


def load_plan(profile: Profile | str | None = None, overrides: dict | None = None) -> Plan:
    """The typed plan for a Profile, a shipped profile name or a YAML path (plus overrides)."""
    if not isinstance(profile, Profile):
        profile = load_profile(profile, overrides)
    elif overrides:
        profile = make_profile({**profile.model_dump(), **overrides})
    return compute_plan(profile)


def build_plan(profile: Profile | str | None = None, overrides: dict | None = None) -> dict:
    """The contract dict for a Profile, a shipped profile name or a YAML path."""
    return load_plan(profile, overrides).to_dict()
