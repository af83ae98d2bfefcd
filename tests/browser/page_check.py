#!/usr/bin/env python3
"""tests/browser/page_check.py: open --report pages in headless Chromium and
check them as a reader's browser sees them.

    page_check.py CHROMIUM SHOT_DIR PAGE:LANES:BARS[:PEAKS[:CURVES]] [...]

One browser for all pages, driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: file descriptors 3 and 4, NUL-terminated JSON), so
nothing but Python's standard library is needed and no port is opened.  For
each page: no console error, no uncaught exception, no log entry of level
error (a blocked request or a CSP violation is one), no request but the page
itself; the DOM holds LANES timeline lanes (g.lane, one per device and
stream) and BARS phase bars (g.bar, one per column of compare's table),
PEAKS bars of a device's share of its peak (g.peak) when given, each drawn
as long as its share says (data-share, to 1%) with its value inside the
figure, and, when given, CURVES curves of the replicas' distance
(svg.replicas), the same with scripts disabled (the figures are the page's
own SVG); and a
screenshot of the top of the page is not blank (saved in SHOT_DIR).  At a
laptop's 700 px window and a 1400 px one: the page is no wider than the
window, no figure's text runs past its figure's edges (a busy machine's
banner did), every figure's text box is MIN_TEXT_PX high or more (the figures
scale with the column: a text box is about 1.15 times its font size, so 11
px is a font of 9.5 px; the pages before this check drew 6.9 px at 700), and the three kinds of communication (comm exposed,
all-reduce, reduce) are colours a reader tells apart (CIE76 distance
MIN_DELTA_E or more between each two).
Exit 0 when every page passes, 1 with one line per failure."""
import base64
import json
import os
import re
import select
import struct
import subprocess
import sys
import tempfile
import time
import zlib

DEADLINE = time.time() + 150
WIDTHS = (700, 1400)
MIN_TEXT_PX = 11.0
MIN_DELTA_E = 25.0
# what the three communication colours render as, and the smallest text drawn
# in a figure (its box's height), and the page's width against the window's
PROBE = """JSON.stringify((function () {
  var svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg'), fills = {};
  document.body.appendChild(svg);
  ['c-exposed', 'c-allreduce', 'c-reduce'].forEach(function (c) {
    var r = document.createElementNS('http://www.w3.org/2000/svg', 'rect');
    r.setAttribute('class', 'ev ' + c); svg.appendChild(r);
    fills[c] = getComputedStyle(r).fill;
  });
  svg.remove();
  var small = 1e9, what = '', cut = '';
  document.querySelectorAll('svg.fig text').forEach(function (t) {
    var b = t.getBoundingClientRect(), s = t.closest('svg').getBoundingClientRect();
    var h = b.height;
    if (h > 0 && h < small) { small = h; what = t.textContent.slice(0, 40); }
    if (h > 0 && !cut && (b.right > s.right + 1 || b.left < s.left - 1))
      cut = t.textContent.slice(0, 60) + ' (' + Math.round(b.left - s.left) + '..' +
            Math.round(b.right - s.left) + ' px of ' + Math.round(s.width) + ')';
  });
  var bars = [];
  document.querySelectorAll('svg g.peak, svg g.bus').forEach(function (g) {
    var t = g.querySelector('rect.track').getBoundingClientRect(),
        e = g.querySelector('rect.ev').getBoundingClientRect(),
        v = g.querySelector('text.val').getBoundingClientRect(),
        s = g.closest('svg').getBoundingClientRect();
    bars.push({share: Math.min(+g.getAttribute('data-share'), 1), drawn: e.width / t.width,
               clipped: v.right > s.right + 1, what: g.textContent.slice(0, 40)});
  });
  return {fills: fills, small: small, what: what, cut: cut, bars: bars,
          page: document.documentElement.scrollWidth, win: window.innerWidth};
})())"""


class Browser:
    def __init__(self, chromium):
        self.prof = tempfile.mkdtemp(prefix="ddpbench-chromium-")
        to_r, to_w = os.pipe()    # us -> browser (its fd 3)
        from_r, from_w = os.pipe()  # browser -> us (its fd 4)

        def fds():
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--disable-extensions", "--disable-default-apps",
             "--user-data-dir=" + self.prof, "--remote-debugging-pipe", "--hide-scrollbars",
             "--window-size=1000,1400", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self.w, self.r = to_w, from_r
        self.buf = b""
        self.next_id = 0
        self.events = []

    def close(self):
        try:
            self.send("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        subprocess.run(["rm", "-rf", self.prof])

    def _read(self):
        left = DEADLINE - time.time()
        if left <= 0 or not select.select([self.r], [], [], left)[0]:
            raise TimeoutError("the browser did not answer in time")
        chunk = os.read(self.r, 1 << 20)
        if not chunk:
            raise EOFError("the browser exited")
        self.buf += chunk

    def _messages(self):
        while b"\0" not in self.buf:
            self._read()
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method, params=None, session=None):
        self.next_id += 1
        m = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            m["sessionId"] = session
        os.write(self.w, json.dumps(m).encode() + b"\0")
        want = self.next_id
        while True:
            msg = self._messages()
            if msg.get("id") == want:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method, session):
        while True:
            for i, e in enumerate(self.events):
                if e["method"] == method and e.get("sessionId") == session:
                    del self.events[i]
                    return e
            self.events.append(self._messages())


def png_ink(png):
    """Share of pixels that are not (near) white, and the distinct colours seen."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(png):
        n, kind = struct.unpack(">I4s", png[pos:pos + 8])
        data = png[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", data[:10])
            bpp = {2: 3, 6: 4}[ctype]
        elif kind == b"IDAT":
            idat += data
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    ink, colours, i = 0, set(), 0
    for _ in range(h):
        ft, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ft == 1:
                line[x] = (line[x] + a) & 255
            elif ft == 2:
                line[x] = (line[x] + b) & 255
            elif ft == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        for x in range(0, stride, bpp):
            px = bytes(line[x:x + 3])
            if min(px) < 235:
                ink += 1
            colours.add(px)
        prev = line
    return ink / float(w * h), len(colours)


COUNT = ("JSON.stringify({lanes: document.querySelectorAll('svg g.lane').length,"
         " bars: document.querySelectorAll('svg g.bar').length,"
         " peaks: document.querySelectorAll('svg g.peak').length,"
         " curves: document.querySelectorAll('svg.replicas polyline').length,"
         " sections: document.querySelectorAll('section').length})")


def lab(rgb):
    """CIE L*a*b* (D65) of an 'rgb(r, g, b)' string."""
    v = [int(x) / 255.0 for x in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3]]
    v = [((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92 for c in v]
    x = (0.4124 * v[0] + 0.3576 * v[1] + 0.1805 * v[2]) / 0.95047
    y = 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]
    z = (0.0193 * v[0] + 0.1192 * v[1] + 0.9505 * v[2]) / 1.08883
    f = [t ** (1 / 3.0) if t > 0.008856 else 7.787 * t + 16 / 116.0 for t in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def widths(b, session, path, url, shots):
    """The page at each of WIDTHS: no wider than the window, its figures' text
    legible, the communication colours apart."""
    bad = []
    b.send("Emulation.setScriptExecutionDisabled", {"value": False}, session)
    for w in WIDTHS:
        b.send("Emulation.setDeviceMetricsOverride", {"width": w, "height": 1400,
                                                      "deviceScaleFactor": 1, "mobile": False},
               session)
        b.send("Page.navigate", {"url": url}, session)
        b.wait_event("Page.loadEventFired", session)
        got = json.loads(b.send("Runtime.evaluate", {"expression": PROBE, "returnByValue": True},
                                session)["result"]["value"])
        if got["page"] > got["win"] + 1:
            bad.append("%s at %d px: the page is %d px wide" % (path, w, got["page"]))
        if os.environ.get("PAGE_CHECK_VERBOSE"):
            print("page_check: %s at %d px: smallest figure text %.1f px ('%s')" %
                  (path, w, got["small"], got["what"]))
        if got["cut"]:
            bad.append("%s at %d px: figure text cut off at the figure's edge: '%s'" %
                       (path, w, got["cut"]))
        if got["small"] < MIN_TEXT_PX:
            bad.append("%s at %d px: figure text %.1f px high ('%s'), under %.0f" %
                       (path, w, got["small"], got["what"], MIN_TEXT_PX))
        for bar in got["bars"]:
            if abs(bar["drawn"] - bar["share"]) > 0.01 or bar["clipped"]:
                bad.append("%s at %d px: the bar '%s' is drawn %.3f of its track for a share "
                           "of %.3f%s" % (path, w, bar["what"], bar["drawn"], bar["share"],
                                          ", its value cut off" if bar["clipped"] else ""))
        names = sorted(got["fills"]) if w == WIDTHS[0] else []
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                a, c = lab(got["fills"][names[i]]), lab(got["fills"][names[j]])
                d = sum((p - q) ** 2 for p, q in zip(a, c)) ** 0.5
                if d < MIN_DELTA_E:
                    bad.append("%s: %s and %s are %.0f apart (CIE76), under %.0f" %
                               (path, names[i], names[j], d, MIN_DELTA_E))
        shot = b.send("Page.captureScreenshot", {"format": "png", "clip": {
            "x": 0, "y": 0, "width": w, "height": 1400, "scale": 0.3}}, session)
        with open(os.path.join(shots, "%s.%d.png" % (os.path.basename(path), w)), "wb") as f:
            f.write(base64.b64decode(shot["data"]))
    b.send("Emulation.clearDeviceMetricsOverride", {}, session)
    return bad


def check(b, session, path, lanes, bars, peaks, curves, shots):
    bad = []
    url = "file://" + os.path.abspath(path)
    b.events = [e for e in b.events if e.get("sessionId") != session]
    for scripts in (True, False):
        b.send("Emulation.setScriptExecutionDisabled", {"value": not scripts}, session)
        b.send("Page.navigate", {"url": url}, session)
        b.wait_event("Page.loadEventFired", session)
        got = json.loads(b.send("Runtime.evaluate", {"expression": COUNT, "returnByValue": True},
                                session)["result"]["value"])
        how = "" if scripts else " (scripts off)"
        if got["lanes"] != lanes:
            bad.append("%s%s: %d timeline lanes, want %d" % (path, how, got["lanes"], lanes))
        if got["bars"] != bars:
            bad.append("%s%s: %d phase bars, want %d" % (path, how, got["bars"], bars))
        if peaks is not None and got["peaks"] != int(peaks):
            bad.append("%s%s: %d peak bars, want %s" % (path, how, got["peaks"], peaks))
        if curves is not None and got["curves"] != int(curves):
            bad.append("%s%s: %d curves of the replicas' distance, want %s"
                       % (path, how, got["curves"], curves))
        if got["sections"] < 6:
            bad.append("%s%s: %d sections" % (path, how, got["sections"]))
        if scripts:
            # a pointer over a bar: the script runs without an error
            b.send("Runtime.evaluate", {"expression":
                   "var r=document.querySelector('svg.fig rect.ev');"
                   "r && r.dispatchEvent(new MouseEvent('mouseover',{bubbles:true}))"}, session)
            shot = b.send("Page.captureScreenshot", {"format": "png", "clip": {
                "x": 0, "y": 0, "width": 1000, "height": 1400, "scale": 0.3}}, session)
            png = base64.b64decode(shot["data"])
            with open(os.path.join(shots, os.path.basename(path) + ".png"), "wb") as f:
                f.write(png)
            ink, colours = png_ink(png)
            if ink < 0.03 or colours < 8:
                bad.append("%s: the screenshot is blank (%.1f%% ink, %d colours)"
                           % (path, 100 * ink, colours))
    if lanes > 0:  # a page of ddpbench's (not a planted bad one)
        bad += widths(b, session, path, url, shots)
    # everything the browser said about this page
    b.send("Runtime.evaluate", {"expression": "1"}, session)  # flush pending events
    for e in b.events:
        if e.get("sessionId") != session:
            continue
        m, p = e["method"], e["params"]
        if m == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert", "warning"):
            bad.append("%s: console %s: %s" % (path, p["type"],
                       " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])))
        elif m == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            bad.append("%s: uncaught exception: %s" % (path, d.get("exception", {}).get(
                "description", d.get("text"))))
        elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
            bad.append("%s: browser log error: %s" % (path, p["entry"]["text"]))
        elif m == "Network.requestWillBeSent" and p["request"]["url"] != url:
            bad.append("%s: a request for %s" % (path, p["request"]["url"]))
        elif m == "Network.loadingFailed":
            bad.append("%s: a load failed: %s" % (path, p.get("errorText")))
    return bad


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    chromium, shots = sys.argv[1], sys.argv[2]
    b = Browser(chromium)
    bad = []
    try:
        t = b.send("Target.createTarget", {"url": "about:blank"})
        session = b.send("Target.attachToTarget", {"targetId": t["targetId"],
                                                   "flatten": True})["sessionId"]
        for dom in ("Page", "Runtime", "Log", "Network"):
            b.send(dom + ".enable", {}, session)
        for spec in sys.argv[3:]:
            m = re.match(r"(.*?):(\d+):(\d+)(?::(\d+))?(?::(\d+))?$", spec)
            path, lanes, bars = m.group(1), int(m.group(2)), int(m.group(3))
            found = check(b, session, path, lanes, bars, m.group(4), m.group(5), shots)
            print("page_check: %s: %s" % (path, "ok" if not found else "FAILED"))
            bad += found
    except (TimeoutError, EOFError, RuntimeError) as e:
        bad.append("the browser: %s" % e)
    finally:
        b.close()
    for line in bad:
        print("page_check: " + line)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
