"""Worked problems at the end of the chapters (issue 21, item 7), computed by the package.

Each problem states a question with this profile's numbers and its answer, worked with the same
formula the chapter shows (``glm_kv.ledgers.derivations`` / ``glm_kv.ledgers.workload``); the
chapter glues both as Markdown (``{glue:md}``) and folds the answer in a dropdown. The numbers in
the question are chosen from the profile (a quarter of its context, half its requests), so every
profile's book gets its own problem. Drawn on by notebooks 01, 02 and 06.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..inputs.rules import rules_for
from ..units import fmt_bytes

if TYPE_CHECKING:
    from ..ledgers.plan import Plan


@dataclass(frozen=True)
class Problem:
    question: str   # Markdown
    answer: str     # Markdown: the working, then the result in bold


def _quarter_context(plan: "Plan") -> int:
    page = plan.token.page_size
    return max(page, (plan.profile.context_length // 4) // page * page)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def tokens_in_budget(budget_bytes: int, cell_size: int, page_size: int) -> int:
    """Token slots a token-pool budget holds: SGLang's ``rest // cell_size``, whole pages only
    (the same rule as ``glm_kv.ledgers.capacity``; here it is fed a mistaken or another layout's
    ``cell_size``)."""
    return budget_bytes // cell_size // page_size * page_size


def _layout_plan(plan: "Plan", layout: str) -> "Plan":
    """``plan``'s profile under SGLang layout ``layout``, everything else unchanged."""
    from ..inputs.profile import make_profile
    from ..ledgers.plan import compute_plan

    if rules_for(plan.profile) is rules_for(layout):
        return plan
    return compute_plan(make_profile({**plan.profile.model_dump(), "sglang_layout": layout}))


def token_problem(plan: "Plan") -> Problem:
    """Chapter 1: the KV pool bytes one request of a quarter of the context keeps on a rank."""
    from ..ledgers.workload import token_ledger_bytes

    n = _quarter_context(plan)
    cell = plan.token.cell_size_bytes
    total = token_ledger_bytes(plan, n)
    return Problem(
        question=(f"A request keeps {n:,} tokens resident on one rank of `{plan.profile.label}`. "
                  f"How many bytes of the KV pool does it hold, and does its KDA state grow with it?"),
        answer=(f"Each token costs `cell_size` = {cell:,} B (MLA latent KV plus indexer K over the "
                f"{len(plan.model.full_attention_layers)} full-attention layers), so the request holds "
                f"{n:,} × {cell:,} = **{fmt_bytes(total)}** of the KV pool. Its KDA state does not grow: "
                f"it stays {plan.request.slots_per_request} state slots of {plan.request.state_slot_bytes:,} B "
                f"whatever the length."))


def request_problem(plan: "Plan") -> Problem:
    """Chapter 2: the state pool bytes that half the profile's requests reserve on a rank."""
    from ..ledgers.workload import kda_ledger_bytes

    n = max(1, plan.capacity.requested_max_running_requests_per_worker // 2)   # a plan with capacity
    req = plan.request
    total = kda_ledger_bytes(plan, n)
    return Problem(
        question=(f"{n:,} requests run at once on one rank of `{plan.profile.label}`, one of 100 tokens and the "
                  f"others of {plan.profile.context_length:,}. How much of the state pool do they reserve?"),
        answer=(f"The KDA state is per request, not per token: each reserves {req.slots_per_request} state slots "
                f"({req.slots_per_request} × {req.state_slot_bytes:,} B = {req.state_bytes_per_request:,} B), "
                f"whatever its length. {n:,} requests reserve {n:,} × {req.state_bytes_per_request:,} B = "
                f"**{fmt_bytes(total)}**."))


def capacity_problem(plan: "Plan") -> Problem:
    """Chapter 6: the requests of a quarter of the context that fit on a rank, and what binds."""
    from ..ledgers.derivations import binding_at_context, requests_fit

    n = _quarter_context(plan)
    d = requests_fit(plan, n)
    c = plan.capacity
    binding = binding_at_context(plan, n)
    words = {"requested": "`max_running_requests` (the requests asked for)",
             "tokens": "the token slots (`max_total_num_tokens`)",
             "mamba": "the state slots (`max_mamba_cache_size`)"}[binding]
    return Problem(
        question=(f"On one rank of `{plan.profile.label}`, how many requests of {n:,} tokens fit at once, "
                  f"and which limit binds?"),
        answer=(f"The smallest of three: {c.requested_max_running_requests_per_worker:,} asked for; "
                f"{c.max_total_num_tokens:,} token slots // {n:,} = {c.max_total_num_tokens // n:,}; "
                f"{c.max_mamba_cache_size:,} state slots // {plan.request.slots_per_request} = "
                f"{c.max_mamba_cache_size // plan.request.slots_per_request:,}. "
                f"So **{int(d.value):,} requests** fit, limited by {words}.\n\n`{d.text()}`"))


def hbm_problem(plan: "Plan") -> Problem:
    """Chapter 3: the IndexKeyCache pages one request of a quarter of the context takes, and their bytes."""
    t = plan.token
    n = _quarter_context(plan)
    pages = _ceil_div(n, t.indexer_tokens_per_page)
    keys = t.indexer_page_bytes // t.indexer_unpooled_bytes_per_token_per_layer
    row = t.indexer_unpooled_bytes_per_token_per_layer
    held = (f"{keys:,} pooled keys of {row:,} B, one per {t.indexer_tokens_per_page // keys:,} tokens"
            if keys < t.indexer_tokens_per_page else f"one key of {row:,} B per token")
    total = pages * t.indexer_page_bytes * t.num_full_layers
    return Problem(
        question=(f"A request of {n:,} tokens runs on one rank of `{plan.profile.label}`. How many "
                  f"`IndexKeyCache` pages does it take in each full-attention layer, and how many bytes of "
                  f"indexer K does it reserve over all {t.num_full_layers} of them?"),
        answer=(f"One page holds {t.indexer_tokens_per_page:,} tokens and is {t.indexer_page_bytes:,} B per layer "
                f"({held}), so the request takes "
                f"⌈{n:,} / {t.indexer_tokens_per_page:,}⌉ = {pages:,} pages per layer and reserves "
                f"{pages:,} × {t.indexer_page_bytes:,} × {t.num_full_layers} = **{fmt_bytes(total)}** "
                f"of indexer K: {t.indexer_bytes_per_token:,} B per token, the indexer part of `cell_size`. "
                f"`index_kpool` = {t.index_kpool} does not change the page."))


def radix_problem(plan: "Plan") -> Problem:
    """Chapter 4: what one cached node of eight pages names in HBM, and where the state starts to dominate."""
    t, r = plan.token, plan.request
    n = 8 * t.page_size
    kv = n * t.cell_size_bytes
    total = kv + r.state_slot_bytes
    even = _ceil_div(r.state_slot_bytes, t.cell_size_bytes)
    return Problem(
        question=(f"The RadixTree of `{plan.profile.label}` caches a prefix of {n:,} tokens (8 pages) as one "
                  f"node with one KDA checkpoint. How many slot numbers does the node hold, how many bytes of "
                  f"HBM do they name, and from what prefix length does the KV outweigh the KDA state?"),
        answer=(f"FULL.value holds {n:,} token slots and MAMBA.value 1 state slot: {n + 1:,} integers. They name "
                f"{n:,} × {t.cell_size_bytes:,} B = {kv:,} B of KV and indexer K plus one state slot of "
                f"{r.state_slot_bytes:,} B: **{fmt_bytes(total)}**. The KV outweighs one checkpoint only from "
                f"⌈{r.state_slot_bytes:,} / {t.cell_size_bytes:,}⌉ = {even:,} tokens on."))


def dram_problem(plan: "Plan") -> Problem:
    """Chapter 5: the host bytes one backup of a quarter-context prefix writes, and what stays in HBM."""
    h, tail = plan.host, plan.tail
    page = h.kv_page_size
    n = _ceil_div(_quarter_context(plan), page) * page
    has_indexer = "indexer" in h.entries
    per_token = h.kv_bytes_per_token + (h.indexer_bytes_per_token if has_indexer else 0)
    total = n * per_token + h.mamba_slot_bytes
    parts = (f"{h.kv_bytes_per_token:,} B of KV + {h.indexer_bytes_per_token:,} B of indexer K = {per_token:,} B"
             if has_indexer else f"{h.kv_bytes_per_token:,} B of KV (no indexer entry in this layout)")
    return Problem(
        question=(f"With HiCache on, `{plan.profile.label}` backs a prefix of {n:,} tokens up to DRAM "
                  f"(`tree.backup`). How many bytes does it write to the host pools, and what stays in HBM only?"),
        answer=(f"The host pools are {', '.join(h.entries)}. Per token the host takes {parts}, "
                f"and the node's one KDA checkpoint takes one host state slot of {h.mamba_slot_bytes:,} B: "
                f"{n:,} × {per_token:,} + {h.mamba_slot_bytes:,} = **{fmt_bytes(total)}**. The compress tail "
                f"({tail.bytes:,} B per rank) and `req_to_token` have no host copy."))


def flags_problem(plan: "Plan") -> Problem:
    """Chapter 6b: up to what request length the state pool, not the token pool, binds on a rank."""
    c, t = plan.capacity, plan.token
    spr = plan.request.slots_per_request
    by_state = c.max_mamba_cache_size // spr
    per_request = c.max_total_num_tokens // max(by_state, 1)
    longest = per_request // t.page_size * t.page_size
    return Problem(
        question=(f"At the split `{plan.profile.label}` gives (`--mamba-full-memory-ratio` "
                  f"{plan.profile.mamba_full_memory_ratio}, KV cache in {t.kv_cache_dtype}), up to what request length does the state pool, "
                  f"not the token pool, limit how many requests one rank holds (leaving `max_running_requests` "
                  f"aside)?"),
        answer=(f"The state pool holds {c.max_mamba_cache_size:,} // {spr} = {by_state:,} requests whatever their "
                f"length. The token pool holds as many while each keeps at most {c.max_total_num_tokens:,} // "
                f"{by_state:,} = {per_request:,} tokens, {longest:,} in whole pages of {t.page_size:,}. So requests "
                f"of up to **{longest:,} tokens** are bound by state slots (a larger ratio helps them); longer "
                f"ones by token slots (a smaller ratio helps)."))


def pitfalls_problem(plan: "Plan") -> Problem:
    """Chapter 7: the token slots a reader who leaves the indexer out of ``cell_size`` (pitfall 2) predicts."""
    c, t = plan.capacity, plan.token
    budget = c.token_pool_budget_bytes
    wrong = tokens_in_budget(budget, t.kv_bytes_per_token, t.page_size)
    right = tokens_in_budget(budget, t.cell_size_bytes, t.page_size)
    return Problem(
        question=(f"The token pool of one rank of `{plan.profile.label}` gets {fmt_bytes(budget)}. A reader divides it by "
                  f"the MLA latent KV alone ({t.kv_bytes_per_token:,} B per token, pitfall 2). How many token "
                  f"slots do they predict, and how far off are they?"),
        answer=(f"SGLang divides by `cell_size` = {t.kv_bytes_per_token:,} + {t.indexer_bytes_per_token:,} = "
                f"{t.cell_size_bytes:,} B and keeps whole pages of {t.page_size:,}: {budget:,} // "
                f"{t.cell_size_bytes:,} → {right:,} tokens. The reader gets {budget:,} // {t.kv_bytes_per_token:,}"
                f" → {wrong:,}: **{wrong - right:,} tokens too many** "
                f"({(wrong - right) / right:.1%} over)."))


def changed_problem(plan: "Plan") -> Problem:
    """Chapter 8: the token slots the same token-pool budget holds under the article's layout and 0.5.23."""
    budget = plan.capacity.token_pool_budget_bytes
    a, b = (_layout_plan(plan, lay).token for lay in ("article", "0.5.23"))
    ta = tokens_in_budget(budget, a.cell_size_bytes, a.page_size)
    tb = tokens_in_budget(budget, b.cell_size_bytes, b.page_size)
    return Problem(
        question=(f"Keep the token-pool budget of one rank of `{plan.profile.label}`, {fmt_bytes(budget)}, and change "
                  f"only the SGLang layout. How many token slots does it hold under the article's layout and under 0.5.23?"),
        answer=(f"Article: `cell_size` = {a.cell_size_bytes:,} B, pages of {a.page_size:,}: {budget:,} // "
                f"{a.cell_size_bytes:,} → {ta:,} tokens. 0.5.23: the indexer reserves only pooled keys, "
                f"`cell_size` = {b.cell_size_bytes:,} B, pages of {b.page_size:,}: {budget:,} // "
                f"{b.cell_size_bytes:,} → {tb:,} tokens. "
                f"**0.5.23 holds {tb - ta:,} more tokens** ({(tb - ta) / ta:.1%})."))


PROBLEMS = {"01_token": token_problem, "02_request": request_problem, "03_hbm_pool": hbm_problem,
            "04_radix_tree": radix_problem, "05_dram": dram_problem, "06_capacity": capacity_problem,
            "06b_choosing_flags": flags_problem, "07_pitfalls": pitfalls_problem,
            "08_what_changed": changed_problem}


def glue_problem(chapter: str, plan: "Plan") -> Problem:
    """Glue ``problem_q`` and ``problem_a`` (Markdown) for ``chapter``'s worked problem."""
    from IPython.display import Markdown
    from myst_nb import glue

    from .sources import link_md

    p = PROBLEMS[chapter](plan)
    glue("problem_q", Markdown(link_md(p.question)), display=False)   # SGLang names linked to their line
    glue("problem_a", Markdown(link_md(p.answer)), display=False)
    return p


PROBLEM_MARKDOWN = """## Worked problem

{glue:md}`problem_q`

:::{admonition} Answer (computed by glm_kv.book.problems)
:class: dropdown
{glue:md}`problem_a`
:::
"""
