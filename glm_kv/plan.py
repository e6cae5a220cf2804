"""The plan: every ledger for one (model, profile), as the JSON contract every consumer reads."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .capacity import CapacityLedger, capacity_ledger
from .errors import ProfileError
from .gpus import Gpu, resolve_gpu
from .host import HostLedger, host_ledger
from .capacity import GiB, effective_max_running_requests
from .memory import rest_for_profile
from .model import ModelConfig, load_model
from .parallel import ParallelLedger, parallel_ledger
from .profile import Profile, load_profile, make_profile, resolve_context_length
from .request import RequestLedger, request_ledger
from .tail import TailLedger, tail_ledger
from .token import TokenLedger, draft_token_count, token_ledger


@dataclass(frozen=True)
class Plan:
    profile: Profile
    model: ModelConfig
    gpu: Gpu
    parallel: ParallelLedger
    token: TokenLedger
    request: RequestLedger
    tail: TailLedger
    capacity: CapacityLedger | None
    host: HostLedger
    draft_tokens: int
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return plan_to_dict(self)


def _available(p: Profile, gpu: Gpu, par: ParallelLedger) -> tuple[int | None, str, float | None]:
    """Bytes left for the pools, where they come from, and SGLang's float GiB when derived."""
    if p.available_bytes is not None:
        return p.available_bytes, "available_bytes from the profile", None
    if p.weights_bytes is None:
        return None, "unknown (give available_bytes, or weights_bytes with gpu)", None
    rest_gib, mfs, how = rest_for_profile(p, gpu, par.attn_dp_size, effective_max_running_requests(p))
    avail = int(rest_gib * GiB)
    if avail <= 0:
        raise ProfileError("weights_bytes", f"weights ({p.weights_bytes} B) leave no memory for the pools "
                                            f"on a {gpu.name} at mem_fraction_static={mfs}")
    mm = "" if p.language_model_only else " - 100 MiB VLM cache"
    return avail, f"derived: {gpu.name} memory x {mfs} ({how}) - weights_bytes{mm}", rest_gib


def _validate(p: Profile, model: ModelConfig) -> None:
    if p.enable_hierarchical_cache and p.disable_radix_cache:
        raise ProfileError("enable_hierarchical_cache", "HiCache and disable_radix_cache are mutually "
                                                        "exclusive (HiCache lives on the radix tree)")
    if p.speculative_algorithm and model.num_nextn_predict_layers < 1:
        raise ProfileError("speculative_algorithm", "the model config has no MTP layer "
                                                    "(num_nextn_predict_layers is 0)")
    for f in ("speculative_num_draft_tokens", "speculative_num_steps", "speculative_eagle_topk"):
        if getattr(p, f) is not None and not p.speculative_algorithm:
            raise ProfileError(f, "needs speculative_algorithm (EAGLE or NEXTN)")
    if p.speculative_algorithm and p.speculative_num_steps is None and (
            p.speculative_num_draft_tokens is not None or p.speculative_eagle_topk is not None):
        raise ProfileError("speculative_num_draft_tokens" if p.speculative_num_draft_tokens is not None
                           else "speculative_eagle_topk",
                           "needs speculative_num_steps: without it SGLang 0.5.23 picks steps, topk and "
                           "draft tokens itself and asserts that none of them was given")


def compute_plan(p: Profile) -> Plan:
    """Every ledger for a validated profile; raises ProfileError for combinations SGLang refuses."""
    model = load_model(p.model)
    p = resolve_context_length(p, model)
    _validate(p, model)
    gpu = resolve_gpu(p)
    par = parallel_ledger(model, p)
    tok = token_ledger(model, p, gpu)
    req = request_ledger(model, p, par.linear_attn_tp_size, tok.page_size)
    draft = draft_token_count(p)
    notes: list[str] = []
    avail, source, rest_gib = _available(p, gpu, par)
    cap = None
    if avail is not None:
        cap = capacity_ledger(p, available_bytes=avail, available_source=source,
                              attn_dp=par.attn_dp_size, slot=req.state_slot_bytes,
                              ratio=req.slots_per_request, cell_size=tok.cell_size_bytes,
                              page_size=tok.page_size, draft_tokens=draft, context_len=p.context_length,
                              rest_gib=rest_gib)
        if cap.capped_message:
            notes.append(cap.capped_message)
    mrr = effective_max_running_requests(p)
    if mrr != p.max_running_requests:
        notes.append(f"max_running_requests unset under speculative decoding: SGLang resets it to {mrr}")
    reqs = cap.max_running_requests if cap else (None if mrr is None else max(1, mrr // par.attn_dp_size))
    if reqs is None:
        notes.append("compress tail not sized: max_running_requests is automatic and capacity is unknown")
        tail = tail_ledger(model, 0, draft)
    else:
        tail = tail_ledger(model, reqs, draft)
    host = host_ledger(model, p, tok, req.state_slot_bytes,
                       cap.max_total_num_tokens if cap else None,
                       cap.max_mamba_cache_size if cap else None)
    if cap is not None and p.sglang_layout == "article":
        notes.append("layout 'article': capacity sizing follows SGLang 0.5.23's order; the article "
                     "does not describe it")
    if draft:
        notes.append("MTP: counted are the draft layer's KV + indexer in cell_size, the verify scratch "
                     "in the mamba budget and the wider compress tail; not modelled: the draft "
                     "worker's CUDA-graph buffers")
    if p.page_size is not None and p.page_size != tok.page_size:
        notes.append(f"page_size {p.page_size} is overridden: this model runs with {tok.page_size}")
    return Plan(p, model, gpu, par, tok, req, tail, cap, host, draft, tuple(notes))


def plan_to_dict(plan: Plan) -> dict:
    """The plan-contract JSON: keys are never renamed or dropped; new keys may be added."""
    tok, req, tail, par = plan.token, plan.request, plan.tail, plan.parallel
    d = {
        "profile": {"name": plan.profile.label, **plan.profile.model_dump(exclude={"name"})},
        "model": {
            "name": plan.model.name, "source": plan.model.source,
            "num_hidden_layers": plan.model.num_hidden_layers,
            "full_attention_layers": list(plan.model.full_attention_layers),
            "linear_attention_layers": list(plan.model.linear_attention_layers),
        },
        "gpu": asdict(plan.gpu),
        "parallel": asdict(par),
        "token": asdict(tok),
        "request": {**asdict(req), "conv_state_shape": list(req.conv_state_shape),
                    "temporal_state_shape": list(req.temporal_state_shape)},
        "tail": asdict(tail),
        "host": {**asdict(plan.host), "entries": list(plan.host.entries),
                 "entry_classes": list(plan.host.entry_classes)},
        "speculative": {"draft_tokens": plan.draft_tokens, "draft_layers": tok.draft_layers},
        "notes": list(plan.notes),
    }
    if plan.capacity is not None:
        d["capacity"] = asdict(plan.capacity)
    return d


def build_plan(profile: Profile | str | None = None, overrides: dict | None = None) -> dict:
    """The contract dict for a Profile, a shipped profile name or a YAML path."""
    if not isinstance(profile, Profile):
        profile = load_profile(profile, overrides)
    elif overrides:
        profile = make_profile({**profile.model_dump(), **overrides})
    return compute_plan(profile).to_dict()
