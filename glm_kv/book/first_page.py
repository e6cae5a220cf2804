"""The book's first page: what fits on one rank of the profile, in one sentence and one picture.

A new reader asks "how many tokens and requests does my GPU hold, and what stops it holding
more?" before anything else, so ``book/intro.ipynb`` answers from the plan before any chapter
explains it. Everything here reads the plan (``glm_kv.ledgers.plan``), the one capacity
derivation (``glm_kv.ledgers.derivations.requests_fit``) and ``glm_kv.ledgers.advise``: no figure
is computed twice. Drawn on by ``book/intro.ipynb``; chapter 6 (``notebooks/06_capacity``)
derives the same numbers step by step.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..units import GiB

if TYPE_CHECKING:
    from ..inputs.profile import Profile
    from ..ledgers.plan import Plan

# what a binding limit is called in the book's vocabulary (book/notation.md); SGLang's names in code
BINDING_WORDS = {
    "requested": "max_running_requests (the requests asked for)",
    "tokens": "the KV pool's token slots (max_total_num_tokens)",
    "mamba": "the state pool's slots (max_mamba_cache_size)",
}

# what runs out first as concurrency grows (``Advice.binding_resource``), in the same words
RESOURCE_WORDS = {"tokens": "the KV pool", "mamba": "the state pool", "memory": "GPU memory"}


@dataclass(frozen=True)
class Step:
    """One bar of the waterfall: what takes memory (or what is left) and how many bytes."""

    label: str
    sglang_name: str    # the quantity as SGLang's code or boot log names it
    bytes: int
    kind: str           # "total", "spent" or "left"


@dataclass(frozen=True)
class FirstAnswer:
    """The answer of page one for one rank of a profile (all numbers from its plan)."""

    profile: str
    gpu: str
    context_length: int
    tokens_per_rank: int            # max_total_num_tokens
    state_slots_per_rank: int       # max_mamba_cache_size
    slots_per_request: int
    requests_fit: int               # requests of context_length resident at once on one rank
    requested_per_rank: int         # max_running_requests per worker, as asked for
    token_cap: int                  # requests the token slots hold at context_length
    state_cap: int | None           # requests the state slots hold (None: the model keeps no per-request state)
    binding: str                    # "requested", "tokens" or "mamba"
    memory_estimated: bool          # the plan's memory figure uses an estimate somewhere
    steps: tuple[Step, ...]

    @property
    def binding_words(self) -> str:
        return BINDING_WORDS[self.binding]


def waterfall_steps(plan: "Plan") -> tuple[Step, ...]:
    """GPU memory -> pre-load overhead -> weights -> activations and graphs -> KV pool -> state pool -> left.

    The bars add up exactly: "activations, CUDA graphs" is everything between the free memory
    after the weights and SGLang's rest (``pre_model_load x (1 - mem_fraction_static)`` plus the
    VLM cache, float GiB rounding included), and "left" is the rest the two pools do not take.
    """
    mem, cap, gpu = plan.memory, plan.capacity, plan.gpu
    state = int(cap.mamba_pool_bytes) + int(cap.spec_scratch_bytes)
    kv = int(cap.token_pool_bytes)
    if mem.rest_bytes is None or mem.pre_model_load_bytes is None or mem.weights_bytes is None:
        # the profile gives SGLang's rest itself (available_bytes): the waterfall starts there
        rest = int(cap.available_bytes)
        return (Step("memory for the pools (given)", "available_bytes (rest)", rest, "total"),
                Step("KV pool", "KV Cache size (max_total_num_tokens x cell_size)", kv, "spent"),
                Step("state pool", "Mamba Cache size (+ verify scratch)", state, "spent"),
                Step("left", "rest - KV pool - state pool", rest - kv - state, "left"))
    device = int(gpu.memory_bytes)
    pre = int(mem.pre_model_load_bytes)
    after_weights = pre - int(mem.weights_bytes)
    rest = int(mem.rest_bytes)
    steps = (
        Step("GPU memory", "total_gpu_memory", device, "total"),
        Step("CUDA context, NCCL", "device - pre_model_load", device - pre, "spent"),
        Step("weights", "weights (Load weight end)", int(mem.weights_bytes), "spent"),
        Step("activations, CUDA graphs", "pre_model_load x (1 - mem_fraction_static)", after_weights - rest, "spent"),
        Step("KV pool", "KV Cache size (max_total_num_tokens x cell_size)", kv, "spent"),
        Step("state pool", "Mamba Cache size (+ verify scratch)", state, "spent"),
        Step("left", "rest - KV pool - state pool", rest - kv - state, "left"),
    )
    assert sum(s.bytes for s in steps if s.kind != "total") == device, "waterfall does not add up"
    return steps


def first_answer(profile: "str | Profile") -> FirstAnswer:
    """The tokens and requests that fit on one rank, which limit binds, and where the memory goes.

    A profile that gives no memory is planned with the engine's weight estimate
    (``glm_kv.book.tables.capacity_plan``), and ``memory_estimated`` says so.
    """
    from ..ledgers.derivations import binding_at_context, requests_fit
    from .tables import capacity_plan

    plan, how = capacity_plan(profile)
    cap, req = plan.capacity, plan.request
    ctx = plan.profile.context_length
    return FirstAnswer(
        profile=plan.profile.label, gpu=plan.gpu.name, context_length=int(ctx),
        tokens_per_rank=int(cap.max_total_num_tokens), state_slots_per_rank=int(cap.max_mamba_cache_size),
        slots_per_request=int(req.slots_per_request), requests_fit=int(requests_fit(plan).value),
        requested_per_rank=int(cap.requested_max_running_requests_per_worker),
        token_cap=int(cap.max_total_num_tokens // ctx),
        state_cap=int(cap.max_mamba_cache_size // req.slots_per_request) if req.slots_per_request else None,
        binding=binding_at_context(plan),
        memory_estimated="estimate" in how.lower() or plan.memory.pre_model_load_source == "estimate",
        steps=waterfall_steps(plan))


def answer_sentence(a: FirstAnswer) -> str:
    """Page one's sentence as Markdown (SGLang's names in code spans, the answer in bold)."""
    head = (f"One {a.gpu} rank of `{a.profile}` holds **{a.tokens_per_rank:,} tokens** of KV cache, and "
            f"**{a.requests_fit:,} requests** of {a.context_length:,} tokens fit at once.")
    if a.binding == "requested":
        pools = min(a.token_cap, a.state_cap) if a.state_cap is not None else a.token_cap
        why = (f"The limit is `max_running_requests` ({a.requested_per_rank:,} per rank asked for), not the "
               f"pools: they would hold {pools:,}.")
    elif a.binding == "tokens":
        state = ("" if a.state_cap is None       # a model without per-request state (MLA / GQA / SWA only)
                 else f"the state pool would hold {a.state_cap:,} and ")
        why = (f"The KV pool's token slots (`max_total_num_tokens`) run out first; {state}"
               f"{a.requested_per_rank:,} are asked for.")
    else:
        why = (f"The state pool's slots (`max_mamba_cache_size`, {a.slots_per_request} per request) run out "
               f"first; the KV pool would hold {a.token_cap:,} and {a.requested_per_rank:,} are asked for.")
    return f"{head} {why}"


def fit_more_sentence(profile: "str | Profile") -> str:
    """What to change to fit more requests of the profile's context (Markdown): ``glm-kv advise`` for
    the profile's own workload, the same advice chapter 7 ("Choosing flags") shows, so the first page
    and the chapter name the same flags (issue 29). The count is ``requests_fit`` of the advised plan,
    the same formula as this page's answer, so "instead of" compares like with like."""
    from ..inputs.profile import load_profile
    from ..ledgers.advise import advise
    from ..ledgers.derivations import binding_at_context, requests_fit
    from .advise_charts import profile_workload

    prof = profile if not isinstance(profile, str) else load_profile(profile)
    adv = advise(prof, profile_workload(prof))
    first = first_answer(prof)
    now, ctx = first.requests_fit, first.context_length
    after = int(requests_fit(adv.plan, ctx).value)
    pools = min(first.token_cap, first.state_cap)
    if first.binding == "requested" and pools == now:
        return (f"To fit more: all {now:,} requests asked for per rank fit, exactly as many as the pools hold "
                f"at this split; `glm-kv advise --profile {prof.label} --set concurrent_requests=N "
                f"--set tokens_per_request={ctx}` names the flags for N.")
    if first.binding == "requested":
        return (f"To fit more: the pools are not the limit. All {now:,} requests asked for per rank fit, and the "
                f"pools would hold {pools:,}; raise `--max-running-requests` (global, over "
                f"{adv.plan.parallel.attn_dp_size:,} DP-attention workers) to run more at once.")
    if not adv.flags or after <= now:
        return (f"To fit more: no flag does at {ctx:,} tokens; glm-kv advise finds {after:,} requests "
                f"per rank the most the pools hold. Shorten the context or add GPUs.")
    flags = " ".join(f"`{f}`" for f in adv.flags)
    return (f"To fit more: launch with {flags} and {after:,} requests of {ctx:,} tokens fit per rank instead "
            f"of {now:,}; then {BINDING_WORDS[binding_at_context(adv.plan, ctx)]} bind (from glm-kv advise, "
            f"as in chapter 7).")


_COLORS = {"total": "#4c78a8", "spent": "#bab0ac", "left": "#54a24b",
           "KV pool": "#f58518", "state pool": "#e45756", "weights": "#72b7b2"}


def waterfall_figure(a: FirstAnswer):
    """The memory of one rank as a waterfall of horizontal bars (inline SVG: no script, no console).

    One row per step, each bar starting where the previous one ended; values in GiB (binary) with
    the exact bytes beside them. The ``viewBox`` lets the page shrink it to a 400 px phone.
    """
    from .figures import _rect, _svg, _text

    # narrow user units: on a 400 px phone the 12-unit labels still show at about 10 px
    width, left, right, row, top = 440, 160, 80, 30, 10
    bar_w = width - left - right
    total = a.steps[0].bytes
    body, x0, y = [], 0, top
    for s in a.steps:
        start = x0 - s.bytes if s.kind == "spent" else 0   # spent bars hang from the last one's end
        w = max(1.0, bar_w * s.bytes / total)
        x = left + bar_w * start / total
        color = _COLORS.get(s.label, _COLORS[s.kind])
        body.append(_rect(x, y, w, row - 8, color))
        body.append(_text(left - 6, y + 15, s.label, anchor="end", weight="bold" if s.kind != "spent" else "normal"))
        gib = s.bytes / GiB
        body.append(_text(width - right + 6, y + 15, f"{gib:,.2f} GiB" if gib >= 0.01 or not s.bytes else "< 0.01 GiB"))
        if s.kind == "total":
            x0 = s.bytes
        elif s.kind == "spent":
            x0 -= s.bytes
        y += row
    title = (f"Where one {a.gpu} rank's memory goes ({a.profile}), in GiB (2³⁰ B)"
             + (" (memory partly estimated)" if a.memory_estimated else ""))
    return _svg(width, y + 4, body, title)


def waterfall_table(a: FirstAnswer):
    """The waterfall's numbers in exact bytes, with SGLang's name for each."""
    import pandas as pd

    from .tables import show

    return show(pd.DataFrame([(s.label, s.sglang_name, s.bytes) for s in a.steps],
                             columns=["step", "SGLang's name", "bytes"]))


# Page one's context stops (issue 29, item 8): the lengths users ask about, beside the profile's own.
CONTEXT_STOPS = (8 * 1024, 32 * 1024, 128 * 1024)


def fit_at_contexts(profile: "str | Profile", stops: tuple[int, ...] = CONTEXT_STOPS) -> list[dict]:
    """Requests that fit on one rank at 8K / 32K / 128K and at the profile's own context.

    Each row is the plan of the profile with ``context_length`` set to that length (SGLang's
    automatic ``max_running_requests`` follows the context, so the plan is computed per length, as
    ``glm-kv plan --set context_length=N`` would), read through ``requests_fit`` and
    ``binding_at_context``. Lengths past the model's maximum are left out.
    """
    from ..inputs.profile import load_profile, make_profile
    from ..ledgers.derivations import binding_at_context, requests_fit
    from ..ledgers.plan import compute_plan

    prof = profile if not isinstance(profile, str) else load_profile(profile)
    own = compute_plan(prof)
    top = int(own.profile.context_length)
    rows = []
    for ctx in sorted({*(c for c in stops if c <= top), top}):
        plan = own if ctx == top else compute_plan(make_profile({**prof.model_dump(), "context_length": ctx}))
        rows.append({"context_length": ctx, "requests_fit": int(requests_fit(plan).value),
                     "binds": binding_at_context(plan), "profile's own": ctx == top})
    return rows


def fit_at_contexts_table(profile: "str | Profile"):
    """``fit_at_contexts`` as the first page's small table (binding in the book's words)."""
    import pandas as pd

    from .tables import show

    rows = fit_at_contexts(profile)
    return show(pd.DataFrame(
        [(f"{r['context_length']:,}" + (" (the profile's)" if r["profile's own"] else ""), r["requests_fit"],
          BINDING_WORDS[r["binds"]]) for r in rows],
        columns=["tokens per request", "requests that fit per rank", "what binds"]))
