#!/usr/bin/env python3
"""The page (make web) in headless Chromium: loads build-web/ from a loopback static server, waits
for its first frames, checks a screenshot as the desktop GUI tests do (size, distinct colours, the
lesson's title region not blank), follows the canvas through a resize and devicePixelRatio 2, then
opens every stage of every lesson through the address's fragment (#lesson=L&stage=S). A JavaScript
error, a console error or a WebGL message fails it. Prints the time to the first frame and the frame
rate on lesson 3. Exits 77 (skipped) when emcc, Chromium or the built page is missing.

With --from-disk it opens the page in one file, build-web/hbmlab.html, copied alone into an empty
folder, through file:// (no server): the same checks, less the resize, the frame rates, the keys past
Page Down, H and Esc, and the walk through every stage (each lesson's last stage instead, asked for
as stage 99, with the address corrected to it), and it fails if the page asks for anything but itself. It first opens index.html from disk, which cannot load hbmlab.wasm there,
and checks that it says so and names hbmlab.html.

Run: tests/web/web_test.py --page build-web [--from-disk] [--check-png build/tests/gui/check_png]
     [--screenshot out.png] [--chromium /usr/bin/chromium]
Only the Python standard library: the DevTools protocol over --remote-debugging-pipe.
"""
import argparse
import base64
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77


class Browser:
    """Chromium driven through the DevTools protocol on a pipe (fd 3 in, fd 4 out, NUL-separated)."""

    def __init__(self, chromium, width, height):
        self.profile = tempfile.mkdtemp(prefix="hbmlab-web-")
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def fds():
            # Through fresh copies: a pipe's end may already be fd 3 or 4 (with no server open), where
            # dup2 onto itself would leave it close-on-exec, or be overwritten before it is moved.
            read_end, write_end = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        args = [chromium, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--user-data-dir=" + self.profile,
                "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--hide-scrollbars",
                f"--window-size={width},{height}", "--force-device-scale-factor=1", "about:blank"]
        # close_fds would close 3 and 4 again after preexec_fn has placed the pipes there.
        self.proc = subprocess.Popen(args, preexec_fn=fds, close_fds=False,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def close(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _read(self):
        while b"\0" not in self.buffer:
            chunk = os.read(self.from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self.buffer += chunk
        text, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(text)

    def call(self, method, session=True, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url):
        self.target = self.call("Target.createTarget", session=False, url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", session=False, targetId=self.target, flatten=True)["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.call(domain + ".enable")
        self.call("Page.navigate", url=url)

    def page_events(self):
        """The events of the page open now (not of one closed before)."""
        return [e for e in self.events if e.get("sessionId") == self.session]

    def problems(self):
        """JavaScript exceptions, console errors and anything WebGL complained about, so far."""
        found = []
        for e in self.page_events():
            method, p = e.get("method"), e.get("params", {})
            if method == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                found.append("exception: " + d.get("exception", {}).get("description", d.get("text", "")))
            elif method == "Runtime.consoleAPICalled":
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                if p.get("type") == "error" or "webgl" in text.lower():
                    found.append(f"console.{p.get('type')}: {text}")
            elif method == "Log.entryAdded":
                entry = p["entry"]
                if entry.get("level") == "error" or "webgl" in entry.get("text", "").lower():
                    found.append(f"log {entry.get('level')}: {entry.get('text')}")
        return found

    def requests(self):
        """The addresses the page asked for, in order (data: ones left out)."""
        return [e["params"]["request"]["url"] for e in self.page_events()
                if e.get("method") == "Network.requestWillBeSent" and not e["params"]["request"]["url"].startswith("data:")]

    def console_lines(self):
        return [" ".join(str(a.get("value", "")) for a in e["params"].get("args", []))
                for e in self.page_events() if e.get("method") == "Runtime.consoleAPICalled"]

    def wait_for(self, expression, seconds, what):
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            value = self.evaluate(expression)
            if value:
                return value
            if self.problems():
                break
            time.sleep(0.05)
        state = {k: v for k, v in (self.evaluate("window.hbmlab") or {}).items() if k != "title_rect"}
        raise RuntimeError(f"{what}: not within {seconds} s (the page: {json.dumps(state)}, {self.evaluate('location.hash')})"
                           + "".join("\n  " + p for p in self.problems()))

    def frames(self):
        return self.evaluate("window.hbmlab ? window.hbmlab.frames : 0")

    def wait_frames(self, n, seconds=60):
        start = self.frames()
        self.wait_for(f"window.hbmlab && window.hbmlab.frames >= {start + n}", seconds, f"{n} more frames")

    def key(self, key, code, key_code, text=""):
        """Held for one whole frame: Dear ImGui 1.86 reads the keys' state once a frame, and a key held
        past its repeat delay (0.275 s, a frame or two of a slow page) would count twice."""
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=key, code=code, windowsVirtualKeyCode=key_code,
                      nativeVirtualKeyCode=key_code, text=text if kind == "keyDown" else "")
            if kind == "keyDown":
                self.wait_frames(1)

    def screenshot(self, clip=None):
        params = {"format": "png"}
        if clip:
            params["clip"] = dict(zip(("x", "y", "width", "height"), clip), scale=1)
        return base64.b64decode(self.call("Page.captureScreenshot", **params)["data"])


# In the page: the distinct colours of a PNG and the share of pixels unlike its most common one.
COLOURS_JS = """(async (url) => {
  const img = new Image(); img.src = url; await img.decode();
  const c = new OffscreenCanvas(img.width, img.height), g = c.getContext('2d');
  g.drawImage(img, 0, 0);
  const px = g.getImageData(0, 0, img.width, img.height).data, counts = new Map();
  for (let k = 0; k < px.length; k += 4) {
    const key = (px[k] << 16) | (px[k + 1] << 8) | px[k + 2];
    counts.set(key, (counts.get(key) || 0) + 1);
  }
  const most = Math.max(...counts.values());
  return [img.width, img.height, counts.size, 1 - most / (px.length / 4)];
})"""


def serve(folder):
    class Handler(http.server.SimpleHTTPRequestHandler):
        extensions_map = dict(http.server.SimpleHTTPRequestHandler.extensions_map,
                              **{".wasm": "application/wasm", ".js": "text/javascript"})

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=folder))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--page", required=True, help="the folder make web builds (build-web)")
    ap.add_argument("--from-disk", action="store_true", help="open hbmlab.html alone through file://, no server")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--check-png", help="tests/gui's check_png, as the desktop GUI tests use it")
    ap.add_argument("--screenshot", help="where to keep the first screenshot (PNG)")
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--height", type=int, default=1000)
    args = ap.parse_args()

    names = ("hbmlab.html",) if args.from_disk else ("index.html", "hbmlab.js", "hbmlab.wasm")
    page_files = [os.path.join(args.page, f) for f in names]
    missing = [f for f in page_files if not os.path.isfile(f)]
    if not (shutil.which("emcc") or os.path.exists("/usr/bin/emcc")):
        print("web test skipped: no emcc (Debian's emscripten package; make web installs it)")
        return SKIP
    if missing:
        print(f"web test skipped: the page is not built ({', '.join(missing)} missing): run make web")
        return SKIP
    if not os.path.isfile(args.chromium):
        print(f"web test skipped: no Chromium at {args.chromium} (Debian's chromium package)")
        return SKIP
    for f in page_files:
        print(f"page: {os.path.basename(f)} {os.path.getsize(f):,} bytes")

    if args.from_disk:
        # Alone in a folder, as a file handed out is: anything it still needed beside it would fail.
        alone = tempfile.mkdtemp(prefix="hbmlab-file-")
        shutil.copy(page_files[0], alone)
        url = "file://" + os.path.join(alone, "hbmlab.html")
        stop = functools.partial(shutil.rmtree, alone, ignore_errors=True)
    else:
        server = serve(args.page)
        url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
        stop = server.shutdown
    browser = Browser(args.chromium, args.width, args.height)
    try:
        return run(browser, url, args)
    finally:
        browser.close()
        stop()


def stage_shown(browser, lesson, stage):
    """The page's state two frames after it opened a stage; its error, if any, fails the test."""
    browser.wait_frames(2)
    s = browser.evaluate("window.hbmlab")
    if s["error"]:
        raise RuntimeError(f"lesson {lesson} stage {stage}: {s['error']}")
    return s


def keys_and_tabs(browser):
    """B for side by side, 4 for the Timeline tab, B again, then 5 for the Measured tab, whose records the
    timing engine predicts in slices between frames: the page keeps drawing."""
    browser.key("b", "KeyB", 66, "b")
    browser.wait_for("window.hbmlab.side_by_side", 60, "B: side by side")
    browser.key("4", "Digit4", 52, "4")
    browser.wait_for("window.hbmlab.tab == 4", 30, "4: the Timeline tab")
    browser.wait_frames(3)
    browser.key("b", "KeyB", 66, "b")
    browser.wait_for("!window.hbmlab.side_by_side", 60, "B: one algorithm again")
    browser.key("5", "Digit5", 53, "5")
    browser.wait_for("window.hbmlab.tab == 5", 30, "5: the Measured tab")
    f0, t0 = browser.evaluate("[window.hbmlab.frames, performance.now()]")
    time.sleep(5)
    f1, t1, working = browser.evaluate("[window.hbmlab.frames, performance.now(), window.hbmlab.working]")
    print(f"keys: Page Down, H, Esc, B, 4 (Timeline tab), B, 5 (Measured tab): {f1 - f0} frames in {(t1 - t0) / 1000:.1f} s while the "
          f"timing engine predicts the records ({'still working' if working else 'done'})")
    if f1 - f0 < 3:
        raise RuntimeError("the page stopped drawing while the Measured tab's records were predicted")


def run(browser, url, args):
    if args.from_disk:
        # index.html opened from disk cannot fetch hbmlab.wasm: it says so and names hbmlab.html.
        browser.open("file://" + os.path.abspath(os.path.join(args.page, "index.html")))
        until, said = time.monotonic() + 30, ""
        while "hbmlab.html" not in said and time.monotonic() < until:
            time.sleep(0.05)
            # The element is not there until the document is parsed: '' until then, not an error.
            said = browser.evaluate("(document.getElementById('status') || {}).textContent || ''")
        print(f"index.html from disk: '{said}'")
        if "hbmlab.html" not in said:
            raise RuntimeError("index.html opened from disk does not point to hbmlab.html")
        browser.call("Target.closeTarget", session=False, targetId=browser.target)
    browser.open(url)
    browser.call("Emulation.setDeviceMetricsOverride", width=args.width, height=args.height, deviceScaleFactor=1, mobile=False)
    browser.wait_for("window.hbmlab && window.hbmlab.frames >= 3", 90, "the page's first frames")
    first = browser.evaluate("window.hbmlab.first_frame_ms")
    print(f"first frame {first / 1000:.2f} s after the page started loading (navigation start)")
    renderer = browser.evaluate("""(() => { const g = document.createElement('canvas').getContext('webgl2');
        const i = g && g.getExtension('WEBGL_debug_renderer_info');
        return g ? (i ? g.getParameter(i.UNMASKED_RENDERER_WEBGL) : g.getParameter(g.RENDERER)) : 'none'; })()""")
    print(f"WebGL 2 renderer: {renderer}")
    browser.wait_frames(10)

    # The first picture, checked as the desktop GUI tests check theirs.
    png = browser.screenshot()
    out = args.screenshot or os.path.join(tempfile.gettempdir(), "hbmlab-web.png")
    with open(out + ".tmp", "wb") as f:
        f.write(png)
    os.replace(out + ".tmp", out)
    w, h, colours, spread = browser.evaluate(f"{COLOURS_JS}('data:image/png;base64,{base64.b64encode(png).decode()}')")
    print(f"screenshot {out}: {w}×{h}, {colours} distinct colours")
    if (w, h) != (args.width, args.height):
        raise RuntimeError(f"screenshot is {w}×{h}, not the window's {args.width}×{args.height}")
    if args.check_png:
        subprocess.run([args.check_png, out, str(args.width), str(args.height)], check=True)
    elif colours < 200:
        raise RuntimeError("too few colours: blank?")
    state = browser.evaluate("window.hbmlab")
    x, y, tw, th = state["title_rect"]
    w, h, colours, spread = browser.evaluate(
        f"{COLOURS_JS}('data:image/png;base64,{base64.b64encode(browser.screenshot((x, y, tw, th))).decode()}')")
    print(f"lesson title region {tw:.0f}×{th:.0f} at ({x:.0f}, {y:.0f}): '{state['title']}', {colours} colours, "
          f"{100 * spread:.1f} % of pixels not background")
    if colours < 8 or spread < 0.02:
        raise RuntimeError("the lesson's title region is blank")

    # The canvas follows the window and its devicePixelRatio (the served page shows it; from disk, the
    # same code runs).
    for cw, ch, dpr in () if args.from_disk else ((1000, 700, 1), (800, 500, 2), (args.width, args.height, 1)):
        browser.call("Emulation.setDeviceMetricsOverride", width=cw, height=ch, deviceScaleFactor=dpr, mobile=False)
        want = [cw * dpr, ch * dpr]
        browser.wait_for(f"JSON.stringify(window.hbmlab.canvas) == '{json.dumps(want, separators=(',', ':'))}'", 30,
                         f"canvas {want[0]}×{want[1]} for a {cw}×{ch} window at devicePixelRatio {dpr}")
        browser.wait_frames(3)
        # The pointer, in CSS pixels, reaches Dear ImGui in device pixels.
        px, py = cw // 3, ch // 2
        browser.call("Input.dispatchMouseEvent", type="mouseMoved", x=px, y=py)
        browser.wait_for(f"JSON.stringify(window.hbmlab.mouse) == '{json.dumps([px * dpr, py * dpr], separators=(',', ':'))}'",
                         30, f"the pointer at ({px}, {py}) seen at ({px * dpr}, {py * dpr})")
        print(f"window {cw}×{ch} at devicePixelRatio {dpr}: canvas {want[0]}×{want[1]}, pointer ({px}, {py}) "
              f"at ({px * dpr}, {py * dpr}) in the window")

    # Every stage of every lesson, through the fragment. From disk, each lesson once: its last stage,
    # asked for as stage 99, and the address then corrected to it (history.replaceState on file://).
    browser.evaluate("window.hbmlab.longest_frame_ms = 0")
    lessons = state["lessons"]
    visited = 0
    if args.from_disk:
        for lesson in range(1, lessons + 1):
            browser.evaluate(f"window.location.hash = '#lesson={lesson}&stage=99'")
            stage = browser.wait_for(f"window.hbmlab.lesson == {lesson} && window.hbmlab.stage == window.hbmlab.stages "
                                     "&& window.hbmlab.stage", 60, f"lesson {lesson}, stage 99: its last")
            browser.wait_for(f"window.location.hash == '#lesson={lesson}&stage={stage}'", 30,
                             f"the address corrected to #lesson={lesson}&stage={stage}")
            s = stage_shown(browser, lesson, stage)
            print(f"lesson {lesson} stage 99: stage {stage} of {s['stages']}, the address corrected: {s['title']}: {s['stage_title']}")
            visited += 1
    else:
        for lesson in range(1, lessons + 1):
            stage, stages = 1, 1
            while stage <= stages:
                browser.evaluate(f"window.location.hash = '#lesson={lesson}&stage={stage}'")
                browser.wait_for(f"window.hbmlab.lesson == {lesson} && window.hbmlab.stage == {stage}", 60,
                                 f"lesson {lesson} stage {stage}")
                s = stage_shown(browser, lesson, stage)
                stages = s["stages"]
                print(f"lesson {lesson} stage {stage} of {stages}: {s['title']}: {s['stage_title']}")
                stage += 1
                visited += 1
    print(f"{visited} stages of {lessons} lessons opened; the longest frame took "
          f"{browser.evaluate('window.hbmlab.longest_frame_ms'):.0f} ms")

    # Frame rate on lesson 3 (served only).
    if not args.from_disk:
        browser.evaluate("window.location.hash = '#lesson=3&stage=1'")
        browser.wait_for("window.hbmlab.lesson == 3", 60, "lesson 3")
        browser.wait_frames(5)
        f0, t0 = browser.evaluate("[window.hbmlab.frames, performance.now()]")
        time.sleep(5)
        f1, t1, working = browser.evaluate("[window.hbmlab.frames, performance.now(), window.hbmlab.working]")
        print(f"lesson 3 at {args.width}×{args.height}: {(f1 - f0) / ((t1 - t0) / 1000):.1f} fps ({f1 - f0} frames in "
              f"{(t1 - t0) / 1000:.1f} s{', background work pending' if working else ''})")

    # Keys as on the desktop: Page Down for the next stage, H for the help, Esc, B for side by side, 4
    # for the Timeline tab, then 5 for the Measured tab, whose records the timing engine predicts in
    # slices between frames: the page keeps drawing.
    browser.evaluate("window.location.hash = '#lesson=1&stage=1'")
    browser.wait_for("window.hbmlab.lesson == 1 && window.hbmlab.stage == 1", 60, "lesson 1")
    browser.key("PageDown", "PageDown", 34)  # it repeats, as on the desktop, if a frame outlasts the key's delay
    stage = browser.wait_for("window.hbmlab.stage >= 2 && window.hbmlab.stage", 30, "Page Down: the next stage")
    browser.wait_for(f"window.location.hash == '#lesson=1&stage={stage}'", 30, "the address following the stage")
    browser.key("h", "KeyH", 72, "h")
    browser.wait_for("window.hbmlab.help", 30, "H: the help")
    browser.key("Escape", "Escape", 27)
    browser.wait_for("!window.hbmlab.help", 30, "Esc: no help")
    if args.from_disk:  # the rest of the keys are the served page's test
        print("keys: Page Down, H, Esc")
    else:
        keys_and_tabs(browser)

    # Another embedded scenario through the address: the explorer with the runs recorded on an H100.
    browser.evaluate("window.location.hash = '#scenario=workloads/h100-flash2-4k'")
    browser.wait_for("window.hbmlab.lesson == 0", 60, "#scenario=workloads/h100-flash2-4k")
    browser.key("3", "Digit3", 51, "3")
    cells = browser.wait_for("window.hbmlab.tab == 3 && window.hbmlab.measured_cells", 120,
                             "the explorer's measured cells")
    print(f"#scenario=workloads/h100-flash2-4k, key 3 (explorer): {cells} cells measured on an H100")

    problems = browser.problems()
    if args.from_disk:
        asked = [u for u in browser.requests() if u != url]
        print(f"requests: {len(browser.requests())} (" + ", ".join(browser.requests()) + ")")
        if asked:
            problems.append("the page in one file asked for other files: " + ", ".join(asked))
    for line in browser.console_lines():
        print("page: " + line)
    if problems:
        raise RuntimeError("the page reported problems:" + "".join("\n  " + p for p in problems))
    print("web test: OK")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"web test: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
