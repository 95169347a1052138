"""A real headless browser for tests: Debian's chromium, driven over the DevTools protocol.

No test tool downloads a browser: this uses /usr/bin/chromium (installed by .ci/run when
missing) and a websocket. `load(path)` opens a file and reports what a reviewer would check:
console errors, every network request, JavaScript dialogs (a sign injected script ran),
whether each image decoded, the page's text, and a screenshot.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--remote-debugging-port=0",
]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageReport:
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    images: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""
    screenshot_png: bytes = b""
    values: dict[str, Any] = field(default_factory=dict)  # what each expression evaluated to


class Browser:
    def __init__(self, executable: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="ledger-chromium-")
        self.process = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.1)
        self.port = int(port_file.read_text().split()[0])
        self._id = 0

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def load(
        self,
        path: Path,
        settle_s: float = 1.0,
        width: int = 1400,
        height: int = 1000,
        evaluate: dict[str, str] | None = None,
    ) -> PageReport:
        """Open `path` at a `width` × `height` viewport; `evaluate` maps names to JavaScript
        expressions whose values land in `values`."""
        import websocket  # websocket-client, a dev dependency

        new_tab = f"http://127.0.0.1:{self.port}/json/new?about:blank"
        request = urllib.request.Request(new_tab, method="PUT")
        with urllib.request.urlopen(request, timeout=10) as response:
            target = json.load(response)
        ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30)
        report = PageReport()
        try:
            for method in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
                self._call(ws, report, method)
            self._call(
                ws,
                report,
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            self._call(ws, report, "Page.navigate", url=path.resolve().as_uri())
            self._wait_for(ws, report, "Page.loadEventFired", timeout=30)
            end = time.monotonic() + settle_s
            while time.monotonic() < end:  # let late scripts and image decodes happen
                self._drain(ws, report, timeout=0.1)
            images = self._evaluate(
                ws,
                report,
                "Array.from(document.images).map(i => ({src: i.src.slice(0, 40),"
                " complete: i.complete, width: i.naturalWidth, height: i.naturalHeight}))",
            )
            report.images = images or []
            report.text = self._evaluate(ws, report, "document.body.innerText") or ""
            for name, expression in (evaluate or {}).items():
                report.values[name] = self._evaluate(ws, report, expression)
            shot = self._call(
                ws, report, "Page.captureScreenshot", format="png", captureBeyondViewport=True
            )
            report.screenshot_png = base64.b64decode(shot["data"])
        finally:
            ws.close()
        return report

    # -- protocol plumbing ---------------------------------------------------------------

    def _call(self, ws: Any, report: PageReport, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(ws.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._record(message, report, ws)

    def _evaluate(self, ws: Any, report: PageReport, expression: str) -> Any:
        result = self._call(
            ws, report, "Runtime.evaluate", expression=expression, returnByValue=True
        )
        return result.get("result", {}).get("value")

    def _wait_for(self, ws: Any, report: PageReport, event: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = json.loads(ws.recv())
            self._record(message, report, ws)
            if message.get("method") == event:
                return
        raise TimeoutError(event)

    def _drain(self, ws: Any, report: PageReport, timeout: float) -> None:
        """Record what the page sends for `timeout` seconds in all (a page that polls
        sends something every second: a pause per message would never come)."""
        import websocket

        deadline = time.monotonic() + timeout
        try:
            while (left := deadline - time.monotonic()) > 0:
                ws.settimeout(left)
                self._record(json.loads(ws.recv()), report, ws)
        except websocket.WebSocketTimeoutException:  # the deadline ends the drain
            pass
        finally:
            ws.settimeout(30)

    def _record(self, message: dict[str, Any], report: PageReport, ws: Any) -> None:
        method = message.get("method")
        params = message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            report.console_errors.append(json.dumps(params.get("args", []))[:300])
        elif method == "Runtime.exceptionThrown":
            report.console_errors.append(str(params.get("exceptionDetails", {}).get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            report.console_errors.append(params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            report.requests.append(params.get("request", {}).get("url", ""))
        elif method == "Page.javascriptDialogOpening":
            report.dialogs.append(params.get("message", ""))
            self._id += 1  # dismiss it, or the page would hang
            ws.send(
                json.dumps(
                    {
                        "id": self._id,
                        "method": "Page.handleJavaScriptDialog",
                        "params": {"accept": True},
                    }
                )
            )


# The text of each element matching a selector as it is drawn: every character placed by
# where the browser put it (lines top to bottom, characters left to right), so text that
# bidi controls mirrored reads mirrored here, unlike innerText, which keeps logical order.
VISUAL_TEXT = """
Array.from(document.querySelectorAll(%s)).map(element => {
  const chars = [];
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const box = range.getBoundingClientRect();
      if (box.width > 0) chars.push({y: (box.top + box.bottom) / 2, x: box.left, c: node.data[i]});
    }
  }
  chars.sort((a, b) => a.y - b.y);
  let line = 0;
  chars.forEach((ch, i) => {
    if (i && ch.y - chars[i - 1].y > 8) line += 1;
    ch.line = line;
  });
  chars.sort((a, b) => a.line - b.line || a.x - b.x);
  return chars.map(ch => ch.c).join("");
})
"""


def visual_text(selector: str) -> str:
    """A JavaScript expression: the drawn text of every element `selector` matches."""
    return VISUAL_TEXT % json.dumps(selector)


# How wide the page and its tables are drawn, against the viewport.
WIDTHS = """({
  viewport: window.innerWidth,
  page: document.documentElement.scrollWidth,
  body: document.body.getBoundingClientRect().right,
  tables: Array.from(document.querySelectorAll("table")).map(t => t.getBoundingClientRect().right),
})"""

# Each inline SVG chart as drawn: its box on the page and the words it holds (SVG text is
# text: the reader can search and copy it).
CHARTS = """Array.from(document.querySelectorAll("figure.chart svg")).map(svg => {
  const box = svg.getBoundingClientRect();
  return {width: box.width, height: box.height,
          text: Array.from(svg.querySelectorAll("text")).map(t => t.textContent).join(" ")};
})"""
