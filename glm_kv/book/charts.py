"""Altair charts for the book, rendered so that they work with no network.

Two halves:

* **Offline rendering.** ``enable_offline()`` registers an Altair renderer that emits a small
  ``<div>`` + ``<script>`` calling ``vegaEmbed`` from the page itself (no CDN), plus the
  Vega-Lite JSON for Jupyter front ends that render it natively. The JavaScript (Vega, Vega-Lite,
  Vega-Embed with its tooltip handler) comes from the ``vl-convert-python`` wheel and is written
  into the built book's ``_static/`` by this module's Sphinx hook (``setup``), listed in
  ``_config.yml`` under ``sphinx.extra_extensions``. The built HTML therefore has no remote
  ``<script src>``, and the charts keep their tooltips.
* **Chart builders.** Each takes data computed by glm_kv (a plan, or tables made by glm_kv
  functions) and only shapes it for plotting: no memory formula lives here.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

if TYPE_CHECKING:
    from ..ledgers.plan import Plan

BUNDLE_NAME = "glm-kv-vega.js"
RENDERER = "glm_kv_offline"
_EMBED_OPTIONS = {"actions": False, "renderer": "svg"}

# Colours shared by every chart, so that a ledger keeps its colour from chapter to chapter.
LEDGER_COLORS = {
    "MLA latent KV": "#1f77b4",
    "indexer K": "#ff7f0e",
    "KDA state": "#2ca02c",
    "compress tail": "#9467bd",
    "free": "#d9d9d9",
}


# ---------------------------------------------------------------------------------------------
# Offline rendering
# ---------------------------------------------------------------------------------------------

def _vega_lite_version() -> str:
    import altair as alt

    major_minor = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return f"v{major_minor}"


def javascript_bundle() -> str:
    """Vega + Vega-Lite + Vega-Embed as one classic script that defines ``window.vegaEmbed``.

    The bundle comes from the vl-convert-python wheel (no download). It is wrapped in a function
    so that its top-level ``const`` names cannot clash with other scripts on the page.
    """
    import vl_convert as vlc

    body = vlc.javascript_bundle(vl_version=_vega_lite_version())
    return "/* Vega, Vega-Lite, Vega-Embed: bundled by vl-convert-python */\n(function(){\n" + body + "\n})();\n"


def write_javascript_bundle(folder: str | Path) -> Path:
    """Write the bundle to ``folder/glm-kv-vega.js`` (reused when already there)."""
    import vl_convert as vlc

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / BUNDLE_NAME
    stamp = folder / (BUNDLE_NAME + ".version")
    version = f"vl-convert {getattr(vlc, '__version__', '?')}, vega-lite {_vega_lite_version()}"
    if not path.is_file() or not stamp.is_file() or stamp.read_text() != version:
        path.write_text(javascript_bundle(), encoding="utf-8")
        stamp.write_text(version)
    return path


def _chart_id(spec: Mapping[str, Any]) -> str:
    # Deterministic, so that re-executing a notebook does not churn its stored output.
    digest = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
    return f"glm-kv-chart-{digest}"


def offline_html(spec: Mapping[str, Any]) -> str:
    """HTML for one chart: a container and a script that waits for ``vegaEmbed`` on the page."""
    import vl_convert as vlc

    div = _chart_id(spec)
    # Compiled to Vega here (vl-convert, offline) and embedded in Vega mode: vega-embed's own
    # Vega-Lite path warns in the console that Vega-Lite 5 targets Vega 5 while the bundle runs
    # Vega 6 (issue 21: a clean console). The Vega-Lite spec stays in the notebook's mime bundle.
    vega = vlc.vegalite_to_vega(dict(spec), vl_version=_vega_lite_version().replace(".", "_"))
    vega.pop("$schema", None)   # the page's Vega (6) runs it; a v5 $schema only makes vega-embed warn
    payload = json.dumps(vega, sort_keys=True).replace("</", "<\\/")
    options = json.dumps({**_EMBED_OPTIONS, "mode": "vega"})
    return (
        f'<div id="{div}" class="glm-kv-chart"></div>\n'
        "<script type=\"text/javascript\">\n"
        "(function () {\n"
        f"  var spec = {payload};\n"
        f"  var el = document.getElementById(\"{div}\");\n"
        "  var tries = 0;\n"
        "  function draw() {\n"
        "    if (window.vegaEmbed) {\n"
        f"      window.vegaEmbed(el, spec, {options}).catch(function (err) {{\n"
        "        el.textContent = \"chart error: \" + err;\n"
        "      });\n"
        "    } else if (tries++ < 200) {\n"
        "      setTimeout(draw, 25);\n"
        "    } else {\n"
        "      el.textContent = \"(chart: open this page in the built book to see it)\";\n"
        "    }\n"
        "  }\n"
        "  draw();\n"
        "})();\n"
        "</script>"
    )


def _renderer(spec: dict, **_: Any) -> dict:
    import altair as alt

    mime = f"application/vnd.vegalite.v{alt.SCHEMA_VERSION.lstrip('v').split('.')[0]}+json"
    title = spec.get("title")
    if isinstance(title, dict):
        title = title.get("text")
    return {
        mime: spec,
        "text/html": offline_html(spec),
        "text/plain": f"<chart: {title or 'altair'}>",
    }


def enable_offline() -> None:
    """Make every Altair chart displayed from now on use the offline renderer."""
    import altair as alt

    if RENDERER not in alt.renderers.names():
        alt.renderers.register(RENDERER, _renderer)
    alt.renderers.enable(RENDERER)


CSS_NAME = "glm-kv.css"

# The book's own style: the shipped CJK subset in the font stack (the article's title and terms are
# Chinese; ``static_assets``), tables that scroll inside their own box, charts and equations that never widen the
# content column, definition lists for explanations.
BOOK_CSS = """
:root, html[data-theme] {
  --pst-font-family-base: -apple-system, BlinkMacSystemFont, "Segoe UI", "Helvetica Neue", Arial,
    "Noto Sans", "glm-kv CJK", "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Micro Hei",
    "PingFang SC", "Microsoft YaHei", sans-serif;
  --pst-font-family-heading: var(--pst-font-family-base);
  --pst-font-family-monospace: SFMono-Regular, Menlo, Consolas, Monaco, "Liberation Mono",
    "Lucida Console", monospace, "glm-kv CJK";
}
.glm-kv-table { overflow-x: auto; max-width: 100%; margin: 0.5em 0 1em; }
.glm-kv-table table { border-collapse: collapse; font-size: 0.85em; margin: 0; }
.glm-kv-table th, .glm-kv-table td { border: 1px solid #d0d7de; padding: 0.25em 0.6em; vertical-align: top; }
.glm-kv-table th { background: #f6f8fa; text-align: left; }
.glm-kv-table td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.glm-kv-table td { white-space: nowrap; }
.glm-kv-table th { min-width: 4em; overflow-wrap: normal; word-break: normal; }
.glm-kv-table.wrap td { white-space: normal; }
.glm-kv-table.wrap td.num { white-space: nowrap; }
.glm-kv-table.sticky-first th:first-child, .glm-kv-table.sticky-first td:first-child {
  position: sticky; left: 0; z-index: 1; background: #fff; box-shadow: 1px 0 0 #d0d7de; }
.glm-kv-table.sticky-first th:first-child { background: #f6f8fa; }
article.bd-article table td code, article.bd-article table td code span.pre {
  white-space: normal; overflow-wrap: anywhere; }
p.glm-kv-caption { color: #555; font-size: 0.9em; margin: 0.5em 0 0.2em; }
.glm-kv-chart { max-width: 100%; overflow-x: auto; overflow-y: hidden; }
.glm-kv-chart svg, .glm-kv-figure svg { max-width: 100%; height: auto; }
.glm-kv-figure { max-width: 100%; overflow-x: auto; margin: 0.5em 0 1em; }
.glm-kv-derivations { max-width: 100%; overflow-x: auto; }
.glm-kv-eq { margin: 0.4em 0 0.9em; }
.glm-kv-eq .what { margin: 0; font-size: 0.85em; color: #555; }
.glm-kv-math { margin-left: 0.5em; }
math.glm-kv-derivation { font-size: 1.05em; math-style: normal; }
math.glm-kv-derivation mtd { text-align: left; }
@media (max-width: 600px) { math.glm-kv-derivation { font-size: 0.85em; margin-left: 0; } }
dl.glm-kv-dl dt { font-weight: 600; margin-top: 0.6em; }
dl.glm-kv-dl, .glm-kv-sources, .glm-kv-measured, .glm-kv-books { overflow-wrap: anywhere; }
.glm-kv-sources .where { color: #555; font-size: 0.9em; }
.glm-kv-sources ul { margin-bottom: 0.2em; }
dl.glm-kv-dl dd { margin-left: 1.2em; }
dl.glm-kv-dl .note { color: #555; font-size: 0.9em; }
div.cell_output .output.text_plain pre, div.cell_output pre { white-space: pre-wrap; word-break: break-word; }
.bd-article-container { max-width: 100%; }
/* a long path or flag in prose (`glm_kv/inputs/data/sglang-0.5.23-flag-table.json`) wraps instead of
   widening the page at 400 px */
.bd-article p code.literal, .bd-article li code.literal, .bd-article dd code.literal,
.bd-article p code.literal span.pre, .bd-article li code.literal span.pre,
.bd-article dd code.literal span.pre { white-space: normal !important; overflow-wrap: anywhere !important;
  word-break: break-word; }
"""


def book_css(with_cjk_font: bool) -> str:
    """The book's CSS, led by the ``@font-face`` of the shipped CJK subset when there is one."""
    from .static_assets import font_face_css

    return (font_face_css() if with_cjk_font else "") + BOOK_CSS


def _dedupe_scripts(app, pagename, templatename, context, doctree):
    """Drop repeated <script> entries (sphinx-thebe's inline THEBE_JS_URL is added twice by
    Jupyter Book 1, which makes every page log "Identifier 'THEBE_JS_URL' has already been declared")."""
    files = context.get("script_files")
    if not files:
        return
    # Edited in place: the list is the builder's own, and handlers that run after this one
    # (sphinx.ext.mathjax's ``install_mathjax`` adds MathJax to it on pages with equations) append to
    # that list. Replacing it with a new one dropped MathJax from every page (issue 29: raw TeX).
    files[:] = unique_scripts(files)


def unique_scripts(files: list) -> list:
    """``files`` without repeats: the same script added twice at two priorities is still the same."""
    seen, out = set(), []
    for js in files:
        attrs = tuple(sorted((k, str(v)) for k, v in getattr(js, "attributes", {}).items()))
        key = (str(getattr(js, "filename", js)), attrs)
        if key in seen:
            continue
        seen.add(key)
        out.append(js)
    return out


_INLINE_SCRIPT = re.compile(r"^[ \t]*<script>[^<]*</script>[ \t]*$", re.M)


def dedupe_inline_scripts(text: str) -> str:
    """Keep the first of identical inline ``<script>`` lines in a built page (see ``_dedupe_scripts``)."""
    seen: set[str] = set()

    def keep(m: "re.Match[str]") -> str:
        line = m.group(0).strip()
        if line in seen:
            return ""
        seen.add(line)
        return m.group(0)

    return _INLINE_SCRIPT.sub(keep, text)


def _build_finished(app, exc) -> None:
    """Jupyter Book 1 registers sphinx-thebe's and sphinx-togglebutton's inline config scripts
    twice in a way no page-context hook sees; a second ``const THEBE_JS_URL`` is a SyntaxError on
    every page. Remove the repeated lines from the written pages."""
    if exc is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        fixed = dedupe_inline_scripts(text)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")


def setup(app):  # Sphinx extension hook: `sphinx.extra_extensions: [glm_kv.book.charts]`
    """Ship the Vega bundle, MathJax, the CJK font subset and the book's CSS in ``_static/`` and
    load them on every page (MathJax on the pages with equations, as Sphinx decides)."""
    static = Path(app.doctreedir).parent / "glm_kv_static"

    def _config_inited(app, config):
        write_javascript_bundle(static)
        from .static_assets import write_cjk_font, write_mathjax

        config.mathjax_path = write_mathjax(static)
        fonts = write_cjk_font(static, Path(app.srcdir))
        (static / CSS_NAME).write_text(book_css(fonts), encoding="utf-8")
        config.html_static_path = list(config.html_static_path) + [str(static)]

    app.connect("config-inited", _config_inited)
    # Loaded in <head> without defer: the per-chart scripts also poll for it.
    app.add_js_file(BUNDLE_NAME, priority=200)
    app.add_css_file(CSS_NAME, priority=900)
    app.connect("html-page-context", _dedupe_scripts, priority=100)  # emit_firstresult: run early
    app.connect("build-finished", _build_finished)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


# ---------------------------------------------------------------------------------------------
# Chart builders: data in (from glm_kv), chart out
# ---------------------------------------------------------------------------------------------

# Token counts on an axis: 4K, 128K, 1M (2^10 and 2^20, as context lengths are quoted).
TOKENS_LABEL = ("datum.value >= 1048576 ? format(datum.value / 1048576, '~g') + 'M' : "
                "datum.value >= 1024 ? format(datum.value / 1024, '~g') + 'K' : format(datum.value, 'd')")


def _alt():
    import altair as alt

    enable_offline()
    return alt


def _color(alt, field: str, domain: Iterable[str] | None = None):
    domain = list(domain) if domain is not None else list(LEDGER_COLORS)
    rng = [LEDGER_COLORS.get(d, "#8c564b") for d in domain]
    return alt.Color(f"{field}:N", scale=alt.Scale(domain=domain, range=rng), title=None)


def _tooltip(alt, fields: Iterable[tuple[str, str, str | None]]):
    return [alt.Tooltip(f, type=t, title=title, **({"format": ","} if t == "quantitative" else {}))
            for f, t, title in fields]


# -- chapter 1 --------------------------------------------------------------------------------

def layer_table(plan: "Plan"):
    """One row per layer: its attention type and what it caches (from the plan's model)."""
    import pandas as pd

    full = set(plan.model.full_attention_layers)
    rows = []
    for i in range(plan.model.num_hidden_layers):
        kind = "full attention (DSA)" if i in full else "KDA (linear attention)"
        caches = "per token: MLA latent KV + indexer K" if i in full else "per request: KDA state slots"
        rows.append({"layer": i, "type": kind, "caches": caches})
    return pd.DataFrame(rows)


def layer_strip(plan: "Plan"):
    """The model's layers in a row, coloured by attention type (the article's figure 1)."""
    alt = _alt()
    df = layer_table(plan)
    n = len(df)
    full = sorted(plan.model.full_attention_layers)
    ticks = sorted(set([0, *full, n - 1]))  # every full layer, and the first and last layer
    domain = ["full attention (DSA): per-token MLA KV + indexer K", "KDA (linear attention): per-request state slots"]
    df["legend"] = df["type"].map({"full attention (DSA)": domain[0], "KDA (linear attention)": domain[1]})
    return alt.Chart(df, title=alt.Title("Which layers keep per-token KV",
                                         subtitle=f"{len(full)} of {n} layers; hover a square for its cache")
                     ).mark_rect(stroke="white").encode(
        x=alt.X("layer:O", title="layer (0-based)", axis=alt.Axis(labelAngle=0, values=ticks)),
        color=alt.Color("legend:N", scale=alt.Scale(domain=domain,
                                                    range=[LEDGER_COLORS["MLA latent KV"], LEDGER_COLORS["KDA state"]]),
                        title=None, legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=0)),
        tooltip=_tooltip(alt, [("layer", "ordinal", "layer"), ("type", "nominal", "attention"),
                               ("caches", "nominal", "caches")]),
    ).properties(width=640, height=40)


LAYOUT_VARIANTS = {
    "bf16": {"kv_cache_dtype": "bfloat16", "dsa_prefill_backend": None, "dsa_decode_backend": None},
    "fp8 scaled (flashmla_kv)": {"kv_cache_dtype": "fp8_e4m3", "dsa_prefill_backend": "flashmla_kv",
                                 "dsa_decode_backend": "flashmla_kv"},
    "fp8 raw (trtllm)": {"kv_cache_dtype": "fp8_e4m3", "dsa_prefill_backend": "trtllm",
                         "dsa_decode_backend": "trtllm"},
}


def token_bytes_by_layout(profile, layouts: Iterable[str] = ("article", "0.5.23")):
    """Per-token bytes (KV, indexer) for each KV dtype/row layout and SGLang layout, from the plan."""
    import pandas as pd

    from .tables import plan_variants

    frames = []
    for layout in layouts:
        variants = {name: {**ov, "sglang_layout": layout} for name, ov in LAYOUT_VARIANTS.items()}
        df = plan_variants(profile, variants, {
            "kv_cache_dim": "token.kv_cache_dim", "MLA latent KV": "token.kv_bytes_per_token",
            "indexer K": "token.indexer_bytes_per_token", "cell_size": "token.cell_size_bytes"})
        df["sglang_layout"] = layout
        frames.append(df.reset_index())
    return pd.concat(frames, ignore_index=True)


def token_bytes_chart(df):
    """Stacked bars: KV + indexer bytes per token, per dtype/layout (the article's figure 2)."""
    alt = _alt()
    long = df.melt(id_vars=["variant", "sglang_layout", "kv_cache_dim", "cell_size"],
                   value_vars=["MLA latent KV", "indexer K"], var_name="ledger", value_name="bytes")
    return alt.Chart(long, title="Bytes per token, by KV dtype and row layout").mark_bar().encode(
        y=alt.Y("variant:N", title=None, sort=list(LAYOUT_VARIANTS)),
        x=alt.X("bytes:Q", title="bytes per token (all full-attention layers)", stack="zero"),
        color=_color(alt, "ledger", ["MLA latent KV", "indexer K"]),
        row=alt.Row("sglang_layout:N", title="SGLang layout", header=alt.Header(labelAngle=0, labelAlign="left")),
        tooltip=_tooltip(alt, [("variant", "nominal", "row layout"), ("sglang_layout", "nominal", "SGLang"),
                               ("ledger", "nominal", "ledger"), ("bytes", "quantitative", "B/token"),
                               ("kv_cache_dim", "quantitative", "kv_cache_dim"),
                               ("cell_size", "quantitative", "cell_size B/token")]),
    ).properties(width=520, height=90)


# -- chapter 2 --------------------------------------------------------------------------------

def ledgers_vs_context(plan, contexts: Iterable[int]):
    """Token ledger and KDA ledger of one request at each context length (glm_kv.workload)."""
    import pandas as pd

    from ..ledgers.workload import kda_ledger_bytes, token_ledger_bytes

    rows = []
    for ctx in contexts:
        rows.append({"context": int(ctx), "ledger": "token ledger (KV + indexer)",
                     "bytes": token_ledger_bytes(plan, int(ctx))})
        rows.append({"context": int(ctx), "ledger": "KDA ledger (state slots)", "bytes": kda_ledger_bytes(plan, 1)})
    return pd.DataFrame(rows)


def ledgers_vs_context_chart(df, crossover: int):
    """Two lines and the crossover: where one request's tokens cost as much as its KDA state."""
    import pandas as pd

    alt = _alt()
    domain = ["token ledger (KV + indexer)", "KDA ledger (state slots)"]
    color = alt.Color("ledger:N", scale=alt.Scale(domain=domain, range=[LEDGER_COLORS["MLA latent KV"],
                                                                      LEDGER_COLORS["KDA state"]]),
                      title=None, legend=alt.Legend(orient="bottom", labelLimit=0))
    df = df.assign(GiB=df["bytes"] / (1 << 30))  # display unit only (binary, as SGLang sizes pools)
    ticks = sorted(set(int(c) for c in df["context"]))
    label = TOKENS_LABEL
    lines = alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("context:Q", title="context length (tokens)", scale=alt.Scale(type="log", base=2, nice=False),
                axis=alt.Axis(values=ticks, labelExpr=label, labelOverlap=False)),
        y=alt.Y("GiB:Q", title="GiB for one request (log scale)", scale=alt.Scale(type="log"),
                axis=alt.Axis(format="~g")),
        color=color,
        tooltip=_tooltip(alt, [("ledger", "nominal", "ledger"), ("context", "quantitative", "tokens"),
                               ("bytes", "quantitative", "bytes")]),
    )
    cross = pd.DataFrame({"context": [crossover], "label": [f"crossover: {crossover:,} tokens"]})
    rule = alt.Chart(cross).mark_rule(strokeDash=[4, 3], color="#555").encode(
        x="context:Q", tooltip=[alt.Tooltip("label:N", title="crossover")])
    text = alt.Chart(cross).mark_text(align="left", dx=4, dy=-6, color="#555").encode(
        x="context:Q", y=alt.value(10), text="label:N")
    return (lines + rule + text).properties(width=560, height=300,
                                            title="One request: token ledger vs KDA ledger")


# -- chapter 3 --------------------------------------------------------------------------------

def pool_structure_table(structure: Mapping[str, Any]):
    """Nodes of ``glm_kv.structure.pool_structure``: one row per pool or buffer, with its depth."""
    import pandas as pd

    rows = []

    def walk(node, depth, parent):
        rows.append({"name": node["name"], "class": node.get("class", ""), "depth": depth,
                     "parent": parent or "", "grows with": node.get("grows_with", ""),
                     "row": node.get("row", ""), "layers": len(node.get("layers", []) or []),
                     "per": node.get("per", "")})
        for child in node.get("children", []):
            walk(child, depth + 1, node["name"])
        for buf in node.get("buffers", []):
            walk(buf, depth + 1, node["name"])

    walk(structure, 0, None)
    for extra in structure.get("beside", []):
        walk(extra, 0, None)
    return pd.DataFrame(rows)


def pool_structure_chart(structure: Mapping[str, Any]):
    """The HBM pool tree as an indented outline: one mark per pool/buffer, coloured by what it grows with."""
    alt = _alt()
    df = pool_structure_table(structure).reset_index().rename(columns={"index": "order"})
    df["label"] = df["name"] + df["class"].map(lambda c: f"  ({c})" if c else "")
    df["grows with"] = df["grows with"].replace("", "(container)")
    domain = ["tokens", "state slots", "requests", "(container)"]
    rng = [LEDGER_COLORS["MLA latent KV"], LEDGER_COLORS["KDA state"], LEDGER_COLORS["compress tail"], "#777"]
    base = alt.Chart(df).encode(
        y=alt.Y("order:O", axis=None),
        tooltip=_tooltip(alt, [("name", "nominal", "name"), ("class", "nominal", "class"),
                               ("parent", "nominal", "inside"), ("grows with", "nominal", "grows with"),
                               ("row", "nominal", "row / shape"), ("layers", "quantitative", "layers")]),
    )
    dots = base.mark_square(size=140).encode(
        x=alt.X("depth:Q", axis=None, scale=alt.Scale(domain=[-0.2, 9])),
        color=alt.Color("grows with:N", scale=alt.Scale(domain=domain, range=rng), title="grows with",
                        legend=alt.Legend(orient="bottom", labelLimit=0, columns=2)))
    text = base.mark_text(align="left", dx=10, fontSize=12).encode(x="depth:Q", text="label:N")
    return (dots + text).properties(width=620, height=22 * len(df), title="What lives in HBM").configure_view(
        strokeWidth=0)


def weights_label(prof) -> str:
    """"from the profile", or "estimated" when the plan estimates the weights (the profile states
    neither weights_bytes nor available_bytes): every chart says which, as the plan's notes do."""
    if prof.available_bytes is not None or prof.weights_bytes is not None:
        return "from the profile"
    return "estimated"


def fits_map_data(profile, gpus: Iterable[str], requests: Iterable[int], contexts: Iterable[int]):
    """Per GPU x concurrency x context: does it fit on a rank, and what binds (glm_kv.sweep).

    ``requests`` are per rank. Memory is the plan's own resolution at every point: the profile's
    ``available_bytes`` / ``weights_bytes`` when it has them, else the engine's weight estimate
    (``weights_estimate``), labelled "estimated".
    """
    from ..inputs.profile import Profile, load_profile
    from ..ledgers.derivations import fit_binding, requests_fit_expr
    from ..ledgers.sweep import sweep

    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    attn_dp = prof.dp_size if prof.enable_dp_attention else 1
    df = sweep(prof, grid=True, gpu=list(gpus), max_running_requests=[r * attn_dp for r in requests],
               context_length=list(contexts))
    out = df.rename(columns={"max_running_requests": "requested (global)"})
    ok = df["error"].isna()
    # the requests each point asks for, per rank (a refused point has no plan, but still its grid value)
    out["requests per rank"] = (df["max_running_requests"].astype("int64") // attn_dp).astype("int64")
    out["served per rank"] = df["max_running_requests_resolved"]
    out["mamba slots"] = df["max_mamba_cache_size_resolved"]
    out["tokens needed"] = df["resident_tokens_per_rank"]  # shown in the tooltip only
    # requests of this context length that fit at once (glm_kv.ledgers.derivations' one formula);
    # refused points (no pools: e.g. the weights leave no memory on that GPU) are 0 and "refused"
    fit = requests_fit_expr(df["requests_per_worker"].fillna(0).astype("int64").to_numpy(),
                            df["max_total_num_tokens"].fillna(0).astype("int64").to_numpy(),
                            df["context_length"].to_numpy(),
                            df["max_mamba_cache_size_resolved"].fillna(0).astype("int64").to_numpy(),
                            df["slots_per_request"].fillna(1).astype("int64").to_numpy())
    out["requests that fit"] = fit.value()
    out["binds at this context"] = fit_binding(fit)
    # The verdict is the engine's (sweep's ``limit``); here it only gets words.
    words = {"fits": "fits", "tokens": "too many tokens", "mamba": "too many requests (mamba)"}
    out["verdict"] = df["limit"].astype(object).map(lambda v: words.get(v, "refused"))
    out.loc[~ok, ["verdict", "binds at this context"]] = "refused"
    out.loc[~ok, "requests that fit"] = 0
    out["weights"] = weights_label(prof)
    return out


def fits_map_chart(df, gpus: Iterable[str] | None = None):
    """Concurrency x context heat map per GPU (two per row): what fits on one rank for this profile."""
    alt = _alt()
    verdicts = ["fits", "too many tokens", "too many requests (mamba)", "refused"]
    colors = ["#2ca02c", "#ff7f0e", "#d62728", "#7f7f7f"]
    order = list(gpus) if gpus is not None else list(dict.fromkeys(df["gpu"]))
    cells = alt.Chart().mark_rect(stroke="white").encode(
        x=alt.X("context_length:O", title="context length (tokens)", axis=alt.Axis(labelExpr=TOKENS_LABEL, labelAngle=0)),
        y=alt.Y("requests per rank:O", title="concurrent requests per rank", sort="descending"),
        color=alt.Color("verdict:N", scale=alt.Scale(domain=verdicts, range=colors), title=None,
                        legend=alt.Legend(orient="bottom", labelLimit=0, columns=2)),
        tooltip=_tooltip(alt, [("gpu", "nominal", "GPU"),
                               ("requests per rank", "quantitative", "requests per rank"),
                               ("requests that fit", "quantitative", "requests that fit at this context"),
                               ("served per rank", "quantitative", "SGLang's request cap"),
                               ("context_length", "quantitative", "context"),
                               ("tokens needed", "quantitative", "tokens needed per rank"),
                               ("max_total_num_tokens", "quantitative", "token pool"),
                               ("mamba slots", "quantitative", "mamba slots"),
                               ("verdict", "nominal", "verdict"), ("weights", "nominal", "weights")]),
    ).properties(width=230, height=170)
    return alt.FacetChart(data=df, spec=cells, facet=alt.Facet("gpu:N", sort=order, title=None),
                          columns=2, title="What fits on one rank")


# -- profiles page ----------------------------------------------------------------------------

def token_bytes_by_profile(profiles: Iterable[str]):
    import pandas as pd

    from ..ledgers.plan import load_plan

    rows = []
    for name in profiles:
        plan = load_plan(name)
        for ledger, value in (("MLA latent KV", plan.token.kv_bytes_per_token),
                              ("indexer K", plan.token.indexer_bytes_per_token)):
            rows.append({"profile": plan.profile.label, "ledger": ledger, "bytes": value,
                         "layout": plan.profile.sglang_layout, "kv_layout": plan.token.kv_layout,
                         "KDA state per request": plan.request.state_bytes_per_request})
    return pd.DataFrame(rows)


def token_bytes_by_profile_chart(df):
    alt = _alt()
    return alt.Chart(df, title="Bytes per token, per profile").mark_bar().encode(
        y=alt.Y("profile:N", title=None, sort=None),
        x=alt.X("bytes:Q", title="bytes per token", stack="zero"),
        color=_color(alt, "ledger", ["MLA latent KV", "indexer K"]),
        tooltip=_tooltip(alt, [("profile", "nominal", "profile"), ("layout", "nominal", "SGLang layout"),
                               ("kv_layout", "nominal", "KV row"), ("ledger", "nominal", "ledger"),
                               ("bytes", "quantitative", "B/token"),
                               ("KDA state per request", "quantitative", "KDA B/request")]),
    ).properties(width=520, height=24 * df["profile"].nunique())


def buffer_table(pools):
    """The tensors of a ``glm_kv.pools.DevicePools``, one row per kind (per-layer lists folded).

    Columns: buffer (``kv_buffer[i]`` for a per-layer list), how many tensors, the shape and
    dtype of one, its storage bytes, and the bytes of all of them.
    """
    import re

    import pandas as pd

    rows: dict[str, dict] = {}
    for name, t in pools.named_buffers():
        kind = re.sub(r"\[\d+\]$", "[i]", name)
        nbytes = t.untyped_storage().nbytes()
        row = rows.setdefault(kind, {"buffer": kind, "tensors": 0, "shape of one": tuple(t.shape),
                                     "dtype": str(t.dtype).removeprefix("torch."), "bytes of one": nbytes,
                                     "bytes, all": 0})
        row["tensors"] += 1
        row["bytes, all"] += nbytes
    return pd.DataFrame(list(rows.values()))


# -- chapters 4 and 5 -------------------------------------------------------------------------

def _ranges(idx) -> str:
    """``64-191`` style summary of an index tensor (what a node's value / host_value points at)."""
    if idx is None:
        return "-"
    vals = [int(v) for v in idx.tolist()]
    if not vals:
        return "(empty)"
    out, start, prev = [], vals[0], vals[0]
    for v in vals[1:]:
        if v != prev + 1:
            out.append(f"{start}-{prev}" if start != prev else f"{start}")
            start = v
        prev = v
    out.append(f"{start}-{prev}" if start != prev else f"{start}")
    return ", ".join(out)


def radix_tree_table(tree):
    """One row per node of a ``glm_kv.radix.RadixTree``: token span, FULL and MAMBA value/host_value."""
    import pandas as pd

    from ..tensors.radix import FULL, MAMBA

    rows = []
    for n in tree.nodes():
        if n is tree.root:
            continue
        end = len(tree.key_of(n))
        f, m = n.component_data[FULL], n.component_data[MAMBA]
        where = ("HBM + DRAM" if f.value is not None and f.host_value is not None else
                 "HBM only" if f.value is not None else "DRAM only (evicted)")
        rows.append({"node": n.id, "parent": n.parent.id if n.parent is not None and n.parent is not tree.root else "root",
                     "first token": end - len(n.key), "end token": end, "tokens": len(n.key),
                     "FULL.value (HBM token slots)": _ranges(f.value),
                     "FULL.host_value (DRAM host slots)": _ranges(f.host_value),
                     "MAMBA.value (HBM state slot)": _ranges(m.value),
                     "MAMBA.host_value (DRAM state slot)": _ranges(m.host_value),
                     "where": where})
    return pd.DataFrame(rows).sort_values(["first token", "node"]).reset_index(drop=True)


def radix_tree_chart(table, title: str = "The RadixTree: token spans and where they live"):
    """Each node as a bar over its token span; colour: where FULL lives; a diamond: a MAMBA checkpoint."""
    alt = _alt()
    # Vega-Lite reads "a.b" as a nested field: give the data dot-free column names.
    df = table.rename(columns={"FULL.value (HBM token slots)": "full_value",
                               "FULL.host_value (DRAM host slots)": "full_host_value",
                               "MAMBA.value (HBM state slot)": "mamba_value",
                               "MAMBA.host_value (DRAM state slot)": "mamba_host_value"}).copy()
    df["row"] = [f"node {n}" for n in df["node"]]
    df["checkpoint"] = df["mamba_value"].ne("-") | df["mamba_host_value"].ne("-")
    domain = ["HBM only", "HBM + DRAM", "DRAM only (evicted)"]
    tips = _tooltip(alt, [("node", "nominal", "node"), ("parent", "nominal", "parent"),
                          ("first token", "quantitative", "from token"), ("end token", "quantitative", "to token"),
                          ("full_value", "nominal", "FULL.value (HBM token slots)"),
                          ("full_host_value", "nominal", "FULL.host_value (DRAM host slots)"),
                          ("mamba_value", "nominal", "MAMBA.value (HBM state slot)"),
                          ("mamba_host_value", "nominal", "MAMBA.host_value (DRAM state slot)")])
    y = alt.Y("row:N", sort=list(df["row"]), title=None)
    bars = alt.Chart(df).mark_bar(height=16).encode(
        x=alt.X("first token:Q", title="token position"), x2="end token:Q", y=y,
        color=alt.Color("where:N", scale=alt.Scale(domain=domain, range=["#1f77b4", "#17becf", "#c7c7c7"]),
                        title="FULL (KV) lives in", legend=alt.Legend(orient="bottom", labelLimit=0, columns=2)),
        tooltip=tips)
    marks = alt.Chart(df[df["checkpoint"]]).mark_point(shape="diamond", size=120, filled=True,
                                                       color=LEDGER_COLORS["KDA state"]).encode(
        x="end token:Q", y=y, tooltip=tips)
    return (bars + marks).properties(width=560, height=34 * max(1, len(df)), title=title)


def host_entries_table(host):
    """The entries of a ``glm_kv.hicache.HostPoolGroup``: name, class, page size, row, buffers."""
    import pandas as pd

    rows = []
    for e in host.entries:
        pool = e.host_pool
        bufs = list(pool.named_buffers())
        rows.append({"entry": e.name.value, "host pool": type(pool).__name__,
                     "device pool": type(e.device_pool).__name__,
                     "page size": getattr(pool, "page_size", None),
                     "indices from": e.indices_from_pool.value if e.indices_from_pool else "its own",
                     "buffers": ", ".join(f"{n} {tuple(b.shape)}" for n, b in bufs[:2]) + (" ..." if len(bufs) > 2 else ""),
                     "bytes": sum(b.untyped_storage().nbytes() for _, b in bufs)})
    return pd.DataFrame(rows)


# -- "Plan your deployment" -------------------------------------------------------------------

PLAN_GPUS = ("H100", "H200", "B200", "B300")
PLAN_DTYPES = ("bfloat16", "fp8_e4m3")
PLAN_LOG2_CONTEXT = tuple(range(12, 21))      # 4K .. 1M tokens
PLAN_LOG2_REQUESTS = tuple(range(0, 9))       # 1 .. 256 concurrent requests per rank


def plan_sweep_data(profile, gpus=PLAN_GPUS, dtypes=PLAN_DTYPES, log2_contexts=PLAN_LOG2_CONTEXT,
                    log2_requests=PLAN_LOG2_REQUESTS):
    """The precomputed sweep behind the "plan your deployment" page: every GPU x KV dtype x
    context x concurrency point for ``profile`` (``glm_kv.ledgers.sweep``), with what fits and
    what binds (``glm_kv.ledgers.derivations.requests_fit_expr``). Memory as in ``fits_map_data``
    (the profile's, else the engine's weight estimate, labelled). Drawn on by book/plan.ipynb."""
    from ..inputs.profile import Profile, load_profile
    from ..ledgers.derivations import fit_binding, requests_fit_expr
    from ..ledgers.sweep import sweep

    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    attn_dp = prof.dp_size if prof.enable_dp_attention else 1
    # the row layout follows the dtype: scaled fp8 keeps the profile's backends, bf16 needs none
    df = sweep(prof, grid=True, gpu=list(gpus), kv_cache_dtype=list(dtypes),
               max_running_requests=[(1 << r) * attn_dp for r in log2_requests],
               context_length=[1 << c for c in log2_contexts])
    ok = df["error"].isna()
    out = df[["gpu", "kv_cache_dtype", "context_length", "requests_per_worker", "cell_size_bytes",
              "max_total_num_tokens", "max_mamba_cache_size_resolved", "max_running_requests_resolved"]].copy()
    out.columns = ["gpu", "kv dtype", "context", "requests", "B per token", "tokens per rank", "mamba slots",
                   "SGLang's cap"]
    fit = requests_fit_expr(df["requests_per_worker"].fillna(0).astype("int64").to_numpy(),
                            df["max_total_num_tokens"].fillna(0).astype("int64").to_numpy(),
                            df["context_length"].to_numpy(),
                            df["max_mamba_cache_size_resolved"].fillna(0).astype("int64").to_numpy(),
                            df["slots_per_request"].fillna(1).astype("int64").to_numpy())
    out["requests that fit"] = fit.value()
    out["binds"] = fit_binding(fit)
    words = {"fits": "fits", "tokens": "too many tokens", "mamba": "too many requests (mamba)"}
    out["verdict"] = df["limit"].astype(object).map(lambda v: words.get(v, "refused"))
    out.loc[~ok, ["verdict", "binds"]] = "refused"
    out.loc[~ok, "requests that fit"] = 0
    # a refused point still has the requests it asked for (the grid's own value, per rank)
    out["requests"] = (df["max_running_requests"].astype("int64") // attn_dp).astype("int64")
    out["log2 context"] = out["context"].map(lambda c: int(c).bit_length() - 1)
    out["log2 requests"] = out["requests"].map(lambda r: int(r).bit_length() - 1)
    out["weights"] = weights_label(prof)
    return out.reset_index(drop=True)


def plan_opening(df, profile=None) -> dict:
    """Where the plan page's controls start: the profile's own GPU, resolved KV dtype, context
    and requests per rank (log2 units, clamped to the grid). ``scripts/consistency_check.py`` reads
    the page's opening figures at this point and holds them against ``glm-kv plan``."""
    gpus = list(dict.fromkeys(df["gpu"]))
    dtypes = list(dict.fromkeys(df["kv dtype"]))
    lc, lr = sorted(df["log2 context"].unique()), sorted(df["log2 requests"].unique())
    p = profile
    g0 = p.gpu if p is not None and p.gpu in gpus else gpus[0]
    d0 = dtypes[-1]
    if p is not None:  # the context the server runs at (SGLang's default, the model's, when omitted)
        from ..inputs.resolve import resolve
        from ..ledgers.token import token_ledger

        args = resolve(p)
        c_log2 = args.context_length.bit_length() - 1
        # the dtype the profile resolves to ("auto" is bf16 on SM90, fp8 on SM100), not the menu's last
        resolved = token_ledger(args).kv_cache_dtype
        d0 = resolved if resolved in dtypes else d0
    else:
        c_log2 = 17
    c0 = min(max(c_log2, int(lc[0])), int(lc[-1]))
    r_asked = 64
    if p is not None:   # per rank, as the plan resolves it (SGLang's automatic value, the MTP reset)
        from ..ledgers.plan import compute_plan

        plan = compute_plan(p)
        r_asked = (plan.capacity.requested_max_running_requests_per_worker if plan.capacity is not None
                   else plan.parallel.max_running_requests_per_worker or 64)
    r0 = min(max(int(r_asked).bit_length() - 1, int(lr[0])), int(lr[-1]))
    return {"gpu": g0, "kv dtype": d0, "log2 context": c0, "log2 requests": r0}


def plan_explorer_chart(df, profile=None):
    """Sliders (context, concurrency) and menus (GPU, KV dtype) over ``plan_sweep_data``: the map of
    what fits for the chosen GPU and dtype, the chosen point outlined, and its figures beside it.
    Vega-Lite parameters only: it runs offline in the built page, no kernel behind it."""
    alt = _alt()
    gpus = list(dict.fromkeys(df["gpu"]))
    dtypes = list(dict.fromkeys(df["kv dtype"]))
    lc, lr = sorted(df["log2 context"].unique()), sorted(df["log2 requests"].unique())
    # the sliders start at the profile's own point (its GPU, dtype, context and concurrency)
    g0, d0, c0, r0 = (plan_opening(df, profile)[k] for k in ("gpu", "kv dtype", "log2 context", "log2 requests"))
    gpu = alt.param(name="gpu", value=g0, bind=alt.binding_select(options=gpus, name="GPU "))
    dtype = alt.param(name="dtype", value=d0, bind=alt.binding_radio(options=dtypes, name="KV dtype "))
    ctx = alt.param(name="ctx", value=c0, bind=alt.binding_range(min=int(lc[0]), max=int(lc[-1]), step=1,
                                                                  name="context, log2 tokens (17 = 128K) "))
    req = alt.param(name="req", value=r0, bind=alt.binding_range(min=int(lr[0]), max=int(lr[-1]), step=1,
                                                                 name="concurrent requests, log2 (6 = 64) "))
    verdicts = ["fits", "too many tokens", "too many requests (mamba)", "refused"]
    colors = ["#2ca02c", "#ff7f0e", "#d62728", "#7f7f7f"]
    base = alt.Chart(df).transform_filter("datum.gpu == gpu && datum['kv dtype'] == dtype")
    tips = _tooltip(alt, [("gpu", "nominal", "GPU"), ("kv dtype", "nominal", "KV dtype"),
                          ("context", "quantitative", "context"), ("requests", "quantitative", "requests per rank"),
                          ("requests that fit", "quantitative", "requests that fit"), ("binds", "nominal", "binds"),
                          ("tokens per rank", "quantitative", "token slots"), ("mamba slots", "quantitative", "mamba slots"),
                          ("verdict", "nominal", "verdict"), ("weights", "nominal", "weights")])
    x = alt.X("context:O", title="context length (tokens)", axis=alt.Axis(labelExpr=TOKENS_LABEL, labelAngle=0))
    y = alt.Y("requests:O", title="concurrent requests per rank", sort="descending")
    cells = base.mark_rect(stroke="white").encode(
        x=x, y=y, color=alt.Color("verdict:N", scale=alt.Scale(domain=verdicts, range=colors), title=None,
                                  legend=alt.Legend(orient="bottom", labelLimit=0, columns=2)),
        tooltip=tips).add_params(gpu, dtype, ctx, req)
    chosen = base.transform_filter("datum['log2 context'] == ctx && datum['log2 requests'] == req")
    ring = chosen.mark_rect(fill=None, stroke="black", strokeWidth=3).encode(x=x, y=y)
    heat = (cells + ring).properties(width=300, height=250, title="What fits on one rank")
    lines = chosen.transform_calculate(
        l1="'GPU ' + datum.gpu + ', KV ' + datum['kv dtype']",
        l2="format(datum.requests, ',') + ' requests of ' + format(datum.context, ',') + ' tokens'",
        l3="'all of them resident: ' + datum.verdict",
        l4="'requests that fit at once: ' + format(datum['requests that fit'], ',')",
        l5="'the limit that stops them: ' + datum.binds",
        l6="'token slots: ' + format(datum['tokens per rank'], ',')",
        l7="'mamba state slots: ' + format(datum['mamba slots'], ',')",
        l8="'bytes per token: ' + format(datum['B per token'], ',')",
    ).transform_fold(["l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8"], as_=["line", "text"])
    panel = lines.mark_text(align="left", baseline="top", fontSize=12).encode(
        x=alt.value(6), y=alt.Y("line:N", axis=None), text="text:N").properties(width=240, height=250, title="The chosen point")
    return alt.hconcat(heat, panel).resolve_scale(y="independent")
