"""A PD decode server's retraction backup under SGLang 0.5.23: where a retracted request's KV goes (issue 30 / 32).

``mem_cache/kv_cache_builder.py resolve_decode_retraction_backup`` runs once the device pools are built. With
``--disaggregation-decode-retraction-backup`` unset, a decode server picks ``host_pool`` when its KV pool is an
``MHATokenToKVPool`` or an ``SWAKVPool`` with full layers, the model keeps no recurrent (SSM) state, and neither
the decode radix cache, decode KV offload, decode context parallel nor priority preemption is on; otherwise
``cpu_tensor``. ``--disaggregation-decode-host-receive-threshold`` below 1 resolves it to ``host_pool`` first
(``pd_disaggregation_hook.handle_pd_disaggregation``). ``host_pool`` builds HiCache's host pools even without
``--enable-hierarchical-cache`` (``registry.create_unified_radix_cache`` -> ``init_hicache``); ``ledgers.host``
sizes them.

Why here (inputs): the start-up refusals and the ledgers read the same rule. Decode KV offload is refused by the
flag table, decode context parallel (``--dcp-size`` > 1) and unified memory by ``launch``; ROCm is not planned.
"""
from __future__ import annotations

from ..errors import ProfileError

# arg_groups/fields/disagg.py; "none" keeps no backup (a retracted request is aborted with 503): no host pool
RETRACTION_BACKUP_CHOICES = ("cpu_tensor", "host_pool", "none")


def kv_pool_backs_up(family: str) -> bool:
    """The device KV pool host-pool retraction can back up (``MHATokenToKVPool``, or ``SWAKVPool`` with full
    layers) on a model without recurrent state (``uses_ssm_state``): the GQA families without state layers (gpt-oss,
    Gemma-4, MiMo-V2-Flash, Llama-4; with ``--disable-hybrid-swa-memory`` one MHA pool). MLA / DSA pools
    (DeepSeek-V3.2, GLM-5.1) are neither; a hybrid ("+" in the family) keeps state."""
    return "+" not in family and family.startswith("gqa")


def priority_preemption(p) -> bool:
    """``enable_priority_scheduling and not disable_priority_preemption`` (kv_cache_builder, kv_cache_hook)."""
    return bool(p.enable_priority_scheduling) and not p.disable_priority_preemption


def retraction_backup(p, family: str) -> str | None:
    """The backup SGLang resolves on a PD decode server (``host_pool`` / ``cpu_tensor`` / ``none``); None elsewhere (no
    decode server retracts into a backup: SGLang's ``cpu_tensor`` there holds nothing)."""
    if p.disaggregation_mode != "decode":
        return None
    if p.disaggregation_decode_host_receive_threshold < 1:
        # handle_pd_disaggregation declares host_pool over any value but cpu_tensor (refused there, validate_retraction)
        return "host_pool"
    if p.disaggregation_decode_retraction_backup is not None:
        return p.disaggregation_decode_retraction_backup
    if p.disaggregation_decode_enable_radix_cache or priority_preemption(p) or not kv_pool_backs_up(family):
        return "cpu_tensor"
    return "host_pool"


def _says(text: str, where: str) -> str:
    return f"SGLang 0.5.23 refuses it: \"{text}\" ({where})"


def validate_retraction(p, family: str) -> None:
    """SGLang 0.5.23's start-up refusals around the retraction backup, in its words and in its order
    (pd_disaggregation_hook, then kv_cache_hook at start-up; the tree cache's after the pools are built)."""
    t = p.disaggregation_decode_host_receive_threshold
    explicit = p.disaggregation_decode_retraction_backup
    if not 0 <= t <= 1:
        raise ProfileError("disaggregation_decode_host_receive_threshold", _says(
            "--disaggregation-decode-host-receive-threshold must be between 0 and 1",
            "arg_groups/pd_disaggregation_hook.py"))
    if t < 1:
        if p.enable_hisparse:
            raise ProfileError("disaggregation_decode_host_receive_threshold", _says(
                "Decode host receive does not yet support HiSparse or role switching",
                "arg_groups/pd_disaggregation_hook.py"))
        if explicit == "cpu_tensor":
            raise ProfileError("disaggregation_decode_retraction_backup", _says(
                "Decode host KV buffering requires host_pool retraction", "arg_groups/pd_disaggregation_hook.py"))
        explicit = "host_pool"
    if explicit != "host_pool":
        return
    field = ("disaggregation_decode_retraction_backup" if p.disaggregation_decode_retraction_backup
             else "disaggregation_decode_host_receive_threshold")
    if p.disaggregation_mode != "decode":
        raise ProfileError(field, _says("--disaggregation-decode-retraction-backup=host_pool is only supported on a "
                                        "PD decode server.", "arg_groups/kv_cache_hook.py"))
    if priority_preemption(p):
        raise ProfileError(field, _says("--disaggregation-decode-retraction-backup=host_pool requires "
                                        "--disable-priority-preemption when priority scheduling is enabled.",
                                        "arg_groups/kv_cache_hook.py"))
    if "+" in family:   # a model with recurrent state (registry.create_unified_radix_cache)
        raise ProfileError(field, _says("Host-pool retraction does not support Mamba models.",
                                        "mem_cache/registry.py"))
    if not kv_pool_backs_up(family):   # an MLA / DSA pool (kv_cache_builder: validate_retraction_host_capacity)
        raise ProfileError(field, _says("--disaggregation-decode-retraction-backup=host_pool requires an MHA or "
                                        "hybrid-SWA HiCache host stack.", "mem_cache/unified_radix_cache.py"))
