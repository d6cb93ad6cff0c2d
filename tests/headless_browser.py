"""Load a page in headless Chromium and see what a reader would: a small DevTools-protocol client.

Takes: the path of an HTML page, JavaScript expressions to evaluate once it has loaded, and
optionally a PNG path and a window size for a screenshot (``load_page``). Gives: a ``Page``
with the DOM after the page's scripts ran, each expression's value (JSON), and every error the
page raised: uncaught exceptions, ``console.error`` and ``console.assert`` calls, and the
browser's own error log entries (a resource that failed, a blocked script). ``--dump-dom``
says none of that, and ``--enable-logging`` prints a ``console.error`` like a ``console.log``.

The browser runs with ``--remote-debugging-pipe``: JSON messages, each ended by a NUL byte, on
its file descriptors 3 (commands in) and 4 (replies and events out). Headless, with
``--no-sandbox`` (Chromium will not start its sandbox as root, as in a CI container), a user
data folder of its own in a temporary folder, and a deadline on every read. ``BROWSER``: the
first of chromium, chromium-browser, google-chrome on PATH, or None.

Also a script: ``PYTHONPATH=. python tests/headless_browser.py docs/report-gpt2-block.png``
writes the report page of the GPT-2 block of ``tests/runtime/test_html_report.py`` (forward
and backward) and saves its screenshot (the one in docs/debugging.md).
"""
from __future__ import annotations

import base64
import dataclasses
import fcntl
import json
import os
import pathlib
import select
import shutil
import subprocess
import sys
import tempfile
import time

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


@dataclasses.dataclass
class Page:
    errors: list  # one line per error: where, what
    dom: str  # document.documentElement.outerHTML after the load event
    values: list  # the value of each expression given to ``load_page``


class BrowserError(RuntimeError):
    pass


def load_page(path, expressions=(), screenshot=None, size=(1400, 900), tall=None, timeout: float = 60.0) -> Page:
    """Open ``path`` in a new headless browser with a window of ``size``, wait for its load event,
    evaluate ``expressions`` in order (each may return a promise), take the screenshot (the
    window, or the top ``tall`` pixels of the page), close the browser."""
    if BROWSER is None:
        raise BrowserError("no chromium, chromium-browser or google-chrome on PATH")
    with tempfile.TemporaryDirectory(prefix="braze-browser-") as profile:
        with _Session(profile, size, time.monotonic() + timeout) as session:
            return session.run(pathlib.Path(path).resolve().as_uri(), expressions, screenshot, size, tall)


class _Session:
    """One browser process and one page target, attached with a flat session."""

    def __init__(self, profile: str, size, deadline: float):
        self.deadline, self.next_id, self.events, self.buffer = deadline, 0, [], b""
        commands_read, self.commands = _high(os.pipe())
        self.replies, replies_write = _high(os.pipe())
        self.log = open(os.path.join(profile, "stderr.txt"), "w+b")
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--remote-debugging-pipe", f"--user-data-dir={profile}",
                f"--window-size={size[0]},{size[1]}", "about:blank"]
        # bash (dash takes no descriptor above 9) execs the browser with the pipes on 3 and 4
        shell = f'exec "$0" "$@" 3<&{commands_read} 4>&{replies_write}'
        self.process = subprocess.Popen(["bash", "-c", shell, BROWSER, *args], pass_fds=(commands_read, replies_write),
                                        stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        os.close(commands_read)
        os.close(replies_write)
        self.session = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            if self.process.poll() is None:
                self._send("Browser.close", session=False)
                self.process.wait(timeout=10)
        except (BrowserError, OSError, subprocess.TimeoutExpired):
            pass
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=10)
            os.close(self.commands)
            os.close(self.replies)
            self.log.close()

    def run(self, url: str, expressions, screenshot, size, tall) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": False})
        navigated = self.call("Page.navigate", {"url": url})
        if navigated.get("errorText"):
            raise BrowserError(f"{url}: {navigated['errorText']}")
        self.wait_for_load(url)
        values = [self.evaluate(e) for e in expressions]
        dom = self.evaluate("document.documentElement.outerHTML")
        if screenshot:
            shot = {"format": "png"} if not tall else {"format": "png", "captureBeyondViewport": True, "clip": {
                "x": 0, "y": 0, "width": size[0], "height": tall, "scale": 1}}
            data = self.call("Page.captureScreenshot", shot)["data"]
            pathlib.Path(screenshot).write_bytes(base64.b64decode(data))
        return Page([e for e in map(_error, self.events) if e], dom, values)

    def evaluate(self, expression: str):
        reply = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                               "awaitPromise": True})
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression[:80]}: {_exception(reply['exceptionDetails'])}")
        return reply["result"].get("value")

    def call(self, method: str, params=None, session: bool = True) -> dict:
        wanted = self._send(method, params, session)
        while True:
            message = self._receive()
            if message.get("id") == wanted:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message["result"]
            self.events.append(message)

    def wait_for_load(self, url: str) -> None:
        """Until the load event that follows the page's navigation (not about:blank's)."""
        def loaded():
            methods = [m.get("method") for m in self.events]
            navigated = [k for k, m in enumerate(self.events) if m.get("method") == "Page.frameNavigated"
                         and m["params"]["frame"].get("url") == url]
            return navigated and "Page.loadEventFired" in methods[navigated[0]:]
        while not loaded():
            self.events.append(self._receive())

    def _send(self, method: str, params=None, session: bool = True) -> int:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        return self.next_id

    def _receive(self) -> dict:
        while b"\0" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.replies], [], [], left)[0]:
                raise BrowserError(f"the browser gave no answer in time{self._status()}")
            chunk = os.read(self.replies, 1 << 20)
            if not chunk:
                raise BrowserError(f"the browser closed its pipe{self._status()}")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)


    def _status(self) -> str:
        self.log.seek(0)
        tail = self.log.read()[-2000:].decode(errors="replace")
        return f" (exit status {self.process.poll()}); its output ends:\n{tail}"


def _high(fds) -> tuple:
    """The two ends of a pipe moved above 9, clear of the 3 and 4 the shell redirects."""
    moved = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds)
    for fd in fds:
        os.close(fd)
    return moved


def _error(message: dict):
    """The line of an event that is an error, or None."""
    method, params = message.get("method"), message.get("params", {})
    if method == "Runtime.exceptionThrown":
        return f"uncaught: {_exception(params['exceptionDetails'])}"
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
        return f"console.{params['type']}: {text}"
    if method == "Log.entryAdded" and params["entry"].get("level") == "error":
        entry = params["entry"]
        return f"{entry.get('source')}: {entry.get('text')} ({entry.get('url', '')})"
    return None


def _exception(details: dict) -> str:
    where = f"{details.get('url', '')}:{details.get('lineNumber', 0) + 1}"
    what = details.get("exception", {}).get("description") or details.get("text", "")
    return f"{what} at {where}"


def main(argv) -> None:
    """Save the screenshot of the GPT-2 block's report page (argv[0], a .png)."""
    import torch
    sys.path.insert(0, str(pathlib.Path(__file__).parent / "runtime"))
    import braze
    from helpers import rand
    from test_html_report import MODELS

    out = pathlib.Path(argv[0] if argv else "docs/report-gpt2-block.png")
    torch.manual_seed(0)
    make, shape = MODELS["gpt2_block"]
    with tempfile.TemporaryDirectory() as folder:
        with braze.config.patch(cache_dir=folder):  # an empty cache: a cold compile's times, not a cache hit's
            report = braze.report(make(), rand(*shape, grad=True))
        page_path = pathlib.Path(folder) / "gpt2_block.html"
        report.save(str(page_path), "braze: a GPT-2 block, forward and backward")
        # a window 1000 high holds the drawing to 800 pixels (80vh): the kernel table shows below it
        page = load_page(page_path, screenshot=out, size=(1400, 1000), tall=1900)
    if page.errors:
        raise SystemExit("\n".join(page.errors))
    print(f"{out}: {out.stat().st_size} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
