"""The profile comparison that chooses (issue 21, item 6): sorted by what fits, the best per question.

Like with like (issue 29, item 7): profiles are ranked by the requests of one stated context,
``COMPARE_CONTEXT`` (128K tokens), that fit per rank, not by each profile's own context (a 1M
profile against a 128K one); per-token and per-request figures follow. A comparison needs two
profiles: with one, every part says so instead of ranking one row.

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
from ..units import fmt_bytes

BEST = "★"   # marks the best value of a column in the answer table
COMPARE_CONTEXT = 131072   # tokens per request every profile is ranked at (128K)


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
    requests_at_compare: int | None   # requests of COMPARE_CONTEXT tokens that fit; None: longer than the profile serves
    binding_at_compare: str | None
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


def context_label(tokens: int) -> str:
    """131072 -> "128K", 1048576 -> "1M" (context lengths as they are quoted)."""
    if tokens % (1 << 20) == 0:
        return f"{tokens >> 20}M"
    return f"{tokens >> 10}K" if tokens % 1024 == 0 else f"{tokens:,}"


def _at_compare(r: "Row") -> int:
    return -1 if r.requests_at_compare is None else r.requests_at_compare


QUESTIONS = (
    Question(f"Most requests of {context_label(COMPARE_CONTEXT)} tokens at once, per rank",
             f"requests of {context_label(COMPARE_CONTEXT)} that fit",
             _at_compare, lambda r: f"{r.requests_at_compare:,} requests"),
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
            requests_at_compare=int(requests_fit(plan, COMPARE_CONTEXT).value)
            if pr.context_length >= COMPARE_CONTEXT else None,
            binding_at_compare=binding_at_context(plan, COMPARE_CONTEXT)
            if pr.context_length >= COMPARE_CONTEXT else None,
            state_slots_per_rank=int(cap.max_mamba_cache_size),
            requests_asked_for=int(cap.requested_max_running_requests_per_worker),
            bytes_per_token=int(plan.token.cell_size_bytes), slots_per_request=int(plan.request.slots_per_request),
            state_bytes_per_request=int(plan.request.state_bytes_per_request),
            parallel=f"{pr.tp_size} / {pr.dp_size} / {par.attn_tp_size}",
            kv=f"{plan.token.kv_cache_dtype}, {plan.token.kv_layout}", layout=pr.sglang_layout,
            host_bytes_per_rank=int(plan.host.total_host_bytes) if plan.host.enabled else None))
    rows.sort(key=lambda r: (-_at_compare(r), -r.tokens_per_rank, r.profile))
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


def needs_two(rows: Sequence[Row]) -> str | None:
    """The sentence a one-profile comparison shows instead of ranking a single row; None with two or more."""
    if len(rows) >= 2:
        return None
    which = f" ({rows[0].profile})" if rows else ""
    return (f"This run built one profile{which}: a side-by-side comparison needs two. Build two or more with "
            "`glm-kv book --profile A --profile B`, or every shipped profile with `glm-kv book`; "
            "`_build/profiles/index.html` compares them all.")


def _needs_two_html(rows: Sequence[Row]):
    from .tables import Html
    import html as _html
    import re as _re

    text = needs_two(rows) or ""
    body = _re.sub(r"`([^`]+)`", lambda m: f"<code>{_html.escape(m.group(1))}</code>", _html.escape(text, quote=False))
    return Html(f'<p class="glm-kv-needs-two">{body}</p>', text)


def comparison_intro(rows: Sequence[Row], this_profile: str) -> str:
    """The page's opening paragraph (Markdown): what is compared, at which context, how ranked."""
    ctx = context_label(COMPARE_CONTEXT)
    if needs_two(rows):
        return f"This book was built for **{this_profile}**."
    return (f"This book was built for **{this_profile}**; the table compares {len(rows)} profiles at one "
            f"context, **{ctx} tokens per request** ({COMPARE_CONTEXT:,} tokens), the most requests of that "
            f"length that fit on one rank first, then the most tokens per rank. {BEST} marks a column's "
            "best value. Requests that fit are the smallest of the requests asked for, the token slots "
            "over the context and the state slots over the slots per request; the binding limit names "
            "which. Each profile's own context, and what fits at it, is in the table of every figure "
            "below. \"(est.)\" marks a profile that gives no memory: its weights are the engine's "
            "estimate on the named GPU.")


def _requests_at_compare(r: Row) -> str:
    return "-" if r.requests_at_compare is None else f"{r.requests_at_compare:,}"


def answer_table(rows: Sequence[Row]):
    """Four columns a phone can show: profile (GPU), requests of ``COMPARE_CONTEXT`` tokens that
    fit, tokens per rank, the limit that binds at that context. With fewer than two profiles, the
    sentence that a comparison needs two.

    The best value of each numeric column carries ``BEST``; "est." marks estimated memory.
    """
    import pandas as pd

    from .tables import show

    if needs_two(rows):
        return _needs_two_html(rows)
    best_req = max(_at_compare(r) for r in rows)
    best_tok = max(r.tokens_per_rank for r in rows)
    ctx = context_label(COMPARE_CONTEXT)
    df = pd.DataFrame([{
        "profile (GPU)": f"{r.profile} ({r.gpu}){_est(r)}",
        f"requests of {ctx} tokens per rank": _requests_at_compare(r)
        + (f" {BEST}" if _at_compare(r) == best_req else ""),
        "tokens per rank": f"{r.tokens_per_rank:,}" + (f" {BEST}" if r.tokens_per_rank == best_tok else ""),
        f"binding limit at {ctx}": r.binding_at_compare or f"serves at most {context_label(r.context_length)}",
    } for r in rows])
    return show(df, css="wrap")


def best_list(rows: Sequence[Row]):
    """The best profile per question, as a definition list (question -> profile: value)."""
    from .tables import definitions

    if needs_two(rows):
        from .tables import Html

        return Html("", "")
    by_text = {q.text: q for q in QUESTIONS}
    items = []
    for text, winners in best_per_question(rows).items():
        q = by_text[text]
        items.append((text, "; ".join(f"{r.profile}{_est(r)}: {q.shown(r)}" for r in winners)))
    dl = definitions(items)
    from .tables import Html

    lead = '<p><strong>The best profile for each question</strong> ("est.": on estimated memory):</p>'
    return Html(lead + dl.html, "The best profile for each question:\n" + dl.text)


def detail_table(rows: Sequence[Row]):
    """Every figure per profile; wide, so it scrolls under a sticky first column (the profile)."""
    import pandas as pd

    from .tables import show

    df = pd.DataFrame([{
        "profile": r.profile, "GPU": r.gpu + _est(r), "context": r.context_length,
        "requests of its context that fit": r.requests_fit, "binding at its context": r.binding,
        "state slots per rank": r.state_slots_per_rank, "requests asked for per rank": r.requests_asked_for,
        "B per token": r.bytes_per_token, "slots per request": r.slots_per_request,
        "KDA B per request": r.state_bytes_per_request, "tp / dp / attn_tp": r.parallel,
        "KV dtype, row": r.kv, "SGLang": r.layout,
        "HiCache DRAM per rank": "off" if r.host_bytes_per_rank is None else fmt_bytes(r.host_bytes_per_rank, "GiB"),
    } for r in rows])
    return show(df, css="sticky-first")


# ------------------------------------------------------------------------------------------------
# The `glm-kv book` run's index page (OUT/index.html): the same comparison, standalone HTML
# ------------------------------------------------------------------------------------------------

INDEX_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Arial,"Noto Sans","glm-kv CJK","Noto Sans CJK SC","Noto Sans SC",
"WenQuanYi Micro Hei","PingFang SC","Microsoft YaHei",sans-serif;margin:1em auto;max-width:80em;padding:0 1em;
line-height:1.45}
table{border-collapse:collapse;font-size:.85em}
td,th{border:1px solid #ccc;padding:.3em .5em;text-align:right;vertical-align:top}
th{background:#f4f4f4}
td.text,th.text{text-align:left}
table.answer{width:100%}
table.answer td,table.answer th{white-space:nowrap}
table.answer th,table.answer td.text{white-space:normal}
table.answer td:first-child{overflow-wrap:anywhere}
.gpu{color:#555;font-size:.9em}
.glm-kv-table.sticky-first{overflow-x:auto;max-width:100%}
.glm-kv-table.sticky-first td,.glm-kv-table.sticky-first th{white-space:nowrap}
.glm-kv-table.sticky-first td:first-child,.glm-kv-table.sticky-first th:first-child{position:sticky;left:0;
background:#fff;z-index:1;box-shadow:1px 0 0 #ccc}
.glm-kv-table.sticky-first th:first-child{background:#f4f4f4}
.none{color:#666}
.best{font-weight:600}
dt{font-weight:600;margin-top:.6em}
dd{margin-left:1.2em;overflow-wrap:anywhere}
"""


def index_page(profiles: Sequence[str], books: dict[str, str]) -> str:
    """The run's index: ``profiles`` sorted by what fits, the best profile per question first, a
    four-column answer table that fits 400 px, every figure in a box scrolling under a sticky first
    column, then what each profile is. ``books`` maps a profile label to its built book's href."""
    import html

    from .static_assets import font_face_css  # the CJK subset, copied beside the page by write_index

    e = html.escape
    rows, refused = profile_rows(profiles)

    def name(label: str, say_unbuilt: bool = True) -> str:
        href = books.get(label)
        return (f'<a href="{e(href)}">{e(label)}</a>' if href
                else e(label) + (' <span class="none">(no book built)</span>' if say_unbuilt else ""))

    by_text = {q.text: q for q in QUESTIONS}
    best = "".join(
        f"<dt>{e(text)}</dt><dd>" + "; ".join(f"{name(r.profile)}{e(_est(r))}: {e(by_text[text].shown(r))}"
                                            for r in winners) + "</dd>"
        for text, winners in best_per_question(rows).items()) if rows else ""
    best_req = max((_at_compare(r) for r in rows), default=None)
    best_tok = max((r.tokens_per_rank for r in rows), default=None)

    def mark(v: int, top: int | None) -> str:
        return f'<span class="best">{v:,} {BEST}</span>' if v == top else f"{v:,}"

    answer = "".join(
        f'<tr><td class="text">{name(r.profile, False)} <span class="gpu">{e(r.gpu)}{e(_est(r))}</span></td>'
        f"<td>{'-' if r.requests_at_compare is None else mark(r.requests_at_compare, best_req)}</td>"
        f"<td>{mark(r.tokens_per_rank, best_tok)}</td>"
        f'<td class="text">{e(r.binding_at_compare or "serves at most " + context_label(r.context_length))}</td>'
        f"</tr>" for r in rows)
    cols = ["profile", "context", "requests of its context that fit", "binding at its context", "state slots per rank", "requests asked for per rank", "B per token",
            "slots per request", "KDA B per request", "tp / dp / attn_tp", "KV dtype, row", "SGLang",
            "HiCache DRAM per rank"]
    detail = "".join(
        f'<tr><td class="text">{e(r.profile)}</td><td>{r.context_length:,}</td><td>{r.requests_fit:,}</td>'
        f'<td class="text">{e(r.binding)}</td><td>{r.state_slots_per_rank:,}</td>'
        f"<td>{r.requests_asked_for:,}</td><td>{r.bytes_per_token:,}</td><td>{r.slots_per_request:,}</td>"
        f"<td>{r.state_bytes_per_request:,}</td><td>{e(r.parallel)}</td><td class=\"text\">{e(r.kv)}</td>"
        f'<td class="text">{e(r.layout)}</td>'
        f"<td>{'off' if r.host_bytes_per_rank is None else e(fmt_bytes(r.host_bytes_per_rank, 'GiB'))}</td></tr>"
        for r in rows)
    refusals = ("<h2>Profiles SGLang would refuse</h2><dl>" + "".join(
        f"<dt>{name(p)}</dt><dd>{e(why)}</dd>" for p, why in refused) + "</dl>") if refused else ""
    desc = "".join(f"<dt>{name(load_profile(n).label)}</dt><dd>{e(load_profile(n).description or '-')}</dd>"
                   for n in profiles)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>glm-kv: the book per profile</title><style>{font_face_css()}{INDEX_CSS}</style></head><body><main>
<h1>The three ledgers (三本账), per deployment profile</h1>
<p>Every shipped profile, computed from its plan by <code>glm_kv</code> whether or not its book was built,
compared at one context, <strong>{context_label(COMPARE_CONTEXT)} tokens per request</strong> ({COMPARE_CONTEXT:,} tokens):
sorted by the requests of that length that fit at once on one rank, then by the tokens per rank; a linked
name opens its book. Requests that fit are the smallest of the requests asked for, the token slots over
the context and the state slots over the slots per request; "binding limit" names which. Each profile's
own context, and what fits at it, is in the table of every figure. {BEST} marks the best value of a column; "(est.)" marks a profile that gives no memory (its
weights are the engine's estimate on the named GPU). Memory in GiB (2<sup>30</sup> B), exact bytes first.</p>
<h2>Which profile, for which question</h2>
<dl class="best-per-question">{best}</dl>
<h2>What fits, per rank</h2>
<table class="answer"><thead><tr><th class="text">profile, GPU</th><th>requests of {context_label(COMPARE_CONTEXT)} tokens per rank</th>
<th>tokens per rank</th><th class="text">binding limit at {context_label(COMPARE_CONTEXT)}</th></tr></thead><tbody>{answer}</tbody></table>
<h2>Every figure</h2>
<div class="glm-kv-table sticky-first"><table><thead><tr>{"".join(
        f'<th class="text">{e(c)}</th>' if c == "profile" else f"<th>{e(c)}</th>" for c in cols)}</tr></thead>
<tbody>{detail}</tbody></table></div>
{refusals}
<h2>What each profile is</h2>
<dl>{desc}</dl>
</main></body></html>
"""
