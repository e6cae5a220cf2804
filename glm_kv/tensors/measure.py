"""Allocate SGLang-shaped tensors and compare what was really allocated with the ledgers.

What is counted: the bytes of each tensor's *storage* (``untyped_storage().nbytes()``), with
tensors that share a storage counted once. Storage bytes must equal the ledger exactly, on every
device. On CUDA, ``torch.cuda.memory_allocated()`` / ``memory_reserved()`` grow by the caching
allocator's *blocks* and *segments*, not by the storages: each buffer's block is predicted by
``cuda_allocator`` (a model of torch 2.13's rules, started from the allocator's own snapshot) and
the prediction is checked against the real deltas; the difference from the storage is shown as the
allocator's overhead beside the ledger (on the CPU too, as what a GPU would add).

What it is compared with: the plan's scalar ledger figures (``kv_bytes_per_token``,
``indexer_page_bytes``, ``conv_state_bytes``, ``temporal_state_bytes``, ``tail.bytes``,
``host.kv_bytes_per_token``, ...), turned into bytes per buffer by the ``ledger_*`` functions
below. Those functions never look at a tensor shape, so a wrong ledger figure makes the
comparison fail (``tests/test_measure.py`` shows it). Only SGLang's *counting* rules enter them
(how many rows: ``size + page_size`` for the padding page, ``(size + page_size + 1) // page_size``
index pages, ``slots + 1`` for the padding slot).

How big: a real allocation that fits a budget (default 4 GiB, or ``GLM_KV_BUDGET_BYTES``, never more
than the free memory of the device), at two reduced sizes. Every buffer must grow exactly linearly
between them, with the ledger's per-unit figure as the slope; the full profile is then reported as
*extrapolated*: measured per unit x count. On a GPU the full profile is allocated when it fits in
free memory. Anything bigger than the budget or the free memory is refused before allocating,
with one line saying how much was asked and how much is free.
"""
from __future__ import annotations

import gc
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Optional

from ..units import fmt_bytes, index_page_count
from .budget import AllocationRefused, check_budget, free_memory_bytes, storage_bytes, storage_key
from .cuda_allocator import AllocatorConfig, CachingAllocatorModel, live_model
from .pool_objects import default_device, torch_dtype
from .memory_pool_host import not_on_host
from .model_pools import (ModelHostPools, NotBuilt, build_device_pools, check_host_buildable, geometry_for,
                          host_shape_table, plan_requests_per_worker)

if TYPE_CHECKING:  # the plan is only read here, never built: no ledger formula is imported
    from ..ledgers.plan import Plan



# --------------------------------------------------------------------------- the ledger side
# Each function turns the plan's ledger figures into the bytes one buffer should hold. They read
# the ledgers' fields only (never a tensor or a shape derived in model_pools), and only SGLang's
# *counting* rules enter them (size + page_size rows for the padding page,
# (size + page_size + 1) // page_size index pages, slots + 1 for the padding slot). A split that
# does not come out whole stays a fraction, so it can never equal a measured byte count.


def _whole(x: Fraction) -> int | float:
    """A ledger figure for the report: an int when whole, else the (non-matching) float."""
    return int(x) if x.denominator == 1 else float(x)


def ledger_kv_buffer_bytes(plan: Plan, size: int) -> Fraction:
    """One full layer's kv_buffer: (size + page_size) token rows x (token.kv_bytes_per_token / full layers)."""
    tok = plan.token
    return (size + tok.page_size) * Fraction(tok.kv_bytes_per_token, tok.num_full_layers)


def _kv_spec(plan: Plan, kind: str):
    """The ledger's first layer spec of this kind (its head dims decide SGLang's K/V split)."""
    return next((s for s in plan.layers.specs() if getattr(s, "kind", None) == kind), None) if plan.layers else None


def _kv_split(spec) -> tuple[Fraction, Fraction]:
    """(K share, V share) of one layer's K+V bytes per the ledger's spec: (1, 0) when K and V have one
    shape (0.5.23's ``_create_buffers_normal`` makes them the halves of one storage, counted on K)."""
    if spec is None or spec.head_dim == spec.v_head_dim:
        return Fraction(1), Fraction(0)
    whole = spec.head_dim + spec.v_head_dim
    return Fraction(spec.head_dim, whole), Fraction(spec.v_head_dim, whole)


def ledger_mha_buffer_bytes(plan: Plan, size: int, v: bool) -> Fraction:
    """One full layer's k_buffer (or v_buffer): (size + page_size) rows x token.kv_bytes_per_token / full
    layers, K's share (all of it when K and V share one storage) or V's."""
    tok = plan.token
    share = _kv_split(_kv_spec(plan, "gqa_kv"))[1 if v else 0]
    return (size + tok.page_size) * Fraction(tok.kv_bytes_per_token, tok.num_full_layers) * share


def ledger_swa_buffer_bytes(plan: Plan, swa_size: int, v: bool) -> Fraction:
    """One sliding-window layer's k_buffer (or v_buffer) in SWAKVPool's SWA pool: (swa_size + page_size)
    rows x token.swa_kv_bytes_per_token / token.num_swa_layers, split as ``ledger_mha_buffer_bytes``."""
    tok = plan.token
    share = _kv_split(_kv_spec(plan, "sliding_window_kv"))[1 if v else 0]
    return (swa_size + tok.page_size) * Fraction(tok.swa_kv_bytes_per_token, tok.num_swa_layers) * share


def ledger_index_buffer_bytes(plan: Plan, size: int) -> Fraction:
    """One full layer's IndexKeyCache buffer: (size + page_size + 1) // page_size pages x token.indexer_page_bytes."""
    tok = plan.token
    return Fraction(index_page_count(size, tok.indexer_tokens_per_page) * tok.indexer_page_bytes)


def ledger_compress_tail_bytes(plan: Plan) -> Fraction:
    """One of _compress_tail_k / _compress_tail_score for one layer: tail.bytes / (2 tensors x tail layers)."""
    tail = plan.tail
    if not tail.num_layers:
        return Fraction(0)
    return Fraction(tail.bytes, 2 * tail.num_layers)


def ledger_conv_state_bytes(plan: Plan, mamba_size: int) -> Fraction:
    """MambaPool conv: (slots + 1) x KDA layers x request.conv_state_bytes."""
    req = plan.request
    return Fraction((mamba_size + 1) * req.num_linear_layers * req.conv_state_bytes)


def ledger_temporal_state_bytes(plan: Plan, mamba_size: int) -> Fraction:
    """MambaPool temporal: (slots + 1) x KDA layers x request.temporal_state_bytes."""
    req = plan.request
    return Fraction((mamba_size + 1) * req.num_linear_layers * req.temporal_state_bytes)


def ledger_intermediate_ssm_bytes(plan: Plan, spec_state_size: int) -> Fraction:
    """EAGLE verify scratch: (requests + 1) x draft tokens x KDA layers x request.temporal_state_bytes."""
    req = plan.request
    return Fraction((spec_state_size + 1) * plan.args.verify_state_draft_tokens * req.num_linear_layers * req.temporal_state_bytes)


def ledger_intermediate_conv_window_bytes(plan: Plan, spec_state_size: int) -> Fraction:
    """EAGLE verify scratch: (requests + 1) x draft tokens x KDA layers x request.conv_state_bytes."""
    req = plan.request
    return Fraction((spec_state_size + 1) * plan.args.verify_state_draft_tokens * req.num_linear_layers * req.conv_state_bytes)


def _dedup_window(plan: Plan) -> Optional[Fraction]:
    """The share of the dense verify conv windows SGLang 0.5.23 allocates on CUDA for this plan: (D + K - 2) /
    (D x (K - 1)) when ``conv_window_dedup_enabled`` (a non-KDA state spec, a linear draft chain), else None
    (dense). D from the resolved draft tokens, K from the ledger's state spec."""
    state = next((s for s in plan.layers.specs() if hasattr(s, "conv_kernel")), None) if plan.layers else None
    topk = getattr(plan.profile, "speculative_eagle_topk", None)
    draft = plan.args.verify_state_draft_tokens
    if state is None or getattr(state, "kind", "") == "kda_state" or not draft or (topk is not None and topk > 1):
        return None
    return Fraction(draft + state.conv_kernel - 2, draft * (state.conv_kernel - 1))


def ledger_dedup_conv_window_bytes(plan: Plan, spec_state_size: int) -> Fraction:
    """The deduplicated verify conv window: the dense figure (``ledger_intermediate_conv_window_bytes``) x
    (D + K - 2) / (D x (K - 1)): one shared (D + K - 2)-column window per (layer, slot)."""
    return ledger_intermediate_conv_window_bytes(plan, spec_state_size) * _dedup_window(plan)


def ledger_host_kv_bytes(plan: Plan, host_tokens: int) -> Fraction:
    """MLATokenToKVPoolHost: host tokens x host.kv_bytes_per_token."""
    return Fraction(host_tokens * plan.host.kv_bytes_per_token)


def ledger_host_indexer_bytes(plan: Plan, host_tokens: int) -> Fraction:
    """DSAIndexerPoolHost: (host_tokens + page + 1) // page pages x page x host.indexer_bytes_per_token."""
    ps = plan.host.kv_page_size
    return Fraction(index_page_count(host_tokens, ps) * ps * plan.host.indexer_bytes_per_token)


def ledger_host_mamba_bytes(plan: Plan, host_slots: int) -> Fraction:
    """MambaPoolHost: host slots x host.mamba_slot_bytes."""
    return Fraction(host_slots * plan.host.mamba_slot_bytes)


NOT_LEDGERED = {
    "req_to_token_pool.req_to_token": "no glm_kv ledger counts it (SGLang sizes it before the pools: "
                                      "(max_reqs + 1) x (context_len + extra) int32)",
}


def ledger_bytes_for(name: str, plan: Plan, geometry, host=None) -> Optional[tuple[Fraction, str]]:
    """The ledger's bytes for the buffer called ``name`` at the geometry's sizes, and which ledger
    fields they come from (None: no ledger counts this buffer)."""
    g = geometry
    if name.startswith("full_kv_pool.kv_buffer["):
        return ledger_kv_buffer_bytes(plan, g.size), "token.kv_bytes_per_token"
    if name.startswith(("full_kv_pool.k_buffer[", "full_kv_pool.v_buffer[")):
        return (ledger_mha_buffer_bytes(plan, g.size, ".v_buffer[" in name),
                "token.kv_bytes_per_token (K/V split by the GQA spec's head dims)")
    if name.startswith(("swa_kv_pool.k_buffer[", "swa_kv_pool.v_buffer[")):
        return (ledger_swa_buffer_bytes(plan, g.swa_size, ".v_buffer[" in name),
                "token.swa_kv_bytes_per_token (K/V split by the SWA spec's head dims)")
    if name.startswith("full_kv_pool.index_key_cache.buffer["):
        i = int(name.rsplit("[", 1)[1].rstrip("]"))
        return ((Fraction(0) if g.skip_topk_layers[i] else ledger_index_buffer_bytes(plan, g.size)),
                "token.indexer_page_bytes")
    if name.startswith(("full_kv_pool._compress_tail_k[", "full_kv_pool._compress_tail_score[")):
        i = int(name.rsplit("[", 1)[1].rstrip("]"))
        return (Fraction(0) if g.skip_topk_layers[i] else ledger_compress_tail_bytes(plan)), "tail.bytes"
    if name.startswith("mamba_pool.conv["):
        return ledger_conv_state_bytes(plan, g.mamba_size), "request.conv_state_bytes"
    if name == "mamba_pool.temporal":
        return ledger_temporal_state_bytes(plan, g.mamba_size), "request.temporal_state_bytes"
    if name == "mamba_pool.intermediate_ssm":
        return ledger_intermediate_ssm_bytes(plan, g.spec_state_size), "request.temporal_state_bytes"
    if name.startswith("mamba_pool.intermediate_conv_window["):
        if _dedup_window(plan) is not None:
            return (ledger_dedup_conv_window_bytes(plan, g.spec_state_size),
                    "request.conv_state_bytes x (D + K - 2) / (D x (K - 1)) (CUDA's deduplicated window)")
        return ledger_intermediate_conv_window_bytes(plan, g.spec_state_size), "request.conv_state_bytes"
    if host is not None:
        if name.startswith(("MLATokenToKVPoolHost", "MHATokenToKVPoolHost")):
            return ledger_host_kv_bytes(plan, host.kv.size), "host.kv_bytes_per_token"
        if name.startswith("DSAIndexerPoolHost"):
            return ledger_host_indexer_bytes(plan, host.kv.size), "host.indexer_bytes_per_token"
        req = plan.request
        if name.startswith("MambaPoolHost[mamba].conv_buffer["):
            return Fraction(host.mamba.size * req.num_linear_layers * req.conv_state_bytes), "request.conv_state_bytes"
        if name.startswith("MambaPoolHost[mamba].temporal_buffer"):
            return (Fraction(host.mamba.size * req.num_linear_layers * req.temporal_state_bytes),
                    "request.temporal_state_bytes")
    return None


# --------------------------------------------------------------------------- one allocation


@dataclass
class BufferRow:
    name: str
    shape: list[int]
    dtype: str
    measured_bytes: int
    ledger_bytes: Optional[int | float]    # a float only when the ledger's split is not whole (a mismatch)
    match: Optional[bool]
    where: str = "device"
    shares_storage_with: Optional[str] = None
    ledger_source: Optional[str] = None    # the ledger field(s) the expected bytes come from, or why none
    cuda_block_bytes: Optional[int] = None  # the caching allocator's block for this storage (device rows)


@dataclass
class Allocation:
    sizes: dict[str, int]
    device: str
    rows: list[BufferRow]
    device_storage_bytes: int
    host_storage_bytes: int
    cuda_allocated_delta: Optional[int] = None
    cuda_expected_delta: Optional[int] = None
    checks: list[dict] = field(default_factory=list)
    cuda_reserved_delta: Optional[int] = None
    cuda_expected_reserved: Optional[int] = None
    allocator: str = ""                    # which allocator model the block figures come from

    @property
    def cuda_overhead_bytes(self) -> Optional[int]:
        """Allocator blocks minus device storages: what a GPU holds beyond the ledger's bytes."""
        blocks = [r.cuda_block_bytes for r in self.rows if r.where == "device" and r.cuda_block_bytes is not None]
        if not blocks:
            return None
        return sum(blocks) - self.device_storage_bytes

    @property
    def ok(self) -> bool:
        return all(r.match is not False for r in self.rows) and all(c["match"] for c in self.checks)


def _group_of(name: str) -> str:
    if name.startswith(("full_kv_pool.kv_buffer", "full_kv_pool.index_key_cache", "full_kv_pool.k_buffer",
                        "full_kv_pool.v_buffer")):
        return "token"
    if name.startswith("swa_kv_pool."):
        return "swa_token"
    if name.startswith(("mamba_pool.conv", "mamba_pool.temporal")):
        return "mamba"
    if name.startswith("mamba_pool.intermediate"):
        return "spec"
    if name.startswith(("MLATokenToKVPoolHost", "MHATokenToKVPoolHost", "DSAIndexerPoolHost")):
        return "host_token"
    if name.startswith("MambaPoolHost"):
        return "host_mamba"
    return "fixed"


def allocate_and_measure(plan: Plan, geometry, device: str, *, host_ratio: Optional[float] = None,
                         budget: Optional[int] = None, fill: str = "empty") -> Allocation:
    """Build the pools (and host pools when ``host_ratio``), measure every buffer, free them."""
    import torch

    asked = geometry.shape_bytes()
    host_asked = _host_shape_bytes(geometry, host_ratio) if host_ratio is not None else 0
    what = f"the pools of profile {geometry.profile_name or '?'}"
    if device == "cpu":  # device and host pools share the CPU memory
        check_budget(asked + host_asked, "cpu", budget,
                     what=what + (" with their HiCache host pools" if host_ratio is not None else ""))
    else:
        check_budget(asked, device, budget, what=what)
        if host_ratio is not None:
            check_budget(host_asked, "cpu", budget, what="the HiCache host pools")
    cuda = device.startswith("cuda")
    model, allocator = _allocator_model(device)
    if cuda:
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)
    pools = build_device_pools(geometry, device=device, fill=fill, budget=budget)  # the same budget, not the default
    if cuda:
        torch.cuda.synchronize(device)
        after = torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)
    host = None
    if host_ratio is not None:
        try:
            host = ModelHostPools(pools, host_ratio, fill=fill)
        except (RuntimeError, MemoryError) as e:   # pinned host memory can fail below MemAvailable (CUDA OOM)
            del pools
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise AllocationRefused(f"could not allocate the HiCache host pools on cpu ({fmt_bytes(host_asked, 'GiB')}"
                                    f"{', pinned' if cuda else ''}): {type(e).__name__}: {first}") from None
    try:
        rows: list[BufferRow] = []
        owner: dict[tuple[str, int], str] = {}
        named = [(n, b, "device") for n, b in pools.named_buffers()]
        blocks = _predict_blocks(model, pools)
        if host is not None:
            named += [(n, b, "host") for n, b in host.named_buffers()]
        for name, t, where in named:
            key = storage_key(t)
            shared = owner.get(key)
            owner.setdefault(key, name)
            measured = t.untyped_storage().nbytes() if shared is None else 0
            found = ledger_bytes_for(name, plan, geometry, host)
            if found is None:
                ledger, match, source = None, None, NOT_LEDGERED.get(name, "not in a ledger")
            else:
                want, source = found
                # a buffer sharing another's storage holds no bytes of its own
                ledger, match = _whole(want), (measured == want) if shared is None else True
            rows.append(BufferRow(name, list(t.shape), str(t.dtype).removeprefix("torch."), measured,
                                  ledger, match, where, shared, source,
                                  blocks.get(name) if where == "device" and blocks is not None else None))
        dev_bytes = storage_bytes(b for n, b in pools.named_buffers())
        host_bytes = storage_bytes(b for n, b in host.named_buffers()) if host is not None else 0
        checks = []
        kv0 = next((t for n, t in pools.named_buffers() if n == "full_kv_pool.kv_buffer[0]"), None)
        if kv0 is not None:
            row = Fraction(kv0.untyped_storage().nbytes(), kv0.shape[0])
            want = plan.token.kv_row_bytes
            checks.append(dict(check="full_kv_pool.kv_buffer: bytes of one token row, one layer vs token.kv_row_bytes",
                               measured=_whole(row), ledger=want, match=row == want))
        k0 = next((t for n, t in pools.named_buffers() if n == "full_kv_pool.k_buffer[0]"), None)
        if k0 is not None:   # MHA: layer 0's K and V storages (one when fused) per token row
            v0 = next(t for n, t in pools.named_buffers() if n == "full_kv_pool.v_buffer[0]")
            row = Fraction(storage_bytes([k0, v0]), k0.shape[0])
            want = plan.token.kv_row_bytes
            checks.append(dict(check="full_kv_pool.k_buffer[0] + v_buffer[0]: bytes of one token row vs "
                                     "token.kv_row_bytes", measured=_whole(row), ledger=want, match=row == want))
        if host is not None and host.mamba is not None:
            m = sum(r.measured_bytes for r in rows if r.name.startswith("MambaPoolHost"))
            want = ledger_host_mamba_bytes(plan, host.mamba.size)
            checks.append(dict(check=f"MambaPoolHost: {host.mamba.size} slots x host.mamba_slot_bytes",
                               measured=m, ledger=_whole(want), match=m == want))
        cuda_expected = reserved_expected = None
        if cuda and blocks is not None:
            cuda_expected = sum(v for v in blocks.values())
            reserved_expected = model.reserved_added
            checks.append(dict(check="torch.cuda.memory_allocated() delta = the caching allocator's blocks "
                                     "(cuda_allocator model)",
                               measured=after[0] - before[0], ledger=cuda_expected,
                               match=after[0] - before[0] == cuda_expected))
            checks.append(dict(check="torch.cuda.memory_reserved() delta = the segments the model opens",
                               measured=after[1] - before[1], ledger=reserved_expected,
                               match=after[1] - before[1] == reserved_expected))
        sizes = dict(tokens=geometry.size, mamba_slots=geometry.mamba_size,
                     spec_state_size=geometry.spec_state_size,
                     max_running_requests=geometry.max_running_requests_per_worker, context_len=geometry.context_len)
        if getattr(geometry, "swa_layer_ids", ()):
            sizes.update(swa_tokens=geometry.swa_size)
        if host is not None:
            sizes.update(host_tokens=host.kv.size, host_mamba_slots=host.mamba.size if host.mamba is not None else 0)
        return Allocation(sizes, device, rows, dev_bytes, host_bytes,
                          None if not cuda else after[0] - before[0], cuda_expected, checks,
                          None if not cuda else after[1] - before[1], reserved_expected, allocator)
    finally:
        del pools, host
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()


def allocation_order(pools) -> list[tuple[str, object]]:
    """Device buffers in the order DevicePools creates them (req_to_token, the MambaPool, then the
    token pools), which is the order the caching allocator sees them: its best fit depends on it."""
    rank = lambda n: 0 if n.startswith("req_to_token") else 1 if n.startswith("mamba_pool.") else 2  # noqa: E731
    named = list(pools.named_buffers())
    return sorted(named, key=lambda nb: rank(nb[0]))  # sorted() is stable: order within a pool kept


def _allocator_model(device: str) -> tuple[Optional[CachingAllocatorModel], str]:
    """The model the block figures come from: the live allocator's state on CUDA, an empty cache
    elsewhere (what a GPU would do); None when the configured allocator is not modelled."""
    try:
        if device.startswith("cuda"):
            import torch

            torch.cuda.synchronize(device)
            return live_model(device), "torch CUDA caching allocator (live state, cuda_allocator model)"
        config = AllocatorConfig.from_env()
        return CachingAllocatorModel(config), f"predicted for CUDA, empty cache ({config.source})"
    except ValueError as e:  # NotModelled, or a setting torch itself refuses
        return None, f"not predicted: {e}"


def _predict_blocks(model: Optional[CachingAllocatorModel], pools) -> Optional[dict[str, int]]:
    """The block each device storage takes, replayed in allocation order (shared storages once:
    a view gets 0)."""
    if model is None:
        return None
    out: dict[str, int] = {}
    seen: set = set()
    for name, t in allocation_order(pools):
        key = storage_key(t)
        out[name] = 0 if key in seen else model.malloc(t.untyped_storage().nbytes()).allocated
        seen.add(key)
    return out


def _host_shape_bytes(g, ratio: float) -> int:
    import math

    return sum(math.prod(shape) * torch_dtype(dt).itemsize for _, shape, dt in host_shape_table(g, ratio))


# --------------------------------------------------------------------------- the whole check


@dataclass
class MeasureReport:
    profile: str
    layout: str
    device: str
    mode: str                      # "reduced" or "full"
    allocations: list[Allocation]
    linear: list[dict]
    full_profile: list[dict]
    not_allocated: list[dict]
    not_on_host: list[dict]
    cuda: str
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(a.ok for a in self.allocations) and all(c["match"] for c in self.linear)

    @property
    def mismatches(self) -> list[str]:
        """One line per buffer (or check) whose measured bytes differ from the ledger, naming it."""
        out: list[str] = []
        for a in self.allocations:
            for r in a.rows:
                if r.match is False:
                    out.append(f"MISMATCH {r.name} at {a.sizes}: measured {r.measured_bytes:,} B "
                               f"(shape {tuple(r.shape)} {r.dtype}), ledger {r.ledger_bytes:,} B from {r.ledger_source}")
            for c in a.checks:
                if not c["match"]:
                    out.append(f"MISMATCH {c['check']} at {a.sizes}: measured {c['measured']:,}, ledger {c['ledger']:,}")
        for c in self.linear:
            if not c["match"]:
                out.append(f"MISMATCH {c['group']} per {c['unit']}: measured {c['measured_per_unit']:,} B, "
                           f"ledger {c['ledger_per_unit']:,} B ({c['ledger_source']})")
        return out

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ok"] = self.ok
        d["mismatches"] = self.mismatches
        for a, ad in zip(self.allocations, d["allocations"]):
            ad["ok"] = a.ok
        return d


def _sum(alloc: Allocation, group: str) -> int:
    return sum(r.measured_bytes for r in alloc.rows if _group_of(r.name) == group)


def _counts(plan: Plan) -> tuple[int, int, int, str]:
    """Token and mamba-slot counts of the full profile, and where they come from."""
    cap = plan.capacity
    reqs = plan_requests_per_worker(plan)
    if cap is not None:
        return (cap.max_total_num_tokens, cap.max_mamba_cache_size, reqs,
                "capacity (max_total_num_tokens, max_mamba_cache_size)")
    ps = plan.token.page_size
    tokens = -(-plan.args.context_length * reqs // ps) * ps
    return (tokens, plan.request.slots_per_request * reqs, reqs,
            f"workload: {reqs} requests x context_length (the plan has no capacity: available_bytes unknown)")


def _swa_count(plan: Plan) -> int:
    """The SWA pool's tokens of the full profile (hybrid SWA): the capacity's, else the full pool's x ratio
    rounded down to whole pages, as ``HybridSWAPoolConfigurator``; 0 without an SWA pool."""
    tok, cap = plan.token, plan.capacity
    if tok.swa_kv_bytes_per_token is None:
        return 0
    if cap is not None and cap.swa_max_total_num_tokens:
        return cap.swa_max_total_num_tokens
    tokens = _counts(plan)[0]
    return max(tok.page_size, int(tokens * tok.swa_full_tokens_ratio) // tok.page_size * tok.page_size)


def _base_geometry(plan: Plan, reqs: int):
    """The one builder's geometry for this plan (``ModelGeometry``, for every model)."""
    return geometry_for(plan, max_running_requests_per_worker=reqs, profile_name=plan.profile.label)


def _full_sizes(base, tokens: int, mamba: int, spec_rows: int, swa: int):
    return base.with_sizes(size=tokens, mamba_size=mamba, spec_state_size=spec_rows, swa_size=swa or None)


HOST_PINNED_SHARE = 0.5   # the share of free host memory a full-profile run pins for HiCache host pools


def measure_profile(plan: Plan, *, device: Optional[str] = None, budget: Optional[int] = None,
                    full: Optional[bool] = None, host: Optional[bool] = None,
                    sizes: tuple[int, int] = (2, 4), fill: str = "empty") -> MeasureReport:
    """Measure the pools of a plan: two reduced sizes + linear check + extrapolation, or the full profile.

    ``device``: "auto" (or None) is CUDA when available, else the CPU. ``sizes``: token pages at
    the two reduced sizes; mamba slots and verify-scratch rows are 1 and 2. ``full``: True
    allocates the full profile (refused when it does not fit), None does so on CUDA when it
    fits, False never. ``host``: allocate HiCache host pools too (default: when the profile
    enables HiCache).
    """
    import torch

    device = default_device() if device in (None, "auto") else device
    prof = plan.profile
    if host is None:
        host = prof.enable_hierarchical_cache
    ratio = float(prof.hicache_ratio) if host else None
    tokens_full, mamba_full, reqs, count_source = _counts(plan)
    tok, req, cap = plan.token, plan.request, plan.capacity
    ps = tok.page_size
    # shapes from the model config + resolved arguments only; the plan gives counts, never bytes
    base = _base_geometry(plan, reqs)
    if host:
        check_host_buildable(plan, base)
    spec = bool(getattr(base, "speculative_num_draft_tokens", 0))   # 0 for a model without state layers
    swa_full = _swa_count(plan)
    g_full = _full_sizes(base, tokens_full, mamba_full, reqs if spec else 0, swa_full)
    cuda_note = (f"CUDA: {torch.cuda.get_device_name(0)}" if torch.cuda.is_available()
                 else "CUDA: not available here; the allocator's bytes are predicted (cuda_allocator), "
                      "the allocator-delta check was skipped")
    allocations: list[Allocation] = []
    notes: list[str] = []
    mode = "reduced"
    if full is None and device.startswith("cuda"):
        need, free = g_full.shape_bytes(), free_memory_bytes(device)
        full = need <= 0.95 * free  # leave room for the caching allocator's segment rounding
        host_need = _host_shape_bytes(g_full, ratio) if host else 0
        if full and host_need > HOST_PINNED_SHARE * free_memory_bytes("cpu"):
            full = False   # pinned host memory: cudaHostAlloc failed at 80 of 125 GiB free on a lent H200
            notes.append(f"full profile not allocated: its HiCache host pools ({fmt_bytes(host_need, 'GiB')}, "
                         f"pinned) exceed {HOST_PINNED_SHARE:.0%} of the free host memory; measured two "
                         f"reduced sizes instead")
        elif full:
            notes.append(f"full profile allocated: {fmt_bytes(need, 'GiB')} fits the {fmt_bytes(free, 'GiB')} "
                         f"free on {device} (pass full=False / --device cpu for the reduced sizes)")
        else:
            notes.append(f"full profile not allocated: asked {fmt_bytes(need, 'GiB')}, "
                         f"free {fmt_bytes(free, 'GiB')}; measured two reduced sizes instead")
    if host and getattr(prof, "hicache_size", None):
        if full:   # SGLang sizes the full host pools from --hicache-size: not built here
            raise NotBuilt("hicache_size", "measure --full sizes the host pools by hicache_ratio only; "
                                           "drop --host or --full, or give hicache_ratio")
        notes.append("hicache_size: the reduced host pools are sized by hicache_ratio (bytes per host token and "
                     "slot are what is checked); the plan's host sizes from hicache_size are not allocated")
    if full:
        mode = "full"
        # the budget does not cap a full-profile run on a GPU, the free memory does
        big = budget if budget is not None else (1 << 62 if device.startswith("cuda") else None)
        allocations.append(allocate_and_measure(plan, g_full, device, host_ratio=ratio, budget=big, fill=fill))
    else:
        for i, pages in enumerate(sizes):
            g = base.with_sizes(size=pages * ps, mamba_size=i + 1, spec_state_size=(i + 1) if spec else 0)
            allocations.append(allocate_and_measure(plan, g, device, host_ratio=ratio, budget=budget, fill=fill))
    linear: list[dict] = []
    full_rows: list[dict] = []
    draft = tok.draft_bytes_per_token
    if mode == "reduced":
        a, b = allocations
        if swa_full:   # hybrid SWA: the cell size blends both pools; each pool is its own unit
            units = [("token", "tokens", tok.kv_bytes_per_token + tok.indexer_bytes_per_token,
                      "kv_bytes_per_token + indexer_bytes_per_token (the full pool)"),
                     ("swa_token", "swa_tokens", tok.swa_kv_bytes_per_token, "swa_kv_bytes_per_token")]
        else:
            units = [("token", "tokens", tok.cell_size_bytes - draft,
                      "cell_size_bytes" + (" - draft_bytes_per_token (draft pool not allocated)" if draft else ""))]
        units.append(("mamba", "mamba_slots", req.state_slot_bytes, "state_slot_bytes"))
        if spec and _dedup_window(plan) is not None:   # allocated < SGLang's dense reservation: per buffer
            per_req = _whole(ledger_intermediate_ssm_bytes(plan, 0) + ledger_dedup_conv_window_bytes(plan, 0))
            units.append(("spec", "spec_state_size", per_req, "draft_tokens x request.temporal_state_bytes + the "
                                                              "deduplicated conv window, per request (x layers)"))
        elif spec:
            if cap is not None and cap.spec_scratch_bytes:
                per_req = _whole(Fraction(cap.spec_scratch_bytes, cap.max_running_requests_per_worker + 1))
                units.append(("spec", "spec_state_size", per_req,
                              "capacity.spec_scratch_bytes / (max_running_requests + 1)"))
            else:
                units.append(("spec", "spec_state_size", plan.args.verify_state_draft_tokens * req.state_slot_bytes,
                              "draft_tokens x state_slot_bytes"))
        if host:
            units.append(("host_token", "host_tokens",
                          plan.host.kv_bytes_per_token + plan.host.indexer_bytes_per_token,
                          "host.kv_bytes_per_token + host.indexer_bytes_per_token"))
            if base.num_linear_layers:
                units.append(("host_mamba", "host_mamba_slots", plan.host.mamba_slot_bytes,
                              "host.mamba_slot_bytes"))
        counts = {"token": tokens_full, "mamba": mamba_full, "spec": reqs, "swa_token": swa_full}
        for group, unit, want, src in units:
            ba, bb = _sum(a, group), _sum(b, group)
            na, nb = a.sizes[unit], b.sizes[unit]
            slope, rem = divmod(bb - ba, nb - na)
            intercept = ba - slope * na
            linear.append(dict(group=group, unit=unit, sizes=[na, nb], bytes=[ba, bb],
                               measured_per_unit=slope, exact=rem == 0, ledger_per_unit=want,
                               ledger_source=src, fixed_bytes=intercept,
                               match=rem == 0 and slope == want))
            if group in counts and (counts[group] or group != "mamba"):   # no state pool: no mamba row
                n = counts[group]
                full_rows.append(dict(group=group, count=n, count_source=count_source if group not in ("spec", "swa_token")
                                      else "max_running_requests per worker" if group == "spec"
                                      else "capacity.swa_max_total_num_tokens" if cap is not None
                                      else "the full pool's tokens x swa_full_tokens_ratio",
                                      bytes=intercept + slope * n,
                                      formula=f"{intercept:,} + {slope:,} x {n:,}",
                                      label="extrapolated: measured per unit x count (not allocated)"))
        fixed_a, fixed_b = _sum(a, "fixed"), _sum(b, "fixed")
        linear.append(dict(group="fixed", unit="-", sizes=[0, 0], bytes=[fixed_a, fixed_b],
                           measured_per_unit=0, exact=True, ledger_per_unit=0,
                           ledger_source="req_to_token and compress tail do not grow with the pools",
                           fixed_bytes=fixed_a, match=fixed_a == fixed_b))
        if cap is not None:
            for r in full_rows:
                if r["group"] == "token":
                    # the plan's token pool includes the draft layer, which is not allocated here
                    plan_bytes = cap.token_pool_bytes - draft * cap.max_total_num_tokens
                    if swa_full:   # the plan's token pool is the full and the SWA pools together
                        plan_bytes -= swa_full * tok.swa_kv_bytes_per_token
                    r["plan_token_pool_bytes"] = plan_bytes
                    r["difference"] = r["bytes"] - plan_bytes
                    r["difference_note"] = ("the padding page (page_size KV rows + one index page per "
                                            "layer) that SGLang allocates but its budget does not count")
                if r["group"] == "mamba":
                    r["plan_mamba_pool_bytes"] = cap.mamba_pool_bytes
                    r["difference"] = r["bytes"] - cap.mamba_pool_bytes
                if r["group"] == "spec":
                    r["plan_spec_scratch_bytes"] = cap.spec_scratch_bytes
                    r["difference"] = r["bytes"] - cap.spec_scratch_bytes
                    if _dedup_window(plan) is not None:
                        r["difference_note"] = ("SGLang reserves the dense conv windows (_handle_max_mamba_cache) "
                                                "and allocates the deduplicated ones on CUDA")
    if mode == "full":
        a = allocations[0]
        plan_figs = {"token": cap.token_pool_bytes - draft * tokens_full
                     - swa_full * (tok.swa_kv_bytes_per_token or 0) if cap else None,
                     "mamba": cap.mamba_pool_bytes if cap else None,
                     "spec": cap.spec_scratch_bytes if cap else None, "swa_token": None}
        for group, n in (("token", tokens_full), ("mamba", mamba_full), ("spec", reqs if spec else 0),
                         ("swa_token", swa_full)):
            if not n:
                continue
            got = _sum(a, group)
            row = dict(group=group, count=n, count_source=count_source, bytes=got,
                       formula="allocated", label="allocated: the full profile, measured")
            if plan_figs[group] is not None:
                row["difference"] = got - plan_figs[group]
            full_rows.append(row)
    not_allocated = []
    if tok.draft_layers:
        not_allocated.append(dict(
            what=f"MTP draft KV pool ({tok.draft_layers} layer, {tok.draft_bytes_per_token:,} B/token in cell_size)",
            why=f"built by SGLang's draft worker; its pool class for a kpool-{base.index_kpool} DSA draft is not "
                f"modelled here" if base.kpool_use_compress else "built by SGLang's draft worker; its pool is not "
                                                                  "allocated here"))
    missing = [dict(what=x.what, why=x.why) for x in not_on_host(base)] if host else []
    report = MeasureReport(prof.label, prof.sglang_layout, device, mode,
                           allocations, linear, full_rows, not_allocated, missing, cuda_note, notes)
    report.notes.extend(sorted({f"CUDA allocator {a.allocator}" for a in allocations
                                if a.allocator.startswith("not predicted")}))
    report.notes.extend(report.mismatches)  # printed by ``glm-kv measure``: each names its buffer
    return report


# --------------------------------------------------------------------------- for a reader

_GROUP_WORDS = {"token": "token pools (KV + indexer)", "mamba": "KDA state (MambaPool)",
                "spec": "verify scratch", "fixed": "req_to_token + compress tail",
                "host_token": "host token pools", "host_mamba": "host KDA state",
                "swa_token": "SWA token pool (SWAKVPool)"}


def why_these_sizes(report: MeasureReport) -> str:
    """One sentence saying what was allocated and why it is that size (for the chapters' Measured sections)."""
    if report.mode == "full":
        a = report.allocations[0]
        return (f"The full profile was allocated on {report.device}: {a.sizes['tokens']:,} tokens and "
                f"{a.sizes['mamba_slots']:,} state slots, the counts the plan sizes the pools for.")
    a, b = report.allocations
    fixed, state = _sum(a, "fixed"), _sum(a, "mamba")
    return (f"Two reduced allocations on {report.device} ({a.sizes['tokens']:,} and {b.sizes['tokens']:,} tokens, "
            f"{a.sizes['mamba_slots']} and {b.sizes['mamba_slots']} state slots): two sizes give the bytes per "
            f"token and per state slot as a slope, which is multiplied out to the full profile. The first one's "
            f"largest part is the KDA state, {fmt_bytes(state, 'GiB')} for {a.sizes['mamba_slots']} slot plus SGLang's "
            f"padding slot; {fmt_bytes(fixed, 'GiB')} is req_to_token ((max_running_requests + 1) x context length "
            f"int32) and the compress tail, which do not grow with the pools.")


def allocation_summary(report: MeasureReport) -> list[dict]:
    """Per allocation: sizes, storage by part, the caching allocator's bytes (measured on CUDA,
    predicted elsewhere) and whether every buffer matched its ledger."""
    rows = []
    for i, a in enumerate(report.allocations):
        parts = {g: _sum(a, g) for g in _GROUP_WORDS}
        cuda = a.cuda_allocated_delta is not None
        blocks = a.cuda_overhead_bytes
        rows.append({"allocation": i + 1, "tokens": a.sizes["tokens"], "state slots": a.sizes["mamba_slots"],
                     **{_GROUP_WORDS[g]: v for g, v in parts.items() if v},
                     "device storage": a.device_storage_bytes,
                     ("CUDA memory_allocated delta" if cuda else "CUDA allocator would hold (predicted)"):
                         a.cuda_allocated_delta if cuda else (None if blocks is None else a.device_storage_bytes + blocks),
                     "allocator overhead": blocks,
                     "every buffer == ledger": a.ok})
    return rows


def predict_cuda_blocks(geometry, config: Optional[AllocatorConfig] = None) -> list[tuple[str, int, int]]:
    """(buffer, storage bytes, predicted block bytes) for every device buffer of ``geometry`` on a
    fresh CUDA caching allocator, from shapes alone (nothing allocated): what a GPU would add to
    the ledger, for any profile, including one too big to allocate here."""
    import math

    model = CachingAllocatorModel(config or AllocatorConfig.from_env())
    out = []
    for name, shape, dtype in geometry.shape_table():
        nbytes = math.prod(shape) * torch_dtype(dtype).itemsize
        out.append((name, nbytes, model.malloc(nbytes).allocated))
    return out


def full_geometry(plan: Plan):
    """The full profile's pool geometry (the counts the plan sizes the pools for), shapes from the
    config and resolved arguments as ``measure_profile`` builds them."""
    tokens, mamba, reqs, _ = _counts(plan)
    base = _base_geometry(plan, reqs)
    return _full_sizes(base, tokens, mamba, reqs if getattr(base, "speculative_num_draft_tokens", 0) else 0,
                       _swa_count(plan))
