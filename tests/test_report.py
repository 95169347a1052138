"""`ledger report`: the HTML is self-contained and escaped; PNG and PDF carry the figures."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import pytest
from helpers import run_cli, run_json

XSS = "<script>window.__pwned = 1</script><img src=x onerror=alert(1)>"


def _steps(level: float, n: int = 400, seed: int = 0) -> list[dict]:
    import numpy as np

    rng = np.random.default_rng(seed)
    values = level * (1 + rng.normal(0, 0.01, n))
    values[:20] *= np.linspace(0.3, 0.95, 20)  # warm-up
    return [
        {"step": i + 1, "throughput": float(v), "step_time_s": 65536 / float(v)}
        for i, v in enumerate(values)
    ]


@pytest.fixture
def investigation(lg) -> object:
    lg.set_baseline(14200, "tok/s")
    lg.add_steps("reference", _steps(14200, seed=1), throughput_unit="tok/s")
    lg.record_fix(XSS, f"summary {XSS}", diff=f"+{XSS}\n", run="attempt")
    lg.deploy("attempt", "relaunch", ["echo", XSS])  # the relaunch, then its steps
    lg.add_steps("attempt", _steps(11000, seed=2), throughput_unit="tok/s")
    lg.set_fate("attempt", "oom", "CUDA out of memory. Tried to allocate 4.50 GiB")
    lg.ensure_run("never_started")
    return lg


def test_html_is_self_contained_and_escaped(investigation, tmp_path: Path) -> None:
    out = investigation.write_report(tmp_path / "r.html")
    page = out.read_text()
    assert "<script" not in page.lower().replace("&lt;script", "")
    assert "&lt;script&gt;window.__pwned" in page and "onerror=alert(1)&gt;" in page
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp and "default-src 'none'" in html.unescape(csp.group(1))
    assert not re.search(r"""(?:src|href)=["']?(?:https?:|//)""", page)
    charts = re.findall(r'<figure class="chart"[^>]*>\s*(<svg.*?</svg>)', page, re.S)
    assert len(charts) >= 3  # inline SVG, its words as text
    for chart in charts:
        assert "<text" in chart and "<script" not in chart
    for data in re.findall(r'href="data:image/png;base64,([^"]+)"', page):  # rasterised dots
        assert base64.b64decode(data).startswith(b"\x89PNG\r\n\x1a\n")
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))  # the figures' ids do not collide on one page
    assert "never_started" in page and "no steps recorded" in page  # shown, not dropped
    assert "oom" in page and "Tried to allocate" in page


def test_png_and_pdf(investigation, tmp_path: Path) -> None:
    png = investigation.write_report(tmp_path / "r.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    from PIL import Image

    figures = investigation.report_data()
    from ledger.report.figures import overview_figures
    from ledger.report.pages import heading_figure
    from ledger.report.render import DPI

    parts = [heading_figure(figures), *overview_figures(figures).values()]
    expected = sum(round(f.get_figheight() * DPI) for f in parts)
    with Image.open(tmp_path / "r.png") as image:
        assert abs(image.height - expected) <= 6  # the heading, then every figure, stacked
    pdf = investigation.write_report(tmp_path / "r.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page\n") + pdf.count(b"/Type /Page ") >= 3


def test_cli_report(investigation, tmp_path: Path) -> None:
    result = run_json("report", "--out", str(tmp_path / "x" / "report.html"))
    assert Path(result["out"]).is_file()
    only = run_json("report", "--runs", "reference", "--out", str(tmp_path / "one.html"))
    assert (
        "attempt" not in Path(only["out"]).read_text().split("<h2>Attempts")[1].split("</table>")[0]
    )
    bad = run_cli("report", "--out", str(tmp_path / "r.docx"))
    assert bad.exit_code == 2 and "Error:" in bad.stderr and ".html, .png or .pdf" in bad.stderr
    missing = run_cli("report", "--runs", "nope", "--out", str(tmp_path / "r.html"))
    assert missing.exit_code == 1 and "no run 'nope'" in missing.stderr


def test_a_ledger_with_no_runs_still_reports(lg, tmp_path: Path) -> None:
    page = lg.write_report(tmp_path / "empty.html").read_text()
    assert page.startswith("<!doctype html>") and "0 attempts" in page


def test_report_reads_one_run_per_attempt(investigation) -> None:
    data = investigation.report_data()
    names = [a.name for a in data.attempts]
    assert names == ["reference", "attempt", "never_started"]
    reference, attempt, never = data.attempts
    assert reference.analysis is not None and reference.comparison is None
    assert attempt.comparison is not None and attempt.comparison.verdict == "regression"
    assert never.analysis is None and never.why_not_analysed == "no steps recorded"
    assert attempt.step_times_s is not None and len(attempt.step_times_s) > 300


def _formats_in_help(*command: str, option: str) -> set[str]:
    """The file suffixes the help of `option` names."""
    text = " ".join(run_cli(*command, "--help").stdout.split("Options:", 1)[1].split())
    found = text.split(f"{option} FILE", 1)[1].split(" --", 1)[0]
    return set(re.findall(r"\.(?:[a-z]{3,4})\b", found))


def test_the_formats_the_help_lists_are_the_ones_accepted(investigation, tmp_path: Path) -> None:
    from ledger.report.plots import PLOT_FORMATS
    from ledger.report.render import FORMATS

    report_formats = _formats_in_help("report", option="--out")
    plot_formats = _formats_in_help("compare", option="--plot")
    assert report_formats == set(FORMATS) == {".html", ".png", ".pdf"}
    assert plot_formats == set(PLOT_FORMATS) == {".png", ".pdf", ".svg"}
    for suffix in report_formats:
        assert run_cli("report", "--out", str(tmp_path / f"r{suffix}")).exit_code == 0
    for suffix in plot_formats:
        result = run_cli("compare", "reference", "--plot", str(tmp_path / f"c{suffix}"))
        assert result.exit_code == 0, result.stderr
    for suffix in (".svg", ".jpg", ".htm"):
        refused = run_cli("report", "--out", str(tmp_path / f"r{suffix}"))
        assert refused.exit_code == 2 and ".html, .png or .pdf" in refused.stderr
    for suffix in (".html", ".jpg"):
        refused = run_cli("compare", "reference", "--plot", str(tmp_path / f"c{suffix}"))
        assert refused.exit_code == 2 and ".png, .pdf or .svg" in refused.stderr


def test_report_and_plot_create_a_missing_folder_alike(investigation, tmp_path: Path) -> None:
    report = run_cli("report", "--out", str(tmp_path / "new" / "deeper" / "r.pdf"))
    plot = run_cli("compare", "reference", "--plot", str(tmp_path / "other" / "deeper" / "c.png"))
    assert (report.exit_code, plot.exit_code) == (0, 0), (report.stderr, plot.stderr)
    assert (tmp_path / "new" / "deeper" / "r.pdf").read_bytes().startswith(b"%PDF")
    assert (tmp_path / "other" / "deeper" / "c.png").read_bytes().startswith(b"\x89PNG")
    # where a folder cannot be made (a file stands in its place), both say so alike
    (tmp_path / "afile").write_text("x")
    report = run_cli("report", "--out", str(tmp_path / "afile" / "r.html"))
    plot = run_cli("compare", "reference", "--plot", str(tmp_path / "afile" / "c.png"))
    for result in (report, plot):
        assert result.exit_code == 1 and result.stderr.startswith("Error: cannot write")
