"""One figure per run everywhere: the effective throughput the verdict uses.

The ledger (tests/report_runs.py) holds a run with a stall every 50 steps and one with
recompile spikes every 12th step, whose medians equal the baseline; a run killed at the
baseline; the logs ingested out of the order they ran. Every figure printed or drawn for
them — HTML text, SVG labels, PDF text, the `--plot` legend — is the effective figure,
the killed run is never "recovered", and the runs are listed in the order they ran.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import report_runs as rr

from ledger.model.analysis import RunAnalysis
from ledger.model.report import RAN_FIRST_STEP
from ledger.usecases.ledger import Ledger


@pytest.fixture(scope="module")
def ledger_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import ledger

    folder = tmp_path_factory.mktemp("effective")
    logs = rr.write_logs(folder)
    with ledger.open(folder / "ledger.db") as lg:
        lg.set_baseline(rr.LEVEL, "tok/s")
        for name in ("eager_spikes", "eager_killed", "baseline", "eager_stall"):  # not as ran
            lg.ingest(logs[name])
    return folder


@pytest.fixture(scope="module")
def opened(ledger_dir: Path) -> Iterator[Ledger]:
    import ledger

    with ledger.open(ledger_dir / "ledger.db", create=False) as lg:
        yield lg


@pytest.fixture(scope="module")
def analyses(opened: Ledger) -> dict[str, RunAnalysis]:
    found = {a.name: a.analysis for a in opened.report_data().attempts}
    return {name: a for name, a in found.items() if a is not None}


FIGURE = r"(\d+(?:\.\d+)?)K"  # a figure as the report writes it: '12.8K', '11K'


def _near(text: str, value: float) -> bool:
    """True when `text` (a figure like '12.83K') is `value` to the digits it shows."""
    shown = float(text.rstrip("K")) * 1000
    digits = len(text.rstrip("K").replace(".", "").lstrip("0"))
    return abs(shown - value) <= 0.5 * 10 ** (len(str(int(shown))) - digits) + 1e-6


def _says(pattern: str, text: str, value: float) -> bool:
    """True when some match of `pattern` (its FIGURE group) in `text` shows `value`."""
    return any(_near(m.group(1), value) for m in re.finditer(pattern, text))


def test_the_medians_hide_what_the_effective_figure_shows(
    analyses: dict[str, RunAnalysis],
) -> None:
    for name in ("eager_stall", "eager_spikes"):
        a = analyses[name]
        assert a.median == pytest.approx(rr.LEVEL, rel=0.01)  # the typical step is fine
        assert a.judged_effective == pytest.approx(
            rr.LEVEL * rr.EFFECTIVE_PCT[name] / 100, rel=0.02
        )


def test_runs_ingested_out_of_order_are_listed_in_the_order_they_ran(opened: Ledger) -> None:
    data = opened.report_data()
    assert [a.name for a in data.attempts] == list(rr.RAN)
    assert all(a.ran_from == RAN_FIRST_STEP for a in data.attempts)  # and it says how it knows
    compared = [a.comparison.a for a in data.attempts if a.comparison is not None]
    assert compared == ["baseline"] * 3  # the reference is the first that ran


def test_the_html_text_and_its_svg_say_the_effective_figure(
    opened, analyses, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    page = opened.write_report(tmp_path / "r.html").read_text()
    headline = page.split('<div class="verdict">')[1].split("</div>")[0]
    table = page.split("<h2>Attempts")[1].split("</table>")[0].replace("<wbr>", "")
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    texts = [" ".join(re.findall(r"<text[^>]*>([^<]*)</text>", s)) for s in svgs]
    marathon, panels = texts[0], texts[1]
    for name in ("eager_stall", "eager_spikes"):
        effective = analyses[name].judged_effective
        row = table.split(f"<bdi>{name}</bdi>")[1].split("</tr>")[0]
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        assert _says(rf"^{FIGURE}$", cells[3], effective), cells  # the 'effective' column
        assert _says(rf"(?<![\w.]){FIGURE}(?= )", marathon + " ", effective), marathon
        assert _says(rf"{name} \(finished\): {FIGURE} tok/s effective", panels, effective)
        assert re.search(r"stall steps, \d+\.\d % of the wall time", panels)
    assert "typical step (median)" in table and "effective" in marathon
    killed = re.search(r"Latest attempt: (.*?)</li>", headline)
    assert killed and "eager_killed" in killed.group(1)
    assert "killed: not a recovery" in killed.group(1) and 'class="ok"' not in killed.group(1)
    assert ">recovered<" not in page  # no run here is a finished one back at the baseline


def test_the_pdf_is_the_report_as_read_with_the_effective_figures(
    opened, analyses, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from ledger.report.pages import text_pages

    data = opened.report_data()
    words = " ".join(t.get_text() for page in text_pages(data) for t in page.texts)
    words = " ".join(words.split())
    for name in ("eager_stall", "eager_spikes"):
        effective = analyses[name].judged_effective
        assert _says(rf"throughput: {FIGURE} effective", words, effective), name
    assert "Why is it slower than baseline?" in words  # the why cards are in the PDF too
    assert "killed: not a recovery" in words and "(recovered)" not in words
    pdf = opened.write_report(tmp_path / "r.pdf")
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed: the page texts were checked")
    extracted = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    flat = " ".join(extracted.split())
    assert "Why is it slower than baseline?" in flat
    for name in ("eager_stall", "eager_spikes"):
        assert _says(rf"{FIGURE} effective", flat, analyses[name].judged_effective), name


def test_the_plot_legend_and_title_say_the_effective_figure(
    opened, analyses, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "cmp.svg"
    report = opened.compare(["baseline", "eager_stall", "eager_spikes", "eager_killed"], plot=out)
    assert report.plot == str(out)
    svg = out.read_text()
    labels = " ".join(re.findall(r"<!-- (.*?) -->", svg))  # matplotlib names each text
    for name in ("eager_stall", "eager_spikes"):
        effective = analyses[name].judged_effective
        assert _says(rf"{name}: {FIGURE} effective", labels, effective), labels
    assert "eager_killed (killed):" in labels


def test_compare_plot_prints_the_path_it_wrote(ledger_dir: Path, tmp_path: Path) -> None:
    from helpers import run_cli

    out = tmp_path / "deep" / "cmp.png"
    done = run_cli("--db", str(ledger_dir / "ledger.db"), "compare", "baseline", "eager_killed",
                   "--plot", str(out))  # fmt: skip
    assert done.exit_code == 0, done.output
    assert f"plot written to {out}" in done.output and out.exists()
    assert "(killed: not a recovery)" in done.output
