"""Text from the ledger in the report: never mathtext, never reordering the page, never so
long that it collapses a figure or pushes a table off screen (issue 14, section 4)."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from helpers import run_cli
from test_report_fixtures import LONG, MATH, RLO, add_events, figure_texts, steps

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


@pytest.fixture
def hostile(lg) -> object:
    lg.set_baseline(14200, "tok/s")
    lg.add_steps("reference", steps(14200, seed=1, loss=True), throughput_unit="tok/s")
    lg.record_fix(f"hypothesis {MATH} {RLO}reversed", f"summary {MATH}", run=MATH)
    lg.add_steps(MATH, steps(11000, seed=2, loss=True), throughput_unit="tok/s")
    lg.set_fate(MATH, "oom", f"CUDA out of memory {MATH}")
    add_events(lg, MATH, [{"kind": "recompile", "text": f"function {MATH}", "step": 50, "line": 3}])
    name = f"evil{RLO}attempt"
    lg.add_steps(name, steps(14150, seed=3), throughput_unit="tok/s")
    lg.set_fate(name, "crashed", f"{RLO}reason mirrored")
    return lg


@pytest.mark.parametrize("suffix", ["html", "png", "pdf"])
def test_a_math_name_renders_in_every_format(hostile, tmp_path: Path, suffix: str) -> None:
    out = hostile.write_report(tmp_path / f"r.{suffix}")
    assert out.stat().st_size > 1000


def test_no_figure_text_is_mathtext_and_latex_is_never_used(
    hostile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import matplotlib
    from matplotlib import cbook

    from ledger.report.figures import overview_figures
    from ledger.report.pages import heading_figure, text_pages
    from ledger.report.plots import plain_text

    # a user's matplotlibrc with usetex on: there is no LaTeX here, so using it would fail
    monkeypatch.setitem(matplotlib.rcParams, "text.usetex", True)
    hostile.write_report(tmp_path / "r.png")
    data = hostile.report_data()
    with plain_text():
        figures = [*overview_figures(data).values(), heading_figure(data), *text_pages(data)]
        texts = [t for f in figures for t in figure_texts(f)]
    assert any("frac" in t for t in texts)  # the name is drawn …
    assert not [t for t in texts if cbook.is_math_text(t)]  # … as the text it is


def test_compare_plot_of_a_math_name(hostile, tmp_path: Path) -> None:
    result = run_cli("compare", "reference", MATH, "--plot", str(tmp_path / "c.png"))
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "c.png").read_bytes().startswith(b"\x89PNG")


def test_clean_drops_controls_and_keeps_text() -> None:
    from ledger.report.text import clean, mpl

    assert clean(f"a{BIDI}b") == "ab"
    assert clean("tab\tand\nnewline") == "tab\tand\nnewline"
    assert clean("\x1b[31mred\x1b[0m\x00") == "[31mred[0m"
    assert clean("emoji 👩\u200d💻 and עברית") == "emoji 👩\u200d💻 and עברית"  # joiner kept
    assert clean("line\u2028sep") == "line\nsep"
    assert mpl("cost $5 and $6") == r"cost \$5 and \$6"


def test_html_holds_no_bidi_control_and_isolates_user_text(hostile, tmp_path: Path) -> None:
    page = hostile.write_report(tmp_path / "r.html").read_text()
    assert not [ch for ch in page if ch in BIDI]
    assert not [
        ch for ch in page if unicodedata.category(ch) in ("Cf", "Cc") and ch not in "\n\t\u200d"
    ]
    assert "<bdi>evilattempt</bdi>" in page and "<bdi>reason mirrored</bdi>" in page


def test_figure_text_holds_no_control_character(hostile) -> None:
    from ledger.report.figures import overview_figures

    for figure in overview_figures(hostile.report_data()).values():
        for text in figure_texts(figure, raw=True):
            # a newline is where a long title wraps, and names are isolated (FSI … PDI,
            # balanced); nothing else of the kind gets through
            assert text.count("\u2068") == text.count("\u2069"), text
            kept = "\n\u2068\u2069"
            odd = [ch for ch in text if unicodedata.category(ch) in ("Cf", "Cc") and ch not in kept]
            assert not odd, text


def test_short_names_stay_distinct() -> None:
    from ledger.report.text import short_names

    a, b = "run_" + "a" * 500 + "_one", "run_" + "a" * 500 + "_two"
    middle = ["x" * 100 + "1" + "x" * 100, "x" * 100 + "2" + "x" * 100]  # differ mid-name
    labels = short_names([a, b, *middle, "short"], 40)
    assert all(len(label) <= 40 for label in labels.values())
    assert len(set(labels.values())) == 5
    assert labels["short"] == "short" and labels[a].startswith("run_a") and "…" in labels[a]


def test_a_long_name_collapses_no_figure(lg) -> None:
    from ledger.report.figures import overview_figures

    lg.set_baseline(14200, "tok/s")
    lg.add_steps("reference", steps(14200, seed=1, loss=True), throughput_unit="tok/s")
    lg.add_steps(LONG, steps(12000, seed=2, loss=True), throughput_unit="tok/s")
    lg.add_steps(LONG + "2", steps(12100, seed=3), throughput_unit="tok/s")
    # constrained layout warns (an error here) when axes collapse; check the sizes too
    for name, figure in overview_figures(lg.report_data()).items():
        texts = figure_texts(figure)
        assert all(len(t) < 200 for t in texts), name
        for ax in figure.axes:
            if ax.get_visible() and ax.axison:
                box = ax.get_position()
                assert box.width > 0.2 and box.height > 0.1, (name, box)


def test_a_long_name_wraps_in_the_tables(lg, tmp_path: Path) -> None:
    lg.add_steps(LONG, steps(12000), throughput_unit="tok/s")
    page = lg.write_report(tmp_path / "r.html").read_text()
    assert "overflow-wrap: anywhere" in page
    assert LONG in page  # whole, on its card and as the table's tooltip


def test_names_in_any_script_draw_without_a_missing_glyph_warning(lg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Hebrew in the PDF's monospace table comes from DejaVu Sans; a CJK or emoji name
    (no shipped face holds them) is drawn with □ in figures, whole in the HTML."""
    import warnings

    lg.set_baseline(14200, "tok/s")
    lg.add_steps("ref", steps(14200, seed=1, wall_from=1.7e9), throughput_unit="tok/s")
    for i, name in enumerate(["אימון_ב", "训练_慢", "run_🚀", "تدريب"]):
        rows = steps(13000 + 300 * i, seed=2 + i, wall_from=1.7e9 + 5000 * (i + 1))
        lg.add_steps(name, rows, throughput_unit="tok/s")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for out in ("r.png", "r.pdf", "r.html"):
            lg.write_report(tmp_path / out)
        lg.compare(["ref", "训练_慢", "run_🚀"], plot=tmp_path / "c.png")
    assert not [str(w.message) for w in caught if "Glyph" in str(w.message)]
    page = (tmp_path / "r.html").read_text()
    assert "训练_慢" in page.replace("<wbr>", "") and "run_🚀" in page.replace("<wbr>", "")


def test_a_right_to_left_name_keeps_the_pdf_and_png_sentences_in_order(lg) -> None:  # type: ignore[no-untyped-def]
    """Each name is drawn isolated (FSI … PDI): a Hebrew name that opens a line does not
    turn the line right-to-left, nor pull the figures beside it."""
    from ledger.report.pages import heading_figure, text_pages

    name = "אימון_ב"
    lg.set_baseline(14200, "tok/s")
    lg.add_steps("ref", steps(14200, seed=1, wall_from=1.7e9), throughput_unit="tok/s")
    lg.add_steps(name, steps(12000, seed=2, wall_from=1.7e9 + 5000), throughput_unit="tok/s")
    data = lg.report_data()
    texts = figure_texts(heading_figure(data), raw=True) + [
        t.get_text() for page in text_pages(data) for t in page.texts
    ]
    said = [t for t in texts if name in t]
    assert said, texts
    for text in said:
        at = text.index(name)
        assert text[at - 1] == "\u2068" and text[at + len(name)] == "\u2069", text
    verdicts = [t for t in said if t.startswith(f"• \u2068{name}\u2069 (unknown) against")]
    assert verdicts and all("\u2068ref\u2069" in v for v in verdicts), said


def test_one_short_value_for_the_cli_and_the_report() -> None:
    """The report's figures and the command line print a number by the same function; only
    the glyph of a missing value differs (an en dash in figures, a hyphen in plain text)."""
    from ledger.analyze.wording import short_value
    from ledger.report.numbers import value_text

    for value in (14200.0, 1_250_000.0, 0.82, -3456.7, 10932.4):
        assert value_text(value) == short_value(value)
        assert value_text(value, 5) == short_value(value, 5)
    assert short_value(None) == "-" and value_text(None) == "–"
    assert short_value(float("nan"), missing="n/a") == "n/a"
