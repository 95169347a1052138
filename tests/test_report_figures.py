"""The report as a person reads it (issue 15, item 18): what is off the axis is marked, loss
is drawn, memory stands against the card's capacity, legends cover no data, intervals print
apart, unmeasured runs are not drawn as measured, the PDF is a document and the PNG has a
title and the verdict."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from test_report_fixtures import add_probe_gpus, figure_texts, steps


@pytest.fixture
def reported(lg) -> object:
    lg.set_baseline(14200, "tok/s")
    lg.add_steps(
        "reference", steps(14200, seed=1, loss=True, memory_mib=60000), throughput_unit="tok/s"
    )
    lg.add_steps("attempt", steps(11000, seed=2, loss=True), throughput_unit="tok/s")
    lg.set_fate("attempt", "oom", "CUDA out of memory")
    add_probe_gpus(lg, "attempt", [78000, 78300, 78600, 78900], 81559)
    lg.ensure_run("never_started")
    return lg


def _figures(lg: object) -> dict:
    from ledger.report.figures import overview_figures

    return overview_figures(lg.report_data())  # type: ignore[attr-defined]


def test_steps_below_the_axis_are_marked_and_counted(reported) -> None:
    figure = _figures(reported)["throughput"]
    data = reported.report_data()
    for ax, attempt in zip(figure.axes, data.analysed, strict=False):
        bottom, _ = ax.get_ylim()
        below = int((np.asarray(attempt.analysis.values) < bottom).sum())
        assert below >= 5  # the start of the warm-up, from 30 % of the level
        assert f"▼ {below:,} below the axis" in ax.get_xlabel()


def test_a_loss_plot_with_a_line_per_run(reported) -> None:
    loss = _figures(reported)["loss"]
    labels = [line.get_label() for line in loss.axes[0].get_lines()]
    assert labels == ["\u2068reference\u2069 (unknown)", "\u2068attempt\u2069 (oom)"]  # isolated


def test_gpu_memory_against_the_cards_capacity(reported) -> None:
    ax = _figures(reported)["gpus"].axes[0]
    capacity = 81559 / 1024
    lines = [line for line in ax.get_lines() if line.get_label().startswith("capacity")]
    assert len(lines) == 1 and abs(lines[0].get_ydata()[0] - round(capacity, 1)) < 1e-9
    assert "NVIDIA H100 80GB HBM3" in lines[0].get_label()
    assert ax.get_ylim()[1] >= capacity
    peak = [c for c in ax.collections if c.get_offsets()[0, 1] == pytest.approx(60000 / 1024)]
    assert peak  # the most memory the reference's steps recorded


def test_no_legend_covers_data(reported) -> None:
    for name, figure in _figures(reported).items():
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        legends = list(figure.legends) + [ax.get_legend() for ax in figure.axes]
        plotted = [ax.get_window_extent(renderer) for ax in figure.axes if ax.get_visible()]
        for legend in (lg for lg in legends if lg is not None):
            box = legend.get_window_extent(renderer)
            assert not [p for p in plotted if p.overlaps(box)], name


def test_intervals_print_at_a_precision_that_separates_them() -> None:
    from ledger.report.numbers import interval_digits, interval_text

    close = [(10931.0, 10951.0), (10932.0, 10952.0), (14180.0, 14210.0)]
    digits = interval_digits(close)
    printed = [interval_text(i, digits) for i in close]
    assert len(set(printed)) == 3
    for text in printed:
        low, high = text.split("–")
        assert low != high
    assert interval_digits([(10000.0, 12000.0)]) == 3  # no more digits than needed
    assert interval_text((10931.0, 10951.0), 3) == "10.9K–11K"  # what 3 digits would show


def test_the_table_tells_close_intervals_apart(lg, tmp_path: Path) -> None:
    lg.add_steps("a", steps(10940, seed=1, noise=0.002), throughput_unit="tok/s")
    lg.add_steps("b", steps(10960, seed=2, noise=0.002), throughput_unit="tok/s")
    page = lg.write_report(tmp_path / "r.html").read_text()
    table = page.split("<h2>Attempts")[1].split("</table>")[0]
    cells = re.findall(r'<td class="num">([\d.]+K–<wbr>[\d.]+K)</td>', table)
    assert len(cells) == 2 and cells[0] != cells[1]
    for cell in cells:
        low, high = cell.split("–<wbr>")
        assert low != high


def test_a_run_with_no_steps_is_not_drawn_as_measured(reported) -> None:
    ax = _figures(reported)["marathon"].axes[0]
    data = reported.report_data()
    x = [a.name for a in data.attempts].index("never_started")
    in_data = [
        c for c in ax.collections
        if c.get_transform() == ax.transData and np.any(np.isclose(c.get_offsets()[:, 0], x))
    ]  # fmt: skip
    assert in_data == []
    marks = [c for c in ax.collections if c.get_gid() == "unmeasured"]
    assert len(marks) == 1 and marks[0].get_offsets()[0, 0] == x
    assert "no steps" in [t.get_text() for t in ax.texts]


def test_the_pdf_is_a_document_on_pages_of_one_size(reported, tmp_path: Path) -> None:
    from ledger.report.pages import text_pages

    pdf = reported.write_report(tmp_path / "r.pdf").read_bytes()
    boxes = re.findall(rb"/MediaBox \[\s*([\d. ]+?)\s*\]", pdf)
    assert len(boxes) >= 6 and len(set(boxes)) == 1
    width, height = (float(v) for v in boxes[0].split()[2:])
    assert (round(width), round(height)) == (842, 595)  # A4 landscape
    first = " ".join(figure_texts(text_pages(reported.report_data())[0]))
    assert "Throughput investigation: default" in first
    assert "Verdict" in first and "Latest attempt:" in first
    assert "Attempts, in the order they ran" in first and "never_started" in first
    assert "Hypothesis → patch → deploy → run → probes → verdict" in first


def test_the_pdf_flows_long_text_onto_more_pages_of_the_same_size(lg) -> None:
    from ledger.report.pages import text_pages

    for i in range(40):
        lg.add_hypothesis(f"hypothesis {i} " + "words " * 60)
    pages = text_pages(lg.report_data())
    assert len(pages) >= 2 and {tuple(p.get_size_inches()) for p in pages} == {(11.69, 8.27)}
    for page in pages:
        page.canvas.draw()
        renderer = page.canvas.get_renderer()
        for text in page.texts:  # nothing runs off the page
            box = text.get_window_extent(renderer)
            assert box.x1 <= page.bbox.width and box.y0 >= 0, text.get_text()[:60]


def test_the_png_opens_with_the_title_and_the_verdict(reported) -> None:
    from ledger.report.pages import heading_figure

    texts = " ".join(figure_texts(heading_figure(reported.report_data())))
    assert "Throughput investigation: default" in texts
    assert "Latest attempt: never_started (unknown): not measured" in texts
    assert "attempt (oom) at 11K tok/s effective (from its steps before the OOM)" in texts
