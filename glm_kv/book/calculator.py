"""The book's offline calculator: every knob, no server, checked against ``glm-kv plan``.

Knobs split in two (issue 21, deliverable 4):

* Categorical knobs (GPU, TP / DP-attention layout, KV dtype, SSM dtype, mamba strategy,
  speculative algorithm and draft tokens) change shapes, backends and weights: each combination
  is resolved here by glm-kv itself (``resolve`` and the token / request / memory ledgers) and
  its constants ship with the page. A combination SGLang refuses ships its one-line refusal.
* Numeric knobs (``mem_fraction_static`` or SGLang's default, ``max_running_requests``,
  ``context_length``, ``hicache_ratio``) are evaluated in the browser by a JavaScript port of
  exactly the arithmetic that depends on them: ``memory.reserved_mib`` / ``fraction_from_inputs``
  (the default fraction), ``memory.rest_gib_from`` (float32 readings under TP), the plan's
  ``memory.pools_budget`` refusals, ``capacity._pool_sizes_scalar`` (SGLang's float64 GiB sizing, Python's
  float ``//`` included) and ``host.host_size`` for an explicit HiCache ratio.

The port is not trusted: ``tests/book/test_calculator.py`` drives the page in headless Chromium
on random knob settings and compares every figure with ``glm_kv.build_plan`` for the same profile.
Weights per rank are glm-kv's estimate from the model config (FP8 checkpoint, plus the MTP draft
when speculative decoding is on) and the pre-load free memory is its estimate, as on page one.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import ProfileError
from ..inputs.gpus import GPU_NAMES
from ..inputs.profile import load_profile
from ..inputs.resolve import SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS, resolve
from ..ledgers.capacity import AUTO_REQS_MAX, AUTO_REQS_MIN, AUTO_REQS_PER_CONTEXT, BINDING_LABELS, REFUSALS
from ..ledgers.memory import (BREAKABLE_PREFILL_A2A, DEEPEP_A2A_MIB, MLA_PREFILL_GRAPH_MIB, VLM_CACHE_SIZE_MB,
                              fraction_inputs, is_multimodal, memory_ledger_for, vlm_factor)
from ..ledgers.layers import DsaIndexerK
from ..ledgers.model_layers import layers_for
from ..ledgers.parallel import parallel_ledger
from ..ledgers.request import request_ledger
from ..ledgers.token import token_ledger

BASE_PROFILE = "h200-0.5.23"
# weights across layouts: the engine's estimate (the base profile states none either, so its own
# setting opens on exactly `glm-kv plan --profile h200-0.5.23`)
BASE_OVERRIDES = {"weights_bytes": None, "weights_estimate": True}

LAYOUTS = ((1, 1, False), (2, 1, False), (2, 2, True), (4, 1, False), (4, 4, True), (8, 1, False), (8, 8, True))
KV_DTYPES = ("auto", "bfloat16", "fp8_e4m3")
SSM_DTYPES = ("float32", "bfloat16")
STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")
DRAFT_TOKENS = (2, 3, 4, 5, 6, 8)
SPECS = ((None, None),) + tuple((alg, n) for alg in ("EAGLE", "NEXTN") for n in DRAFT_TOKENS)
AXES = ("gpu", "layout", "kv_cache_dtype", "mamba_ssm_dtype", "mamba_scheduler_strategy", "speculative")

# numeric knobs: slider ranges in natural units
FRACTION_RANGE = (0.5, 0.99, 0.001)
REQUESTS_RANGE = (1, 4096)
HICACHE_RANGE = (0.1, 20.0, 0.1)

GROUPS = ("err", "herr", "mem", "pool", "host")


def layout_overrides(layout: tuple[int, int, bool]) -> dict:
    tp, dp, dpa = layout
    return {"tp_size": tp, "dp_size": dp, "enable_dp_attention": dpa}


def combo_overrides(gpu: str, layout, kv: str, ssm: str, strategy: str, spec) -> dict:
    """Profile overrides of one categorical combination (on top of BASE_OVERRIDES)."""
    # topk 1: draft tokens = steps + 1 (SGLang asserts steps is given with them, and with steps it
    # needs topk given too: it fills topk only when steps is unset)
    alg, draft = spec
    return {**BASE_OVERRIDES, "gpu": gpu, **layout_overrides(layout), "kv_cache_dtype": kv,
            "mamba_ssm_dtype": ssm, "mamba_scheduler_strategy": strategy, "speculative_algorithm": alg,
            "speculative_num_steps": None if draft is None else draft - 1,
            "speculative_eagle_topk": None if draft is None else 1, "speculative_num_draft_tokens": draft}


def _refusal(overrides: dict) -> tuple:
    """(field, rule) when SGLang refuses the combination before any pool is sized, else ()."""
    try:
        resolve(load_profile(BASE_PROFILE, overrides))
    except ProfileError as e:
        return (e.field, e.rule)
    return ()


def combo_groups(overrides: dict) -> dict[str, tuple]:
    """The constants of one combination, by group; ``err`` is (field, rule) or () when it resolves."""
    try:
        p = load_profile(BASE_PROFILE, overrides)
        args = resolve(p)
        par = parallel_ledger(args)
        layers = layers_for(args)
        tok = token_ledger(args, layers)
        req = request_ledger(args, par.linear_attn_tp_size, layers)
        mem = memory_ledger_for(p, args.config, layers, args.gpu, args.attn_dp_size, None, par.attn_tp_size)
    except ProfileError as e:
        return {"err": (e.field, e.rule), "herr": (e.field, e.rule), "mem": (), "pool": (), "host": ()}
    f_in = fraction_inputs(p, args.config, args.gpu, args.attn_dp_size, None)
    vlm = vlm_factor(f_in.vision_num_hidden_layers, f_in.vision_hidden_size) if f_in.is_vlm else 0.0
    host_layers = tok.num_full_layers + tok.draft_layers
    idx_layers = (len(layers.layer_ids(DsaIndexerK)) + tok.draft_layers) if tok.indexer_bytes_per_token else 0
    return {
        "err": (),
        # HiCache on (any ratio): refusals of the host side
        "herr": _refusal({**overrides, "enable_hierarchical_cache": True, "hicache_ratio": 2.0}),
        # gpu bytes, tp, attn_dp, pre-load bytes, weights (target + draft), multimodal, VLM factor, spec
        "mem": (args.gpu.memory_bytes, p.tp_size, args.attn_dp_size, mem.pre_model_load_bytes, mem.weights_bytes,
                int(is_multimodal(args.config, p)), vlm, int(bool(p.speculative_algorithm)), p.max_prefill_tokens),
        # slot bytes, slots per request, cell size, page size, verify draft tokens, mamba_full_memory_ratio
        "pool": (req.state_slot_bytes, req.slots_per_request, tok.cell_size_bytes, tok.page_size,
                 args.verify_state_draft_tokens, p.mamba_full_memory_ratio),
        # host KV bytes per token (row x layers), index layers, index page bytes
        "host": (tok.kv_row_bytes * host_layers, idx_layers, tok.indexer_page_bytes),
    }


def _b36(i: int, width: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    s = ""
    for _ in range(width):
        i, r = divmod(i, 36)
        s = digits[r] + s
    return s


def build_data() -> dict:
    """Every categorical combination's constants, deduplicated per group and indexed in base 36.

    The data does not depend on the book's profile (it starts from ``BASE_PROFILE``) and resolving
    all 24,024 combinations costs about 10 CPU s, so a kernel that builds several profiles' books
    computes it once (``_build_data_once``), and where ``GLM_KV_CACHE_DIR`` names a folder (``glm-kv
    book`` sets it to the book's ``_build/.cache``) the result is kept there under the digest of
    glm_kv's own files: any change to the package's code or data is a new digest, so a kept result is
    what ``compute_data`` returns for exactly this code. Each caller gets its own copy.
    """
    return copy.deepcopy(_build_data_once())


CACHE_ENV = "GLM_KV_CACHE_DIR"
_PACKAGE = Path(__file__).resolve().parents[1]


def package_digest(package: Path = _PACKAGE) -> str:
    """sha256 over every file of the glm_kv package (relative path and bytes; caches left out)."""
    h = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(package)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def cache_path(folder: str | Path) -> Path:
    return Path(folder) / f"calculator-{package_digest()[:32]}.json"


@functools.lru_cache(maxsize=1)
def _build_data_once() -> dict:
    folder = os.environ.get(CACHE_ENV)
    if not folder:
        return compute_data()
    path = cache_path(folder)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    data = compute_data()
    keep(folder, data)
    return data


def keep(folder: str | Path, data: dict) -> None:
    """Write ``data`` (this code's ``compute_data()``) where ``build_data`` reads it back."""
    path = cache_path(folder)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache folder: computed again next time


def compute_data() -> dict:
    """``build_data``'s content, computed (every combination resolved now)."""
    gpus = tuple(GPU_NAMES)
    axes = {"gpu": list(gpus), "layout": [list(x) for x in LAYOUTS], "kv_cache_dtype": list(KV_DTYPES),
            "mamba_ssm_dtype": list(SSM_DTYPES), "mamba_scheduler_strategy": list(STRATEGIES),
            "speculative": [list(x) for x in SPECS]}
    tables: dict[str, dict[tuple, int]] = {g: {} for g in GROUPS}
    codes: dict[str, list[int]] = {g: [] for g in GROUPS}
    for combo in itertools.product(gpus, LAYOUTS, KV_DTYPES, SSM_DTYPES, STRATEGIES, SPECS):
        groups = combo_groups(combo_overrides(*combo))
        for g in GROUPS:
            codes[g].append(tables[g].setdefault(groups[g], len(tables[g])))
    width = {g: max(1, len(_b36(len(tables[g]) - 1, 8).lstrip("0"))) for g in GROUPS}
    base = load_profile(BASE_PROFILE, BASE_OVERRIDES)
    model_max = resolve(base).context_length
    return {
        "base_profile": BASE_PROFILE, "axes": axes, "axis_order": list(AXES),
        "tables": {g: [list(k) for k in tables[g]] for g in GROUPS},
        "width": width, "index": {g: "".join(_b36(c, width[g]) for c in codes[g]) for g in GROUPS},
        "refusals": {str(k): list(v) for k, v in REFUSALS.items()},
        "binding_labels": list(BINDING_LABELS),
        "constants": {"auto_per_context": AUTO_REQS_PER_CONTEXT, "auto_min": AUTO_REQS_MIN,
                      "auto_max": AUTO_REQS_MAX, "spec_default_requests": SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS,
                      "vlm_cache_mb": VLM_CACHE_SIZE_MB, "mla_prefill_graph_mib": MLA_PREFILL_GRAPH_MIB,
                      "deepep_a2a_mib": DEEPEP_A2A_MIB,
                      "prefill_graph": base.moe_a2a_backend in BREAKABLE_PREFILL_A2A and base.attn_cp_size == 1},
        "defaults": {"gpu": base.gpu, "layout": [base.tp_size, base.dp_size, base.enable_dp_attention],
                     "kv_cache_dtype": base.kv_cache_dtype, "mamba_ssm_dtype": base.mamba_ssm_dtype,
                     "mamba_scheduler_strategy": base.mamba_scheduler_strategy, "speculative": [None, None],
                     "mem_fraction_static": None, "max_running_requests": base.max_running_requests,
                     "context_length": model_max, "hicache_ratio": None},
        "ranges": {"mem_fraction_static": list(FRACTION_RANGE), "max_running_requests": list(REQUESTS_RANGE),
                   "context_length": [1, model_max], "hicache_ratio": list(HICACHE_RANGE)},
    }


@dataclass(frozen=True)
class Calculator:
    """The calculator's HTML: ``_repr_html_`` puts it in a notebook's output (static book pages)."""

    html: str

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:   # the notebook's text/plain: one line, not the page twice
        return f"glm-kv calculator ({len(self.html.encode()) / 1024:,.0f} KiB, offline)"


def calculator_fragment(data: dict | None = None) -> str:
    """A self-contained <div> + <style> + <script> (data inlined: works from file://, no network)."""
    data = build_data() if data is None else data
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return (f'<div id="glm-kv-calculator" class="glm-kv-calc glm-kv-calculator"></div>\n<style>{CSS}</style>\n'
            f'<script>window.GLM_KV_CALC_DATA = {payload};\n{JS}</script>\n')


def calculator(data: dict | None = None, profile=None) -> Calculator:
    """The calculator, opening on ``profile``'s own setting where its knobs can show it (issue 29:
    the book's profile, so its opening figures are ``glm-kv plan``'s); else on ``BASE_PROFILE``."""
    data = build_data() if data is None else data
    if profile is not None:
        start, missing = profile_settings(data, profile)
        if not missing:
            data = {**data, "defaults": start}
    return Calculator(calculator_fragment(data))


# profile fields the knobs do not set: a profile that differs from the base in one of these cannot
# be shown by the calculator (its figures would not be the profile's)
_KNOB_FIELDS = {"gpu", "tp_size", "dp_size", "enable_dp_attention", "kv_cache_dtype", "mamba_ssm_dtype",
                "mamba_scheduler_strategy", "speculative_algorithm", "speculative_num_steps",
                "speculative_eagle_topk", "speculative_num_draft_tokens", "mem_fraction_static",
                "max_running_requests", "context_length", "enable_hierarchical_cache", "hicache_ratio"}


def profile_settings(data: dict, profile) -> tuple[dict, list[str]]:
    """(the knob setting of ``profile``, the fields the knobs cannot show) for the calculator.

    The setting is exact when the second value is empty: the calculator's opening figures are then
    ``glm-kv plan``'s for the profile (``scripts/consistency_check.py`` checks it in Chromium).
    """
    from ..inputs.profile import Profile

    p = profile if isinstance(profile, Profile) else load_profile(profile)
    axes = data["axes"]
    draft = p.speculative_num_draft_tokens
    spec = [p.speculative_algorithm, draft] if p.speculative_algorithm else [None, None]
    start = {"gpu": p.gpu, "layout": [p.tp_size, p.dp_size, p.enable_dp_attention],
             "kv_cache_dtype": p.kv_cache_dtype, "mamba_ssm_dtype": p.mamba_ssm_dtype,
             "mamba_scheduler_strategy": p.mamba_scheduler_strategy, "speculative": spec,
             "mem_fraction_static": p.mem_fraction_static, "max_running_requests": p.max_running_requests,
             "context_length": resolve(p).context_length,
             "hicache_ratio": p.hicache_ratio if p.enable_hierarchical_cache else None}
    missing = [k for k in AXES if start[k] not in axes[k]]
    if spec[0] is not None and (p.speculative_eagle_topk != 1 or p.speculative_num_steps != (draft or 0) - 1):
        missing.append("speculative_eagle_topk / speculative_num_steps")
    base = load_profile(BASE_PROFILE, BASE_OVERRIDES).model_dump()
    mine = p.model_dump()
    missing += sorted(k for k in mine if k not in _KNOB_FIELDS | {"name", "description"} and mine[k] != base[k])
    return start, missing


def write_standalone(path: Path, data: dict | None = None) -> Path:
    """The calculator as one HTML file (the test opens it in headless Chromium)."""
    path = Path(path)
    path.write_text("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                    "<title>glm-kv calculator</title></head>\n<body>\n" + calculator_fragment(data)
                    + "</body></html>\n", encoding="utf-8")
    return path


def js_source() -> str:
    return JS


CSS = """
.glm-kv-calc{font-family:inherit;max-width:100%;box-sizing:border-box}
.glm-kv-calc fieldset{border:1px solid #ccc;border-radius:6px;margin:0 0 .8em;padding:.5em .8em;min-width:0}
.glm-kv-calc .knobs{display:grid;grid-template-columns:repeat(auto-fill,minmax(15em,1fr));gap:.5em 1em}
.glm-kv-calc label,.glm-kv-calc .knob{display:flex;flex-direction:column;font-size:.9em;min-width:0;margin:0}
.glm-kv-calc .knob .title{font-weight:600}
.glm-kv-calc label.row,.glm-kv-calc div.row{display:flex;flex-direction:row;gap:.4em;align-items:center;flex-wrap:nowrap}
.glm-kv-calc .row input[type=checkbox]{margin:0;flex:none;width:auto}
.glm-kv-calc .row input[type=range]{flex:1 1 8em;min-width:6em;width:auto}
.glm-kv-calc .row input[type=number]{flex:none;width:8em;box-sizing:border-box}
.glm-kv-calc .row output{flex:0 0 4em;width:4em;display:inline-block;text-align:right}
.glm-kv-calc select,.glm-kv-calc input[type=number]{max-width:100%;box-sizing:border-box}
.glm-kv-calc input[type=range]{width:100%}
.glm-kv-calc table{border-collapse:collapse;width:100%;table-layout:fixed}
.glm-kv-calc td{padding:.2em .4em;border-bottom:1px solid #eee;overflow-wrap:anywhere}
.glm-kv-calc td.v{text-align:right;font-variant-numeric:tabular-nums;font-weight:600;white-space:nowrap;width:8em;overflow-wrap:normal}
.glm-kv-calc .err{color:#b00020;font-weight:600}
.glm-kv-calc .answer{font-size:1.05em;margin:.3em 0 .6em}
"""

JS = r"""
(function () {
  "use strict";
  var D = window.GLM_KV_CALC_DATA, C = D.constants;
  var GiB = 1073741824, MiB = 1048576;

  // ---- exact helpers: Python's semantics where JavaScript's differ ----------------------------
  function pyFloorDivFloat(a, b) {          // float.__floordiv__ (Objects/floatobject.c float_floor_div)
    if (b === 0) return NaN;
    var mod = a % b, div = (a - mod) / b, fd;
    if (mod) { if ((b < 0) !== (mod < 0)) { mod += b; div -= 1.0; } }
    if (div) { fd = Math.floor(div); if (div - fd > 0.5) fd += 1.0; } else { fd = 0 * (a / b); }
    return fd;
  }
  function intFloorDiv(a, b) {               // int // int (floors toward -inf), exact below 2^53
    var q = Math.floor(a / b);
    while (q * b > a) q -= 1;
    while ((q + 1) * b <= a) q += 1;
    return q;
  }
  function finiteInt(x) { return isFinite(x) ? Math.trunc(x) : 0; }
  function pyRound3(x) {                     // round(x, 3): correctly rounded, ties to even
    var neg = x < 0, s = Math.abs(x).toFixed(100), dot = s.indexOf(".");
    var ip = s.slice(0, dot), fr = s.slice(dot + 1), n = parseInt(ip, 10) * 1000 + parseInt(fr.slice(0, 3), 10);
    var rest = fr.slice(3), half = "5" + "0".repeat(rest.length - 1);
    if (rest > half || (rest === half && n % 2 === 1)) n += 1;
    var r = n / 1000;
    return neg ? -r : r;
  }

  // ---- memory.py: the default fraction and the rest -------------------------------------------
  function gpuDefaults(mib, tp) {
    if (mib < 20 * 1024) return [2048, 8];
    if (mib < 35 * 1024) return [4096, tp < 4 ? 48 : 160];
    if (mib < 60 * 1024) return [4096, tp < 4 ? 32 : 160];
    if (mib < 160 * 1024) return [8192, tp < 4 ? 256 : 512];
    return [16384, 512];
  }
  function reservedMib(mib, tp, attnDp, mrr, maxPrefill) {
    var d = gpuDefaults(mib, tp), chunk = d[0], maxBs = d[1];
    if (mrr !== null && maxBs > mrr) maxBs = mrr;
    var act = chunk > 0 ? Math.max(chunk, 2048) : Math.max(maxPrefill, 2048);
    var r = 512 + act * 1.5 + tp * 1 / 8 * 1024;
    var graph = 0.0;
    graph += maxBs * 2;
    if (attnDp > 1) { graph += maxBs * attnDp * 3; if (maxBs > 300) graph += maxBs * attnDp * 1.5; }
    if (C.prefill_graph) graph += C.mla_prefill_graph_mib;
    r += graph;
    if (mib > 60 * 1024) r = Math.max(r, 10 * 1024);
    return r;
  }
  function defaultFraction(m, mrr) {
    var mib = m.gpuBytes / MiB;
    var frac = pyRound3((mib - reservedMib(mib, m.tp, m.attnDp, mrr, m.maxPrefill)) / mib);
    return m.vlm ? frac * m.vlm : frac;
  }
  function reading(bytes, dist) { return dist ? Math.fround(bytes) / GiB : bytes / GiB; }
  // memory.free_readings: free GiB before the weights load and after it
  function readings(m) {
    var dist = m.tp > 1;
    return [reading(m.preLoad, dist), reading(m.preLoad - m.weights, dist)];
  }
  function restGib(m, mfs) {
    var r = readings(m), pre = r[0], avail = r[1];
    return avail - pre * (1 - mfs) - (m.multimodal ? C.vlm_cache_mb / 1024 : 0.0);
  }
  // memory.sglang_no_memory_text: SGLang's minimum viable fraction 1 - available/pre, rounded up to 0.001
  function fractionThatWouldDo(m) {
    var r = readings(m), pre = r[0], avail = r[1];
    return pre > 0 ? Math.ceil((1 - avail / pre) * 1000) / 1000 : null;
  }

  // ---- capacity.py: _pool_sizes_scalar without caps (max_mamba_cache_size, max_total_tokens unset) ----
  function poolSizes(restG, q, perWorker, hasRequests, ctx) {
    var slot = q.slot, ratio = q.ratio, cell = q.cell, page = q.page, draft = q.draft, r = q.fullRatio;
    var err = 0;
    function fail(where, code) { if (where && err === 0) err = code; }
    var budget = restG * r / (1 + r) * GiB, spec = draft > 0, kb;
    if (spec) kb = pyFloorDivFloat(budget - slot * (1 + draft), slot * (1 + draft / ratio));
    else kb = pyFloorDivFloat(budget - slot, slot);
    var K = finiteInt(kb);
    var capped = Math.min(perWorker, intFloorDiv(K, ratio));
    var scratch = spec ? slot * (capped + 1) * draft : 0;
    fail(K <= 0, 2);
    var rg = restG - scratch / GiB - ((K + 1) * slot) / GiB;
    var restBytes = finiteInt(Math.trunc(rg * GiB));
    fail(restBytes <= 0, 4);
    var tokens = intFloorDiv(intFloorDiv(restBytes, cell), page) * page;
    fail(tokens <= 0, 6);
    var est = Math.trunc(tokens / Math.max(ctx, 1) * C.auto_per_context);
    var auto = Math.max(Math.min(est, C.auto_max), C.auto_min);
    var requested = hasRequests ? perWorker : auto;
    var nreq = Math.min(requested, intFloorDiv(tokens, 2));
    var binding = nreq < requested ? 2 : (hasRequests ? 0 : 1);
    var cap = intFloorDiv(K, ratio);
    if (cap < nreq) binding = 3;
    nreq = Math.min(nreq, cap);
    fail(nreq <= 0, 8);
    return {K: K, scratch: scratch, restBytes: restBytes, tokens: tokens, requested: requested,
            nreq: nreq, binding: binding, err: err};
  }

  // ---- the lookup of a categorical combination ------------------------------------------------
  function axisIndex(name, value) {
    var vals = D.axes[name];
    for (var i = 0; i < vals.length; i++) if (JSON.stringify(vals[i]) === JSON.stringify(value)) return i;
    throw new Error("unknown " + name + ": " + JSON.stringify(value));
  }
  function combo(s) {
    var idx = 0;
    D.axis_order.forEach(function (a) { idx = idx * D.axes[a].length + axisIndex(a, s[a]); });
    var out = {};
    Object.keys(D.tables).forEach(function (g) {
      var w = D.width[g];
      out[g] = D.tables[g][parseInt(D.index[g].substr(idx * w, w), 36)];
    });
    return out;
  }

  // ---- one plan's figures from the knobs -------------------------------------------------------
  function compute(s) {
    var c = combo(s);
    var hicache = s.hicache_ratio !== null && s.hicache_ratio !== undefined;
    if (c.err.length) return {error: c.err[0], rule: c.err[1]};
    if (hicache && c.herr.length) return {error: c.herr[0], rule: c.herr[1]};
    var m = {gpuBytes: c.mem[0], tp: c.mem[1], attnDp: c.mem[2], preLoad: c.mem[3], weights: c.mem[4],
             multimodal: c.mem[5], vlm: c.mem[6], spec: c.mem[7], maxPrefill: c.mem[8]};
    var q = {slot: c.pool[0], ratio: c.pool[1], cell: c.pool[2], page: c.pool[3], draft: c.pool[4], fullRatio: c.pool[5]};
    var mrr = s.max_running_requests === undefined ? null : s.max_running_requests;
    var given = s.mem_fraction_static !== null && s.mem_fraction_static !== undefined;
    var mfs = given ? s.mem_fraction_static : defaultFraction(m, mrr);
    var rg = restGib(m, mfs), avail = Math.trunc(rg * GiB);
    if (avail <= 0 && mfs <= 0) return {error: "gpu", rule: "the device is smaller than SGLang's reservation", mem_fraction_static: mfs};
    if (avail <= 0) {
      var need = fractionThatWouldDo(m);
      return {error: "weights_bytes", mem_fraction_static: mfs, fraction_that_would_do: need,
              rule: "weights leave no memory for the pools at this fraction" + (need === null ? "" :
                    '; SGLang 0.5.23 asks for --mem-fraction-static above <span data-field="fraction_that_would_do"' +
                    ' data-value="' + need + '">' + need.toFixed(3) + "</span>" +
                    (need >= 1 ? ": no fraction fits, the weights exceed the free memory (more GPUs, or a smaller checkpoint)" : ""))};
    }
    var global = (mrr === null && m.spec) ? C.spec_default_requests : mrr;
    var perWorker = global === null ? null : Math.max(1, intFloorDiv(global, m.attnDp));
    var p = poolSizes(rg, q, perWorker === null ? 1 : perWorker, perWorker !== null, s.context_length);
    if (p.err) {
      var ref = D.refusals[String(p.err)];
      return {error: ref[0], rule: ref[1], mem_fraction_static: mfs};
    }
    var out = {
      mem_fraction_static: mfs, rest_bytes: avail, weights_bytes: m.weights, pre_model_load_bytes: m.preLoad,
      max_total_num_tokens: p.tokens, max_mamba_cache_size: p.K, max_running_requests: p.nreq,
      requested_max_running_requests: p.requested, binding_limit: D.binding_labels[p.binding],
      attn_dp_size: m.attnDp, token_pool_bytes: p.tokens * q.cell, mamba_pool_bytes: (p.K + 1) * q.slot,
      spec_scratch_bytes: p.scratch, slots_per_request: q.ratio, page_size: q.page,
      host_kv_tokens: null, host_total_bytes: null, gpu_memory_bytes: m.gpuBytes,
      context_length: s.context_length
    };
    // page one's "requests that fit" and what binds (derivations.requests_fit_expr / fit_binding:
    // the smallest of three, the first of equals wins)
    var terms = [p.requested, intFloorDiv(p.tokens, s.context_length), intFloorDiv(p.K, q.ratio)];
    var least = Math.min(terms[0], terms[1], terms[2]);
    out.requests_at_context = least;
    out.binds_at_context = ["requested", "tokens", "mamba"][terms.indexOf(least)];
    if (hicache) {     // host.host_size, ratio given
      var h = {spt: c.host[0], idxLayers: c.host[1], idxPage: c.host[2]}, ratio = s.hicache_ratio;
      var tokens = (intFloorDiv(Math.trunc(p.tokens * ratio), q.page) + 1) * q.page;
      var slots = Math.trunc(p.K * ratio) + 1;
      var kvB = tokens * h.spt, idxB = intFloorDiv(tokens + q.page + 1, q.page) * h.idxPage * h.idxLayers;
      var mB = slots * q.slot;
      out.host_kv_tokens = tokens; out.host_mamba_slots = slots; out.host_kv_bytes = kvB;
      out.host_indexer_bytes = idxB; out.host_mamba_bytes = mB; out.host_total_bytes = kvB + idxB + mB;
    }
    return out;
  }

  // ---- the page ---------------------------------------------------------------------------------
  var root = document.getElementById("glm-kv-calculator");
  if (!root) return;
  var R = D.ranges, DEF = D.defaults;
  function fmtInt(n) { return Math.round(n).toLocaleString("en-US"); }
  function fmtGiB(b) { return (b / GiB).toLocaleString("en-US", {minimumFractionDigits: 2, maximumFractionDigits: 2}) + " GiB"; }
  function label(v) {
    if (Array.isArray(v) && v.length === 3) return "TP " + v[0] + (v[2] ? ", DP attention " + v[1] + " (attn_tp " + (v[0] / v[1]) + ")" : ", no DP attention");
    if (Array.isArray(v)) return v[0] === null ? "none" : v[0] + ", " + v[1] + " draft tokens";
    return String(v);
  }
  function select(name, text) {
    var opts = D.axes[name].map(function (v, i) { return '<option value="' + i + '">' + label(v) + "</option>"; }).join("");
    return '<label>' + text + '<select data-knob="' + name + '">' + opts + "</select></label>";
  }
  function numeric(title, name, range, box, boxText, boxOff, typed) {
    var h = '<div class="knob"><div class="title">' + title + "</div>";
    if (box) h += '<label class="row"><input type="checkbox" data-num="' + box + '"> ' + boxText + "</label>";
    h += '<div class="row"><input type="range" data-num="' + name + '" min="' + range[0] + '" max="' + range[1] +
         '" step="' + range[2] + '">';
    h += typed ? '<input type="number" data-typed="' + name + '" min="' + range[0] + '" max="' + range[1] + '" step="' + range[2] + '">'
               : '<output data-out="' + name + '"></output>';
    return h + "</div></div>";
  }
  // context_length: a slider in powers of two (8K, 32K and 128K are stops, as on page one) beside a
  // box that takes any length; the box holds the value the page computes with
  var CTX_STOPS = [[13, "8K"], [15, "32K"], [17, "128K"]];
  function contextKnob() {
    var top = Math.floor(Math.log2(R.context_length[1]));
    var stops = CTX_STOPS.filter(function (x) { return x[0] <= top; })
      .map(function (x) { return '<option value="' + x[0] + '" label="' + x[1] + '"></option>'; }).join("");
    return '<div class="knob"><div class="title">context_length (tokens; the slider moves in powers of two)</div>' +
      '<div class="row"><input type="range" data-num="ctxlog" min="0" max="' + top + '" step="1" list="glm-kv-ctx-stops">' +
      '<input type="number" data-num="ctx" min="' + R.context_length[0] + '" max="' + R.context_length[1] + '" step="1">' +
      '<datalist id="glm-kv-ctx-stops">' + stops + "</datalist></div></div>";
  }
  function setContext(v) { num("ctx").value = String(v); num("ctxlog").value = String(Math.round(Math.log2(Math.max(v, 1)))); }
  root.innerHTML =
    '<fieldset><legend>Deployment (precomputed by glm-kv per combination)</legend><div class="knobs">' +
    select("gpu", "GPU") + select("layout", "TP / DP attention") + select("kv_cache_dtype", "kv_cache_dtype") +
    select("mamba_ssm_dtype", "mamba_ssm_dtype") + select("mamba_scheduler_strategy", "mamba strategy") +
    select("speculative", "speculative algorithm") + "</div></fieldset>" +
    '<fieldset><legend>Numbers (computed in the browser)</legend><div class="knobs">' +
    numeric("mem_fraction_static", "mfs", R.mem_fraction_static, "mfs_default", "SGLang's default", true, false) +
    numeric("max_running_requests (global)", "mrr", R.max_running_requests.concat([1]), "mrr_auto", "automatic", true, true) +
    contextKnob() +
    numeric("HiCache (hicache_ratio)", "hicache", R.hicache_ratio, "hicache_on", "HiCache on", false, false) +
    "</div></fieldset>" +
    '<div class="answer" data-out="answer"></div><table data-out="table"><tbody></tbody></table>';

  function q(sel) { return root.querySelector(sel); }
  function knob(name) { return q('[data-knob="' + name + '"]'); }
  function num(name) { return q('[data-num="' + name + '"]'); }

  function read() {
    var s = {};
    D.axis_order.forEach(function (a) { s[a] = D.axes[a][+knob(a).value]; });
    s.mem_fraction_static = num("mfs_default").checked ? null : +num("mfs").value;
    s.max_running_requests = num("mrr_auto").checked ? null : +num("mrr").value;
    s.context_length = +num("ctx").value;
    s.hicache_ratio = num("hicache_on").checked ? +num("hicache").value : null;
    return s;
  }
  function write(s) {
    D.axis_order.forEach(function (a) { if (s[a] !== undefined) knob(a).value = String(axisIndex(a, s[a])); });
    if (s.mem_fraction_static !== undefined) {
      num("mfs_default").checked = s.mem_fraction_static === null;
      if (s.mem_fraction_static !== null) num("mfs").value = String(s.mem_fraction_static);
    }
    if (s.max_running_requests !== undefined) {
      num("mrr_auto").checked = s.max_running_requests === null;
      if (s.max_running_requests !== null) num("mrr").value = String(s.max_running_requests);
    }
    if (s.context_length !== undefined) setContext(s.context_length);
    if (s.hicache_ratio !== undefined) {
      num("hicache_on").checked = s.hicache_ratio !== null;
      if (s.hicache_ratio !== null) num("hicache").value = String(s.hicache_ratio);
    }
  }
  // one vocabulary (book/notation.md): "binds" says what limits the requests of the context that fit;
  // what set SGLang's own max_running_requests is "set by"
  var BINDS = {requested: "the requests asked for (max_running_requests)", tokens: "the token slots (max_total_num_tokens)",
               mamba: "the state slots (max_mamba_cache_size)"};
  var SET_BY = {requested: "--max-running-requests", auto: "SGLang's automatic value", tokens: "the token slots",
                mamba: "the state slots"};
  function row(name, value, text) {
    return '<tr><td>' + name + '</td><td class="v" data-field="' + value[0] + '" data-value="' + value[1] + '">' + text + "</td></tr>";
  }
  function render() {
    var s = read(), r = compute(s);
    q('[data-out="mfs"]').textContent = r.mem_fraction_static !== undefined ? r.mem_fraction_static.toFixed(4) : "";
    num("mfs").disabled = num("mfs_default").checked;
    q('[data-typed="mrr"]').value = num("mrr").value;
    num("mrr").disabled = q('[data-typed="mrr"]').disabled = num("mrr_auto").checked;
    q('[data-out="hicache"]').textContent = s.hicache_ratio === null ? "off" : s.hicache_ratio.toFixed(1);
    num("hicache").disabled = !num("hicache_on").checked;
    var ans = q('[data-out="answer"]'), body = q('[data-out="table"] tbody');
    if (r.error) {
      ans.innerHTML = '<span class="err" data-field="error" data-value="' + r.error + '">No plan: ' + r.error + "</span> " + r.rule;
      body.innerHTML = "";
      return r;
    }
    ans.innerHTML = "Per rank: <b>" + fmtInt(r.max_total_num_tokens) + "</b> tokens of KV cache, and <b>" +
      fmtInt(r.requests_at_context) + "</b> requests of " + fmtInt(r.context_length) + " tokens fit at once; the limit that binds: " +
      BINDS[r.binds_at_context] + ". SGLang runs up to " + fmtInt(r.max_running_requests) + " requests per DP worker (" +
      fmtInt(r.max_running_requests * r.attn_dp_size) + " over " + r.attn_dp_size + " worker" + (r.attn_dp_size > 1 ? "s" : "") +
      "; set by " + SET_BY[r.binding_limit] + ").";
    var rows = [
      row("GPU memory", ["gpu_memory_bytes", r.gpu_memory_bytes], fmtGiB(r.gpu_memory_bytes)),
      row("weights per rank (estimate; with the MTP draft when on)", ["weights_bytes", r.weights_bytes], fmtGiB(r.weights_bytes)),
      row("mem_fraction_static", ["mem_fraction_static", r.mem_fraction_static], r.mem_fraction_static.toFixed(4)),
      row("memory left for the pools (rest)", ["rest_bytes", r.rest_bytes], fmtGiB(r.rest_bytes)),
      row("tokens per rank (max_total_num_tokens)", ["max_total_num_tokens", r.max_total_num_tokens], fmtInt(r.max_total_num_tokens)),
      row("KV pool (token slots x cell size)", ["token_pool_bytes", r.token_pool_bytes], fmtGiB(r.token_pool_bytes)),
      row("state slots (max_mamba_cache_size)", ["max_mamba_cache_size", r.max_mamba_cache_size], fmtInt(r.max_mamba_cache_size)),
      row("state pool ((slots + 1) x slot)", ["mamba_pool_bytes", r.mamba_pool_bytes], fmtGiB(r.mamba_pool_bytes)),
      row("MTP verify scratch", ["spec_scratch_bytes", r.spec_scratch_bytes], fmtGiB(r.spec_scratch_bytes)),
      row("state slots per request", ["slots_per_request", r.slots_per_request], fmtInt(r.slots_per_request)),
      row("max_running_requests asked per worker", ["requested_max_running_requests", r.requested_max_running_requests], fmtInt(r.requested_max_running_requests)),
      row("max_running_requests per worker (SGLang's cap)", ["max_running_requests", r.max_running_requests], fmtInt(r.max_running_requests)),
      row("max_running_requests set by", ["binding_limit", r.binding_limit], SET_BY[r.binding_limit]),
      row("requests of context_length tokens that fit", ["requests_at_context", r.requests_at_context], fmtInt(r.requests_at_context)),
      row("binds", ["binds_at_context", r.binds_at_context], BINDS[r.binds_at_context])
    ];
    if (r.host_total_bytes !== null) {
      rows.push(row("HiCache host tokens", ["host_kv_tokens", r.host_kv_tokens], fmtInt(r.host_kv_tokens)));
      rows.push(row("HiCache host state slots", ["host_mamba_slots", r.host_mamba_slots], fmtInt(r.host_mamba_slots)));
      rows.push(row("HiCache host pools (KV + index + state)", ["host_total_bytes", r.host_total_bytes], fmtGiB(r.host_total_bytes)));
    }
    body.innerHTML = rows.join("");
    return r;
  }
  function shown() {                         // the figures as displayed (data-value of each cell)
    var out = {};
    root.querySelectorAll("[data-field]").forEach(function (el) {
      var v = el.getAttribute("data-value");
      out[el.getAttribute("data-field")] = (v !== "" && !isNaN(+v)) ? +v : v;
      out[el.getAttribute("data-field") + "__text"] = el.textContent;
    });
    return out;
  }
  root.addEventListener("input", function (e) {
    var t = e.target.getAttribute("data-typed"), n = e.target.getAttribute("data-num");
    if (t) { if (e.target.value === "" || !e.target.checkValidity()) return; num(t).value = e.target.value; }
    if (n === "ctxlog") num("ctx").value = String(Math.min(Math.pow(2, +e.target.value), R.context_length[1]));
    if (n === "ctx") { if (e.target.value === "" || !e.target.checkValidity()) return; setContext(+e.target.value); }
    render();
  });
  root.addEventListener("change", render);
  write(DEF);
  num("mfs").value = "0.85"; num("hicache").value = "2";
  render();
  window.glmKvCalculator = {
    data: D, compute: compute,
    set: function (s) { write(s); render(); return shown(); },
    get: function () { return {settings: read(), shown: shown()}; }
  };
})();
"""


def calculator_facts(data: dict) -> dict[str, str]:
    """Figures the calculator page's prose glues (thousands separators applied)."""
    n = 1
    for a in data["axis_order"]:
        n *= len(data["axes"][a])
    width, err = data["width"]["err"], data["index"]["err"]
    refused = sum(1 for i in range(n) if data["tables"]["err"][int(err[i * width:(i + 1) * width], 36)])
    size = len(calculator_fragment(data).encode())
    return {"calc_combinations": f"{n:,}", "calc_refused": f"{refused:,}", "calc_gpus": f"{len(data['axes']['gpu']):,}",
            "calc_kib": f"{size / 1024:,.0f}", "calc_base_profile": data["base_profile"],
            "calc_context_max": f"{data['ranges']['context_length'][1]:,}"}
