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
from pathlib import Path
from typing import Any, Iterable, Mapping

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
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / BUNDLE_NAME
    if not path.is_file() or path.stat().st_size < 100_000:
        path.write_text(javascript_bundle(), encoding="utf-8")
    return path


def _chart_id(spec: Mapping[str, Any]) -> str:
    # Deterministic, so that re-executing a notebook does not churn its stored output.
    digest = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
    return f"glm-kv-chart-{digest}"


def offline_html(spec: Mapping[str, Any]) -> str:
    """HTML for one chart: a container and a script that waits for ``vegaEmbed`` on the page."""
    div = _chart_id(spec)
    payload = json.dumps(spec, sort_keys=True).replace("</", "<\\/")
    options = json.dumps(_EMBED_OPTIONS)
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


def setup(app):  # Sphinx extension hook: `sphinx.extra_extensions: [glm_kv.charts]`
    """Ship the Vega bundle in the book's ``_static/`` and load it on every page."""
    static = Path(app.doctreedir).parent / "glm_kv_static"

    def _config_inited(app, config):
        write_javascript_bundle(static)
        config.html_static_path = list(config.html_static_path) + [str(static)]

    app.connect("config-inited", _config_inited)
    # Loaded in <head> without defer: the per-chart scripts also poll for it.
    app.add_js_file(BUNDLE_NAME, priority=200)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


# ---------------------------------------------------------------------------------------------
# Chart builders: data in (from glm_kv), chart out
# ---------------------------------------------------------------------------------------------

def _alt():
    import altair as alt

    enable_offline()
    return alt


def _color(alt, field: str, domain: Iterable[str] | None = None):
    domain = list(domain) if domain is not None else list(LEDGER_COLORS)
    rng = [LEDGER_COLORS.get(d, "#8c564b") for d in domain]
    return alt.Color(f"{field}:N", scale=alt.Scale(domain=domain, range=rng), title=None)
