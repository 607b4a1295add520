"""A small headless-Chromium client for the report test: the DevTools protocol over
--remote-debugging-pipe (JSON messages separated by NUL on fds 3 and 4), so no websocket
package is needed. Debian's `chromium` package is installed with apt-get when missing and
root, as tests/slurm/cluster.py installs SLURM.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

import aptget
import pytest

PACKAGES = ["chromium"]


def ensure_installed() -> str:
    """The chromium binary; installed with apt-get when missing and root, else RuntimeError."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    aptget.install(PACKAGES, "chromium")
    found = shutil.which("chromium")
    if not found:
        raise RuntimeError("apt-get installed chromium, but no chromium binary is on PATH")
    return found


def chromium() -> str:
    """The chromium binary, or the test is skipped (not root and none installed)."""
    try:
        return ensure_installed()
    except RuntimeError as e:
        pytest.skip(f"no browser: {e}")


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium with one page. Console errors and uncaught exceptions of every
    frame (site isolation off, so iframes report into the page's session) collect in `errors`."""

    def __init__(self, binary: str, width: int = 1400, height: int = 950, timeout: float = 30.0):
        self.timeout = timeout
        self.errors: list[str] = []
        self._events: list[dict] = []
        self._id = 0
        self._buffer = b""
        self._profile = tempfile.TemporaryDirectory(prefix="hwsweep-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire():  # the child reads commands on fd 3 and writes replies on fd 4
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [
            binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
            "--disable-site-isolation-trials", "--disable-features=IsolateOrigins,site-per-process",
            "--no-first-run", "--no-default-browser-check", "--hide-scrollbars",
            f"--user-data-dir={self._profile.name}", f"--window-size={width},{height}", "about:blank",
        ]  # fmt: skip
        # os.pipe() ends are not inheritable; only the dup2'd fds 3 and 4 reach chromium.
        self.proc = subprocess.Popen(args, preexec_fn=wire, close_fds=False, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)  # fmt: skip
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.page(f"{domain}.enable")
        self.page("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    # -- the protocol --------------------------------------------------------------------

    def _read(self) -> dict:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            # Waited for with a bound: a blocking read outlived every deadline when no message came (an event
            # that never fires, as a load event after a same-document navigation).
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise BrowserError("chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise BrowserError("chromium closed the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _note(self, event: dict) -> None:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            text = (d.get("exception") or {}).get("description") or d.get("text", "")
            self.errors.append(f"exception: {text} ({d.get('url', '')}:{d.get('lineNumber')})")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.errors.append(f"console.{params['type']}: {args}")
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            e = params["entry"]
            self.errors.append(f"log ({e.get('source')}): {e.get('text')} {e.get('url', '')}".strip())
        self._events.append(event)

    def send(self, method: str, session: str | None = None, **params) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            self._note(reply)

    def page(self, method: str, **params) -> dict:
        return self.send(method, session=self.session, **params)

    def wait_for(self, method: str, timeout: float | None = None) -> dict:
        """The next event `method` (one already received counts)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for i, event in enumerate(self._events):
                if event.get("method") == method:
                    return self._events.pop(i)
            if time.monotonic() > deadline:
                raise BrowserError(f"no {method} within the timeout")
            self._note(self._read())

    # -- what a test does ----------------------------------------------------------------

    def open(self, url: str) -> None:
        self._events.clear()
        self.page("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.page("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def until(self, expression: str, timeout: float = 10.0) -> bool:
        """Poll a JavaScript expression until it is truthy; whether it became so in time."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(f"Boolean({expression})")
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.1)

    def frame_evaluate(self, expression: str, child: int = 0):
        """The value of an expression in the page's `child`-th iframe (a data: URL, so not
        reachable from the page's own JavaScript)."""
        deadline = time.monotonic() + self.timeout
        while True:
            tree = self.page("Page.getFrameTree")["frameTree"]
            frames = tree.get("childFrames", [])
            if len(frames) <= child:
                raise BrowserError(f"the page has {len(frames)} iframes")
            frame = frames[child]["frame"]["id"]
            try:
                world = self.page("Page.createIsolatedWorld", frameId=frame, worldName="hwsweep-test")
                result = self.page("Runtime.evaluate", expression=expression, contextId=world["executionContextId"],
                                   returnByValue=True)  # fmt: skip
                break
            except BrowserError as e:
                # The iframe loaded its document between the two calls (about:blank, then its data: URL), which
                # destroys the world just made: make one in the new document.
                if ("context" not in str(e) and "frame" not in str(e)) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def frame_until(self, expression: str, child: int = 0, timeout: float = 10.0):
        """Poll a JavaScript expression in the page's `child`-th iframe until it is truthy; its value (BrowserError
        at the timeout: the frame never got there)."""
        deadline = time.monotonic() + timeout
        while not (value := self.frame_evaluate(expression, child)):
            if time.monotonic() > deadline:
                raise BrowserError(f"not within {timeout} s in iframe {child}: {expression[:120]}")
            time.sleep(0.1)
        return value

    def screenshot(self, path) -> None:
        data = self.page("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
