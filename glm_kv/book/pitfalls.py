"""The source article's nine pitfalls (its section 7) as executable checks.

Each pitfall names a quantity, what the plan says it is (``truth``) and what a reader who makes
the article's mistake would assume (``mistaken``). ``check(n, profile, assumed)`` raises
``PitfallError`` when ``assumed`` is not what the plan says, so feeding it the mistaken value
fails and feeding it the plan's value passes, for every profile. Nothing here computes memory:
every value is read from ``glm_kv.plan.build_plan`` (for the profile, or for the profile with
one setting changed) or from ``glm_kv.structure.pool_structure``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..inputs.model import load_model
from ..inputs.profile import Profile, load_profile, make_profile
from ..ledgers.plan import build_plan, compute_plan
from ..ledgers.structure import pool_structure


DEEPSEEK_V3_QK_ROPE_HEAD_DIM = 64  # DeepSeek V3 stores a 64-wide RoPE key beside the 512 latent


class PitfallError(AssertionError):
    """An assumption that the plan contradicts."""


def _profile(profile: Profile | str | None) -> Profile:
    return profile if isinstance(profile, Profile) else load_profile(profile)


def _variant(profile: Profile, **overrides: Any) -> dict:
    return build_plan(make_profile({**profile.model_dump(), **overrides}))


@dataclass(frozen=True)
class Pitfall:
    number: int
    title: str
    quantity: str
    mistake: str
    truth: Callable[[Profile, dict], Any]
    mistaken: Callable[[Profile, dict], Any]


def _entries(plan: dict) -> list[str]:
    return sorted(plan["host"]["entries"])


def _top_level_pools(profile: Profile, plan: dict) -> list[str]:
    s = pool_structure(compute_plan(profile))
    return [s["class"]]


def _slot_tp8_no_dp_attention(profile: Profile, plan: dict) -> int:
    return _variant(profile, tp_size=8, dp_size=1, enable_dp_attention=False, attn_cp_size=1,
                    max_running_requests=profile.max_running_requests or 64,
                    available_bytes=None, weights_bytes=None)["request"]["state_slot_bytes"]


def _slot_attn_tp1(profile: Profile, plan: dict) -> int:
    return _variant(profile, tp_size=1, dp_size=1, enable_dp_attention=False, attn_cp_size=1,
                    available_bytes=None, weights_bytes=None)["request"]["state_slot_bytes"]


def _state_at_double_context(profile: Profile, plan: dict) -> int:
    return _variant(profile, context_length=2 * profile.context_length)["request"]["state_bytes_per_request"]


def _cell_with_mtp_toggled(profile: Profile, plan: dict) -> int:
    if profile.speculative_algorithm:
        toggled = dict(speculative_algorithm=None, speculative_num_draft_tokens=None,
                       speculative_num_steps=None, speculative_eagle_topk=None)
    else:
        toggled = dict(speculative_algorithm="EAGLE", max_running_requests=profile.max_running_requests or 64)
    return _variant(profile, **toggled)["token"]["cell_size_bytes"]


PITFALLS: tuple[Pitfall, ...] = (
    Pitfall(1, "512, 528 and 576 are different rows", "kv_cache_dim (elements per full layer, per token)",
            "take DeepSeek V3's 576-wide row (512 latent + 64 RoPE); this model has no RoPE part",
            lambda p, d: d["token"]["kv_cache_dim"],
            lambda p, d: load_model(p.model).kv_lora_rank + DEEPSEEK_V3_QK_ROPE_HEAD_DIM),
    Pitfall(2, "the per-token figure includes the indexer and excludes the KDA state",
            "bytes per token the token budget divides by (cell_size)",
            "count the MLA latent KV alone, leaving the indexer K out",
            lambda p, d: d["token"]["cell_size_bytes"],
            lambda p, d: d["token"]["kv_bytes_per_token"]),
    Pitfall(3, "the indexer's physical page holds whole pages of tokens",
            "tokens in one IndexKeyCache page",
            "read index_kpool as shrinking the page (page tokens / index_kpool)",
            lambda p, d: d["token"]["indexer_tokens_per_page"],
            lambda p, d: d["token"]["indexer_tokens_per_page"] // d["token"]["index_kpool"]),
    Pitfall(4, "the compress tail has no HiCache copy", "HiCache HostPoolGroup entries",
            "add the compress tail to what HiCache backs up",
            lambda p, d: _entries(d),
            lambda p, d: sorted(_entries(d) + ["compress_tail"])),
    Pitfall(5, "HBM holds one HybridLinearKVPool, not two pools", "top-level KV pools in HBM",
            "treat full_kv_pool and mamba_pool as two independent pools",
            _top_level_pools,
            lambda p, d: [c["class"] for c in pool_structure(compute_plan(p))["children"]]),
    Pitfall(6, "whether the indexer has a host entry depends on the layout", "HiCache HostPoolGroup entries",
            "assume the other layout's answer about an INDEXER host entry",
            lambda p, d: _entries(d),
            lambda p, d: sorted(set(_entries(d)) ^ {"indexer"})),
    Pitfall(7, "KDA state is charged per state slot, not per token",
            "KDA state of one request at twice the context length, B",
            "scale the KDA state with the request's tokens",
            _state_at_double_context,
            lambda p, d: 2 * d["request"]["state_bytes_per_request"]),
    Pitfall(8, "attn_tp decides the KDA slot: TP8 without DP attention splits it eight ways",
            "KDA state slot per rank at TP8 without DP attention, B",
            "reuse the attn_tp = 1 slot for every parallel layout",
            _slot_tp8_no_dp_attention,
            _slot_attn_tp1),
    Pitfall(9, "MTP changes the numbers only when speculative decoding is on",
            "cell_size, B/token, for this profile's speculative setting",
            "count (or forget) the MTP draft layer regardless of --speculative-algorithm",
            lambda p, d: d["token"]["cell_size_bytes"],
            _cell_with_mtp_toggled),
)


def pitfall(number: int) -> Pitfall:
    for p in PITFALLS:
        if p.number == number:
            return p
    raise KeyError(f"no pitfall {number} (1..{len(PITFALLS)})")


def truth(number: int, profile: Profile | str | None = None) -> Any:
    prof = _profile(profile)
    return pitfall(number).truth(prof, build_plan(prof))


def mistaken(number: int, profile: Profile | str | None = None) -> Any:
    prof = _profile(profile)
    return pitfall(number).mistaken(prof, build_plan(prof))


def check(number: int, profile: Profile | str | None, assumed: Any) -> Any:
    """Pass (return the plan's value) when ``assumed`` agrees with the plan; else PitfallError."""
    pf = pitfall(number)
    actual = truth(number, profile)
    if assumed != actual:
        raise PitfallError(f"pitfall {number} ({pf.title}): assumed {pf.quantity} = {assumed!r}, "
                           f"the plan says {actual!r}")
    return actual


def pitfall_table(profile: Profile | str | None = None):
    """One row per pitfall: the mistaken value, the plan's value, and whether the check catches it."""
    import pandas as pd

    prof = _profile(profile)
    plan = build_plan(prof)
    rows = []
    for pf in PITFALLS:
        right, wrong = pf.truth(prof, plan), pf.mistaken(prof, plan)
        try:
            check(pf.number, prof, wrong)
            caught = False
        except PitfallError:
            caught = True
        try:
            check(pf.number, prof, right)
            passes = True
        except PitfallError:
            passes = False
        rows.append({"#": pf.number, "pitfall": pf.title, "quantity": pf.quantity,
                     "the mistake": pf.mistake, "mistaken value": _show(wrong),
                     "the plan says": _show(right), "mistake caught": caught, "plan passes": passes})
    return pd.DataFrame(rows).set_index("#")


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v))
    return str(v)
