"""The article's diagrams, drawn from the plan as inline SVG (no JavaScript, no network).

Each function takes a typed ``Plan`` (or a tree table built by ``glm_kv.book.charts``) and only
lays out what the plan says: every label is a number or a name read from it. The SVGs carry a
``viewBox`` so the book's CSS can shrink them to the content column; text stays selectable.
Used by chapters 1, 3, 4 and 5 (``notebooks/0*_*.ipynb``).
"""
from __future__ import annotations

import html
from typing import TYPE_CHECKING, Iterable

from ..units import fmt_bytes
from .charts import LEDGER_COLORS

if TYPE_CHECKING:
    from ..ledgers.plan import Plan

_FONT = 'font-family="inherit" font-size="12"'


def _svg(width: int, height: int, body: Iterable[str], title: str) -> "Html":
    from .tables import Html

    t = html.escape(title)
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" aria-label="{t}" {_FONT}><title>{t}</title>'
           + "".join(body) + "</svg>")
    return Html(f'<figure class="glm-kv-figure">{svg}<figcaption>{t}</figcaption></figure>', title)


def _text(x: float, y: float, s: str, anchor: str = "start", weight: str = "normal", fill: str = "#222",
          size: int | None = None) -> str:
    extra = f' font-size="{size}"' if size else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-weight="{weight}" fill="{fill}"{extra}>'
            f"{html.escape(s)}</text>")


def _wrapped(x: float, y: float, s: str, width_chars: int, line_h: float = 14, **kw) -> tuple[list[str], float]:
    """Text broken into lines of at most ``width_chars`` characters; returns the elements and the next y."""
    import textwrap

    out = []
    for line in textwrap.wrap(s, width_chars):
        out.append(_text(x, y, line, **kw))
        y += line_h
    return out, y


def _rect(x, y, w, h, fill, stroke="#fff", rx=0, dash: str | None = None) -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}" '
            f'stroke="{stroke}" rx="{rx}"{d}/>')


def _line(x1, y1, x2, y2, stroke="#555", width=1, arrow=False, dash: str | None = None) -> str:
    a = ' marker-end="url(#glmkv-arrow)"' if arrow else ""
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
            f'stroke-width="{width}"{a}{d}/>')


_ARROW = ('<defs><marker id="glmkv-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
          'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>')


# -- chapter 3: the indexer page ---------------------------------------------------------------

def indexer_page_figure(plan: "Plan"):
    """One IndexKeyCache page: its tokens, their index_kpool groups, the keys its physical row
    holds (bytes per key, bytes per page), and the compress tail beside it (not in the page)."""
    tok = plan.token
    facts = indexer_page_facts(plan)
    n_tok, kpool = tok.indexer_tokens_per_page, tok.index_kpool
    row = tok.indexer_unpooled_bytes_per_token_per_layer
    keys, groups = int(facts["keys_per_page"]), int(facts["groups_per_page"])
    W, x0, x1 = 760, 150, 740
    cell = (x1 - x0) / n_tok
    body = [_ARROW]
    body.append(_text(10, 34, f"{n_tok} tokens", weight="bold"))
    body.append(_text(10, 50, "of one page", fill="#555"))
    for t in range(n_tok):
        g = t // kpool
        colour = LEDGER_COLORS["indexer K"] if g % 2 == 0 else "#ffbb78"
        body.append(_rect(x0 + t * cell, 22, cell, 26, colour, stroke="#fff" if cell > 4 else colour))
    # group brackets under the tokens (every group when they fit, else a sample)
    body.append(_text(10, 82, f"{groups} index_kpool", weight="bold"))
    body.append(_text(10, 98, f"groups of {kpool}", fill="#555"))
    gw = (x1 - x0) / groups
    for g in range(groups):
        gx = x0 + g * gw
        body.append(_line(gx + 1, 56, gx + gw - 1, 56, stroke="#333"))
        if gw >= 26 or g in (0, groups - 1):
            body.append(_text(gx + gw / 2, 72, f"g{g}", anchor="middle", size=10))
    # the physical row: keys stored
    kw = (x1 - x0) / keys
    body.append(_text(10, 140, f"{keys} keys x {row} B", weight="bold"))
    body.append(_text(10, 156, f"= {tok.indexer_page_bytes:,} B row", fill="#555"))
    for k in range(keys):
        body.append(_rect(x0 + k * kw, 128, kw, 26, "#8c564b" if k % 2 == 0 else "#c49c94",
                          stroke="#fff" if kw > 4 else "#8c564b"))
    per_key_tokens = n_tok // keys
    if per_key_tokens == 1:
        note = (f"one {row} B key per token: index_kpool = {kpool} groups tokens for the top-k, "
                f"the row is not shrunk ({tok.indexer_bytes_per_token_per_layer} B reserved per token and layer)")
        for g in range(0, groups, max(1, groups // 8)):
            gx = x0 + (g * kpool + kpool / 2) * cell
            body.append(_line(gx, 58, gx, 126, stroke="#999", dash="3,3"))
    else:
        note = (f"one pooled {row} B key per {per_key_tokens} tokens: the row is shrunk by index_kpool "
                f"({tok.indexer_bytes_per_token_per_layer} B reserved per token and layer)")
        for k in range(0, keys, max(1, keys // 8)):
            gx = x0 + (k * per_key_tokens + per_key_tokens / 2) * cell
            body.append(_line(gx, 58, x0 + (k + 0.5) * kw, 126, stroke="#999", arrow=True))
    lines, y = _wrapped(x0, 178, note, 96, size=11, fill="#333")
    body += lines
    tail = plan.tail
    if tail.rows:
        label = (f"compress tail, outside the page: {tail.rows} request rows x {tail.width} x {tail.head_dim} "
                 f"{tail.dtype}, K + score, {tail.num_layers} layers = {fmt_bytes(tail.bytes, 'MiB')} per rank")
        parts, _ = _wrapped(x0 + 8, y + 16, label, 90, size=11, fill="#fff")
        body.append(_rect(x0, y + 2, x1 - x0, 8 + 14 * len(parts), LEDGER_COLORS["compress tail"], stroke="#fff", rx=3))
        body += parts
        y += 14 + 14 * len(parts)
    return _svg(W, int(y) + 8, body,
                f"One IndexKeyCache page, one layer ({plan.profile.sglang_layout} layout): "
                f"{n_tok} tokens, {groups} groups, {tok.indexer_page_bytes:,} B")


def indexer_page_facts(plan: "Plan") -> dict[str, object]:
    """What chapter 3 says about the indexer page, in one place for its figure, text, formula and
    takeaway: tokens and groups of the page this profile allocates, keys its row holds, and the
    bytes per token reserved (what the token budget divides by) against written (one pooled key per
    ``index_kpool`` tokens)."""
    from ..ledgers.derivations import derivation

    tok = plan.token
    reserved, written = tok.indexer_bytes_per_token_per_layer, tok.indexer_effective_bytes_per_token_per_layer
    facts: dict[str, object] = {
        "idx_page_tokens": tok.indexer_tokens_per_page,
        "idx_page_bytes": tok.indexer_page_bytes,
        "groups_per_page": int(derivation(plan, "index_groups_per_page").value),
        "keys_per_page": tok.indexer_page_bytes // tok.indexer_unpooled_bytes_per_token_per_layer,
        "reserved_layer": reserved, "written_layer": written,
        "reserved_total": tok.indexer_bytes_per_token, "written_total": tok.indexer_effective_bytes_per_token,
        "layout": plan.profile.sglang_layout,
    }
    if reserved == written:
        facts["reserve_sentence"] = (
            f"SGLang {facts['layout']} stores one pooled key per group, so it reserves exactly what it "
            f"writes: {reserved} B per token and layer, {tok.indexer_bytes_per_token:,} B per token.")
        facts["takeaway_indexer"] = (
            f"its row holds {facts['keys_per_page']} pooled keys, one per `index_kpool` group of "
            f"{tok.index_kpool} tokens, so the token budget reserves what is written: {reserved} B per "
            f"token and layer.")
    else:
        facts["reserve_sentence"] = (
            f"The {facts['layout']} layout keeps one unpooled key per token: it reserves {reserved} B per "
            f"token and layer ({tok.indexer_bytes_per_token:,} B per token) but pooling writes only {written} B "
            f"({tok.indexer_effective_bytes_per_token:,} B per token); SGLang 0.5.23 reserves only what is written.")
        facts["takeaway_indexer"] = (
            f"`index_kpool` only groups tokens inside it, so the budget reserves {reserved} B per token and "
            f"layer while {written} B are written.")
    return facts


# -- chapter 5: what HiCache covers, and the backup / load-back path ---------------------------

def _coverage(plan: "Plan") -> list[tuple[str, str, str | None, str]]:
    """(object, colour, host entry or None, per-what) for the four HBM objects of the article."""
    entries = set(plan.host.entries)
    tok = plan.token
    return [
        ("MLA latent KV", LEDGER_COLORS["MLA latent KV"], "KV" if "kv" in entries else None,
         f"{tok.kv_bytes_per_token:,} B/token"),
        ("indexer K", LEDGER_COLORS["indexer K"], "INDEXER" if "indexer" in entries else None,
         f"{tok.indexer_bytes_per_token:,} B/token"),
        ("KDA state", LEDGER_COLORS["KDA state"], "MAMBA" if "mamba" in entries else None,
         f"{fmt_bytes(plan.request.state_slot_bytes)}/slot"),
        ("compress tail", LEDGER_COLORS["compress tail"], None, f"{fmt_bytes(plan.tail.bytes, 'MiB')}/rank"),
    ]


def hicache_coverage_figure(plan: "Plan"):
    """HBM's four objects and which of them HiCache copies to DRAM (the article's figure 5)."""
    host_cls = dict(zip(plan.host.entries, plan.host.entry_classes))
    cls_of = {"KV": host_cls.get("kv", ""), "INDEXER": host_cls.get("indexer", ""),
              "MAMBA": host_cls.get("mamba", "")}
    body = [_ARROW, _text(20, 20, "HBM (device)", weight="bold"), _text(470, 20, "DRAM (HiCache host)", weight="bold")]
    for i, (name, colour, entry, per) in enumerate(_coverage(plan)):
        y = 34 + i * 52
        body.append(_rect(20, y, 240, 40, colour, rx=4))
        body.append(_text(30, y + 17, name, fill="#fff", weight="bold"))
        body.append(_text(30, y + 33, per, fill="#fff", size=11))
        if entry:
            body.append(_line(262, y + 20, 466, y + 20, arrow=True))
            body.append(_text(364, y + 14, "backup / load back", anchor="middle", size=10, fill="#555"))
            body.append(_rect(470, y, 270, 40, "#eef3f8", stroke="#7a9cc6", rx=4))
            body.append(_text(480, y + 17, f"PoolName.{entry}", weight="bold"))
            body.append(_text(480, y + 33, cls_of[entry], size=11, fill="#333"))
        else:
            body.append(_line(262, y + 20, 400, y + 20, stroke="#bbb", dash="4,3"))
            body.append(_text(408, y + 24, "no host copy", fill="#b22", weight="bold"))
    return _svg(760, 34 + 4 * 52, body, f"What HiCache covers ({plan.profile.sglang_layout} layout): "
                                        f"host entries {', '.join(plan.host.entries)}")


def backup_path_figure(plan: "Plan"):
    """The backup and load-back path: tree value -> host_value -> HostPoolGroup -> host pools."""
    h = plan.host
    host_cls = dict(zip(h.entries, h.entry_classes))
    body = [_ARROW]
    cols = [(20, "RadixTree node", ["FULL.value", "MAMBA.value"], "HBM indices"),
            (210, "after backup", ["FULL.host_value", "MAMBA.host_value"], "DRAM indices"),
            (400, "HostPoolGroup", [f"PoolName.{e.upper()}" for e in h.entries], "an allocation facade"),
            (560, "host pools", [host_cls[e] for e in h.entries], "the bytes")]
    for x, title, items, sub in cols:
        body.append(_text(x, 18, title, weight="bold"))
        body.append(_text(x, 32, sub, size=10, fill="#555"))
        for j, it in enumerate(items):
            y = 44 + j * 40
            w = 180 if x == 560 else 150
            body.append(_rect(x, y, w, 30, "#eef3f8", stroke="#7a9cc6", rx=4))
            body.append(_text(x + 6, y + 19, it, size=11))
    # tree value -> host_value: FULL to FULL, MAMBA to MAMBA
    for j in range(2):
        body.append(_line(170, 59 + j * 40, 208, 59 + j * 40, arrow=True))
    # host_value -> entries: MAMBA.host_value names MAMBA slots; FULL.host_value names the KV
    # slots, which a sidecar (INDEXER: indices from KV) reuses
    for j, e in enumerate(h.entries):
        src = 1 if e == "mamba" else 0
        body.append(_line(360, 59 + src * 40, 398, 59 + j * 40, arrow=True))
        body.append(_line(550, 59 + j * 40, 558, 59 + j * 40, arrow=True))
    n = max(len(h.entries), 2)
    y = 54 + n * 40
    body.append(_line(740, y, 20, y, arrow=True, dash="5,3"))
    lines, y_end = _wrapped(20, y + 18, f"load back (dashed, right to left): host_value finds the DRAM slots, whose "
                                        f"bytes are copied into fresh HBM slots (the new value); KV moves in pages of "
                                        f"{h.kv_page_size} tokens, MAMBA one state slot per page", 110, size=11, fill="#333")
    body += lines
    return _svg(760, int(y_end) + 4, body, "Backup and load back, through HostPoolGroup")


# -- chapter 4: the RadixTree as a tree --------------------------------------------------------

def radix_tree_figure(table, title: str = "The RadixTree: nodes, parent-child edges, FULL and MAMBA values"):
    """Each node of ``charts.radix_tree_table`` as a box (its token span and the four indices it
    holds), joined to its parent; the root on the left, depth to the right."""
    rows = table.to_dict("records")
    children: dict[str, list[dict]] = {}
    for r in rows:
        children.setdefault(str(r["parent"]), []).append(r)
    pos: dict[str, tuple[float, float]] = {}
    order: list[tuple[dict, int]] = []

    def walk(key: str, depth: int) -> None:
        for r in children.get(key, []):
            order.append((r, depth))
            walk(str(r["node"]), depth + 1)

    walk("root", 1)
    box_w, box_h, gap_x, gap_y = 250, 86, 40, 14
    depth_max = max((d for _, d in order), default=1)
    W = 20 + 70 + depth_max * (box_w + gap_x)
    H = max(120, 20 + len(order) * (box_h + gap_y))
    body = [_rect(10, H / 2 - 18, 60, 36, "#555", rx=18), _text(40, H / 2 + 4, "root", anchor="middle", fill="#fff")]
    pos["root"] = (70, H / 2)
    colours = {"HBM only": "#1f77b4", "HBM + DRAM": "#17becf", "DRAM only (evicted)": "#c7c7c7"}
    for i, (r, depth) in enumerate(order):
        x = 90 + (depth - 1) * (box_w + gap_x)
        y = 20 + i * (box_h + gap_y)
        pos[str(r["node"])] = (x + box_w, y + box_h / 2)
        px, py = pos[str(r["parent"])]
        body.append(_line(px, py, x, y + box_h / 2, stroke="#777", width=1.5))
        body.append(_rect(x, y, box_w, box_h, "#fff", stroke=colours.get(r["where"], "#999"), rx=5))
        body.append(_rect(x, y, box_w, 18, colours.get(r["where"], "#999"), stroke="none", rx=5))
        body.append(_text(x + 6, y + 13, f"node {r['node']}: tokens {r['first token']}-{r['end token'] - 1} "
                                         f"({r['where']})", fill="#fff", size=11, weight="bold"))
        lines = [("FULL.value", r["FULL.value (HBM token slots)"]),
                 ("FULL.host_value", r["FULL.host_value (DRAM host slots)"]),
                 ("MAMBA.value", r["MAMBA.value (HBM state slot)"]),
                 ("MAMBA.host_value", r["MAMBA.host_value (DRAM state slot)"])]
        for j, (k, v) in enumerate(lines):
            body.append(_text(x + 6, y + 33 + j * 15, f"{k}: {v}", size=11))
    return _svg(int(W), int(H), body, title)
