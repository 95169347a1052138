"""`ledger serve` in a real headless browser (Debian's chromium over DevTools): every page
loads with no console error and fetches nothing from another origin; the figures on the
pages are `compare --json`'s; hostile text stays text; the charts get no more points than
pixels; a run ingested while the page is open appears, and a watched run shows its
decision; the token is enforced. With LEDGER_SERVE_SHOTS=FOLDER the demo's pages are
saved there as PNG (docs/images/serve/ is made that way)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from browser import Browser, PageReport, chromium_path
from test_report_fixtures import RLO, add_events, steps
from test_serve import origin, serving

pytest.importorskip("starlette")

XSS = "<script>alert('script ran')</script><img src=x onerror=alert('handler ran')>"
HOSTILE_RUN = f"evil{RLO}<img src=x onerror=alert(1)>"
TRAINER = [sys.executable, "-m", "ledger.demo.trainer"]


@pytest.fixture(scope="module")
def chromium() -> str:
    path = chromium_path()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have chromium: .ci/run installs Debian's package")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


class Tab:
    """One tab of `browser` kept open across pages (the protocol plumbing is
    tests/browser.py's): open a page, wait for a condition, evaluate, take a screenshot.
    `report` collects console errors, requests and dialogs of every page it opened."""

    def __init__(self, browser: Browser, width: int = 1400, height: int = 1000) -> None:
        import websocket

        new_tab = f"http://127.0.0.1:{browser.port}/json/new?about:blank"
        request = urllib.request.Request(new_tab, method="PUT")
        with urllib.request.urlopen(request, timeout=10) as response:
            target = json.load(response)
        self.browser = browser
        self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30)
        self.report = PageReport()
        for method in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            self.call(method)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width, height=height, deviceScaleFactor=1, mobile=False,
        )  # fmt: skip

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser._call(self.ws, self.report, method, **params)

    def open(self, url: str, until: str, timeout: float = 60) -> float:
        """Navigate to `url` and wait until the expression `until` is truthy; the seconds."""
        start = time.monotonic()
        self.call("Page.navigate", url=url)
        self.wait(until, timeout)
        return time.monotonic() - start

    def wait(self, expression: str, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            self.browser._drain(self.ws, self.report, timeout=0.05)
        raise TimeoutError(f"{expression} within {timeout} s: {self.report.console_errors}")

    def evaluate(self, expression: str) -> Any:
        return self.browser._evaluate(self.ws, self.report, expression)

    def settle(self, seconds: float = 0.5) -> None:
        self.browser._drain(self.ws, self.report, timeout=seconds)

    def text(self) -> str:
        return str(self.evaluate("document.body.innerText") or "")

    def screenshot(self, path: Path) -> None:
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        self.ws.close()

    def __enter__(self) -> Tab:
        return self

    def __exit__(self, *exc: object) -> None:
        # closed even when an assertion failed: a socket left open is reported as an
        # unraisable warning in whichever later test collects it
        self.close()


def drawn(part: str, at_least: int = 1) -> str:
    count = f"(window.ledgerServe.renders[{json.dumps(part)}] || 0)"
    return f"window.ledgerServe && {count} >= {at_least}"


def cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    code = "import sys\nfrom ledger.cli import main\nsys.argv[0] = 'ledger'\nmain()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
        check=False,
    )  # fmt: skip


def only_from(report: PageReport, base: str) -> list[str]:
    """Requests that went anywhere but the server."""
    return [u for u in report.requests if not u.startswith((base, "data:", "about:"))]


@pytest.fixture
def hostile(lg: Any) -> Any:
    lg.set_baseline(14200.0, "tok/s")
    lg.add_steps("reference", steps(14200, n=600, seed=1, loss=True), throughput_unit="tok/s")
    lg.add_steps("slower", steps(12000, n=600, seed=2, loss=True), throughput_unit="tok/s")
    lg.add_steps(HOSTILE_RUN, steps(14100, n=600, seed=3), throughput_unit="tok/s")
    lg.record_fix(XSS, f"summary {XSS}", run=HOSTILE_RUN)
    lg.set_fate(HOSTILE_RUN, "crashed", f"{RLO}reason mirrored {XSS}")
    add_events(
        lg, HOSTILE_RUN, [{"kind": "recompile", "text": f"recompiled {XSS}", "step": 40, "line": 7}]
    )
    return lg


@pytest.mark.slow
def test_pages_show_compare_figures_and_hostile_text_as_text(
    chromium: str, hostile: Any, db_url: str
) -> None:
    done = cli("--db", db_url, "compare", "reference", "slower", "--json")
    assert done.returncode == 0, done.stderr
    expected = json.loads(done.stdout)
    words = cli("--db", db_url, "compare", "reference", "slower")
    assert words.returncode == 0, words.stderr
    with serving(db_url) as url, Browser(chromium) as browser:
        base = origin(url)
        with Tab(browser) as tab:
            tab.open(base + "/", drawn("investigation"))
            rows = tab.evaluate(
                "Array.from(document.querySelectorAll('table.attempts tbody tr')).map(tr => ({"
                "run: tr.querySelector('td.name').innerText,"
                "effective: Number(tr.querySelector('td.effective').dataset.value),"
                "of: Number(tr.querySelector('td.of-baseline').dataset.value),"
                "verdict: tr.querySelector('td.verdict').innerText,"
                "summary: tr.querySelector('td.verdict').title}))"
            )
            by_run = {r["run"]: r for r in rows}
            assert list(by_run) == ["reference", "slower", HOSTILE_RUN]  # the order they ran
            for run in expected["runs"]:
                judged = (run["regime"] or run)["effective"]
                assert by_run[run["run"]]["effective"] == judged
                assert by_run[run["run"]]["of"] == run["vs_baseline_pct"]
            (pair,) = expected["comparisons"]
            assert by_run["slower"]["verdict"] == pair["verdict"] == "regression"
            assert by_run["slower"]["summary"] == pair["summary"]
            assert by_run["reference"]["verdict"] == "reference"
            text = tab.text()
            assert XSS in text and HOSTILE_RUN in text  # the hypothesis and the name, as text

            tab.open(base + "/compare?runs=reference,slower", drawn("compare"))
            sentence = tab.evaluate("document.querySelector('li.sentence').innerText")
            assert sentence in words.stdout.splitlines()  # word for word what compare prints
            delta = tab.evaluate("Number(document.querySelector('td.delta').dataset.value)")
            assert delta == pair["delta_pct"]
            checked = tab.evaluate(
                "Array.from(document.querySelectorAll('input[type=checkbox]:checked'))"
                ".map(b => b.value)"
            )
            assert checked == ["reference", "slower"]

            tab.open(f"{base}/run?run={quote(HOSTILE_RUN)}", drawn("run"))
            assert (
                tab.evaluate("document.getElementById('title').innerText") == f"Run {HOSTILE_RUN}"
            )
            text = tab.text()
            assert f"recompiled {XSS}" in text and f"summary {XSS}" in text
            assert tab.evaluate("document.querySelectorAll('img').length") == 0  # no <img> made
            tab.settle()
            assert tab.report.console_errors == []
            assert tab.report.dialogs == []  # no script from the ledger ran
            assert only_from(tab.report, base) == []


@pytest.mark.slow
def test_the_chart_gets_no_more_points_than_pixels_and_keeps_the_stall(
    chromium: str, lg: Any, db_url: str
) -> None:
    n, stall = 60_000, 31_337
    rows = [
        {"step": i, "throughput": 50.0 if i == stall else 1000.0 + (i % 7), "step_time_s": 0.1}
        for i in range(n)
    ]
    lg.add_steps("long", rows, throughput_unit="tok/s")
    with serving(db_url) as url, Browser(chromium) as browser:
        base = origin(url)
        with Tab(browser, width=1200) as tab:
            tab.open(f"{base}/run?run=long", drawn("series"))
            served = tab.evaluate("window.ledgerServe.points.series")
            assert served["rows"] == n and 0 < served["buckets"] <= served["width"] <= 1200
            # what the throughput chart holds: two values (min, max) a bucket, the stall among them
            held = tab.evaluate(
                "(() => { const d = L.charts.throughput.plot.data;"
                " return {x: d[0].length, low: Math.min(...d[2].filter(v => v !== null))}; })()"
            )
            assert held["x"] == served["buckets"] and 2 * held["x"] <= 2 * served["width"]
            assert held["low"] == 50.0
            # once the analysis has marked the charts (they are drawn again), the page still
            # shows the whole run: uPlot fits its x axis to the buckets' first steps, which end
            # before the run's last step, and that fit is no zoom of the reader's
            tab.wait(drawn("run"))
            tab.settle(1.5)
            assert tab.evaluate("location.search") == "?run=long"
            assert tab.evaluate("window.ledgerServe.points.series.rows") == n
            # a zoom is kept in the address, and read again at full resolution
            tab.open(f"{base}/run?run=long&from=31300&to=31400", drawn("series"))
            zoomed = tab.evaluate("L.charts.throughput.plot.data[0]")
            assert zoomed[0] == 31300 and zoomed[-1] == 31400 and len(zoomed) == 101
            tab.wait(drawn("run"))
            tab.settle()
            assert tab.report.console_errors == []


@pytest.mark.slow
def test_a_run_ingested_while_the_page_is_open_appears_and_its_watch_decision_shows(
    chromium: str, db_url: str, tmp_path: Path
) -> None:
    assert cli("--db", db_url, "init", "--baseline", "14200", "--unit", "tok/s").returncode == 0
    first = tmp_path / "train_first.log"
    pace = ["--step-time", "0.0005", "--load-time", "0.1", "--noise", "0.01"]
    subprocess.run([*TRAINER, "--log", str(first), "--steps", "400", *pace], check=True)
    assert cli("--db", db_url, "ingest", str(first)).returncode == 0
    with serving(db_url) as url, Browser(chromium) as browser:
        base = origin(url)
        with Tab(browser) as tab:
            tab.open(base + "/", drawn("investigation"))
            assert "first" in tab.text() and "slow" not in tab.text()
            log = tmp_path / "train_slow.log"
            slow = ["--level", "10650", "--steps", "5000", "--step-time", "0.003", "--ending", "ok"]
            trainer = subprocess.Popen([*TRAINER, "--log", str(log), *slow])
            try:
                watch = subprocess.Popen(
                    [sys.executable, "-m", "ledger", "--db", db_url, "watch", "slow", "--log",
                     str(log), "--interval", "0.1", "--json"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                )  # fmt: skip
                # the run appears without a reload (the page polls every second)
                tab.wait("Array.from(document.querySelectorAll('td.name')).some("
                         "td => td.innerText === 'slow')", timeout=60)  # fmt: skip
                out, err = watch.communicate(timeout=180)
            finally:
                if trainer.poll() is None:
                    trainer.kill()
                trainer.wait()
            assert watch.returncode == 1, err  # a regression against the 14.2K baseline
            decided = json.loads(out)
            tab.open(base + "/run?run=slow", drawn("run"))
            decision = tab.wait("document.querySelector('p.decision') && "
                                "document.querySelector('p.decision').innerText")  # fmt: skip
            assert decision.startswith("Watch decision: regression")
            assert f"at step {decided['decided_at_step']:,}" in decision
            tab.settle()
            assert tab.report.console_errors == []


@pytest.mark.slow
def test_the_token_in_a_browser(chromium: str, lg: Any, db_url: str) -> None:
    lg.add_steps("ref", steps(1000.0, n=100), throughput_unit="tok/s")
    with serving(db_url, "--token", "t0ken") as url, Browser(chromium) as browser:
        base = origin(url)
        with Tab(browser) as tab:
            tab.call("Page.navigate", url=base + "/")
            tab.wait("document.body && document.body.innerText.includes('token is needed')")
            assert "ref" not in tab.text()
            tab.settle(1.0)
            assert tab.report.console_errors  # the 401 (and the icon's) is logged as a failed load
            tab.report.console_errors.clear()
            tab.open(url, drawn("investigation"))  # ?token= once: a cookie carries it on
            tab.open(base + "/run?run=ref", drawn("run"))  # no token in this address
            tab.settle()
            assert tab.report.console_errors == []


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_the_demo_investigation_page_by_page(chromium: str, tmp_path: Path) -> None:
    """Every page of the demo (deploys, drift, probes, events, why findings) with no
    console error; the screenshots of docs/serve.md come from here."""
    from ledger.demo import run_demo

    demo = run_demo(tmp_path / "demo", say=lambda _: None)
    shots = tmp_path / "shots"
    shots.mkdir()
    with serving(str(demo.db)) as url, Browser(chromium) as browser:
        base = origin(url)
        with Tab(browser, width=1400, height=900) as tab:
            tab.open(base + "/", drawn("investigation"))
            runs = tab.evaluate(
                "Array.from(document.querySelectorAll('td.name')).map(t => t.innerText)"
            )
            assert len(runs) == 6 and "DRIFT" in tab.text()
            tab.screenshot(shots / "investigation.png")
            for run in runs:
                tab.open(f"{base}/run?run={quote(run)}", drawn("run"))
            tab.open(f"{base}/run?run=eager_dynamiccopy", drawn("run"))
            assert "Why: the likely causes" in tab.text() and "DRIFT" in tab.text()
            tab.screenshot(shots / "run.png")
            tab.open(f"{base}/compare?runs=eager_unpadded,eager_dynamiccopy", drawn("compare"))
            assert "faster than eager_unpadded" in tab.text()
            tab.screenshot(shots / "compare.png")
            tab.settle()
            assert tab.report.console_errors == []
            assert only_from(tab.report, base) == []
    for shot in shots.iterdir():
        assert shot.read_bytes().startswith(b"\x89PNG")
    keep = os.environ.get("LEDGER_SERVE_SHOTS")
    if keep:
        for shot in shots.iterdir():
            shutil.copy(shot, Path(keep) / shot.name)
