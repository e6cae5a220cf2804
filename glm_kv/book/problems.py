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

from .fmt import fmt_bytes

if TYPE_CHECKING:
    from ..ledgers.plan import Plan


@dataclass(frozen=True)
class Problem:
    question: str   # Markdown
    answer: str     # Markdown: the working, then the result in bold


def _quarter_context(plan: "Plan") -> int:
    page = plan.token.page_size
    return max(page, (plan.profile.context_length // 4) // page * page)


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


PROBLEMS = {"01_token": token_problem, "02_request": request_problem, "06_capacity": capacity_problem}


def glue_problem(chapter: str, plan: "Plan") -> Problem:
    """Glue ``problem_q`` and ``problem_a`` (Markdown) for ``chapter``'s worked problem."""
    from IPython.display import Markdown
    from myst_nb import glue

    p = PROBLEMS[chapter](plan)
    glue("problem_q", Markdown(p.question), display=False)
    glue("problem_a", Markdown(p.answer), display=False)
    return p


PROBLEM_MARKDOWN = """## Worked problem

{glue:md}`problem_q`

:::{admonition} Answer (computed by glm_kv.book.problems)
:class: dropdown
{glue:md}`problem_a`
:::
"""
