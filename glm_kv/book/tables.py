"""Tables the chapters show: display and shaping only, every number comes from the ledgers or tensors."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..errors import ProfileError, own_words
from ..inputs.profile import Profile, load_profile, make_profile
from ..ledgers.plan import build_plan, compute_plan
from ..ledgers.workload import workload
from ..units import dotted
from .literal import Html  # noqa: F401  (figures, pitfalls and the runner import it from here)
from ..units import fmt_bytes  # noqa: F401  (the chapters import it from here: binary units)


def comparison_table(profiles: Sequence[str]):
    """One row per quantity, one column per profile: the figures every chapter starts from.

    Every value is read from the plan (``glm_kv.ledgers.plan.build_plan``); nothing is computed here.
    """
    import pandas as pd


    rows = [
        ("layout", ("profile", "sglang_layout")),
        ("GPU", ("gpu", "name")),
        ("tp / attn_tp / attn_dp", None),
        ("kv_cache_dtype", ("token", "kv_cache_dtype")),
        ("KV row layout", ("token", "kv_layout")),
        ("kv_cache_dim", ("token", "kv_cache_dim")),
        ("MLA latent KV, B/token", ("token", "kv_bytes_per_token")),
        ("indexer K, B/token", ("token", "indexer_bytes_per_token")),
        ("cell_size, B/token", ("token", "cell_size_bytes")),
        ("page_size, tokens", ("token", "page_size")),
        ("KDA state slot, B", ("request", "state_slot_bytes")),
        ("state slots per request", ("request", "slots_per_request")),
        ("KDA state per request, B", ("request", "state_bytes_per_request")),
        ("compress tail, B", ("tail", "bytes")),
        ("max_total_num_tokens", ("capacity", "max_total_num_tokens")),
        ("max_running_requests (per worker)", ("capacity", "max_running_requests")),
        ("HiCache host entries", ("host", "entries")),
    ]
    data = {}
    for prof in profiles:
        plan = build_plan(prof)
        col = []
        for label, path in rows:
            if path is None:
                par = plan["parallel"]
                col.append(f"{plan['profile']['tp_size']} / {par['attn_tp_size']} / {par['attn_dp_size']}")
                continue
            value = plan.get(path[0], {}) or {}
            value = value.get(path[1]) if isinstance(value, dict) else None
            if isinstance(value, list):
                value = ", ".join(map(str, value))
            elif isinstance(value, bool) or value is None:
                value = "-" if value is None else str(value)
            elif isinstance(value, int):
                value = f"{value:,}"
            col.append(value)
        data[plan["profile"]["name"]] = col
    return pd.DataFrame(data, index=[r[0] for r in rows])



def capacity_plan(profile):
    """(plan with a capacity, how the memory was found) for any profile: the one resolution.

    The plan is ``compute_plan``'s, exactly what ``glm-kv plan`` prints: weights the profile does
    not state are the engine's estimate from the model's config and quantization over the
    profile's own ranks (``weights_estimate``, on by default), and ``how`` says so, so the book
    never shows an estimate unlabelled and never keeps an estimate of its own (issue 29).
    """
    from ..ledgers.plan import compute_plan

    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    plan = compute_plan(prof)
    if plan.capacity is None:
        raise ProfileError("weights_estimate", f"{prof.label}: no capacity without memory figures (give "
                                               "weights_bytes or available_bytes, or leave weights_estimate on)")
    m = plan.memory
    if prof.available_bytes is None and m is not None and "estimate" in (m.weights_source or ""):
        return plan, (f"ESTIMATED: weights {fmt_bytes(m.weights_bytes)} per rank estimated from the model's "
                      f"config and quantization over tp {prof.tp_size} on {plan.gpu.name}")
    return plan, plan.capacity.available_source


def profile_overview(profiles: Sequence[str]):
    """One row per profile, one column per figure a deployment is chosen by (for the comparison page).

    Every value comes from the profile's plan (``capacity_plan``: estimated memory is marked
    "est."), and the requests that fit from ``glm_kv.ledgers.derivations.requests_fit``.
    Drawn on by book/profiles.ipynb and the ``glm-kv book`` index page (runner.write_index).
    """
    import pandas as pd

    from ..ledgers.derivations import binding_at_context, requests_fit

    rows = []
    for name in profiles:
        try:
            plan, how = capacity_plan(name)
        except ProfileError as e:  # SGLang would refuse it: say so in its row, keep the others
            rows.append({"profile": load_profile(name).label, "binding limit": f"refused: {e}"})
            continue
        est = how.startswith("ESTIMATED")
        cap, par, pr = plan.capacity, plan.parallel, plan.profile
        fit = requests_fit(plan)
        mark = " (est.)" if est else ""
        rows.append({
            "profile": pr.label,
            "GPU": (pr.gpu or "-") + mark,
            "requests that fit per rank": f"{int(fit.value):,}{mark}",
            "binding limit": binding_at_context(plan),
            "context": pr.context_length,
            "tokens per rank": f"{cap.max_total_num_tokens:,}{mark}",
            "mamba slots per rank": f"{cap.max_mamba_cache_size:,}{mark}",
            "SGLang's request cap": cap.max_running_requests_per_worker,
            "B per token": plan.token.cell_size_bytes,
            "KDA slots per request": plan.request.slots_per_request,
            "KDA B per request": plan.request.state_bytes_per_request,
            "tp / dp / attn_tp": f"{pr.tp_size} / {pr.dp_size} / {par.attn_tp_size}",
            "KV dtype, row": f"{plan.token.kv_cache_dtype}, {plan.token.kv_layout}",
            "SGLang": pr.sglang_layout,
            "HiCache DRAM per rank": fmt_bytes(plan.host.total_host_bytes) if plan.host.enabled else "off",
        })
    return pd.DataFrame(rows, dtype=object).fillna("-")


def profile_descriptions(profiles: Sequence[str]) -> "Html":
    """Each profile's own description, as a definition list (descriptions are sentences)."""
    return definitions([(load_profile(p).label, load_profile(p).description or "-") for p in profiles])


# ------------------------------------------------------------------------------------------------
# Helpers the chapters call (display and shaping only: every number comes from glm_kv)
# ------------------------------------------------------------------------------------------------

class Plain(str):
    """A string that glues without quotes (``{glue:text}`` shows its text/plain repr)."""

    def __repr__(self) -> str:
        return str(self)


def glue_all(values: dict, *, display: bool = False) -> None:
    """``myst_nb.glue`` every item; strings glue without quotes."""
    from myst_nb import glue

    for key, value in values.items():
        glue(key, Plain(value) if isinstance(value, str) else value, display=display)


def plan_variants(profile, variants: dict, columns: dict):
    """One row per variant of ``profile`` (label -> field overrides), one column per plan key.

    ``columns`` maps a column title to a dotted plan key (``"token.kv_bytes_per_token"``). A
    variant SGLang refuses gets its one-line reason in the ``refused`` column instead of values (glm-kv's words:
    ``own_words`` drops the SGLang message a refusal quotes, which the CLI prints whole).
    """
    import pandas as pd


    base = profile if isinstance(profile, Profile) else load_profile(profile)
    rows = []
    for label, overrides in variants.items():
        row = {"variant": label}
        try:
            plan = build_plan(make_profile({**base.model_dump(), **(overrides or {})}))
            for title, path in columns.items():
                value = dotted(plan, path)
                row[title] = ", ".join(map(str, value)) if isinstance(value, list) else value
            row["refused"] = ""
        except ProfileError as e:
            row.update({title: None for title in columns})
            row["refused"] = own_words(str(e))
        rows.append(row)
    df = pd.DataFrame(rows, dtype=object).set_index("variant")
    for col in df.columns:  # numeric where every variant has a value; refused rows keep None
        if df[col].notna().all():
            df[col] = df[col].infer_objects()
    if not df["refused"].astype(bool).any():
        df = df.drop(columns="refused")
    return df


def show(df, *, caption: str | None = None, css: str = "wrap sticky-first") -> "Table":
    """``df`` for reading: integers with thousands separators, no 0..n index, never truncated.

    A named index (``variant``, ``figure``) becomes the first column; a plain 0..n index is
    dropped. The table renders as HTML inside its own horizontally scrolling box, so a wide
    table never widens the page (the data stays numeric in ``df`` itself). ``css``: extra classes
    of the box: ``wrap`` lets text cells wrap (a narrow table that fits a phone), ``sticky-first``
    keeps the first column (the row's name) in view while the rest scrolls; both by default.
    """
    import pandas as pd

    out = df.copy()
    # an unnamed integer index is row numbers (a filtered 0..n one included: the flags table), never labels
    if isinstance(out.index, pd.RangeIndex) or out.index.name is None and pd.api.types.is_integer_dtype(out.index):
        out = out.reset_index(drop=True)
        keep_index = False
    else:
        keep_index = True
    for col in out.columns:
        if pd.api.types.is_integer_dtype(out[col]) and not pd.api.types.is_bool_dtype(out[col]):
            out[col] = out[col].map(lambda v: f"{v:,}")
        elif pd.api.types.is_float_dtype(out[col]) and len(out[col].dropna()) \
                and (out[col].dropna() % 1 == 0).all():
            # byte counts that pandas made float (a column with a gap): whole numbers, separated
            out[col] = out[col].map(lambda v: f"{int(v):,}" if pd.notna(v) else v)
        elif out[col].dtype == object:
            out[col] = out[col].map(lambda v: f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else v)
    out = out.astype(object).where(out.notna(), "-")
    if keep_index:
        if out.index.name is None:
            out.index.name = ""  # row labels (a transposed table): no "index" header
        out = out.reset_index()
    return Table(out, caption=caption, css=css)


class Table:
    """A display-only table: HTML in a scrolling box (no index, no truncation), text for terminals."""

    def __init__(self, df, caption: str | None = None, css: str = ""):
        self.df = df
        self.caption = caption
        self.css = css

    def _repr_html_(self) -> str:
        import html as _html

        def cell(v, tag="td"):
            text = _html.escape(_cell_text(v))
            num = bool(_NUMERIC.match(text))
            return f'<{tag} class="{"num" if num else "text"}">{text}</{tag}>'

        head = "".join(f"<th>{_html.escape(str(c))}</th>" for c in self.df.columns)
        body = "".join("<tr>" + "".join(cell(v) for v in row) + "</tr>"
                       for row in self.df.itertuples(index=False, name=None))
        # the caption sits above the scrolling box, so it wraps with the page instead of scrolling
        cap = f'<p class="glm-kv-caption">{_html.escape(self.caption)}</p>' if self.caption else ""
        box = " ".join(["glm-kv-table", *self.css.split()])
        return (f'{cap}<div class="{box}"><table><thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table></div>")

    def __repr__(self) -> str:
        return self.df.to_string(index=False, max_colwidth=None)

    def __len__(self) -> int:
        return len(self.df)


def _cell_text(v) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v)) if not isinstance(v, tuple) else "(" + ", ".join(map(str, v)) + ")"
    return str(v)


_NUMERIC = __import__("re").compile(r"^[-+]?[\d,]+(\.\d+)?( ?[KMG]i?B| B| %)?( ★)?$")


def definitions(items, *, css: str = "glm-kv-dl") -> Html:
    """Explanations as a definition list (term -> description): they wrap, never truncate.

    ``items``: (term, description) pairs, or (term, description, note) triples; text is escaped, and
    an SGLang class or function it names links to its line (``glm_kv.book.sources.link_names``).
    """
    from .sources import link_names

    parts, text = [], []
    for item in items:
        term, desc, *note = item
        parts.append(f"<dt>{link_names(str(term))}</dt><dd>{link_names(str(desc))}"
                     + (f'<br><span class="note">{link_names(str(note[0]))}</span>' if note and note[0] else "")
                     + "</dd>")
        text.append(f"{term}: {desc}")
    return Html(f'<dl class="{css}">' + "".join(parts) + "</dl>", "\n".join(text))


def derivation_block(plan, names=None, groups=None, extra=()) -> Html:
    """The plan's derivations (``glm_kv.ledgers.derivations``) as displayed equations with numbers.

    Each shows the formula in SGLang's names, the same formula with this profile's numbers,
    and the value; all three come from one expression, and tests check the value against the plan.
    A wide equation scrolls inside the block, never the page. Chapters 1, 2, 3, 5 and 6 show it.
    """
    import html as _html

    from ..ledgers.derivations import GROUPS, derivations

    ds = derivations(plan, tuple(GROUPS) if groups is None else groups)
    if names is not None:
        by = {d.name: d for d in ds}
        ds = [by[n] for n in names if n in by]
    ds = [*ds, *extra]  # derivations made for a question (``requests_fit(plan, context)``)
    html = "".join(f'<div class="glm-kv-eq"><p class="what">{_html.escape(d.what)}</p>{d.mathml()}</div>'
                   for d in ds)
    return Html(f'<div class="glm-kv-derivations">{html}</div>', "\n".join(d.text() for d in ds))


def measured_buffers(report, names: Sequence[str] | None = None):
    """Per-buffer rows of a ``glm_kv.measure`` report: shape, measured bytes, ledger bytes, match."""
    import pandas as pd

    rows = []
    for i, alloc in enumerate(report.allocations):
        for r in alloc.rows:
            if names is not None and not any(r.name.startswith(n) for n in names):
                continue
            rows.append({"allocation": i + 1, "tokens": alloc.sizes.get("tokens"),
                         "mamba slots": alloc.sizes.get("mamba_slots"), "buffer": r.name,
                         "shape": tuple(r.shape), "dtype": r.dtype, "where": r.where,
                         "measured B": r.measured_bytes, "ledger B": r.ledger_bytes, "match": r.match})
    return pd.DataFrame(rows)


def measured_per_unit(report) -> "Html":
    """The report's linear checks: measured bytes per token / slot vs the ledger's figure.

    Numbers in the table; what a row means (the ledger figure it is checked against, or why a
    group does not grow) underneath as a definition list.
    """
    import pandas as pd

    rows, notes = [], []
    for l in report.linear:
        rows.append({"what grows": l["group"], "per": l["unit"],
                     "sizes": " → ".join(f"{v:,}" for v in l["sizes"]),
                     "bytes at those sizes": " → ".join(f"{v:,}" for v in l["bytes"]),
                     "measured per unit": l["measured_per_unit"],
                     "ledger per unit": l["ledger_per_unit"], "match": l["match"]})
        notes.append((l["group"], f"checked against {l['ledger_source']}" if " " not in l["ledger_source"]
                      else l["ledger_source"]))
    table = show(pd.DataFrame(rows))
    return Html(table._repr_html_() + definitions(notes).html, repr(table))


def measured_full_profile(report) -> "Html":
    """The full profile's pools as measured per unit x count (or allocated), against the plan.

    The formula and byte counts in the table; where the count came from and why a group differs
    from the plan's pool bytes as notes underneath.
    """
    import pandas as pd

    rows, notes = [], []
    for f in report.full_profile:
        plan_bytes = f.get("plan_token_pool_bytes") if f["group"] == "token" else f.get("plan_mamba_pool_bytes")
        rows.append({"group": f["group"], "count": f["count"], "bytes": f["bytes"], "formula": f["formula"],
                     "plan's pool bytes": int(plan_bytes) if plan_bytes == plan_bytes and plan_bytes is not None else None,
                     "difference": f.get("difference")})
        note = f"{f['label']}; count from {f['count_source']}"
        if f.get("difference_note") and f.get("difference_note") == f.get("difference_note"):
            note += f". The difference: {f['difference_note']}"
        notes.append((f["group"], note))
    table = show(pd.DataFrame(rows, dtype=object))
    return Html(table._repr_html_() + definitions(notes).html, repr(table))


def measured_slope(report, prefix: str | tuple[str, ...]) -> int:
    """Measured bytes per token (or slot) of the buffers whose names start with ``prefix`` (or any of them).

    The slope between the report's two reduced allocations: (bytes at b - bytes at a) / (b - a).
    """
    a, b = report.allocations[:2]
    first = prefix if isinstance(prefix, str) else prefix[0]
    unit = "mamba_slots" if first.startswith(("mamba_pool", "MambaPoolHost")) else (
        "host_tokens" if first.startswith(("MLATokenToKVPoolHost", "DSAIndexerPoolHost")) else "tokens")
    ba = sum(r.measured_bytes for r in a.rows if r.name.startswith(prefix))
    bb = sum(r.measured_bytes for r in b.rows if r.name.startswith(prefix))
    slope, rem = divmod(bb - ba, b.sizes[unit] - a.sizes[unit])
    if rem:
        raise ValueError(f"{prefix}: bytes do not grow linearly ({ba} -> {bb})")
    return slope


def workload_table(profile, variants: dict, requests: int, context_length: int):
    """``glm_kv.workload.workload`` for each variant of ``profile``: both ledgers, per rank and global."""
    import pandas as pd


    base = profile if isinstance(profile, Profile) else load_profile(profile)
    rows = []
    for label, overrides in variants.items():
        w = workload(compute_plan(make_profile({**base.model_dump(), **(overrides or {})})),
                     requests, context_length)
        rows.append({"variant": label, "requests (global)": w.requests_global,
                     "requests per rank": w.requests_per_rank, "context": w.context_length,
                     "token ledger per request, B": w.token_bytes_per_request,
                     "token ledger per rank, B": w.token_bytes_per_rank,
                     "KDA ledger per request, B": w.kda_bytes_per_request,
                     "KDA ledger per rank, B": w.kda_bytes_per_rank,
                     "compress tail per rank, B": w.tail_bytes_per_rank})
    return pd.DataFrame(rows).set_index("variant")


# Why SGLang 0.5.23 differs from the article's upstream commit, per figure (reference:
# shared/reference/sglang-0.5.23.md, read from the 0.5.23 wheel).
LAYOUT_FIGURES = [
    ("page size, tokens", "token.page_size",
     "0.5.23 forces page_size = 64 x index_kpool for this model (_deepseek_family_overrides)"),
    ("kv_cache_dim", "token.kv_cache_dim", "calculate_mla_kv_cache_dim is unchanged: the row depends on dtype and backend only"),
    ("MLA latent KV, B/token", "token.kv_bytes_per_token", "same rows, same layers"),
    ("indexer K reserved, B/token/layer", "token.indexer_bytes_per_token_per_layer",
     "IndexKeyCache rows hold page_size // index_kpool pooled keys: ceil(132 / kpool) per token and layer"),
    ("indexer K reserved, B/token", "token.indexer_bytes_per_token", "the same, over the indexed layers"),
    ("indexer page, B per layer", "token.indexer_page_bytes", "a page keeps its byte size but now spans page_size tokens"),
    ("tokens per indexer page", "token.indexer_tokens_per_page", "follows the page size"),
    ("cell_size (token budget divisor), B/token", "token.cell_size_bytes",
     "the configurator divides by KV + pooled indexer (_compute_dsa_indexer_cell_size)"),
    ("KDA state slot, B", "request.state_slot_bytes", "mamba_cache_per_req is unchanged"),
    ("state slots per request", "request.slots_per_request", "_calculate_mamba_ratio is unchanged for the reachable strategies"),
    ("compress tail, B", "tail.bytes", "rows = requests per worker + 2, width = index_kpool + draft tokens, in both"),
    ("HiCache host entries", "host.entries", "0.5.23's hybrid HostPoolGroup adds the DSAIndexerPoolHost sidecar of KV"),
    ("host KV row, B per layer", "host.kv_row_bytes", "0.5.23's host row equals the device row (the article's host row is kv_lora_rank wide)"),
    ("host indexer, B/token", "host.indexer_bytes_per_token", "the INDEXER sidecar stores the pooled keys"),
]


def layout_comparison(profile):
    """Figure by figure: the article's layout vs SGLang 0.5.23, for this profile's other settings."""
    import pandas as pd


    base = profile if isinstance(profile, Profile) else load_profile(profile)
    plans = {layout: build_plan(make_profile({**base.model_dump(), "sglang_layout": layout}))
             for layout in ("article", "0.5.23")}
    rows = []
    for title, path, why in LAYOUT_FIGURES:
        a, b = dotted(plans["article"], path), dotted(plans["0.5.23"], path)
        show_a = ", ".join(map(str, a)) if isinstance(a, list) else a
        show_b = ", ".join(map(str, b)) if isinstance(b, list) else b
        rows.append({"figure": title, "article (f4de6abee6)": show_a, "SGLang 0.5.23": show_b,
                     "changed": a != b, "why": why if a != b else "unchanged"})
    return pd.DataFrame(rows).set_index("figure")


def agreement_report(path: str | Path):
    """The SGLang agreement report (``book/_static/sglang-agreement.json``, written by tests/sglang).

    Returns (summary dict, per-profile DataFrame, mismatch DataFrame); (None, None, None) when the
    report has not been produced on this checkout.
    """
    import json

    import pandas as pd

    path = Path(path)
    if not path.is_file():
        return None, None, None
    rep = json.loads(path.read_text())
    summary = {k: v for k, v in rep.items() if not isinstance(v, (list, dict))}
    profiles = pd.DataFrame([{"profile": p.get("id"), "keys compared": p.get("keys_compared"),
                              "mismatches": len(p.get("mismatches") or []),
                              "SGLang refused": bool(p.get("sglang_error")),
                              "engine refused": bool(p.get("engine_error")),
                              "seconds": p.get("seconds")} for p in rep.get("profiles", [])])
    mismatches = pd.DataFrame([{"profile": p.get("id"), **m} for p in rep.get("profiles", [])
                               for m in (p.get("mismatches") or [])],
                              columns=["profile", "key", "sglang", "engine", "explanation"])
    return summary, profiles, mismatches


def agreement_summary(summary: dict | None):
    """The agreement report's headline for a reader: a short two-column table (None without a report)."""
    import pandas as pd

    if not summary:
        return None
    rows = [("run finished (UTC)", summary.get("finished_utc", "?")),
            ("SGLang", summary.get("sglang_version", "?")),
            ("deployment points checked", f"{summary.get('profiles_checked', 0):,}"),
            ("refused by both SGLang and glm-kv", f"{summary.get('profiles_refused_by_both', 0):,}"),
            ("values compared", f"{summary.get('keys_compared', 0):,}"),
            ("differences, each with its recorded reason", f"{summary.get('mismatches', 0):,}"),
            ("unexplained differences", f"{summary.get('unexplained_mismatches', 0):,}")]
    return pd.DataFrame(rows, columns=["", "this build's run"]).set_index("")


# ------------------------------------------------------------------------------------------------
# The device a chapter measures on (the `device` parameter: "auto" = CUDA when available)
# ------------------------------------------------------------------------------------------------

def resolve_device(device: str | None) -> str:
    """"auto" (or None) is CUDA when ``torch.cuda.is_available()``, else the CPU; else as given."""
    from ..tensors.pool_objects import default_device

    return default_device() if device in (None, "auto") else device


def measured_on(report) -> "Html":
    """What a ``measure_profile`` report allocated, where, and why that size; on CUDA the
    allocator's measured delta, elsewhere its predicted bytes (glm_kv.tensors.cuda_allocator)."""
    import html as _html

    import pandas as pd

    from ..tensors.measure import allocation_summary, why_these_sizes

    table = show(pd.DataFrame(allocation_summary(report)), caption=f"measured on {report.device} ({report.cuda})")
    why = why_these_sizes(report)
    return Html(f'<div class="glm-kv-measured" data-device="{report.device}"><p>{_html.escape(why)}</p>'
                f"{table._repr_html_()}</div>", f"measured on {report.device}\n{why}\n{table!r}")


def on_device(device: str) -> Html:
    """One line naming where a chapter's tensors were allocated (the GPU workflow reads it)."""
    import html as _html

    name = device
    if device.startswith("cuda"):
        import torch

        name = f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return Html(f'<p class="glm-kv-measured" data-device="{_html.escape(device)}">Tensors allocated on '
                f"<strong>{_html.escape(name)}</strong>.</p>", f"measured on {device}")


def capacity_summary(plan, how: str) -> dict:
    """Chapter 6's answer for one rank, as glue values; the takeaway sentence follows the numbers.

    ``plan`` has a capacity (``capacity_plan``); ``how`` says where its memory figure came from.
    Drawn on by notebooks/06_capacity.ipynb.
    """
    from ..ledgers.derivations import binding_at_context, requests_fit

    cap, req = plan.capacity, plan.request
    fit = requests_fit(plan)
    n_fit, binding = int(fit.value), binding_at_context(plan)
    ctx = plan.profile.context_length
    requested = cap.requested_max_running_requests_per_worker
    mamba_cap = cap.max_mamba_cache_size // req.slots_per_request
    token_cap = cap.max_total_num_tokens // ctx
    if binding == "tokens":
        verdict = (f"the KV pool binds first: {n_fit:,} requests of {ctx:,} tokens fit per rank, "
                   f"fewer than the {mamba_cap:,} the state pool would hold and the {requested:,} asked for")
    elif binding == "mamba":
        verdict = (f"the state pool binds first: {n_fit:,} requests per rank "
                   f"({cap.max_mamba_cache_size:,} state slots / {req.slots_per_request}), fewer than the "
                   f"{token_cap:,} the KV pool holds at {ctx:,} tokens and the {requested:,} asked for")
    else:
        verdict = (f"neither pool binds: the {requested:,} requests asked for fit per rank "
                   f"(the KV pool holds {token_cap:,} at {ctx:,} tokens, the state pool {mamba_cap:,})")
    # numbers glue as ints (``{glue:text}`cap_tokens:,```): a "6,370,368" string would be read back
    # by myst-nb's glue role as a tuple
    return {"cap_tokens": int(cap.max_total_num_tokens), "cap_mamba_slots": int(cap.max_mamba_cache_size),
            "cap_fit": n_fit, "cap_binding": binding, "cap_requested": int(requested),
            "cap_sglang": int(cap.max_running_requests_per_worker), "cap_token_cap": int(token_cap),
            "cap_mamba_cap": int(mamba_cap), "cap_how": how, "cap_verdict": verdict,
            "cap_available": fmt_bytes(cap.available_bytes), "cap_gpu": plan.profile.gpu or "-"}


def capacity_table(plan):
    """The pools SGLang sizes for this plan, one row per figure (numbers only; the words are in prose)."""
    import pandas as pd

    from ..ledgers.derivations import requests_fit

    c = plan.capacity
    rows = [("bytes left for the pools (rest)", fmt_bytes(c.available_bytes)),
            ("state pool budget (mamba budget)", fmt_bytes(c.mamba_budget_bytes)),
            ("max_mamba_cache_size (state slots)", f"{c.max_mamba_cache_size:,}"),
            ("state pool (Mamba Cache size)", fmt_bytes(c.mamba_pool_bytes)),
            ("KV pool budget", fmt_bytes(c.token_pool_budget_bytes)),
            ("max_total_num_tokens", f"{c.max_total_num_tokens:,}"),
            ("KV pool (KV Cache size)", fmt_bytes(c.token_pool_bytes)),
            ("max_running_requests asked for (per worker)", f"{c.requested_max_running_requests_per_worker:,}"),
            ("SGLang's max_running_requests (per worker)", f"{c.max_running_requests_per_worker:,}"),
            ("max_running_requests set by", c.binding_limit),
            (f"requests that fit at {plan.profile.context_length:,} tokens", f"{int(requests_fit(plan).value):,}")]
    return show(pd.DataFrame(rows, columns=["figure", "value"]))

