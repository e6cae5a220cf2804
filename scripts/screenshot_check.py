#!/usr/bin/env python3
"""Open built book pages in headless Chromium with the network off; check they read well.

For each page (default: every page of the built book), at 1,400 px and at 400 px wide:

* Chromium runs headless in a fresh ``--user-data-dir``, in a new network namespace when the
  machine allows it (``unshare -n``: no network at all), otherwise with every host mapped to
  nowhere. The page is driven over the DevTools protocol on a pipe (no port, no extra package).
* **Offline:** any ``http(s)://`` request fails the check.
* **No console errors:** an uncaught exception or a ``console.error`` fails it.
* **No horizontal overflow:** the page must not scroll sideways, and nothing in the content
  column may stick out of it unless it sits inside its own scrolling box.
* **Nothing truncated:** no table cell ends in "..." (pandas' truncation), no ellipsis-clipped text,
  no prose running out of a scrolling box (a box may scroll a table, code, a chart or an equation).
* **No index column:** no table whose first column is an unnamed 0..n counter.
* **One parameters cell:** at most one visible cell tagged ``parameters``/``injected-parameters``.
* **CJK renders:** where the page has Chinese text, its font draws distinct glyphs (not boxes); the
  book ships its own CJK subset (``book/_static/fonts``), so no system CJK font is needed.
* **Figures** (``.glm-kv-figure``, SVG drawn by ``glm_kv.book.figures``): no text past the edge.
* **Charts** (``.glm-kv-chart``): each holds a rendered Vega view that fits its container, no
  text of it (legend, labels) clipped by the SVG's edge, no label of an axis of bytes in raw bytes; at the
  first width, hovering the first mark shows a tooltip and the chart screenshot is not blank.

Screenshots: ``OUT/<page>-<width>.png`` and ``-2``, ``-3``... (1,600 px tiles of the page, up to
8,000 px) and ``OUT/<page>-chart.png``.

Usage::

    python scripts/screenshot_check.py [--html _build/html] [--out _build/screenshots] [PAGE ...]
    python scripts/screenshot_check.py --self-test     # a page made to fail every check must fail

Exit status 0 when every page passes; 1 with one line per failure otherwise; 77 when Chromium
is not installed (``apt-get install -y chromium``; the CJK font ships with the book).
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
    # Belt and braces when no network namespace can be made: nothing resolves, no proxy answers.
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=http://127.0.0.1:9",
    "--remote-debugging-pipe",
    "--window-size=1280,1600",
]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _can_unshare() -> bool:
    if not shutil.which("unshare"):
        return False
    try:
        return subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


# ------------------------------------------------------------------------------------------------
# DevTools protocol over --remote-debugging-pipe (fd 3: to the browser, fd 4: from the browser)
# ------------------------------------------------------------------------------------------------

class Browser:
    def __init__(self, chromium: str, timeout: float = 60.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="glm-kv-chromium-")
        to_browser_r, self._to_browser_w = os.pipe()
        self._from_browser_r, from_browser_w = os.pipe()
        cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"]
        self.isolated = _can_unshare()
        if self.isolated:
            cmd = ["unshare", "-n", *cmd]

        def _child_fds():  # Chromium reads commands on fd 3 and writes answers on fd 4
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            a, b = os.dup2(a, 100), os.dup2(b, 101)
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=_child_fds, pass_fds=(3, 4),
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict] = []

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except Exception:  # noqa: BLE001 - best effort
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_browser_w, self._from_browser_r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def _read_message(self, deadline: float) -> dict:
        import select

        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from Chromium")
            ready, _, _ = select.select([self._from_browser_r], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_browser_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_browser_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def pump(self, seconds: float) -> None:
        """Collect events for a while."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                self.events.append(self._read_message(min(end, time.monotonic() + 0.2)))
            except TimeoutError:
                pass


def _eval(browser: Browser, session: str, expression: str):
    res = browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                            "awaitPromise": True}, session)
    if "exceptionDetails" in res:
        d = res["exceptionDetails"]
        raise RuntimeError(f"page script failed: {d.get('text')} {d.get('exception', {}).get('description', '')[:200]}")
    return res.get("result", {}).get("value")


# ------------------------------------------------------------------------------------------------
# PNG reading (stdlib only) for the blank check
# ------------------------------------------------------------------------------------------------

def png_pixels(data: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG into (width, height, RGB pixels)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    height = color_type = 0
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        ctype = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if ctype == b"IHDR":
            width, height = int.from_bytes(body[0:4], "big"), int.from_bytes(body[4:8], "big")
            bit_depth, color_type, interlace = body[8], body[9], body[12]
            assert bit_depth == 8 and color_type in (2, 6) and interlace == 0, "unsupported PNG"
        elif ctype == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 4 if color_type == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    pixels: list[tuple[int, int, int]] = []
    i = 0
    for _ in range(height):
        ftype = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 0xFF
            elif ftype == 2:
                line[x] = (line[x] + b) & 0xFF
            elif ftype == 3:
                line[x] = (line[x] + ((a + b) >> 1)) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pred) & 0xFF
        pixels.extend((line[x], line[x + 1], line[x + 2]) for x in range(0, stride, bpp))
        prev = line
    return width, height, pixels


def blank_report(png: bytes) -> tuple[bool, str]:
    """(is_blank, description) for a screenshot of a chart."""
    width, height, pixels = png_pixels(png)
    ink = [p for p in pixels if min(p) < 235]
    colours = {(r >> 4, g >> 4, b >> 4) for r, g, b in ink}
    saturated = sum(1 for p in ink if max(p) - min(p) > 60)
    share = len(ink) / max(1, len(pixels))
    desc = (f"{width}x{height}px, {share:.1%} non-white, {len(colours)} colours, "
            f"{saturated} saturated pixels")
    blank = share < 0.01 or len(colours) < 4 or saturated < 50
    return blank, desc


# ------------------------------------------------------------------------------------------------
# The check
# ------------------------------------------------------------------------------------------------

# Injected before any script of the page (Page.addScriptToEvaluateOnNewDocument): when the page
# defines window.vegaEmbed, wrap it so that each chart's element gets data-glm-kv-rendered="ok"
# once its Vega view has finished its dataflow and drawn (view.runAsync() resolved), or "error".
# The check waits on that mark, not on a guess about time, so a slow machine only waits longer.
_RENDER_HOOK = r"""
(() => {
  let embed;
  const mark = (el, state) => {
    const node = typeof el === 'string' ? document.querySelector(el) : el;
    if (node && node.setAttribute) node.setAttribute('data-glm-kv-rendered', state);
  };
  Object.defineProperty(window, 'vegaEmbed', {
    configurable: true,
    get() { return embed; },
    set(fn) {
      if (typeof fn !== 'function') { embed = fn; return; }
      const wrapped = function (el, spec, opts) {
        return fn.apply(this, arguments).then(
          res => res.view.runAsync().then(() => { mark(el, 'ok'); return res; }),
          err => { mark(el, 'error'); throw err; });
      };
      Object.assign(wrapped, fn);
      embed = wrapped;
    },
  });
})();
"""

# Every chart settled: rendered (or failed), fonts loaded, and its box unchanged across two frames.
_SETTLED = r"""
(async () => {
  const charts = Array.from(document.querySelectorAll('.glm-kv-chart'));
  if (document.readyState !== 'complete') return {ready: false, why: 'document loading'};
  const pending = charts.filter(el => !el.hasAttribute('data-glm-kv-rendered')).map(el => el.id);
  if (pending.length) return {ready: false, why: 'charts not rendered: ' + pending.slice(0, 3).join(', ')};
  await document.fonts.ready;
  const boxes = () => charts.map(el => { const r = el.getBoundingClientRect();
                                         return [r.x + window.scrollX, r.y + window.scrollY, r.width, r.height].map(Math.round).join(','); }).join(';');
  const frame = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const a = boxes(); await frame(); const b = boxes();
  return a === b ? {ready: true} : {ready: false, why: 'layout still moving'};
})()
"""

# The box of one chart's vega-embed element, measured after scrolling it into view and letting
# the layout settle: the clip for its screenshot, in page coordinates.
_CHART_BOX = r"""
(async (i) => {
  const el = document.querySelectorAll('.glm-kv-chart')[i];
  el.scrollIntoView({block: 'center'});
  const frame = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const box = () => { const t = el.querySelector('.vega-embed') || (el.classList.contains('vega-embed') ? el : el);
                      const r = t.getBoundingClientRect();
                      return {x: r.x + window.scrollX, y: r.y + window.scrollY, w: r.width, h: r.height}; };
  let a = box();
  for (let k = 0; k < 20; k++) { await frame(); const b = box();
    if (Math.abs(a.x - b.x) < 0.5 && Math.abs(a.y - b.y) < 0.5 && Math.abs(a.w - b.w) < 0.5 && Math.abs(a.h - b.h) < 0.5) return b;
    a = b; }
  return a;
})(%d)
"""

_CHART_STATE = """
(() => {
  const charts = Array.from(document.querySelectorAll('.glm-kv-chart'));
  return charts.map(el => {
    const svg = el.querySelector('svg.marks');
    const signal = el.getAttribute('data-glm-kv-rendered');
    const marks = svg ? svg.querySelectorAll('.mark-rect path, .mark-rect rect, .mark-line path,'
                                           + ' .mark-area path, .mark-symbol path, .mark-arc path,'
                                           + ' .mark-rule line, .mark-text text').length : 0;
    const r = el.getBoundingClientRect();
    return {id: el.id, rendered: !!svg && signal === 'ok', signal: signal, marks: marks, text: el.textContent.slice(0, 120),
            x: r.x + window.scrollX, y: r.y + window.scrollY, w: r.width, h: r.height};
  });
})()
"""

_FIRST_MARK_CENTRE = """
(() => {
  const el = document.querySelectorAll('.glm-kv-chart')[%d];
  el.scrollIntoView({block: 'center'});
  const sel = ['.mark-rect path', '.mark-symbol path', '.mark-arc path', '.mark-area path',
               '.mark-line path', '.mark-rect rect'];
  for (const s of sel) {
    for (const m of el.querySelectorAll(s)) {
      const r = m.getBoundingClientRect();
      if (r.width >= 2 && r.height >= 2) return {x: r.x + r.width / 2, y: r.y + r.height / 2};
    }
  }
  return null;
})()
"""

_TOOLTIP = """
(() => {
  const t = document.getElementById('vg-tooltip-element');
  if (!t) return null;
  const s = getComputedStyle(t);
  return {visible: t.classList.contains('visible') || (s.visibility !== 'hidden' && s.display !== 'none' && t.textContent.length > 0),
          text: t.textContent.slice(0, 200)};
})()
"""


_LAYOUT = r"""
(() => {
  const out = {overflow: [], truncated: [], index: [], params: 0, cjk: null, charts: [], pageOverflow: 0,
               figureClipped: [], textCut: []};
  const doc = document.documentElement;
  out.pageOverflow = Math.max(doc.scrollWidth, document.body.scrollWidth) - window.innerWidth;
  const col = document.querySelector('main .bd-article') || document.querySelector('article') ||
              document.querySelector('main') || document.body;
  const cr = col.getBoundingClientRect();
  const scrolls = el => { const o = getComputedStyle(el).overflowX; return o === 'auto' || o === 'scroll' || o === 'hidden'; };
  const insideBox = el => { for (let a = el.parentElement; a && a !== col; a = a.parentElement) { if (scrolls(a)) return true; } return false; };
  const label = el => (el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
                       (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).slice(0, 2).join('.') : ''));
  for (const el of col.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if ((r.right > cr.right + 2 || r.left < cr.left - 2) && !insideBox(el)) {
      out.overflow.push(label(el) + ' ' + Math.round(r.left) + '..' + Math.round(r.right) + ' outside ' +
                        Math.round(cr.left) + '..' + Math.round(cr.right));
      if (out.overflow.length > 4) break;
    }
  }
  // a scroll box may hold a table, code, a chart or an equation; prose that runs out of it reads as cut
  const boxed = 'table, pre, svg, math, .glm-kv-chart, .glm-kv-figure, .highlight';
  for (const box of col.querySelectorAll('*')) {
    if (!scrolls(box) || box.scrollWidth <= box.clientWidth + 1 || box.clientWidth === 0) continue;
    const br = box.getBoundingClientRect();
    for (const el of box.querySelectorAll('p, li, dd, dt, a, span, code, strong, em')) {
      if (el.closest(boxed)) continue;
      const r = el.getBoundingClientRect();
      if (r.width && r.right > br.right + 2) {
        out.textCut.push(label(el) + ': ' + el.textContent.trim().slice(0, 50));
        break;
      }
    }
    if (out.textCut.length > 4) break;
  }
  for (const td of col.querySelectorAll('td, th')) {
    const t = td.textContent.trim();
    if (/(\.\.\.|\u2026)$/.test(t)) out.truncated.push(t.slice(-60));
    const cs = getComputedStyle(td);
    if (cs.textOverflow === 'ellipsis' && td.scrollWidth > td.clientWidth + 1) out.truncated.push('(ellipsis) ' + t.slice(0, 60));
    if (out.truncated.length > 4) break;
  }
  for (const table of col.querySelectorAll('table')) {
    const rows = Array.from(table.querySelectorAll('tbody tr'));
    if (rows.length < 2) continue;
    const head = table.querySelector('thead tr');
    const h0 = head && head.children[0] ? head.children[0].textContent.trim() : '';
    const firsts = rows.map(r => r.children[0] ? r.children[0].textContent.trim() : '');
    const counter = firsts.every((t, i) => t === String(i)) || firsts.every((t, i) => t === String(i + 1));
    const thIndex = rows.every(r => r.children[0] && r.children[0].tagName === 'TH');
    if ((counter && h0 === '') || (thIndex && counter)) out.index.push(firsts.slice(0, 4).join(','));
  }
  for (const c of document.querySelectorAll('.tag_parameters, .tag_injected-parameters')) {
    if (c.offsetParent !== null && c.getBoundingClientRect().height > 0) out.params += 1;
  }
  // CJK: draw two different characters in the font of the first element holding CJK text.
  const walker = document.createTreeWalker(col, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode())) {
    const m = node.textContent.match(/[\u4e00-\u9fff]{2,}/);
    if (!m) continue;
    const el = node.parentElement, cs = getComputedStyle(el);
    const cv = document.createElement('canvas'); cv.width = 64; cv.height = 64;
    const ctx = cv.getContext('2d');
    const draw = ch => { ctx.clearRect(0, 0, 64, 64); ctx.font = '40px ' + cs.fontFamily; ctx.fillStyle = '#000';
                         ctx.fillText(ch, 4, 48); return Array.from(ctx.getImageData(0, 0, 64, 64).data).join(','); };
    const a = draw(m[0][0]), b = draw(m[0][1]), box = draw('\ue000');
    out.cjk = {text: m[0].slice(0, 8), font: cs.fontFamily.slice(0, 120), distinct: a !== b && a !== box};
    break;
  }
  for (const el of document.querySelectorAll('.glm-kv-chart')) {
    const svg = el.querySelector('svg.marks');
    if (!svg) { out.charts.push({id: el.id, rendered: false}); continue; }
    const sr = svg.getBoundingClientRect(), er = el.getBoundingClientRect();
    const clipped = [];
    for (const t of svg.querySelectorAll('text')) {
      const r = t.getBoundingClientRect();
      if (r.width === 0) continue;
      if (r.right > sr.right + 1 || r.left < sr.left - 1 || r.bottom > sr.bottom + 1) clipped.push(t.textContent.slice(0, 40));
      else if (/\u2026$/.test(t.textContent)) clipped.push(t.textContent.slice(0, 40) + ' (cut by a label limit)');
    }
    const raw = [];
    for (const g of svg.querySelectorAll('.role-axis')) {
      // an axis counting bytes must not print raw byte counts (1,000,000,000): GB, MiB, ...
      const title = Array.from(g.querySelectorAll('.role-axis-title text')).map(t => t.textContent).join(' ');
      if (!/\bbytes?\b|\(B\)|\bB\b/i.test(title)) continue;
      const labels = Array.from(g.querySelectorAll('.role-axis-label text')).map(t => t.textContent);
      for (const l of labels) { if (/\d{7,}/.test(l.replace(/[,\s]/g, '')) || /e\+\d/.test(l)) raw.push(l); }
    }
    out.charts.push({id: el.id, rendered: true, wider: sr.width - er.width, clipped: clipped.slice(0, 3), raw: raw.slice(0, 3)});
  }
  for (const fig of document.querySelectorAll('.glm-kv-figure svg')) {
    const sr = fig.getBoundingClientRect();
    for (const t of fig.querySelectorAll('text')) {
      const r = t.getBoundingClientRect();
      if (r.width && (r.right > sr.right + 1 || r.left < sr.left - 1 || r.bottom > sr.bottom + 1)) {
        out.figureClipped.push(t.textContent.slice(0, 50));
      }
    }
  }
  return out;
})()
"""


RENDER_TIMEOUT = float(os.environ.get("GLM_KV_RENDER_TIMEOUT", "120"))  # s: generous for a loaded machine


def _load(browser: Browser, page: Path, width: int, height: int = 1600):
    """Open ``page`` at ``width``; return once every chart has signalled its render and the layout
    has settled (or raise TimeoutError after RENDER_TIMEOUT seconds, naming what was pending)."""
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    browser.events.clear()
    for domain in ("Network", "Page", "Runtime", "Log"):
        browser.send(f"{domain}.enable", {}, session)
    browser.send("Page.addScriptToEvaluateOnNewDocument", {"source": _RENDER_HOOK}, session)
    browser.send("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
    browser.send("Page.navigate", {"url": page.resolve().as_uri()}, session)
    deadline = time.monotonic() + RENDER_TIMEOUT
    why = "no answer"
    while True:
        browser.pump(0.2)
        try:
            state = _eval(browser, session, _SETTLED) or {}
        except RuntimeError as err:  # navigation in progress
            state = {"ready": False, "why": str(err)}
        if state.get("ready"):
            return target, session
        why = state.get("why", why)
        if time.monotonic() > deadline:
            browser.send("Target.closeTarget", {"targetId": target})
            raise TimeoutError(f"{page.name} @{width}px: not settled after {RENDER_TIMEOUT:.0f} s ({why})")


def _console_errors(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append((d.get("exception", {}).get("description") or d.get("text", "exception")).splitlines()[0])
        elif m == "Runtime.consoleAPICalled" and p.get("type") == "error":
            out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))[:160])
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(p["entry"].get("text", "")[:160])
    return list(dict.fromkeys(out))


def check_layout(browser: Browser, page: Path, out_dir: Path, width: int, name: str) -> tuple[list[str], dict]:
    """Every readability check at one width; saves the page's screenshot."""
    failures: list[str] = []
    target, session = _load(browser, page, width)
    browser.pump(0.5)
    info = _eval(browser, session, _LAYOUT)
    where = f"{name} @{width}px"
    remote = sorted({e["params"]["request"]["url"] for e in browser.events
                     if e.get("method") == "Network.requestWillBeSent"
                     and e["params"]["request"]["url"].startswith(("http://", "https://"))})
    failures += [f"{where}: the page requested {u} (must work offline)" for u in remote]
    failures += [f"{where}: console error: {m}" for m in _console_errors(browser.events)]
    if info["pageOverflow"] > 1:
        failures.append(f"{where}: the page scrolls sideways by {info['pageOverflow']} px")
    failures += [f"{where}: overflows the content column: {o}" for o in info["overflow"]]
    failures += [f"{where}: truncated cell: {t!r}" for t in info["truncated"]]
    failures += [f"{where}: prose cut off by its scroll box: {t}" for t in info["textCut"]]
    failures += [f"{where}: table with a 0..n index column ({t})" for t in info["index"]]
    if info["params"] > 1:
        failures.append(f"{where}: {info['params']} visible parameters cells (one expected)")
    if info["cjk"] and not info["cjk"]["distinct"]:
        failures.append(f"{where}: CJK text {info['cjk']['text']!r} renders as boxes (font stack: {info['cjk']['font']})")
    failures += [f"{where}: figure text clipped at its edge: {t!r}" for t in info["figureClipped"][:3]]
    for i, c in enumerate(info["charts"]):
        if not c["rendered"]:
            failures.append(f"{where}: chart {i} ({c['id']}) did not render")
            continue
        if c["wider"] > 1:
            failures.append(f"{where}: chart {i} is {c['wider']:.0f} px wider than its container")
        failures += [f"{where}: chart {i}: text clipped at the chart's edge: {t!r}" for t in c["clipped"]]
        failures += [f"{where}: chart {i}: axis label in raw units: {t!r}" for t in c["raw"]]
    out_dir.mkdir(parents=True, exist_ok=True)
    h = _eval(browser, session, "Math.min(8000, document.documentElement.scrollHeight)")
    for k, top in enumerate(range(0, h, TILE)):  # tiles a person can read: <page>-<width>[-k].png
        # Scrolled to, and taken from the viewport, as a person sees the page there (sticky header and
        # sidebar included). Not captureBeyondViewport: Chromium then lays the page out again at its
        # full height and draws a page whose table scrolls sideways shifted left, the sidebar cut
        # (book/profiles and book/flags at 1,400 px), which no reader ever sees. The clip is in page
        # coordinates; the viewport is TILE px tall, so each tile lies inside it once scrolled to.
        _eval(browser, session, f"window.scrollTo(0, {top}), window.scrollY")
        png = base64.b64decode(browser.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": False,
            "clip": {"x": 0, "y": top, "width": width, "height": min(TILE, h - top), "scale": 1}}, session)["data"])
        (out_dir / (f"{name}-{width}.png" if k == 0 else f"{name}-{width}-{k + 1}.png")).write_bytes(png)
    browser.send("Target.closeTarget", {"targetId": target})
    return failures, info


def check_charts(browser: Browser, page: Path, out_dir: Path, name: str, width: int = 1400) -> list[str]:
    """Tooltip on the first mark; every chart rendered (its own signal) and not blank on screen."""
    failures: list[str] = []
    target, session = _load(browser, page, width)
    browser.pump(0.5)
    state = _eval(browser, session, _CHART_STATE) or []
    if not state:
        browser.send("Target.closeTarget", {"targetId": target})
        return failures
    for i, c in enumerate(state):
        if not c["rendered"] or c["marks"] == 0:
            failures.append(f"{name}: chart {i} ({c['id']}) did not render "
                            f"(signal {c['signal']!r}, {c['marks']} marks): {c['text']!r}")
    centre = _eval(browser, session, _FIRST_MARK_CENTRE % 0)
    tip = None
    if centre:
        for dx in (0, 1, 2):
            browser.send("Input.dispatchMouseEvent",
                         {"type": "mouseMoved", "x": centre["x"] + dx, "y": centre["y"]}, session)
            browser.pump(0.15)
            tip = _eval(browser, session, _TOOLTIP)
            if tip and tip["visible"] and tip["text"].strip():
                break
        if not tip or not tip["visible"] or not tip["text"].strip():
            failures.append(f"{name}: hovering the first mark showed no tooltip ({tip!r})")
    else:
        failures.append(f"{name}: chart 0 has no mark to hover")
    descs = []
    for i in range(len(state)):  # every chart: cropped by its own DOM box, judged on its pixels
        # A capture can come before the compositor has painted the scrolled-to chart (seen once on
        # a loaded machine: a rendered chart captured pure white). A blank capture is retaken after
        # a pause, up to three times; a chart with nothing drawn stays blank every time.
        for attempt in range(3):
            box = _eval(browser, session, _CHART_BOX % i)
            clip = {"x": box["x"], "y": box["y"], "width": max(1, box["w"]), "height": max(1, box["h"]), "scale": 1}
            png = base64.b64decode(browser.send("Page.captureScreenshot",
                                                {"format": "png", "clip": clip, "captureBeyondViewport": True},
                                                session)["data"])
            blank, desc = blank_report(png)
            if not blank:
                break
            browser.pump(1.0)
        (out_dir / (f"{name}-chart.png" if i == 0 else f"{name}-chart-{i + 1}.png")).write_bytes(png)
        descs.append(desc)
        if blank:
            failures.append(f"{name}: chart {i} ({state[i]['id']}): the chart screenshot looks blank ({desc})")
    tip_text = " ".join((tip or {}).get("text", "").split())[:60]
    drawn = sum(1 for c in state if c["rendered"] and c["marks"])
    print(f"{name}: {drawn} of {len(state)} chart(s) rendered; tooltip {tip_text!r}; chart 0 screenshot {descs[0]}")
    browser.send("Target.closeTarget", {"targetId": target})
    return failures


WIDTHS = (1400, 400)
TILE = 1600  # px per screenshot tile


def check_page(browser: Browser, page: Path, out_dir: Path, widths=WIDTHS, html_root: Path | None = None) -> list[str]:
    try:
        name = str(page.resolve().relative_to(html_root.resolve()).with_suffix("")).replace("/", "__") if html_root else page.stem
    except ValueError:
        name = page.stem
    failures: list[str] = []
    for w in widths:
        f, info = check_layout(browser, page, out_dir, w, name)
        failures += f
        cjk = f"; CJK {'ok' if info['cjk']['distinct'] else 'BOXES'}" if info["cjk"] else ""
        print(f"{name} @{w}px: {len(f)} problem(s){cjk}")
    if 'class="glm-kv-chart"' in page.read_text(errors="ignore"):
        failures += check_charts(browser, page, out_dir, name)
    return failures


def book_pages(html_root: Path) -> list[Path]:
    """Every content page of a built book (not the search/index pages, not _static or _sources)."""
    skip = {"search.html", "genindex.html", "py-modindex.html"}
    return sorted(p for p in html_root.rglob("*.html")
                  if not any(part.startswith("_") for part in p.relative_to(html_root).parts) and p.name not in skip)


def pages_with_charts(html_root: Path) -> list[Path]:
    return [p for p in book_pages(html_root) if 'class="glm-kv-chart"' in p.read_text(errors="ignore")]


BAD_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8">
<script>const THEBE_JS_URL = "x";</script><script>const THEBE_JS_URL = "x";</script></head>
<body><main><article class="bd-article" style="max-width:360px">
<p>三本账 (made to fail every check of the screenshot check)</p>
<div class="cell tag_parameters"><pre>profile = "article"</pre></div>
<div class="cell tag_injected-parameters"><pre>profile = "b200-0.5.23"</pre></div>
<table><thead><tr><th></th><th>the mistake</th></tr></thead><tbody>
<tr><th>0</th><td>take DeepSeek V3's row...</td></tr><tr><th>1</th><td>count the KV alone</td></tr></tbody></table>
<div style="width:900px;background:#eee">a box wider than the column</div>
<div style="overflow-x:auto"><ul><li><a href="#">python/sglang/srt/mem_cache/an_unbreakable_path_that_runs_past_the_column_edge.py</a></li></ul></div>
<figure class="glm-kv-figure"><svg viewBox="0 0 200 40" width="200" height="40"><text x="150" y="20">a label running past the edge</text></svg></figure>
</article></main></body></html>
"""

BAD_EXPECTED = ("console error", "overflows the content column", "truncated cell", "index column",
                "visible parameters cells", "figure text clipped", "prose cut off")


def _chart_spec(values: list[dict]) -> dict:
    return {"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "width": 300, "height": 150,
            "data": {"values": values}, "mark": {"type": "bar", "tooltip": True},
            "encoding": {"x": {"field": "ledger", "type": "nominal"},
                         "y": {"field": "GiB", "type": "quantitative"},
                         "color": {"field": "ledger", "type": "nominal"}}}


def chart_page(folder: Path) -> Path:
    """A page with two charts drawn by the book's own offline renderer: chart 0 has data, chart 1
    has none (its spec's data is empty, so Vega draws axes and nothing else)."""
    from glm_kv.book.charts import BUNDLE_NAME, offline_html, write_javascript_bundle

    write_javascript_bundle(folder)
    full = _chart_spec([{"ledger": k, "GiB": v} for k, v in
                        (("MLA latent KV", 40.5), ("indexer K", 12.0), ("KDA state", 25.0), ("tail", 3.0))])
    empty = _chart_spec([])
    page = folder / "charts.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        f'<script src="{BUNDLE_NAME}"></script></head><body><main><article class="bd-article">'
        f"<p>a chart with data</p>{offline_html(full)}<p>a chart with no data</p>{offline_html(empty)}"
        "</article></main></body></html>", encoding="utf-8")
    return page


def self_test(browser: Browser, out_dir: Path) -> list[str]:
    """The checks must fail on pages built to break them; returns the checks that did NOT fire
    (or fired where they must not: the chart with data must not be judged blank)."""
    import tempfile as _tf

    folder = Path(_tf.mkdtemp(prefix="glm-kv-bad-page-"))
    page = folder / "bad.html"
    page.write_text(BAD_PAGE, encoding="utf-8")
    try:
        failures = check_page(browser, page, out_dir, widths=(1400,))
        chart_failures = check_charts(browser, chart_page(folder), out_dir, "self-test-charts")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for f in failures + chart_failures:
        print(f"  (expected) {f}")
    missed = [k for k in BAD_EXPECTED if not any(k in f for f in failures)]
    if not any("chart 1" in f and "looks blank" in f for f in chart_failures):
        missed.append("a chart with no data judged blank")
    wrong = [f for f in chart_failures if "chart 0" in f]
    missed += [f"(must not fire) {f}" for f in wrong]
    return missed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("pages", nargs="*", type=Path, help="HTML pages (default: every page of the book)")
    ap.add_argument("--html", type=Path, default=Path("_build/html"), help="built book folder")
    ap.add_argument("--out", type=Path, default=Path("_build/screenshots"), help="where screenshots go")
    ap.add_argument("--charts-only", action="store_true", help="only the pages with a chart")
    ap.add_argument("--width", type=int, action="append", help="viewport width(s) (default 1400 and 400)")
    ap.add_argument("--self-test", action="store_true", help="check that a page made to fail does fail")
    args = ap.parse_args(argv)

    chromium = find_chromium()
    if not chromium:
        print("chromium not found: apt-get install -y chromium", file=sys.stderr)
        return 77
    widths = tuple(args.width or WIDTHS)
    browser = Browser(chromium)
    failures: list[str] = []
    try:
        browser.send("Browser.getVersion")
        print(f"chromium: {'network namespace (no network at all)' if browser.isolated else 'host rules map every name to nowhere'}")
        if args.self_test:
            missed = self_test(browser, args.out)
            if missed:
                print(f"SELF-TEST FAILED: no failure reported for: {', '.join(missed)}")
                return 1
            print("self-test: every check fired on the page made to fail")
            return 0
        pages = args.pages or (pages_with_charts(args.html) if args.charts_only else book_pages(args.html))
        if not pages:
            print(f"no page under {args.html} (build the book first)", file=sys.stderr)
            return 1
        for page in pages:
            try:
                failures += check_page(browser, page, args.out, widths, None if args.pages else args.html)
            except (RuntimeError, TimeoutError) as err:
                failures.append(f"{page.name}: {err}")
    finally:
        browser.close()
    for f in failures:
        print(f"FAIL {f}")
    bad = {f.split(":")[0].split(" @")[0] for f in failures}
    print(f"screenshot check: {len(pages) - len(bad)} page(s) ok, {len(bad)} with problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
