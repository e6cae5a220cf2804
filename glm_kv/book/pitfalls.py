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
from ..inputs.rules import rules_for
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
    goes_wrong: str = ""      # what a reader who makes the mistake gets wrong (prose, no figures)
    why: str = ""             # why the plan's value is what it is (SGLang's reason, with the file)
    in_0523: str = ""         # what 0.5.23 changes about it, if anything (prose, no figures)
    changes_in_0523: bool = False  # the article's statement no longer holds in 0.5.23


def _entries(plan: dict) -> list[str]:
    return sorted(plan["host"]["entries"])


def _top_level_pools(profile: Profile, plan: dict) -> list[str]:
    s = pool_structure(compute_plan(profile))
    return [s["class"]]


def _slot_tp8_no_dp_attention(profile: Profile, plan: dict) -> int:
    return _variant(profile, tp_size=8, dp_size=1, enable_dp_attention=False, attn_cp_size=1,
                    max_running_requests=profile.max_running_requests or 64,
                    available_bytes=None, weights_bytes=None, weights_estimate=False)["request"]["state_slot_bytes"]


def _slot_attn_tp1(profile: Profile, plan: dict) -> int:
    return _variant(profile, tp_size=1, dp_size=1, enable_dp_attention=False, attn_cp_size=1,
                    available_bytes=None, weights_bytes=None, weights_estimate=False)["request"]["state_slot_bytes"]


def _state_at_double_context(profile: Profile, plan: dict) -> int:
    # the context the server runs at: the profile's, or (omitted) SGLang's default, the model's maximum
    context = plan["profile"]["context_length"]
    return _variant(profile, context_length=2 * context, allow_overwrite_longer_context_len=True)[
        "request"]["state_bytes_per_request"]


def _cell_with_mtp_toggled(profile: Profile, plan: dict) -> int:
    if profile.speculative_algorithm:
        toggled = dict(speculative_algorithm=None, speculative_num_draft_tokens=None,
                       speculative_num_steps=None, speculative_eagle_topk=None)
    else:
        toggled = dict(speculative_algorithm="EAGLE", max_running_requests=profile.max_running_requests or 64)
    return _variant(profile, **toggled)["token"]["cell_size_bytes"]


def _index_page(profile: Profile, plan: dict) -> tuple[int, int]:
    t = plan["token"]
    return (t["indexer_tokens_per_page"], t["indexer_page_bytes"] // t["indexer_row_bytes"])


def _index_page_mistaken(profile: Profile, plan: dict) -> tuple[int, int]:
    t = plan["token"]
    tokens = t["indexer_tokens_per_page"]
    if rules_for(profile).indexer_pooled_rows:   # the mistake: the other version's page rows
        return (tokens, tokens)
    return (tokens // t["index_kpool"], tokens // t["index_kpool"])


PITFALLS: tuple[Pitfall, ...] = (
    Pitfall(1, "512, 528 and 576 are different rows", "kv_cache_dim (elements per full layer, per token)",
            "take DeepSeek V3's 576-wide row (512 latent + 64 RoPE); this model has no RoPE part",
            lambda p, d: d["token"]["kv_cache_dim"],
            lambda p, d: load_model(p.model).kv_lora_rank + DEEPSEEK_V3_QK_ROPE_HEAD_DIM,
            goes_wrong='Every kv_buffer row, and with it the KV bytes per token and the token budget, comes out too wide: a DeepSeek V3 habit applied to a model without a RoPE part.',
            why='qk_rope_head_dim is 0 here, so the row is kv_lora_rank wide in bf16 and in raw fp8 (TRT-LLM), and gains one {scale_bytes}-byte fp32 scale per {scale_group} values in scaled fp8 (calculate_mla_kv_cache_dim, mem_cache/kv_cache_configurator.py).',
            in_0523='Holds: the row width depends on the dtype and the backend only.'),
    Pitfall(2, "the per-token figure includes the indexer and excludes the KDA state",
            "bytes per token the token budget divides by (cell_size)",
            "count the MLA latent KV alone, leaving the indexer K out",
            lambda p, d: d["token"]["cell_size_bytes"],
            lambda p, d: d["token"]["kv_bytes_per_token"],
            goes_wrong='Leaving the indexer out of the per-token figure over-states how many tokens fit; adding the KDA state to it charges a per-request cost per token.',
            why="SGLang's token budget divides the memory left after the state pool by cell_size, the KV plus the indexer K of one token over the full-attention layers; the KDA state sits in the state pool, paid per state slot.",
            in_0523='Holds, with a smaller indexer part: 0.5.23 reserves only the pooled indexer keys (_compute_dsa_indexer_cell_size).'),
    Pitfall(3, "the indexer's physical page holds whole pages of tokens",
            "(tokens in one IndexKeyCache page, token keys its physical row holds)",
            "read index_kpool as shrinking the page to page tokens / index_kpool (article layout), "
            "or, under 0.5.23, keep the article's reading that the row still holds one key per token",
            _index_page, _index_page_mistaken,
            goes_wrong="Sizing or slicing the indexer buffer by index_kpool groups instead of pages "
                       "splits pages that do not exist (article layout); carrying the article's "
                       "one-key-per-token row over to 0.5.23 over-reserves the indexer several times.",
            why="IndexKeyCache allocates one row per page of page_size tokens (mem_cache/index_key_cache.py). "
                "In the article's layout the row holds every token's {indexer_row_bytes}-byte key; index_kpool only "
                "groups tokens for the top-k selection.",
            in_0523="Changes: 0.5.23 forces page_size = {article_page} x index_kpool for this model and "
                    "_buffer_shape stores page_size // index_kpool pooled keys per row, so index_kpool "
                    "does shrink what a token reserves; the row keeps its byte size but spans more tokens.",
            changes_in_0523=True),
    Pitfall(4, "the compress tail has no HiCache copy", "HiCache HostPoolGroup entries",
            "add the compress tail to what HiCache backs up",
            lambda p, d: _entries(d),
            lambda p, d: sorted(_entries(d) + ["compress_tail"]),
            goes_wrong="Counting the compress tail in HiCache's host capacity makes DRAM look fuller than it is, and expecting it back after a loadback is wrong: it is not there.",
            why='_compress_tail_k and _compress_tail_score are per-rank request buffers of DSATokenToKVPool (mem_cache/memory_pool.py), not indexed by the RadixTree, so no node has a host_value for them and HostPoolGroup has no entry for them.',
            in_0523='Holds.'),
    Pitfall(5, "HBM holds one HybridLinearKVPool, not two pools", "top-level KV pools in HBM",
            "treat full_kv_pool and mamba_pool as two independent pools",
            _top_level_pools,
            lambda p, d: [c["class"] for c in pool_structure(compute_plan(p))["children"]],
            goes_wrong='Budgeting two independent pools double-counts the memory split: the mamba share and the token share come out of one rest, in one order.',
            why='The default hybrid path builds a single HybridLinearKVPool whose full_kv_pool (DSATokenToKVPool) and mamba_pool (MambaPool) are sized together by the pool configurator.',
            in_0523='Holds (--enable-unified-memory builds another pool class in both).'),
    Pitfall(6, "whether the indexer has a host entry depends on the layout", "HiCache HostPoolGroup entries",
            "assume the other layout's answer about an INDEXER host entry",
            lambda p, d: _entries(d),
            lambda p, d: sorted(set(_entries(d)) ^ {"indexer"}),
            goes_wrong="Assuming an indexer copy on the host where there is none (or missing the one there is) gets HiCache's DRAM size and what a loadback restores wrong.",
            why="The host entries are whatever HostPoolGroup is built with (mem_cache/pool_host/, hybrid_pool_assembler.py): the article's CUDA hybrid path builds KV and MAMBA only.",
            in_0523="Changes: 0.5.23's hybrid HostPoolGroup adds an INDEXER entry (DSAIndexerPoolHost) beside KV, so the pooled indexer keys are backed up too.",
            changes_in_0523=True),
    Pitfall(7, "KDA state is charged per state slot, not per token",
            "KDA state of one request at twice the context length, B",
            "scale the KDA state with the request's tokens",
            _state_at_double_context,
            lambda p, d: 2 * d["request"]["state_bytes_per_request"],
            goes_wrong='Scaling the KDA state with context length makes long requests look far more expensive, and short ones far cheaper, than they are.',
            why='A KDA layer keeps a fixed-size conv + temporal state per state slot (mamba_cache_per_req, mamba_utils.py), and a request reserves slots_per_request slots whatever its length.',
            in_0523='Holds.'),
    Pitfall(8, "attn_tp decides the KDA slot: TP8 without DP attention splits it eight ways",
            "KDA state slot per rank at TP8 without DP attention, B",
            "reuse the attn_tp = 1 slot for every parallel layout",
            _slot_tp8_no_dp_attention,
            _slot_attn_tp1,
            goes_wrong='Reusing the attn_tp = 1 slot for a TP layout without DP attention over-states the per-rank KDA state by the TP degree.',
            why='attn_tp_size = tp_size // attn_dp_size // attn_cp_size, and the KDA state shapes are split over it (KimiLinearStateShape, mamba_utils.py): only attn_dp = tp gives attn_tp = 1.',
            in_0523='Holds.'),
    Pitfall(9, "MTP changes the numbers only when speculative decoding is on",
            "cell_size, B/token, for this profile's speculative setting",
            "count (or forget) the MTP draft layer regardless of --speculative-algorithm",
            lambda p, d: d["token"]["cell_size_bytes"],
            _cell_with_mtp_toggled,
            goes_wrong='Adding the MTP draft layer to every plan (or forgetting it when speculative decoding is on) mis-sizes the token budget and the state pool.',
            why='num_nextn_predict_layers in the config is only a field: draft pools and the verify scratch exist only with --speculative-algorithm.',
            in_0523='Holds.'),
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
        raise PitfallError(f"pitfall {number} ({pf.title}): assumed {pf.quantity} = {_shown(assumed)}, "
                           f"the plan says {_shown(actual)}")
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


def _shown(v: Any) -> str:
    """A value in an error message: integers with thousands separators, the rest as repr."""
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if isinstance(v, tuple):
        return "(" + ", ".join(map(_shown, v)) + ")"
    return repr(v)


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, tuple):
        return "(" + ", ".join(map(_show, v)) + ")"
    if isinstance(v, list):
        return ", ".join(map(str, v))
    return str(v)


def _prose_values(plan: dict) -> dict:
    from ..inputs.resolve import ARTICLE_PAGE_SIZE
    from ..units import FP8_SCALE_BYTES, FP8_SCALE_GROUP

    return {"indexer_row_bytes": plan["token"]["indexer_row_bytes"], "article_page": ARTICLE_PAGE_SIZE,
            "scale_bytes": FP8_SCALE_BYTES, "scale_group": FP8_SCALE_GROUP}


def across_layouts(number: int, profile: Profile | str | None = None) -> dict[str, Any]:
    """The plan's value for pitfall ``number`` under each SGLang layout, this profile otherwise."""
    prof = _profile(profile)
    out = {}
    for layout in ("article", "0.5.23"):
        p = make_profile({**prof.model_dump(), "sglang_layout": layout})
        out[layout] = pitfall(number).truth(p, build_plan(p))
    return out


# ------------------------------------------------------------------------------------------------
# What each mistake costs on a profile, in tokens, requests or bytes (chapter 8's reader page)
# ------------------------------------------------------------------------------------------------

def _tokens_at_cell(plan: dict, cell_bytes: int) -> int | None:
    """Token slots this profile's token budget buys at ``cell_bytes`` per token (whole pages, as
    SGLang's ``max_total_num_tokens``); None when the profile gives no memory."""
    cap = plan.get("capacity")
    if not cap or not cap.get("token_pool_budget_bytes"):
        return None
    page = plan["token"]["page_size"]
    return cap["token_pool_budget_bytes"] // cell_bytes // page * page


def _pct(wrong: int | float, right: int | float) -> str:
    return f"{(wrong - right) / right:+.1%}" if right else "n/a"


def _token_count_effect(plan: dict, wrong_cell: int, what: str) -> str:
    right_cell = plan["token"]["cell_size_bytes"]
    right, wrong = plan["capacity"]["max_total_num_tokens"] if plan.get("capacity") else None, \
        _tokens_at_cell(plan, wrong_cell)
    head = (f"{what}: {wrong_cell:,} B per token instead of {right_cell:,} B "
            f"({_pct(wrong_cell, right_cell)})")
    if right is None or wrong is None:
        return head + "; this profile states no memory, so no token count follows."
    return (head + f", so the token budget would hold {wrong:,} tokens per rank instead of {right:,} "
            f"({_pct(wrong, right)}).")


def _consequence(number: int, prof: Profile, plan: dict) -> str:
    """One sentence: what the mistake gets wrong on this profile, with its numbers."""
    from ..units import fmt_bytes

    t, q, cap = plan["token"], plan["request"], plan.get("capacity") or {}
    right, wrong = pitfall(number).truth(prof, plan), pitfall(number).mistaken(prof, plan)
    if number == 1:
        wrong_cell = t["cell_size_bytes"] + (wrong - right) * t["kv_item_bytes"] * t["num_full_layers"]
        return _token_count_effect(plan, wrong_cell, f"a {wrong}-wide row instead of {right}")
    if number == 2:
        return _token_count_effect(plan, wrong, "leaving the indexer out")
    if number == 3:
        (tokens, keys), (w_tokens, w_keys) = right, wrong
        n_idx = t["indexer_bytes_per_token"] // t["indexer_bytes_per_token_per_layer"]
        per_token = -(-t["indexer_row_bytes"] * w_keys // w_tokens) * n_idx
        wrong_cell = t["cell_size_bytes"] - t["indexer_bytes_per_token"] + per_token
        if wrong_cell != t["cell_size_bytes"]:
            return _token_count_effect(plan, wrong_cell, f"{w_keys} keys in a {w_tokens}-token page")
        pages = cap.get("max_total_num_tokens")
        extra = (f": {pages // w_tokens:,} pages instead of {pages // tokens:,} for this profile's "
                 f"{pages:,} tokens") if pages else ""
        return (f"a page of {w_tokens} tokens instead of {tokens}{extra}; buffer slices and page "
                f"indices computed that way point into the wrong rows.")
    if number == 4:
        return (f"the compress tail is {fmt_bytes(plan['tail']['bytes'])} per rank on this profile; counted "
                f"in HiCache it is DRAM that is never written, and after a load-back it is not restored.")
    if number == 5:
        rest = cap.get("rest_bytes")
        if not rest:
            return "this profile states no memory; with one, the two sub-pools split a single rest."
        cell, slot = t["cell_size_bytes"], q["state_slot_bytes"]
        return (f"each pool budgeted from the whole rest ({fmt_bytes(rest)}) would promise "
                f"{rest // cell // t['page_size'] * t['page_size']:,} tokens "
                f"and {rest // slot:,} state slots at once; the one rest holds "
                f"{cap['max_total_num_tokens']:,} tokens and {cap['max_mamba_cache_size']:,} slots.")
    if number == 6:
        host = plan["host"]
        has = "indexer" in right
        kv, idx = host["kv_bytes_per_token"], host["indexer_bytes_per_token"] or t["indexer_bytes_per_token"]
        if has:
            return (f"the host copy of one token is {kv:,} B of KV plus {idx:,} B of indexer K; leaving the "
                    f"indexer out sizes HiCache's DRAM per token {idx / (kv + idx):.1%} too small.")
        return (f"the host copy of one token is {kv:,} B of KV and no indexer K; adding the {idx:,} B "
                f"indexer row sizes HiCache's DRAM per token {idx / kv:.1%} too large.")
    if number == 7:
        spr = q["slots_per_request"]
        slots = cap.get("max_mamba_cache_size")
        fit = (f"; the state pool's {slots:,} slots hold {slots // spr:,} requests at any length, the "
               f"mistake would say {slots * right // wrong // spr:,} at twice the context") if slots else ""
        return (f"KDA state per request stays {fmt_bytes(right)} at twice the context, not "
                f"{fmt_bytes(wrong)}{fit}.")
    if number == 8:
        return (f"at TP8 without DP attention a state slot is {fmt_bytes(right)} per rank, not "
                f"{fmt_bytes(wrong)} ({wrong / right:.0f}x too large): the state pool would seem to "
                f"hold {wrong // right if right else 0}x fewer slots than it does.")
    if number == 9:
        if right == wrong:
            return "the draft layer adds nothing per token here: the two settings agree."
        what = ("forgetting the MTP draft layer this profile runs" if prof.speculative_algorithm
                else "counting an MTP draft layer this profile does not run")
        return _token_count_effect(plan, wrong, what)
    raise KeyError(number)


def pitfall_consequences(profile: Profile | str | None = None) -> dict[int, str]:
    """What each pitfall's mistake costs on ``profile``, in tokens, requests or bytes."""
    prof = _profile(profile)
    plan = build_plan(prof)
    return {pf.number: _consequence(pf.number, prof, plan) for pf in PITFALLS}


def pitfall_sections(profile: Profile | str | None = None):
    """Each pitfall as prose: what goes wrong, what it costs on this profile (tokens, requests or
    bytes), why, and what SGLang 0.5.23 changes. Every mistake is also run through its check here
    (a check that let one through raises: the page is never built on a broken check); the reader
    sees consequences, not calls. Returned as HTML (``glm_kv.book.tables.Html``). Drawn on by
    notebooks/07_pitfalls.ipynb."""
    import html as _html

    from .sources import link_names
    from .tables import Html

    prof = _profile(profile)
    plan = build_plan(prof)
    vals = _prose_values(plan)
    e = _html.escape
    parts, text = [], []
    for pf in PITFALLS:
        right, wrong = pf.truth(prof, plan), pf.mistaken(prof, plan)
        try:
            check(pf.number, prof, wrong)
        except PitfallError:
            pass
        else:
            raise PitfallError(f"pitfall {pf.number}: the check lets the mistake ({_show(wrong)}) through")
        check(pf.number, prof, right)
        both = across_layouts(pf.number, prof)
        same = both["article"] == both["0.5.23"]
        note = (" (the same)" if same else " (the statement no longer holds)" if pf.changes_in_0523
                else " (another value; the statement still holds)")
        layouts = (f"the plan's value is {_show(both['article'])} in the article's layout and "
                   f"{_show(both['0.5.23'])} in 0.5.23{note}")
        items = [
            ("What goes wrong", pf.goes_wrong.format(**vals)),
            ("Why", pf.why.format(**vals)),
            ("What it costs here", f"The mistake is to {pf.mistake}. On this profile: "
                                   f"{_consequence(pf.number, prof, plan)}"),
            ("In SGLang 0.5.23", f"{pf.in_0523.format(**vals)} For this profile {layouts}."),
        ]
        dl = "".join(f"<dt>{e(k)}</dt><dd>{link_names(v)}</dd>" for k, v in items)  # SGLang names linked
        parts.append(f'<div class="glm-kv-pitfall"><p class="rubric"><strong>Pitfall {pf.number}: '
                     f'{link_names(pf.title)}</strong></p><dl class="glm-kv-dl">{dl}</dl></div>')
        text.append(f"{pf.number}. {pf.title}: plan {_show(right)}, mistaken {_show(wrong)}")
    return Html("".join(parts), "\n".join(text))
