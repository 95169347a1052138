"""The HTML report in a real headless browser (Debian's chromium over DevTools): it loads
with no console error and no network request, every image decodes, and a hostile
hypothesis shows as text and runs nothing."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from browser import CHARTS, WIDTHS, Browser, chromium_path, visual_text
from test_report_fixtures import LONG, RLO, add_events, steps

from ledger.demo import run_demo

XSS = "<script>alert('script ran')</script><img src=x onerror=alert('handler ran')>"


@pytest.fixture(scope="module")
def chromium() -> str:
    path = chromium_path()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have chromium: .ci/run installs Debian's package")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_the_demo_report_in_a_browser(chromium: str, tmp_path: Path) -> None:
    result = run_demo(tmp_path / "demo", say=lambda _: None)
    import ledger

    with ledger.open(result.db, create=False) as lg:
        lg.add_hypothesis(XSS)
        report = lg.write_report(tmp_path / "report.html")

    with Browser(chromium) as browser:
        page = browser.load(report, evaluate={"charts": CHARTS})

    assert page.console_errors == []
    assert page.dialogs == []  # neither the <script> nor the onerror handler ran
    fetched = [u for u in page.requests if not u.startswith(("data:", report.as_uri()))]
    assert fetched == []  # nothing over the network, nothing else from disk
    charts = page.values["charts"]
    assert len(charts) == 5  # marathon, throughput, loss, step times, GPUs: inline SVG
    for chart in charts:
        assert chart["width"] > 0 and chart["height"] > 0 and chart["text"].strip()
    assert "effective throughput" in charts[0]["text"]
    assert XSS in page.text  # the hypothesis is shown as the text it is
    assert "eager_dynamiccopy" in page.text and "DRIFT" in page.text
    (tmp_path / "report.png").write_bytes(page.screenshot_png)
    assert page.screenshot_png.startswith(b"\x89PNG")


@pytest.fixture
def hostile_report(lg, tmp_path: Path) -> Path:
    """A report whose latest attempt has U+202E in its name and whose other has 3,000
    characters, with an OOM and a recompile on the cards."""
    lg.set_baseline(14200, "tok/s")
    lg.add_steps("reference", steps(14200, seed=1, wall_from=1.7e9), throughput_unit="tok/s")
    lg.add_steps(LONG, steps(12000, seed=2, wall_from=1.7e9 + 5000), throughput_unit="tok/s")
    lg.set_fate(LONG, "oom", f"CUDA out of memory {RLO}reversed")
    add_events(lg, LONG, [{"kind": "recompile", "text": f"function {RLO}f", "step": 40}])
    # the widest figures a table cell holds: a run in another unit or scale
    lg.add_steps("per_job", steps(14200 * 11879.6, seed=4, wall_from=1.7e9 + 7000))
    name = f"evil{RLO}attempt"
    lg.add_steps(name, steps(14150, seed=3, wall_from=1.7e9 + 9000), throughput_unit="tok/s")
    return Path(lg.write_report(tmp_path / "hostile.html"))


@pytest.mark.slow
def test_bidi_controls_reorder_no_verdict_line(chromium: str, hostile_report: Path) -> None:
    with Browser(chromium) as browser:
        page = browser.load(hostile_report, evaluate={"verdicts": visual_text(".verdict li")})
    assert page.console_errors == []
    verdicts = page.values["verdicts"]
    (latest,) = [v for v in verdicts if v.startswith("Latest attempt:")]
    # as drawn, left to right: the name, its fate, then the figures in reading order
    assert re.fullmatch(
        r"Latest attempt: evilattempt ?unknown at 1\d\.\dK tok/s effective"
        r"(?: \(typical step 1\d\.\dK\))?, \d+\.\d % of the baseline "
        r"\((not )?recovered\)\.",
        latest,
    ), latest
    compared = [v for v in verdicts if v.startswith("evilattempt")]
    assert compared and re.search(r"\(CI -?\d+\.\d", compared[0]), compared
    assert not [v for v in verdicts if "enilesab" in v or "desrever" in v]  # nothing mirrored


@pytest.mark.slow
@pytest.mark.parametrize("width", [1400, 900])
def test_a_long_name_keeps_every_table_on_screen(
    chromium: str, hostile_report: Path, width: int, tmp_path: Path
) -> None:
    with Browser(chromium) as browser:
        page = browser.load(
            hostile_report, width=width, evaluate={"widths": WIDTHS, "charts": CHARTS}
        )
    widths = page.values["widths"]
    assert widths["page"] <= widths["viewport"], widths  # no sideways scrolling
    assert widths["tables"] and max(widths["tables"]) <= widths["body"] + 1, widths
    for chart in page.values["charts"]:  # the figures did not collapse
        assert chart["width"] >= min(width - 120, 1000) and chart["height"] >= 200, chart
    (tmp_path / f"hostile-{width}.png").write_bytes(page.screenshot_png)


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_the_effective_figure_in_a_browser(chromium: str, tmp_path: Path) -> None:
    """The stall, spike and killed runs as a reader sees them: every chart's words are
    the effective figures, the killed run is not recovered, the names are whole; the
    screenshot is kept beside the test's files."""
    import report_runs as rr

    import ledger

    logs = rr.write_logs(tmp_path)
    with ledger.open(tmp_path / "ledger.db") as lg:
        lg.set_baseline(rr.LEVEL, "tok/s")
        for name in reversed(rr.RAN):
            lg.ingest(logs[name])
        analyses = {a.name: a.analysis for a in lg.report_data().attempts}
        report = Path(lg.write_report(tmp_path / "effective.html"))
    with Browser(chromium) as browser:
        page = browser.load(
            report,
            width=1300,
            evaluate={
                "charts": CHARTS,
                "verdicts": visual_text(".verdict li"),
                "names": "Array.from(document.querySelectorAll('table')[0]"
                ".querySelectorAll('tbody tr td:first-child')).map(td => td.innerText)",
            },
        )
    shot = tmp_path / "screenshots" / "effective-1300.png"
    shot.parent.mkdir()
    shot.write_bytes(page.screenshot_png)
    assert page.console_errors == [] and page.dialogs == []
    assert [u for u in page.requests if not u.startswith(("data:", report.as_uri()))] == []
    marathon, panels = page.values["charts"][0]["text"], page.values["charts"][1]["text"]
    for name in ("eager_stall", "eager_spikes"):
        a = analyses[name]
        assert a is not None
        shown = f"{a.judged_effective / 1000:.1f}"
        assert re.search(re.escape(shown.rstrip("0").rstrip(".")) + r"\d*K", marathon), marathon
        assert re.search(rf"{name} \(finished\): [\d.]+K tok/s effective \(typical", panels)
    (latest,) = [v for v in page.values["verdicts"] if v.startswith("Latest attempt:")]
    assert "killed: not a recovery" in latest and "(recovered)" not in latest
    # the table lists them as they ran, each name on one line (never broken in a word)
    assert page.values["names"] == list(rr.RAN)
