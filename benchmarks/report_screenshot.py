"""The report as a real browser shows it: headless Chromium (Debian's ``chromium``) driven over its DevTools pipe.

``python benchmarks/report_screenshot.py --out docs/report.png --force`` (``make screenshot``) writes the default
report (``ropekit report``, the bundled tiny model) into a temporary folder and saves a full-page screenshot of it at
1200 px; ``--report DIR`` screenshots a report already written. ``tests/eval/test_report_browser.py`` uses
:class:`Chromium` for its checks (images decode, no console errors, no horizontal overflow at 1200 px).

Why the DevTools protocol over ``--remote-debugging-pipe``: it needs nothing beyond the standard library (no
Playwright, Selenium or websocket client), and it sees what ``--dump-dom`` cannot: console messages, uncaught
exceptions and failed loads (the browser's ``Log`` domain), the laid-out page, and full-page screenshots.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: the browser Debian's ``chromium`` package installs
CHROMIUM = Path("/usr/bin/chromium")
#: the width the report must be readable at (px)
WIDTH = 1200
#: no GPU, no network and no background services: a quiet, deterministic headless browser as root in a container
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
    "--force-device-scale-factor=1",
)

#: what the page looks like once loaded: image states and boxes, widths, and the elements wider than the viewport
PROBE = """(() => {
  const width = document.documentElement.clientWidth;
  const box = (e) => e.getBoundingClientRect();
  const images = [...document.images].map((img) => ({
    src: img.getAttribute("src"), complete: img.complete, naturalWidth: img.naturalWidth,
    naturalHeight: img.naturalHeight, left: box(img).left + scrollX, top: box(img).top + scrollY,
    width: box(img).width, height: box(img).height}));
  const overflowing = [...document.body.querySelectorAll("*")]
    .filter((e) => box(e).right > width + 0.5 || box(e).left < -0.5)
    .map((e) => e.tagName.toLowerCase() + ": " + (e.textContent || e.getAttribute("src") || "").slice(0, 60));
  const fontPx = (e) => parseFloat(getComputedStyle(e).fontSize);
  const texts = [...document.body.querySelectorAll("p, li, td, th")];
  return {images, overflowing, clientWidth: width, scrollWidth: document.documentElement.scrollWidth,
          scrollHeight: document.documentElement.scrollHeight,
          smallestFontPx: Math.min(...texts.map(fontPx)), title: document.title};
})()"""


class ChromiumError(RuntimeError):
    """The browser failed to start, answered with an error or went quiet."""


class Chromium:
    """One headless Chromium, driven over the DevTools protocol on ``--remote-debugging-pipe`` (fds 3 and 4).

    Use as a context manager; :meth:`open` loads a page, :meth:`evaluate` runs JavaScript in it, :meth:`screenshot`
    captures it, and :attr:`problems` lists every console error, uncaught exception and failed load seen so far.
    """

    def __init__(self, profile: Path, *, binary: Path = CHROMIUM, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.problems: list[str] = []
        self._next_id = 0
        self._buffer = b""
        self._events: list[dict[str, Any]] = []
        to_browser, self._from_us = os.pipe()  # the browser reads commands on fd 3
        self._from_browser, to_us = os.pipe()  # and writes replies and events on fd 4
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in __exit__) its stderr: a file, since a pipe
        # nobody reads could fill and stall it
        # posix_spawn moves the two ends onto fds 3 and 4 in the child (no Python runs between fork and exec, which
        # matters in a process with torch's threads); copies at fds >= 10 first, so neither dup2 clobbers the other
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser, to_us)]
        command = [str(binary), *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"]
        try:
            self._pid = os.posix_spawn(
                command[0],
                command,
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_DUP2, self._log.fileno(), 2),
                    (os.POSIX_SPAWN_DUP2, high[0], 3),
                    (os.POSIX_SPAWN_DUP2, high[1], 4),
                ],
            )
        finally:
            for fd in (to_browser, to_us, *high):
                os.close(fd)
        self._status: int | None = None
        self._session: str | None = None

    def __enter__(self) -> Chromium:
        try:
            target = self.send("Target.createTarget", url="about:blank")["targetId"]
            self._session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                self.send(f"{domain}.enable")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._session = None
            self.send("Browser.close")
        except (ChromiumError, OSError):
            pass
        finally:
            deadline = time.monotonic() + 10
            while self._exited() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if self._exited() is None:
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
            os.close(self._from_us)
            os.close(self._from_browser)
            self._log.close()

    def _exited(self) -> int | None:
        """The browser's exit status once it has exited (reaped here), else ``None``."""
        if self._status is None:
            pid, status = os.waitpid(self._pid, os.WNOHANG)
            if pid:
                self._status = os.waitstatus_to_exitcode(status)
        return self._status

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command (to the page once attached) and return its result."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if self._session is not None and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self._session
        os.write(self._from_us, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def wait_for(self, event: str) -> dict[str, Any]:
        """Block until the page sends ``event``; return its parameters."""
        while True:
            for index, seen in enumerate(self._events):
                if seen["method"] == event:
                    return self._events.pop(index)["params"]
            self._receive()

    def open(self, url: str, *, width: int = WIDTH, height: int = 900) -> None:
        """Load ``url`` in a ``width`` × ``height`` viewport and wait for its load event (images included)."""
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self._events.clear()
        navigated = self.send("Page.navigate", url=url)
        if navigated.get("errorText"):
            raise ChromiumError(f"{url}: {navigated['errorText']}")
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` in the page (an exception in it is a :class:`ChromiumError`)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise ChromiumError(f"{expression[:60]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, *, width: int = WIDTH) -> Path:
        """A PNG of the whole page (``width`` wide, as tall as the page) at ``path``."""
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        shot = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def _receive(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_browser], [], [], max(0.0, left))
            chunk = os.read(self._from_browser, 1 << 20) if ready else b""
            if not chunk:  # silence, or the end of the pipe (the browser is exiting)
                for _ in range(100 if ready else 0):
                    if self._exited() is not None:
                        break
                    time.sleep(0.05)
                self._log.seek(0)
                stderr = self._log.read().decode(errors="replace")[-2000:]
                why = f"exited ({self._exited()})" if ready else f"sent nothing for {self.timeout:g} s"
                raise ChromiumError(f"chromium {why}; its stderr ends: {stderr}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message = json.loads(raw)
        if "method" in message:
            self._note(message)
            self._events.append(message)
        return message

    def _note(self, event: dict[str, Any]) -> None:
        """Record console errors, uncaught exceptions and failed loads (the page's DevTools console, in words)."""
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            words = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.problems.append(f"console.{params['type']}: {words}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.problems.append(f"uncaught: {details.get('exception', {}).get('description', details.get('text'))}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.problems.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Full-page screenshot of the report at 1200 px (headless Chromium).")
    parser.add_argument("--out", type=Path, default=Path("docs/report.png"), help="PNG to write")
    parser.add_argument("--report", type=Path, help="a report folder already written (default: write the default one)")
    parser.add_argument("--force", action="store_true", help="overwrite --out")
    options = parser.parse_args(argv)
    if not CHROMIUM.is_file():
        parser.error(f"needs Debian's chromium at {CHROMIUM} (apt-get install -y chromium)")
    if options.out.exists() and not options.force:
        parser.error(f"--out {options.out} exists; pass --force to overwrite it")
    with tempfile.TemporaryDirectory(prefix="ropekit-shot-") as scratch:
        report = options.report
        if report is None:
            report = Path(scratch) / "report"
            ropekit = [sys.executable, "-m", "ropekit.cli", "report", "--out", str(report)]
            subprocess.run(ropekit, check=True)
        index = report / "index.html"
        if not index.is_file():
            parser.error(f"--report {report}: no index.html there")
        with Chromium(Path(scratch) / "profile") as browser:
            browser.open(index.resolve().as_uri())
            page = browser.evaluate(PROBE)
            browser.screenshot(options.out)
        if browser.problems:
            print("console problems:\n  " + "\n  ".join(browser.problems), file=sys.stderr)
            return 1
    print(f"wrote {options.out} ({WIDTH} × {page['scrollHeight']} px, {len(page['images'])} images)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
