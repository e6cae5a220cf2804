#!/usr/bin/env python3
"""Open built book pages in headless Chromium with the network off; check the charts render.

For each page given (default: every chapter page of ``_build/html`` that holds a chart):

* Chromium runs headless in a fresh ``--user-data-dir``, in a new network namespace when the
  machine allows it (``unshare -n``: no network at all), otherwise with every host mapped to
  nowhere. The page is driven over the DevTools protocol on a pipe (no port, no extra package).
* Every request the page makes is recorded; any ``http(s)://`` request fails the check.
* Every ``.glm-kv-chart`` container must hold a rendered Vega view (an SVG with marks).
* The mouse is moved over the first mark of the first chart: a Vega tooltip must appear.
* A screenshot of the first chart is saved and must not be blank (enough non-white pixels,
  several colours), and a full-page screenshot is saved beside it.

Usage::

    python scripts/screenshot_check.py [--html _build/html] [--out _build/screenshots] [PAGE ...]

Exit status 0 when every page passes; 1 with one line per failure otherwise; 77 when Chromium
is not installed (``apt-get install -y chromium``).
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
        raise RuntimeError(f"page script failed: {res['exceptionDetails'].get('text')}")
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

_CHART_STATE = """
(() => {
  const charts = Array.from(document.querySelectorAll('.glm-kv-chart'));
  return charts.map(el => {
    const svg = el.querySelector('svg.marks');
    const marks = svg ? svg.querySelectorAll('.mark-rect path, .mark-rect rect, .mark-line path,'
                                           + ' .mark-area path, .mark-symbol path, .mark-arc path,'
                                           + ' .mark-rule line, .mark-text text').length : 0;
    const r = el.getBoundingClientRect();
    return {id: el.id, rendered: !!svg, marks: marks, text: el.textContent.slice(0, 120),
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


def check_page(browser: Browser, page: Path, out_dir: Path, settle: float = 0.5) -> list[str]:
    failures: list[str] = []
    name = page.stem
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    browser.events.clear()
    browser.send("Network.enable", {}, session)
    browser.send("Page.enable", {}, session)
    browser.send("Emulation.setDeviceMetricsOverride",
                 {"width": 1280, "height": 1600, "deviceScaleFactor": 1, "mobile": False}, session)
    browser.send("Page.navigate", {"url": page.resolve().as_uri()}, session)
    # Wait for the charts to draw (vega-embed is asynchronous).
    deadline = time.monotonic() + 30
    state: list[dict] = []
    while time.monotonic() < deadline:
        browser.pump(0.3)
        try:
            state = _eval(browser, session, _CHART_STATE) or []
        except RuntimeError:
            continue
        if state and all(c["rendered"] for c in state):
            break
    browser.pump(settle)
    state = _eval(browser, session, _CHART_STATE) or []

    remote = sorted({e["params"]["request"]["url"] for e in browser.events
                     if e.get("method") == "Network.requestWillBeSent"
                     and e["params"]["request"]["url"].startswith(("http://", "https://"))})
    for url in remote:
        failures.append(f"{name}: the page requested {url} (must work offline)")
    if not state:
        failures.append(f"{name}: no .glm-kv-chart on the page")
        return failures
    for i, c in enumerate(state):
        if not c["rendered"] or c["marks"] == 0:
            failures.append(f"{name}: chart {i} ({c['id']}) did not render: {c['text']!r}")

    # Tooltip: hover the first mark of the first chart.
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

    # Screenshots: the first chart, and the whole page.
    out_dir.mkdir(parents=True, exist_ok=True)
    first = _eval(browser, session, _CHART_STATE)[0]
    clip = {"x": first["x"], "y": first["y"], "width": max(1, first["w"]), "height": max(1, first["h"]),
            "scale": 1}
    png = base64.b64decode(browser.send("Page.captureScreenshot",
                                        {"format": "png", "clip": clip, "captureBeyondViewport": True},
                                        session)["data"])
    (out_dir / f"{name}-chart.png").write_bytes(png)
    blank, desc = blank_report(png)
    if blank:
        failures.append(f"{name}: the chart screenshot looks blank ({desc})")
    full = base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png"}, session)["data"])
    (out_dir / f"{name}.png").write_bytes(full)
    tip_text = " ".join((tip or {}).get("text", "").split())[:60]
    drawn = sum(1 for c in state if c["rendered"] and c["marks"])
    print(f"{name}: {drawn} of {len(state)} chart(s) rendered; tooltip {tip_text!r}; "
          f"chart screenshot {desc} -> {out_dir / (name + '-chart.png')}")
    browser.send("Target.closeTarget", {"targetId": target})
    return failures


def pages_with_charts(html_root: Path) -> list[Path]:
    return sorted(p for p in html_root.rglob("*.html")
                  if "_static" not in p.parts and 'class="glm-kv-chart"' in p.read_text(errors="ignore"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="*", type=Path, help="HTML pages (default: every page with a chart)")
    ap.add_argument("--html", type=Path, default=Path("_build/html"), help="built book folder")
    ap.add_argument("--out", type=Path, default=Path("_build/screenshots"), help="where screenshots go")
    ap.add_argument("--first", action="store_true", help="check only the first page with a chart")
    args = ap.parse_args(argv)

    chromium = find_chromium()
    if not chromium:
        print("chromium not found: apt-get install -y chromium", file=sys.stderr)
        return 77
    pages = args.pages or pages_with_charts(args.html)
    if args.first:
        pages = pages[:1]
    if not pages:
        print(f"no page with a chart under {args.html} (build the book first)", file=sys.stderr)
        return 1
    browser = Browser(chromium)
    failures: list[str] = []
    try:
        browser.send("Browser.getVersion")
        print(f"chromium: {'network namespace (no network at all)' if browser.isolated else 'host rules map every name to nowhere'}")
        for page in pages:
            try:
                failures += check_page(browser, page, args.out)
            except (RuntimeError, TimeoutError) as err:
                failures.append(f"{page.name}: {err}")
    finally:
        browser.close()
    for f in failures:
        print(f"FAIL {f}")
    bad = {f.split(":")[0] for f in failures}
    print(f"screenshot check: {len(pages) - len(bad)} page(s) ok, {len(bad)} with problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
