"""Derivations: each ledger figure as a formula, rendered with this profile's numbers plugged in.

One expression per figure is both evaluated and rendered (LaTeX for text, MathML for the book's
pages, which need no JavaScript and no network), so the formula on the page and the value beside
it cannot drift apart. Each ``Derivation`` names the plan key (``token.kv_bytes_per_token``) its
value must equal; ``tests/book/test_derivations.py`` checks that for every shipped profile.
Symbols are SGLang's names (``kv_cache_dim``, ``index_kpool``, ``mamba_cache_per_req``).

Pure arithmetic on a typed ``Plan`` (numpy for sweep columns): no torch, no pandas. The book draws on it in every chapter
(``glm_kv.book``: chapters 1, 2, 3, 5 and 6 show ``derivations(plan, ...)``).
"""
from __future__ import annotations

import functools
import html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence, Union

import numpy as np

from ..units import FP8_SCALE_BYTES, FP8_SCALE_GROUP
from .capacity import FIT_LIMITS

if TYPE_CHECKING:
    from .plan import Plan

Number = Union[int, float]

# precedence: higher binds tighter
_ADD, _MUL, _ATOM = 1, 2, 3


class Expr:
    """A node of a formula: it evaluates, and renders as LaTeX or MathML (symbols or numbers)."""

    prec = _ATOM

    def value(self) -> Number:
        raise NotImplementedError

    def latex(self, numbers: bool) -> str:
        raise NotImplementedError

    def mathml(self, numbers: bool) -> str:
        raise NotImplementedError

    def __add__(self, other: "Expr") -> "Expr":
        return BinOp("+", self, _e(other))

    def __sub__(self, other: "Expr") -> "Expr":
        return BinOp("-", self, _e(other))

    def __mul__(self, other: "Expr") -> "Expr":
        return BinOp("*", self, _e(other))

    def __floordiv__(self, other: "Expr") -> "Expr":
        return Floor(BinOp("/", self, _e(other)))

    def __truediv__(self, other: "Expr") -> "Expr":
        return BinOp("/", self, _e(other))


def _integral(x) -> bool:
    if np.ndim(x):
        return np.issubdtype(np.asarray(x).dtype, np.integer)
    return isinstance(x, (int, np.integer))


def _e(x) -> Expr:
    return x if isinstance(x, Expr) else Num(x)


def _fmt_latex(v: Number) -> str:
    if isinstance(v, float) and not v.is_integer():
        return f"{v:,.3f}".rstrip("0").replace(",", "{,}")
    return f"{int(v):,}".replace(",", "{,}")


def _fmt_text(v: Number) -> str:
    if isinstance(v, float) and not v.is_integer():
        return f"{v:,.3f}".rstrip("0")
    return f"{int(v):,}"


@dataclass(frozen=True)
class Var(Expr):
    """A named quantity (SGLang's name where there is one) and its value for this profile."""

    name: str
    val: Number

    def value(self) -> Number:
        return self.val

    def latex(self, numbers: bool) -> str:
        if numbers:
            return _fmt_latex(self.val)
        return r"\mathrm{" + self.name.replace("_", r"\_") + "}"

    def mathml(self, numbers: bool) -> str:
        if numbers:
            return f"<mn>{_fmt_text(self.val)}</mn>"
        return f'<mi mathvariant="normal">{html.escape(self.name)}</mi>'


@dataclass(frozen=True)
class Num(Expr):
    """A literal of the formula itself (the 2 of "two buffers"), shown as a number in both forms."""

    val: Number

    def value(self) -> Number:
        return self.val

    def latex(self, numbers: bool) -> str:
        return _fmt_latex(self.val)

    def mathml(self, numbers: bool) -> str:
        return f"<mn>{_fmt_text(self.val)}</mn>"


_OPS = {"+": (_ADD, "+", "+"), "-": (_ADD, "-", "&#8722;"), "*": (_MUL, r"\times", "&#215;"),
        "/": (_MUL, "/", "/")}


@dataclass(frozen=True)
class BinOp(Expr):
    op: str
    a: Expr
    b: Expr

    @property
    def prec(self) -> int:  # type: ignore[override]
        return _OPS[self.op][0]

    def value(self) -> Number:
        a, b = self.a.value(), self.b.value()
        if self.op == "+":
            return a + b
        if self.op == "-":
            return a - b
        if self.op == "*":
            return a * b
        return a / b

    def _parts(self, numbers: bool, render: Callable[[Expr, bool], str], wrap: Callable[[str], str]):
        left, right = render(self.a, numbers), render(self.b, numbers)
        if self.a.prec < self.prec:
            left = wrap(left)
        # a - (b + c), a / (b * c): the right operand needs brackets at equal precedence too
        if self.b.prec < self.prec or (self.b.prec == self.prec and self.op in "-/"):
            right = wrap(right)
        return left, right

    def latex(self, numbers: bool) -> str:
        left, right = self._parts(numbers, lambda e, n: e.latex(n), lambda s: rf"\left({s}\right)")
        return f"{left} {_OPS[self.op][1]} {right}"

    def mathml(self, numbers: bool) -> str:
        left, right = self._parts(numbers, lambda e, n: e.mathml(n),
                                  lambda s: f"<mrow><mo>(</mo>{s}<mo>)</mo></mrow>")
        return f"<mrow>{left}<mo>{_OPS[self.op][2]}</mo>{right}</mrow>"


@dataclass(frozen=True)
class Floor(Expr):
    inner: Expr

    def value(self) -> Number:
        if isinstance(self.inner, BinOp) and self.inner.op == "/":
            a, b = self.inner.a.value(), self.inner.b.value()
            if _integral(a) and _integral(b):
                return a // b  # exact integer division, as the ledgers do it
        v = self.inner.value()
        return np.floor(v).astype(np.int64) if np.ndim(v) else int(v // 1)

    def latex(self, numbers: bool) -> str:
        return rf"\left\lfloor {self.inner.latex(numbers)} \right\rfloor"

    def mathml(self, numbers: bool) -> str:
        return f"<mrow><mo>&#8970;</mo>{self.inner.mathml(numbers)}<mo>&#8971;</mo></mrow>"


@dataclass(frozen=True)
class Ceil(Expr):
    inner: Expr

    def value(self) -> Number:
        if isinstance(self.inner, BinOp) and self.inner.op == "/":
            a, b = self.inner.a.value(), self.inner.b.value()
            return -(-a // b)
        v = self.inner.value()
        return int(-(-v // 1))

    def latex(self, numbers: bool) -> str:
        return rf"\left\lceil {self.inner.latex(numbers)} \right\rceil"

    def mathml(self, numbers: bool) -> str:
        return f"<mrow><mo>&#8968;</mo>{self.inner.mathml(numbers)}<mo>&#8969;</mo></mrow>"


@dataclass(frozen=True)
class Min(Expr):
    args: tuple[Expr, ...]

    def value(self) -> Number:
        vals = [a.value() for a in self.args]
        if any(np.ndim(v) for v in vals):  # evaluated over sweep columns
            return functools.reduce(np.minimum, vals)
        return min(vals)

    def latex(self, numbers: bool) -> str:
        return r"\min\left(" + ",\\ ".join(a.latex(numbers) for a in self.args) + r"\right)"

    def mathml(self, numbers: bool) -> str:
        inner = "<mo>,</mo>".join(a.mathml(numbers) for a in self.args)
        return f"<mrow><mi>min</mi><mo>(</mo>{inner}<mo>)</mo></mrow>"


@dataclass(frozen=True)
class Derivation:
    """One figure: ``name = formula = formula with numbers = value unit``, and its plan key."""

    name: str          # the left-hand side (SGLang's or the plan's name for the figure)
    expr: Expr
    unit: str          # "B", "tokens", "slots", "requests", "" (a count)
    key: str           # dotted plan key whose value this must equal
    what: str          # one line: what the figure is

    @property
    def value(self) -> Number:
        return self.expr.value()

    def latex(self) -> str:
        """``lhs = symbols = numbers = value`` as one LaTeX ``aligned`` block."""
        unit = rf"\ \mathrm{{{self.unit}}}" if self.unit else ""
        lhs = r"\mathrm{" + self.name.replace("_", r"\_") + "}"
        lines = [f"{lhs} &= {self.expr.latex(False)}", f"&= {self.expr.latex(True)}",
                 f"&= {_fmt_latex(self.value)}{unit}"]
        return r"\begin{aligned}" + r" \\ ".join(lines) + r"\end{aligned}"

    def mathml(self) -> str:
        """The same lines as block MathML (rendered natively by the browser, offline)."""
        unit = f'<mspace width="0.3em"/><mtext>{html.escape(self.unit)}</mtext>' if self.unit else ""
        lhs = f'<mi mathvariant="normal">{html.escape(self.name)}</mi>'
        # the name on its own line, then one "= ..." line each, a wide sum one term per line: narrow enough for a
        # phone (MathML has no line breaking in Chromium)
        rows = [lhs] + _mathml_rows(self.expr, False) + _mathml_rows(self.expr, True) + [
            f'<mspace width="1em"/><mo>=</mo><mn>{_fmt_text(self.value)}</mn>{unit}']
        body = "".join(f"<mtr><mtd>{r}</mtd></mtr>" for r in rows)
        # inline math in a block of its own: block math would centre itself in the column
        return (f'<div class="glm-kv-math"><math class="glm-kv-derivation" displaystyle="true" '
                f'alttext="{html.escape(self.latex())}"><mtable columnalign="left">{body}</mtable></math></div>')

    def text(self) -> str:
        """Plain text for terminals and nbval: ``name = numbers = value unit``."""
        return f"{self.name} = {_plain(self.expr)} = {_fmt_text(self.value)}{' ' + self.unit if self.unit else ''}"


# characters of one formula line that fit a 400 px column (chapter 3 at 400 px: about 57 show); a wider sum or
# product is wrapped between its terms
WIDE_LINE = 52


def _width(e: Expr, numbers: bool) -> int:
    """A formula's width in characters as shown: ``floor(`` and ``ceil(`` are one bracket each."""
    return len(_plain(e, numbers).replace("floor(", "(").replace("ceil(", "("))


def _chain(e: Expr) -> list[tuple[str, Expr]]:
    """A left-nested sum (``+ -``) or product (``*``) as ``[("", first), (op, term), ...]``; else ``[("", e)]``."""
    ops = "+-" if isinstance(e, BinOp) and e.op in "+-" else "*"
    terms: list[tuple[str, Expr]] = []
    while isinstance(e, BinOp) and e.op in ops:
        terms.insert(0, (e.op, e.b))
        e = e.a
    return [("", e)] + terms


def _mathml_rows(e: Expr, numbers: bool) -> list[str]:
    """The line ``= e`` as MathML table rows: one, or for a sum or product wider than ``WIDE_LINE`` as many as its
    terms need (``= a + b`` then ``+ c`` ...), each term bracketed as ``BinOp`` brackets it."""
    if _width(e, numbers) <= WIDE_LINE:
        return [f'<mspace width="1em"/><mo>=</mo>{e.mathml(numbers)}']
    if isinstance(e, Min):   # min(a, / b, / c): one argument per row
        last = len(e.args) - 1
        return [f'<mspace width="{"1em" if i == 0 else "3em"}"/>' + ("<mo>=</mo><mi>min</mi><mo>(</mo>" if i == 0 else "")
                + a.mathml(numbers) + ("<mo>)</mo>" if i == last else "<mo>,</mo>") for i, a in enumerate(e.args)]
    prec = e.prec
    rows: list[list[str]] = []
    width = WIDE_LINE
    for op, term in _chain(e):
        body, text = term.mathml(numbers), _width(term, numbers)
        if term.prec < prec or (op in "-/" and term.prec == prec):
            body, text = f"<mrow><mo>(</mo>{body}<mo>)</mo></mrow>", text + 2
        if width + text + 3 > WIDE_LINE and (rows == [] or rows[-1][1:]):
            rows.append([f'<mspace width="{"1em" if not rows else "2em"}"/><mo>{_OPS[op][2] if op else "="}</mo>'])
            width = 0
        elif op:
            rows[-1].append(f"<mo>{_OPS[op][2]}</mo>")
        rows[-1].append(body)
        width += text + 3
    return ["".join(r) for r in rows]


def _plain(e: Expr, numbers: bool = True) -> str:
    """The formula as plain text: its numbers (``text``, nbval), or its names (``numbers=False``: a line's width)."""
    if isinstance(e, Var) and not numbers:
        return e.name
    if isinstance(e, (Var, Num)):
        return _fmt_text(e.value())
    if isinstance(e, BinOp):
        sym = {"*": "x"}.get(e.op, e.op)
        left, right = _plain(e.a, numbers), _plain(e.b, numbers)
        if e.a.prec < e.prec:
            left = f"({left})"
        if e.b.prec < e.prec or (e.b.prec == e.prec and e.op in "-/"):
            right = f"({right})"
        return f"{left} {sym} {right}"
    if isinstance(e, Floor):
        return f"floor({_plain(e.inner, numbers)})"
    if isinstance(e, Ceil):
        return f"ceil({_plain(e.inner, numbers)})"
    if isinstance(e, Min):
        return "min(" + ", ".join(_plain(a, numbers) for a in e.args) + ")"
    raise TypeError(type(e))


# ------------------------------------------------------------------------------------------------
# The figures
# ------------------------------------------------------------------------------------------------

def _token(plan: "Plan") -> list[Derivation]:
    m, t = plan.model, plan.token
    r = Var("kv_lora_rank", m.kv_lora_rank)
    group, scale = Var("scale_group", FP8_SCALE_GROUP), Var("scale_bytes", FP8_SCALE_BYTES)
    if t.kv_layout == "fp8_scaled":
        dim: Expr = r + r // group * scale
        if m.qk_rope_head_dim:
            dim = dim + Var("qk_rope_head_dim", m.qk_rope_head_dim) * Num(2)
    else:
        dim = r + Var("qk_rope_head_dim", m.qk_rope_head_dim) if m.qk_rope_head_dim else r
    n_full = Var("full_layers", t.num_full_layers)
    n_idx = Var("indexed_layers", len(m.dsa_indexed_layers))
    d_idx = Var("index_head_dim", m.index_head_dim)
    idx_row = d_idx + d_idx // group * scale
    page, kpool = Var("page_size", t.page_size), Var("index_kpool", t.index_kpool)
    out = [
        Derivation("kv_cache_dim", dim, "", "token.kv_cache_dim",
                   f"elements in one {t.kv_layout} MLA latent row"),
        Derivation("kv_bytes_per_token", Var("kv_cache_dim", t.kv_cache_dim) * Var("itemsize", t.kv_item_bytes)
                   * n_full, "B", "token.kv_bytes_per_token", "MLA latent KV of one token, all full layers"),
        Derivation("indexer_row_bytes", idx_row, "B", "token.indexer_row_bytes",
                   "one token's indexer K with its fp8 scales, one layer, before pooling"),
    ]
    row = Var("indexer_row_bytes", t.indexer_unpooled_bytes_per_token_per_layer)
    if plan.args.rules.indexer_pooled_rows:
        page_bytes: Expr = page // kpool * row
        per_layer: Expr = Ceil(row / kpool)
    else:
        page_bytes = page * row
        per_layer = row
    out += [
        Derivation("indexer_page_bytes", page_bytes, "B", "token.indexer_page_bytes",
                   "one IndexKeyCache page (one buffer row), one layer"),
        Derivation("indexer_bytes_per_token", per_layer * n_idx if not t.hisparse_host_to_device_ratio else
                   per_layer * n_full * Var("hisparse_ratio", t.hisparse_host_to_device_ratio),
                   "B", "token.indexer_bytes_per_token",
                   "indexer K the token budget reserves per token, all indexed layers"
                   if not t.hisparse_host_to_device_ratio else
                   "indexer K the token budget reserves per token: HiSparse's, every full layer, for ratio x the "
                   "device tokens"),
        # Groups in the page this profile allocates (chapter 3's figure and text): 256 // 4 = 64 for
        # 0.5.23, 64 // 4 = 16 for the article. ``token.index_groups_per_page`` keeps the article's
        # 64-token count (a top-k compute quantity), so this figure names no plan key.
        Derivation("index_groups_per_page", Var("indexer_page_tokens", t.indexer_tokens_per_page) // kpool, "",
                   "", "index_kpool groups in one IndexKeyCache page"),
    ]
    cell: Expr = Var("kv_bytes_per_token", t.kv_bytes_per_token) + Var("indexer_bytes_per_token",
                                                                        t.indexer_bytes_per_token)
    if t.draft_bytes_per_token:
        cell = cell + Var("draft_bytes_per_token", t.draft_bytes_per_token)
    out.append(Derivation("cell_size", cell, "B", "token.cell_size_bytes",
                          "bytes per token the token budget divides by"))
    return out


def slots_per_request_expr(plan: "Plan") -> Expr:
    """SGLang 0.5.23's ``_calculate_mamba_ratio`` (``mem_cache/kv_cache_configurator.py``) with
    this profile's numbers: ``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`` (3), less
    ``MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP`` (1) under ``SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK``, plus the
    tracking slots (``get_mamba_tracking_slots``: extra_buffer 2 with the overlap scheduler, 1
    without it or lazy; no_buffer under the skip lock ``MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_BUFFER``
    = 1, else 0). With the radix cache off the ratio is 1."""
    p, strategy = plan.profile, plan.request.mamba_strategy
    if strategy == "none":
        return Var("ratio_without_radix_cache", 1)
    skip = bool(p.mamba_skip_decode_lock)
    if strategy in ("extra_buffer", "extra_buffer_lazy"):
        tracking = 1 if strategy == "extra_buffer_lazy" or p.disable_overlap_schedule else 2
    else:
        tracking = 1 if skip else 0
    return (Var("base_ratio", 3) - Var("skip_lock_drop", 1 if skip else 0)
            + Var("tracking_slots", tracking))


def _request(plan: "Plan") -> list[Derivation]:
    q = plan.request
    names = ("conv_kernel_minus_1", "conv_dim") + tuple(f"conv_dim_{i}" for i in range(2, len(q.conv_state_shape)))
    conv: Expr = Var(names[0], q.conv_state_shape[0])
    for name, d in zip(names[1:], q.conv_state_shape[1:]):
        conv = conv * Var(name, d)
    conv = conv * Var("conv_itemsize", _itemsize(q.conv_dtype))
    temporal: Expr = Var("num_heads", q.temporal_state_shape[0])
    for name, d in zip(("head_k_dim", "head_v_dim"), q.temporal_state_shape[1:]):
        temporal = temporal * Var(name, d)
    temporal = temporal * Var("temporal_itemsize", _itemsize(q.temporal_dtype))
    layers = Var("kda_layers", q.num_linear_layers)
    return [
        Derivation("slots_per_request", slots_per_request_expr(plan), "slots", "request.slots_per_request",
                   f"state slots one request holds ({q.mamba_strategy} strategy; SGLang's _calculate_mamba_ratio)"),
        Derivation("conv_state_bytes", conv, "B", "request.conv_state_bytes", "KDA conv state, one layer"),
        Derivation("temporal_state_bytes", temporal, "B", "request.temporal_state_bytes",
                   "KDA temporal state, one layer"),
        Derivation("mamba_cache_per_req", layers * (Var("conv_state_bytes", q.conv_state_bytes)
                                                    + Var("temporal_state_bytes", q.temporal_state_bytes)),
                   "B", "request.state_slot_bytes", "one KDA state slot over all KDA layers"),
        Derivation("state_bytes_per_request", Var("slots_per_request", q.slots_per_request)
                   * Var("mamba_cache_per_req", q.state_slot_bytes), "B", "request.state_bytes_per_request",
                   "KDA state one request reserves"),
    ]


def _tail(plan: "Plan") -> list[Derivation]:
    from .tail import TAIL_EXTRA_ROWS

    t = plan.tail
    if not t.rows:
        return []
    # the tail is sized by the requests per worker SGLang resolved (capped, or automatic)
    extra = plan.args.decode_extra_slots   # a PD decode server's pre-allocation rows
    rows = Var("requests_per_worker", t.rows - TAIL_EXTRA_ROWS - extra) + Num(TAIL_EXTRA_ROWS)
    if extra:
        rows = rows + Var("decode_extra_slots", extra)
    expr = rows * Var("tail_width", t.width) * Var("index_head_dim", t.head_dim) * Var(
        "itemsize", _itemsize(t.dtype)) * Num(2) * Var("full_layers", t.num_layers)
    return [Derivation("compress_tail_bytes", expr, "B", "tail.bytes",
                       "_compress_tail_k + _compress_tail_score, all full layers, one rank")]


def _host(plan: "Plan") -> list[Derivation]:
    h = plan.host
    return [Derivation("host_kv_bytes_per_token", Var("host_kv_row_bytes", h.kv_row_bytes)
                       * Var("full_layers", plan.token.num_full_layers), "B", "host.kv_bytes_per_token",
                       "HiCache KV entry, one token, all full layers")]


def _capacity(plan: "Plan") -> list[Derivation]:
    c = plan.capacity
    if c is None:
        return []
    out = []
    if plan.profile.max_total_tokens is None:
        page = Var("page_size", plan.token.page_size)
        out.append(Derivation(
            "max_total_num_tokens",
            Floor(Floor(Var("token_pool_budget", c.token_pool_budget_bytes) / Var("cell_size", plan.token.cell_size_bytes))
                  / page) * page,
            "tokens", "capacity.max_total_num_tokens", "token slots the rest of the memory holds, whole pages"))
    out.append(Derivation("mamba_request_cap", Var("max_mamba_cache_size", c.max_mamba_cache_size)
                          // Var("slots_per_request", plan.request.slots_per_request), "requests",
                          "", "requests the mamba pool can hold"))
    return out


def requests_fit(plan: "Plan", context_length: int | None = None) -> Derivation | None:
    """Requests of ``context_length`` tokens (default: the profile's) that fit on one rank at once.

    The smaller of three: the requests asked for (SGLang's max_running_requests per worker), the
    token slots over the context length, and the mamba slots over the slots per request. Unlike
    SGLang's own cap (which never looks at the context length), this is what a full-length
    workload can keep resident. None when the profile does not say how much memory there is.
    """
    c = plan.capacity
    if c is None:
        return None
    ctx = context_length or plan.profile.context_length
    expr = requests_fit_expr(c.requested_max_running_requests_per_worker, c.max_total_num_tokens, ctx,
                             c.max_mamba_cache_size, plan.request.slots_per_request)
    return Derivation("requests_fit", expr, "requests", "", "requests of the full context length that fit at once")


def requests_fit_expr(requested, tokens, context_length, mamba_slots, slots_per_request) -> Min:
    """The one formula for requests that fit, over scalars (a plan) or arrays (a sweep):
    min(requested, tokens // context_length, mamba_slots // slots_per_request); a model without state
    layers (slots_per_request 0, scalars) has the first two terms only."""
    terms = (Var("max_running_requests", requested),
             Var("max_total_num_tokens", tokens) // Var("context_length", context_length))
    if np.ndim(slots_per_request) == 0 and slots_per_request == 0:
        return Min(terms)
    return Min(terms + (Var("max_mamba_cache_size", mamba_slots) // Var("slots_per_request", slots_per_request),))




def fit_binding(expr: Min):
    """Which term of ``requests_fit_expr`` is smallest ("requested", "tokens", "mamba"); arrays too."""
    vals = [a.value() for a in expr.args]
    if any(np.ndim(v) for v in vals):
        return np.asarray(FIT_LIMITS, dtype=object)[np.argmin(np.vstack([np.asarray(v) for v in vals]), axis=0)]
    return FIT_LIMITS[vals.index(min(vals))]


def binding_at_context(plan: "Plan", context_length: int | None = None) -> str | None:
    """Which limit gives ``requests_fit``: "requested", "tokens" or "mamba" (first of equals wins)."""
    d = requests_fit(plan, context_length)
    return None if d is None else fit_binding(d.expr)  # type: ignore[arg-type]


def _itemsize(dtype: str) -> int:
    from ..units import DTYPE_BYTES

    return DTYPE_BYTES[dtype]


GROUPS: dict[str, Callable[["Plan"], list[Derivation]]] = {
    "token": _token, "request": _request, "tail": _tail, "host": _host, "capacity": _capacity,
}


def derivations(plan: "Plan", groups: Sequence[str] = tuple(GROUPS)) -> list[Derivation]:
    """The derivations of ``groups`` (token, request, tail, host, capacity) for this plan."""
    out: list[Derivation] = []
    for g in groups:
        out += GROUPS[g](plan)
    return out


def derivation(plan: "Plan", name: str) -> Derivation:
    for d in derivations(plan):
        if d.name == name:
            return d
    raise KeyError(f"no derivation {name!r}")
