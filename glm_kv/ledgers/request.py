"""The per-request ledger: state slots (MambaPool: KDA, Gated DeltaNet, Mamba-2) and how many a request holds."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..inputs.resolve import ServerArgs
from ..units import DTYPE_BYTES
from .layers import STATE_KINDS
from .model_layers import ModelLayers, layers_for

CONV_DTYPE = "bfloat16"  # mamba2_state_dtype(): conv is always bf16; only temporal follows the SSM dtype


@dataclass(frozen=True)
class RequestLedger:
    num_linear_layers: int
    linear_attn_tp_size: int
    conv_state_shape: tuple[int, int]
    temporal_state_shape: tuple[int, int, int]
    conv_dtype: str
    temporal_dtype: str
    conv_state_bytes: int       # one layer, one slot
    temporal_state_bytes: int   # one layer, one slot
    state_bytes_per_layer: int  # conv + temporal, one layer, one slot
    state_slot_bytes: int       # all KDA layers: SGLang's mamba_cache_per_req
    mamba_strategy: str         # resolved mamba_scheduler_strategy ("none" when radix cache is off)
    slots_per_request: int
    state_bytes_per_request: int
    replayssm_ring_bytes_per_slot: int = 0   # --enable-linear-replayssm-spec: the KDA replay ring of one slot
    state_kind: str | None = None            # "kda_state", "gdn_state", "mamba2_state" (None: no state layer)

    @property
    def budget_slot_bytes(self) -> int:
        """What one state slot costs the mamba budget: the slot, plus its replay ring under ReplaySSM
        spec-verify (``_handle_max_mamba_cache``: KDA keeps the ring attached to every slot)."""
        return self.state_slot_bytes + self.replayssm_ring_bytes_per_slot


def mamba_tracking_slots(*, extra_buffer: bool, overlap: bool, lazy: bool = False) -> int:
    """``get_mamba_tracking_slots`` (mem_cache/allocation_sizing.py): the tracking slots a running request holds
    beside its own under extra_buffer, 2 with the overlap scheduler and 1 without; lazy defers the second."""
    if not extra_buffer:
        return 0
    if lazy:
        return 1
    return 2 if overlap else 1


def slots_per_request(p, strategy: str) -> int:
    """``_calculate_mamba_ratio``: base 3, +2 overlap / +1 otherwise or lazy, -1 skip-decode-lock."""
    if strategy == "none":
        return 1
    base = 3 - (1 if p.mamba_skip_decode_lock else 0)
    if strategy in ("extra_buffer", "extra_buffer_lazy"):
        add = 1 if strategy == "extra_buffer_lazy" or p.disable_overlap_schedule else 2
    elif p.mamba_skip_decode_lock:
        add = 1
    else:
        add = 0
    return base + add


def replayssm_ring_bytes(temporal_shape: tuple[int, int, int], num_layers: int, record_len: int) -> int:
    """``BaseLinearStateParams.replayssm_ring_bytes_per_req`` for KDA (configs/mamba_utils.py), all layers.

    Per layer, for a ring of ``record_len`` steps: raw v, raw k, d and k rings in the conv dtype (bf16),
    beta and the per-K vector gate in fp32. KDA's k heads are its v heads (``num_k_heads_per_tp``).
    """
    hv, v_dim, k_dim = temporal_shape
    h_k, conv_b, fp32_b, n = hv, DTYPE_BYTES[CONV_DTYPE], 4, record_len
    per_layer = (hv * n * v_dim * conv_b            # rawv
                 + h_k * n * k_dim * conv_b         # rawk
                 + hv * n * fp32_b                  # beta
                 + hv * n * k_dim * fp32_b          # vector g
                 + hv * n * v_dim * conv_b          # d
                 + h_k * n * k_dim * conv_b)        # k
    return per_layer * num_layers


def gdn_replayssm_ring_bytes(spec, num_layers: int, record_len: int) -> int:
    """``BaseLinearStateParams.replayssm_ring_bytes_per_req`` for Gated DeltaNet (configs/mamba_utils.py), all
    layers: per layer the d ring (v heads x v dim), the normalized-k ring (k heads x k dim) in the conv dtype and
    a scalar gate in fp32, plus low parts of the two rings when the conv dtype is not fp32. ``spec``: one
    ``GatedDeltaNetState`` (its k heads per rank: ``num_k_heads_per_tp``, the ORIGINAL groups rounded up)."""
    hv, v_dim, k_dim = spec.temporal_shape
    h_k = -(-spec.n_groups // spec.attn_tp)
    conv_b, n = spec.conv_item_bytes, record_len
    per_layer = hv * n * v_dim * conv_b + h_k * n * k_dim * conv_b + hv * n * 4
    if conv_b != 4:
        per_layer += hv * n * v_dim * conv_b + h_k * n * k_dim * conv_b
    return per_layer * num_layers


def _gdn_ring_per_request(args: ServerArgs, layers: ModelLayers | None) -> int:
    """One request's Gated DeltaNet / JetBlock ReplaySSM ring over every such layer at the resolved linear TP;
    0 where the ring is not active (no such layer, or ``ServerArgs.replayssm_active`` false)."""
    m = layers or layers_for(args)
    gdn = [s for s in m.specs(STATE_KINDS) if s.kind in ("gdn_state", "jet_state")]
    if not (args.replayssm_active and gdn):
        return 0
    tp = args.linear_attn_tp_size
    spec = gdn[0] if gdn[0].attn_tp == tp else replace(gdn[0], attn_tp=tp)
    return gdn_replayssm_ring_bytes(spec, len(gdn), args.profile.linear_replayssm_cache_len)


def replayssm_fixed_bytes(args: ServerArgs, layers: ModelLayers | None = None) -> int:
    """Gated DeltaNet's ReplaySSM ring as ``_handle_max_mamba_cache`` reserves it (kv_cache_configurator.py): fixed
    request scratch, ring per request x (max(1, max_running_requests // attn_dp) + 1), taken from the state budget
    before the slots are counted (KDA keeps its ring on every slot instead: ``budget_slot_bytes``; Mamba-2 has no
    ring, the flag is inert there). 0 without ``--enable-linear-replayssm-spec``."""
    ring = _gdn_ring_per_request(args, layers)
    if not ring:
        return 0
    mrr = args.max_running_requests_global
    if mrr is None:   # SGLang reads the schedule's value, None without --max-running-requests or a speculative reset
        from ..errors import ProfileError

        raise ProfileError("enable_linear_replayssm_spec", "SGLang 0.5.23 fails at start-up: \"unsupported operand "
                                                           "type(s) for //: 'NoneType' and 'int'\" (_handle_max_mamba_cache "
                                                           "sizes the Gated DeltaNet ring per max_running_requests); give "
                                                           "--max-running-requests")
    return ring * (max(1, mrr // args.attn_dp_size) + 1)


def replayssm_pool_ring_bytes(args: ServerArgs, requests_per_worker: int | None,
                              layers: ModelLayers | None = None) -> int:
    """The Gated DeltaNet ring MambaPool allocates (memory_pool.py: the d, k, gate and raw v / k rings, the bytes
    the budget reserves per request, over ``spec_state_size + 1`` rows: the CAPPED requests per worker), which
    ``MambaPool.get_kv_size_bytes`` counts where HiCache splits ``--hicache-size`` over the device pools; the
    budget reserved the same ring over the uncapped requests (``replayssm_fixed_bytes``)."""
    if not requests_per_worker:
        return 0
    return _gdn_ring_per_request(args, layers) * (requests_per_worker + 1)


def request_ledger(args: ServerArgs, linear_tp: int | None = None, layers: ModelLayers | None = None) -> RequestLedger:
    """The per-request ledger summed over the model's state specs (KDA, Gated DeltaNet, Mamba-2):
    one state slot is SGLang's ``mamba_cache_per_req``. ``linear_tp``: the TP that splits the state
    heads (default: the resolved one). A model without state layers has an empty request ledger."""
    p = args.profile
    m = layers or layers_for(args)
    tp = args.linear_attn_tp_size if linear_tp is None else linear_tp
    states = [s if s.attn_tp == tp else replace(s, attn_tp=tp) for s in m.specs(STATE_KINDS)]
    if not states:
        return RequestLedger(
            num_linear_layers=0, linear_attn_tp_size=tp, conv_state_shape=(), temporal_state_shape=(),
            conv_dtype=CONV_DTYPE, temporal_dtype=p.mamba_ssm_dtype, conv_state_bytes=0, temporal_state_bytes=0,
            state_bytes_per_layer=0, state_slot_bytes=0, mamba_strategy=args.mamba_strategy, slots_per_request=0,
            state_bytes_per_request=0)
    s = states[0]
    conv_shape, temporal_shape = tuple(s.conv_shape), tuple(s.temporal_shape)
    slot = sum(x.bytes_per_slot for x in states)
    spr = slots_per_request(p, args.mamba_strategy)
    return RequestLedger(
        num_linear_layers=len(states), linear_attn_tp_size=tp,
        conv_state_shape=conv_shape, temporal_state_shape=temporal_shape,
        conv_dtype=CONV_DTYPE, temporal_dtype=s.ssm_dtype,
        conv_state_bytes=s.conv_bytes, temporal_state_bytes=s.temporal_bytes,
        state_bytes_per_layer=s.bytes_per_slot, state_slot_bytes=slot,
        mamba_strategy=args.mamba_strategy, slots_per_request=spr, state_bytes_per_request=spr * slot,
        # KDA keeps the ring on every slot; Gated DeltaNet reserves it per request (replayssm_fixed_bytes)
        replayssm_ring_bytes_per_slot=(replayssm_ring_bytes(temporal_shape, len(states),
                                                            p.linear_replayssm_cache_len)
                                       if args.replayssm_active and s.kind == "kda_state" else 0),
        state_kind=s.kind,
    )
