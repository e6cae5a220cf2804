"""Tables and charts for the chapter "Choosing your flags": display and shaping only.

Every number comes from ``glm_kv.ledgers.advise`` (which sizes through the one capacity kernel) or
from plans of the profile with flags applied; nothing is computed here that the ledgers do not.
"""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from ..inputs.profile import Profile, make_profile
from ..inputs.workload_spec import WorkloadSpec, make_workload
from ..ledgers.advise import (DEFAULT_RATIO, Advice, candidates, paged, resident_slots_per_request,
                              served_requests, with_flags)
from ..ledgers.plan import compute_plan
from .charts import _alt, _tooltip

CONTEXTS = tuple(int(x) for x in np.unique(np.geomspace(1024, 1 << 20, 41).astype(np.int64)))


def deployment_for_advice(profile: Profile) -> tuple[Profile, str]:
    """The profile as it is (the one resolution ``glm-kv advise`` reads), and where its memory
    figure comes from: "from the profile", or "estimated weights" when the plan estimates them."""
    from .charts import weights_label

    return profile, ("from the profile" if weights_label(profile) == "from the profile" else "estimated weights")


def profile_workload(profile: Profile) -> WorkloadSpec:
    """The profile's own example as a workload: its max_running_requests of its context length."""
    plan = compute_plan(profile)
    return make_workload({"name": "the profile's example", "concurrent_requests": profile.max_running_requests or 64,
                          "tokens_per_request": plan.args.context_length})


def advised_profile(profile: Profile, advice: Advice) -> Profile:
    """The profile with the advised flags, or with the workload's count only when nothing fits."""
    if advice.flags:
        return with_flags(profile, advice.flags)
    return advice.default_plan.profile


def setting_table(profile: Profile, advice: Advice):
    """Default split vs advised split: the pools, what SGLang would run, what fits of this workload."""
    import pandas as pd

    rows = {}
    # the profile's own flags are the profile as given (its own KV dtype included: the plan
    # `glm-kv plan` prints), not advise's starting point, which may already switch the dtype
    own = compute_plan(profile)
    for label, plan in (("profile's own flags", own), ("advised flags", advice.plan)):
        cap = plan.capacity
        rows[label] = {
            "kv_cache_dtype": plan.token.kv_cache_dtype,
            "mamba_full_memory_ratio": plan.profile.mamba_full_memory_ratio,
            "max_mamba_cache_size (per worker)": cap.max_mamba_cache_size,
            "max_total_num_tokens (per worker)": cap.max_total_num_tokens,
            "max_running_requests (per worker)": cap.max_running_requests_per_worker,
            "max_running_requests set by": cap.binding_limit,
            "requests of this size that fit (per worker)": int(served_requests(
                cap.max_mamba_cache_size, cap.max_total_num_tokens,
                slots_per_request=plan.request.slots_per_request,
                tokens_per_request=advice.tokens_per_request_paged,
                prefix_tokens=advice.workload.prefix_cache_tokens)),
        }
    return pd.DataFrame(rows).T


def frontier_data(settings: Mapping[str, Profile], contexts: Iterable[int] = CONTEXTS,
                  envelope_of: Profile | None = None, requests_per_worker: int = 1):
    """Per setting and context: the most requests of that length one worker holds, and which pool binds.

    ``envelope_of``: add the best split at each context (``advise.candidates``), for that profile.
    """
    import pandas as pd

    ctx = np.asarray(list(contexts), dtype=np.int64)
    rows = []
    for label, prof in settings.items():
        plan = compute_plan(prof)
        cap, spr = plan.capacity, plan.request.slots_per_request
        t = paged(ctx, plan.token.page_size)
        served = served_requests(cap.max_mamba_cache_size, cap.max_total_num_tokens, slots_per_request=spr,
                                 tokens_per_request=t, prefix_tokens=0)
        by_state = cap.max_mamba_cache_size // spr
        for c, s in zip(ctx, served):
            rows.append({"setting": label, "context": int(c), "requests per worker": int(s),
                         "binds": "state pool" if by_state <= s else "token pool",
                         "state slots": cap.max_mamba_cache_size, "tokens": cap.max_total_num_tokens})
    if envelope_of is not None:
        plan = compute_plan(envelope_of)
        for c in ctx:
            cand = candidates(plan, requests_per_worker, int(paged(int(c), plan.token.page_size)), 0)
            i = int(np.argmax(cand.served))
            rows.append({"setting": "best split at each context", "context": int(c),
                         "requests per worker": int(cand.served[i]), "binds": "both (balanced)",
                         "state slots": int(cand.slots[i]), "tokens": int(cand.tokens[i])})
    return pd.DataFrame(rows)


def crossover_contexts(frontier) -> dict[str, int | None]:
    """Per setting: the longest context at which the state pool still binds (None: never)."""
    out = {}
    for label, g in frontier.groupby("setting", sort=False):
        state = g[g["binds"] == "state pool"]
        out[label] = int(state["context"].max()) if len(state) else None
    return out


def frontier_chart(frontier, workload_point: Mapping[str, int] | None = None):
    """Concurrency vs context, log-log: one line per setting; points show which pool binds."""
    alt = _alt()
    df = frontier[frontier["requests per worker"] > 0]
    domain = [int(frontier["context"].min()), int(frontier["context"].max())]
    base = alt.Chart(df).encode(
        x=alt.X("context:Q", scale=alt.Scale(type="log", domain=domain), title="tokens per request (resident)"),
        y=alt.Y("requests per worker:Q", scale=alt.Scale(type="log"), title="requests that fit, per worker"),
        color=alt.Color("setting:N", title=None, legend=alt.Legend(orient="bottom", columns=1)),
        tooltip=_tooltip(alt, [("setting", "nominal", "setting"), ("context", "quantitative", "tokens per request"),
                               ("requests per worker", "quantitative", "requests per worker"),
                               ("binds", "nominal", "binds"), ("state slots", "quantitative", "state slots"),
                               ("tokens", "quantitative", "token pool")]))
    layers = [base.mark_line(),
              base.mark_point(filled=True, size=40).encode(
                  shape=alt.Shape("binds:N", title="binding pool", legend=alt.Legend(orient="bottom")))]
    if workload_point:
        import pandas as pd

        pt = pd.DataFrame([{"context": workload_point["context"],
                            "requests per worker": workload_point["requests per worker"], "label": "the workload"}])
        layers.append(alt.Chart(pt).mark_point(shape="cross", size=200, color="black", strokeWidth=2).encode(
            x="context:Q", y="requests per worker:Q", tooltip=_tooltip(alt, [("label", "nominal", None)])))
    return alt.layer(*layers).properties(width=520, height=300,
                                         title="How many requests of each length fit on one worker")


def slot_table(advice: Advice):
    """The state slots of one worker under the advice: reserved per request vs resident, and the rest."""
    import pandas as pd

    plan = advice.plan
    cap, req = plan.capacity, plan.request
    running = min(advice.requests_per_worker, advice.served_per_worker)
    rows = [
        ("state slots in the pool (max_mamba_cache_size)", cap.max_mamba_cache_size),
        ("running requests per worker", running),
        (f"slots reserved per request ({req.mamba_strategy})", req.slots_per_request),
        ("slots a running request holds", resident_slots_per_request(plan)),
        ("reserved by the running requests", advice.slots_reserved),
        ("held by the running requests", advice.slots_resident),
        ("left for the radix cache's mamba checkpoints", advice.slot_headroom),
        ("tokens left for the radix cache", advice.token_headroom),
    ]
    return pd.DataFrame(rows, columns=["quantity", "per worker"]).set_index("quantity")


def slot_chart(advice: Advice):
    """One bar of state slots: held by running requests, reserved but free, free beyond the reservation."""
    import pandas as pd

    alt = _alt()
    cap = advice.plan.capacity
    parts = [("held by running requests", advice.slots_resident),
             ("reserved, not held (radix checkpoints meanwhile)", advice.slots_reserved - advice.slots_resident),
             ("beyond the reservation", cap.max_mamba_cache_size - advice.slots_reserved)]
    df = pd.DataFrame([{"pool": "state slots", "part": p, "slots": max(int(v), 0), "order": i}
                       for i, (p, v) in enumerate(parts)])
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("slots:Q", stack="zero", title="state slots per worker"),
        y=alt.Y("pool:N", title=None),
        color=alt.Color("part:N", sort=[p for p, _ in parts], title=None,
                        scale=alt.Scale(range=["#d62728", "#ff9896", "#2ca02c"]),
                        legend=alt.Legend(orient="bottom", columns=1, labelLimit=480)),
        order=alt.Order("order:Q"),
        tooltip=_tooltip(alt, [("part", "nominal", None), ("slots", "quantitative", "slots")]),
    ).properties(width=520, height=60, title="Reserved versus resident state slots")


def host_balance_data(profile: Profile, advice: Advice, ratios: Iterable[float] | None = None):
    """Per device split: how many cached prefixes of the workload's length the host KV tokens and
    the host mamba slots hold, at the advised host ratio (both host pools scale with the device ones)."""
    import pandas as pd

    if advice.host is None or advice.host.hicache_ratio is None:
        return pd.DataFrame(columns=["mamba_full_memory_ratio", "held by", "prefixes"])
    if ratios is None:
        ratios = sorted({*np.round(np.geomspace(0.1, 50, 25), 3), DEFAULT_RATIO})
    base = advised_profile(profile, advice)
    rows = []
    for r in ratios:
        p = make_profile({**base.model_dump(), "mamba_full_memory_ratio": float(r), "max_mamba_cache_size": None})
        host = compute_plan(p).host
        rows.append({"mamba_full_memory_ratio": float(r), "held by": "host KV tokens",
                     "prefixes": int(host.kv_host_tokens // advice.tokens_per_request_paged)})
        rows.append({"mamba_full_memory_ratio": float(r), "held by": "host mamba slots",
                     "prefixes": int(host.mamba_host_slots)})
    return pd.DataFrame(rows)


def host_balance_chart(df, advised_ratio: float | None = None):
    alt = _alt()
    base = alt.Chart(df).encode(
        x=alt.X("mamba_full_memory_ratio:Q", scale=alt.Scale(type="log"), title="--mamba-full-memory-ratio"),
        y=alt.Y("prefixes:Q", scale=alt.Scale(type="log"), title="cached prefixes the host tier holds"),
        color=alt.Color("held by:N", title=None, legend=alt.Legend(orient="bottom")),
        tooltip=_tooltip(alt, [("held by", "nominal", None), ("mamba_full_memory_ratio", "quantitative", "ratio"),
                               ("prefixes", "quantitative", "prefixes")]))
    layers = [base.mark_line(point=True)]
    if advised_ratio is not None:
        import pandas as pd

        rule = pd.DataFrame([{"mamba_full_memory_ratio": advised_ratio, "label": "advised ratio"}])
        layers.append(alt.Chart(rule).mark_rule(strokeDash=[4, 4], color="black").encode(
            x="mamba_full_memory_ratio:Q", tooltip=_tooltip(alt, [("label", "nominal", None)])))
    return alt.layer(*layers).properties(width=520, height=260,
                                         title="The host tier: prefixes by KV tokens vs by mamba slots")


def host_table(advice: Advice):
    """The advised host tier of one rank."""
    import pandas as pd

    h = advice.host
    if h is None or h.hicache_ratio is None:
        return pd.DataFrame({"per rank": ["no host tier advised"]}, index=["HiCache"])
    rows = [("ranks on the machine", h.ranks_per_host), ("host budget per rank, B", h.budget_bytes_per_rank),
            ("--hicache-ratio", h.hicache_ratio), ("host KV tokens", h.kv_tokens),
            ("host mamba slots", h.mamba_slots), ("host pools, B", h.total_bytes),
            ("prefixes the KV tokens hold", h.prefixes_by_kv), ("prefixes the mamba slots hold", h.prefixes_by_mamba),
            ("runs out first", h.binding)]
    return pd.DataFrame(rows, columns=["quantity", "per rank"]).set_index("quantity")


RESOURCE_WORDS = {"tokens": "the token pool", "mamba": "the state pool (mamba slots)",
                  "memory": "the token and state pools together (no split does better)"}
LIMIT_WORDS = {"requested": "the requested max_running_requests", "auto": "SGLang's automatic count",
               "tokens": "the token pool", "mamba": "the state pool (mamba slots)",
               "memory": "the memory as a whole (no split serves the workload)"}


def words(kind: str, value: str) -> str:
    """A binding label in words for the prose (``kind``: "resource" or "limit")."""
    return (RESOURCE_WORDS if kind == "resource" else LIMIT_WORDS).get(value, value)
