"""Hybrid sliding-window (SWA) models under SGLang 0.5.23: what glm-kv sizes of them, and what not yet (issue 32).

SGLang sizes a hybrid-SWA model (``is_hybrid_swa_model``: gpt-oss, Gemma-4, MiMo-V2-Flash, ...) with
``HybridSWAPoolConfigurator``: a full pool for the full-attention layers and an SWA pool beside it holding
``swa_full_tokens_ratio`` x the full pool's tokens for the sliding-window layers. glm-kv sizes that path at
SGLang's default ratio, and ``SWARequestCapPoolConfigurator`` (a given ``--max-running-requests`` with
``--disable-radix-cache`` and a chunked prefill: the SWA pool sized from the request cap,
``ledgers.capacity.swa_request_cap``). The paths beside them move other pools, which glm-kv does not size yet,
so each is refused by name (never planned as if it were the default path):

* ``--swa-full-tokens-ratio``, ``--disable-hybrid-swa-memory``, ``--swa-prefix-tails``: the flag table proves
  them inert on GLM-5.3-Flash's profiles, but for a hybrid-SWA model they move its pools; not profile fields, so
  a launch command carrying them is refused (``refuse_swa_flags``);
* HiCache (the hybrid SWA host sub-pool), speculative decoding (the draft's SWA layers), PD disaggregation
  (a decode server's request cap).
"""
from __future__ import annotations

from ..errors import ProfileError

# arg_groups/fields/schedule.py: swa_full_tokens_ratio's fallback when --swa-full-tokens-ratio is not given
SWA_FULL_TOKENS_RATIO = 0.8
SWA_FAMILIES = ("gqa_swa",)


def refuse_unsized_swa(p, family: str, architectures: tuple[str, ...]) -> None:
    """Refuse, naming the field, a launch of a hybrid-SWA model on a path glm-kv does not size yet."""
    if family not in SWA_FAMILIES:
        return
    arch = ", ".join(architectures) or "this model"
    why = f"for hybrid sliding-window models ({arch}) is not sized by glm-kv yet (issue 32); leave it out for a plan"
    if p.enable_hierarchical_cache:
        raise ProfileError("enable_hierarchical_cache", f"HiCache (SGLang's SWA host sub-pool) {why}")
    if p.speculative_algorithm is not None:
        raise ProfileError("speculative_algorithm", f"speculative decoding (the draft's SWA layers) {why}")
    if p.disaggregation_mode != "null":
        raise ProfileError("disaggregation_mode", f"PD disaggregation (the SWA request cap) {why}")


# flags proven inert on GLM-5.3-Flash (the flag table) that move a hybrid-SWA model's pools
SWA_POOL_FLAGS = ("--swa-full-tokens-ratio", "--disable-hybrid-swa-memory", "--swa-prefix-tails")


def refuse_swa_flags(model: str | None, inert: list[str]) -> None:
    """A launch command's inert flags (``"flag value ..."``, canonical long options) that move the pools of
    the hybrid-SWA model it names: refused by name, never dropped as inert."""
    from .hf_config import load_hf_config, names_other_model

    given = [item.split()[0] for item in inert if item.split()[0] in SWA_POOL_FLAGS]
    if not given or not model or not names_other_model(model):
        return
    try:
        cfg = load_hf_config(model)
    except ProfileError:
        return   # the plan names the config's problem
    if cfg.family in SWA_FAMILIES:
        raise ProfileError(given[0], f"moves the SWA pool of a hybrid sliding-window model ({', '.join(cfg.architectures)}), "
                                     f"which glm-kv sizes at SGLang's default ratio ({SWA_FULL_TOKENS_RATIO}) only "
                                     f"(issue 32); leave it out for a plan")
