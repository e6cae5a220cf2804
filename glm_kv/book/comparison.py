"""The profile comparison that chooses (issue 21, item 6): sorted by what fits, the best per question.

``book/profiles.ipynb`` shows three things built here: a narrow answer table (profile, requests
that fit, tokens, binding limit: four columns that fit a 400 px phone), sorted by the requests
that fit and then the tokens; the best profile for each question a reader chooses by, as a
definition list; and the details, one row per profile, in a box that scrolls under a sticky
first column. Every number is the profile's plan (``capacity_plan``: "est." marks a profile whose
memory is the engine's estimate) and ``glm_kv.ledgers.derivations.requests_fit``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ..inputs.profile import ProfileError, load_profile
from ..units import GiB

BEST = "★"   # marks the best value of a column in the answer table


@dataclass(frozen=True)
class Row:
    """One profile's figures, numbers as numbers (formatting happens at display)."""

    profile: str
    gpu: str
    estimated: bool
    requests_fit: int
    binding: str
    context_length: int
    tokens_per_rank: int
    state_slots_per_rank: int
    requests_asked_for: int
    bytes_per_token: int
    slots_per_request: int
    state_bytes_per_request: int
    parallel: str
    kv: str
    layout: str
    host_bytes_per_rank: int | None


@dataclass(frozen=True)
class Question:
    """A question a reader chooses a profile by, and how its best answer is found."""

    text: str
    column: str
    key: Callable[[Row], float]      # larger is better
    shown: Callable[[Row], str]


QUESTIONS = (
    Question("Most requests of the profile's context at once, per rank", "requests that fit",
             lambda r: r.requests_fit, lambda r: f"{r.requests_fit:,} requests"),
    Question("Most tokens of KV cache per rank (longest contexts)", "tokens per rank",
             lambda r: r.tokens_per_rank, lambda r: f"{r.tokens_per_rank:,} tokens"),
    Question("Fewest bytes per token (cell_size)", "B per token",
             lambda r: -r.bytes_per_token, lambda r: f"{r.bytes_per_token:,} B per token"),
    Question("Least KDA state per request", "KDA B per request",
             lambda r: -r.state_bytes_per_request, lambda r: f"{r.state_bytes_per_request:,} B per request"),
)


def profile_rows(profiles: Sequence[str]) -> tuple[list[Row], list[tuple[str, str]]]:
    """(rows sorted by what fits, [(profile, why SGLang refuses it)])."""
    from ..ledgers.derivations import binding_at_context, requests_fit
    from .tables import capacity_plan

    rows, refused = [], []
    for name in profiles:
        try:
            plan, how = capacity_plan(name)
        except ProfileError as e:
            refused.append((load_profile(name).label, str(e)))
            continue
        cap, pr, par = plan.capacity, plan.profile, plan.parallel
        rows.append(Row(
            profile=pr.label, gpu=pr.gpu or "-", estimated=how.startswith("ESTIMATED"),
            requests_fit=int(requests_fit(plan).value), binding=binding_at_context(plan),
            context_length=int(pr.context_length), tokens_per_rank=int(cap.max_total_num_tokens),
            state_slots_per_rank=int(cap.max_mamba_cache_size),
            requests_asked_for=int(cap.requested_max_running_requests_per_worker),
            bytes_per_token=int(plan.token.cell_size_bytes), slots_per_request=int(plan.request.slots_per_request),
            state_bytes_per_request=int(plan.request.state_bytes_per_request),
            parallel=f"{pr.tp_size} / {pr.dp_size} / {par.attn_tp_size}",
            kv=f"{plan.token.kv_cache_dtype}, {plan.token.kv_layout}", layout=pr.sglang_layout,
            host_bytes_per_rank=int(plan.host.total_host_bytes) if plan.host.enabled else None))
    rows.sort(key=lambda r: (-r.requests_fit, -r.tokens_per_rank, r.profile))
    return rows, refused


def best_per_question(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """For each question, every profile that ties for the best value (profiles measured on memory
    the engine estimated compete too, and say so where they are shown)."""
    out = {}
    for q in QUESTIONS:
        top = max(q.key(r) for r in rows)
        out[q.text] = [r for r in rows if q.key(r) == top]
    return out


def _est(r: Row) -> str:
    return " (est.)" if r.estimated else ""


def answer_table(rows: Sequence[Row]):
    """Four columns a phone can show: profile (GPU), requests that fit, tokens per rank, binding limit.

    The best value of each numeric column carries ``BEST``; "est." marks estimated memory.
    """
    import pandas as pd

    from .tables import show

    best_req = max(r.requests_fit for r in rows)
    best_tok = max(r.tokens_per_rank for r in rows)
    df = pd.DataFrame([{
        "profile (GPU)": f"{r.profile} ({r.gpu}){_est(r)}",
        "requests that fit per rank": f"{r.requests_fit:,}" + (f" {BEST}" if r.requests_fit == best_req else ""),
        "tokens per rank": f"{r.tokens_per_rank:,}" + (f" {BEST}" if r.tokens_per_rank == best_tok else ""),
        "binding limit": r.binding,
    } for r in rows])
    return show(df, css="wrap")


def best_list(rows: Sequence[Row]):
    """The best profile per question, as a definition list (question -> profile: value)."""
    from .tables import definitions

    by_text = {q.text: q for q in QUESTIONS}
    items = []
    for text, winners in best_per_question(rows).items():
        q = by_text[text]
        items.append((text, "; ".join(f"{r.profile}{_est(r)}: {q.shown(r)}" for r in winners)))
    return definitions(items)


def detail_table(rows: Sequence[Row]):
    """Every figure per profile; wide, so it scrolls under a sticky first column (the profile)."""
    import pandas as pd

    from .tables import show

    df = pd.DataFrame([{
        "profile": r.profile, "GPU": r.gpu + _est(r), "context": r.context_length,
        "state slots per rank": r.state_slots_per_rank, "requests asked for per rank": r.requests_asked_for,
        "B per token": r.bytes_per_token, "slots per request": r.slots_per_request,
        "KDA B per request": r.state_bytes_per_request, "tp / dp / attn_tp": r.parallel,
        "KV dtype, row": r.kv, "SGLang": r.layout,
        "HiCache DRAM per rank, GiB": "off" if r.host_bytes_per_rank is None else f"{r.host_bytes_per_rank / GiB:,.2f}",
    } for r in rows])
    return show(df, css="sticky-first")
