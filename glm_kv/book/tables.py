"""Tables the chapters show: display and shaping only, every number comes from the ledgers or tensors."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..errors import ProfileError
from ..inputs.profile import Profile, load_profile, make_profile
from ..ledgers.plan import build_plan, compute_plan
from ..ledgers.workload import workload
from ..units import dotted, fmt_bytes  # noqa: F401  (fmt_bytes: the chapters import it from here)


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
    variant SGLang refuses gets its one-line reason in the ``refused`` column instead of values.
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
            row["refused"] = str(e)
        rows.append(row)
    df = pd.DataFrame(rows, dtype=object).set_index("variant")
    for col in df.columns:  # numeric where every variant has a value; refused rows keep None
        if df[col].notna().all():
            df[col] = df[col].infer_objects()
    if not df["refused"].astype(bool).any():
        df = df.drop(columns="refused")
    return df


def show(df):
    """A copy of ``df`` for reading: integers with thousands separators (the data stays numeric elsewhere)."""
    import pandas as pd

    out = df.copy()
    for col in out.columns:
        if pd.api.types.is_integer_dtype(out[col]) and not pd.api.types.is_bool_dtype(out[col]):
            out[col] = out[col].map(lambda v: f"{v:,}")
        elif out[col].dtype == object:
            out[col] = out[col].map(lambda v: f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else v)
    return out.astype(object).where(out.notna(), "-")


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


def measured_per_unit(report):
    """The report's linear checks: measured bytes per token / slot vs the ledger's figure."""
    import pandas as pd

    return pd.DataFrame([{"what grows": l["group"], "per": l["unit"], "sizes": tuple(l["sizes"]),
                          "bytes at those sizes": tuple(l["bytes"]), "measured per unit": l["measured_per_unit"],
                          "ledger per unit": l["ledger_per_unit"], "ledger figure": l["ledger_source"],
                          "match": l["match"]} for l in report.linear])


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
