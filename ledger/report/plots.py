"""The comparison as a picture: throughput over steps per run, with what the analyzer saw.

Per run: the steps as light points, a running median as a line, the warm-up shaded,
change points marked, outliers as small crosses; the baseline as a dashed line. Long
runs are drawn from at most a few thousand points, so a million steps plot in a blink.

matplotlib's object API on the Agg canvas: functions take an `ax` and return the figure;
nothing here calls pyplot, so it works headless and never opens a window. The report
(ledger.report) reuses `plot_run` and `plot_baseline` on its own axes.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ledger.analyze.wording import short_value
from ledger.model.terms import Fate
from ledger.report.numbers import interval_digits, interval_text, value_digits, value_text
from ledger.report.text import mpl

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ledger.model.analysis import CompareReport, RunAnalysis

MAX_POINTS = 4000  # raw points drawn per run
LINE_BINS = 200  # bins of the running-median line


def thin(steps: np.ndarray, values: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    if len(values) <= limit:
        return steps, values
    every = math.ceil(len(values) / limit)
    return steps[::every], values[::every]


def binned_median(
    steps: np.ndarray, values: np.ndarray, bins: int
) -> tuple[np.ndarray, np.ndarray]:
    """Median of each of `bins` consecutive slices, placed at the slice's middle step."""
    if len(values) <= bins:
        return steps, values
    size = math.ceil(len(values) / bins)
    count = len(values) // size
    table = values[: count * size].reshape(count, size)
    middle = steps[size // 2 : count * size : size][:count]
    return middle, np.median(table, axis=1)


@contextlib.contextmanager
def plain_text() -> Iterator[None]:
    """matplotlib settings under which text from the ledger is drawn as the text it is:
    never through LaTeX (a user's matplotlibrc may turn usetex on), and with mathtext only
    for a `$` left unescaped, which `ledger.report.text.mpl` never leaves. Wrap both the
    drawing and the saving: tick labels are made when the figure is saved."""
    from matplotlib import rc_context

    from ledger.report.glyphs import SANS

    with rc_context(
        {"text.usetex": False, "text.parse_math": True, "font.family": "sans-serif",
         "font.sans-serif": SANS}
    ):  # fmt: skip
        yield


def short_ticks(axis: Any) -> None:
    """Tick labels like '14.2K' and '169M', with enough digits to tell the ticks apart,
    and no '1e8' offset text to collide with a title."""
    from matplotlib.ticker import Formatter

    class Short(Formatter):
        def format_ticks(self, values: list[float]) -> list[str]:
            digits = value_digits(list(values))
            return [value_text(v, digits) for v in values]

        def __call__(self, x: float, pos: int | None = None) -> str:
            return value_text(x, 4)

    axis.set_major_formatter(Short())


def run_colors(count: int) -> list[str]:
    """The first `count` colours of matplotlib's default cycle (repeating)."""
    from matplotlib import rcParams

    cycle = rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    return [cycle[i % len(cycle)] for i in range(count)]


TYPICAL_APART = 0.02  # the typical step is named beside the effective figure this far off


def judged(run: RunAnalysis) -> tuple[float, tuple[float, float] | None]:
    """The figure the verdict uses: the effective throughput (stalls included) of the
    stretch the run is judged on, with its 95 % interval."""
    return run.judged_effective, run.judged_effective_ci95


def typical(run: RunAnalysis) -> float:
    """The typical step's throughput (the median) over the same stretch."""
    return run.regime.median if run.regime is not None else run.median


def figure_words(run: RunAnalysis, digits: int = 3) -> str:
    """'12.8K effective (12.3K–13.4K); typical step 14.2K': the judged figure with its
    interval, and the median beside it when the two differ."""
    value, ci = judged(run)
    if not math.isfinite(value):
        return f"typical step {short_value(typical(run))}"
    words = f"{short_value(value)} effective"
    if ci is not None:
        words += f" ({interval_text(ci, digits)})"
    median = typical(run)
    if math.isfinite(median) and abs(median / value - 1.0) > TYPICAL_APART:
        words += f"; typical step {short_value(median)}"
    return words


def stall_words(run: RunAnalysis) -> str | None:
    """'12 stall steps, 9.6 % of the wall time', or None when no stall counted."""
    stalls = run.stalls
    if stalls is None or not stalls.recurring:
        return None
    return f"{stalls.recurring:,} stall steps, {stalls.cost_pct:.1f} % of the wall time"


def plot_run(
    ax: Axes, run: RunAnalysis, *, color: str = "C0", label: str | None = None, digits: int = 3
) -> Any:
    """Draw one run on `ax`: raw points, running median, warm-up, change points, outliers,
    and the judged figure — the effective throughput, stalls included — as a level over
    the stretch it was judged on, with its interval as a band; stall steps are ticked
    along the bottom edge. The level is labelled `label` (default: the run's name and
    `figure_words`)."""
    steps, values = run.steps, run.values
    if steps is None or values is None or len(values) == 0:
        return ax.figure
    mask = run.outlier_mask if run.outlier_mask is not None else np.zeros(len(values), bool)
    x, y = thin(steps[~mask], values[~mask], MAX_POINTS)
    ax.scatter(x, y, s=2, alpha=0.15, color=color, linewidths=0, rasterized=True)
    mx, my = binned_median(steps[~mask], values[~mask], LINE_BINS)
    if label is None:
        label = f"{mpl(run.run, 40)}: {figure_words(run, digits)}"
    ax.plot(mx, my, color=color, linewidth=0.9, alpha=0.55, label="_running median")
    value, ci = judged(run)
    start = run.regime.from_step if run.regime is not None else run.steady_from_step
    if math.isfinite(value):
        ax.hlines(value, start, run.last_step, color=color, linewidth=2.2, label=label,
                  gid="effective")  # fmt: skip
        if ci is not None:
            ax.fill_between([start, run.last_step], ci[0], ci[1], color=color, alpha=0.18,
                            linewidth=0)  # fmt: skip
    mark_stalls(ax, run, color)
    if mask.any():
        ox, oy = thin(steps[mask], values[mask], MAX_POINTS // 4)
        ax.scatter(ox, oy, s=10, marker="x", color=color, alpha=0.6, linewidths=0.8)
    if run.steady_from_step > run.first_step:
        ax.axvspan(run.first_step, run.steady_from_step, color=color, alpha=0.07, linewidth=0)
        ax.axvline(run.steady_from_step, color=color, linewidth=0.8, linestyle=":")
    for change in run.change_points:
        ax.axvline(change.step, color=color, linewidth=1.0, linestyle="--", alpha=0.8)
        ax.annotate(
            f"{change.shift_pct:+.0f} %",
            xy=(change.step, change.after),
            xytext=(4, -12 if change.shift_pct < 0 else 6),
            textcoords="offset points",
            fontsize=8,
            color=color,
            fontweight="bold",
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none"},
        )
    return ax.figure


def mark_stalls(ax: Axes, run: RunAnalysis, color: str) -> None:
    """Each counted stall step as a tick on the bottom edge, at its step."""
    stalls = run.stalls
    if stalls is None or not stalls.recurring or stalls.at is None or not len(stalls.at):
        return
    at = np.asarray(stalls.at)
    x, _ = thin(at, at, MAX_POINTS // 4)
    ax.scatter(
        x, np.full(len(x), 0.035), transform=ax.get_xaxis_transform(), marker="|", s=60,
        color=color, linewidths=1.4, clip_on=False, zorder=4, gid="stalls",
    )  # fmt: skip


def plot_baseline(ax: Axes, value: float | None, unit: str | None = None) -> Any:
    """A dashed horizontal line at the baseline, labelled with its value."""
    if value is None:
        return ax.figure
    label = f"baseline {short_value(value)}" + (f" {mpl(unit, 24)}" if unit else "")
    ax.axhline(value, color="0.25", linewidth=1.0, linestyle="--", label=label)
    return ax.figure


def compare_figure(report: CompareReport, *, width: float = 9.0, height: float = 4.8) -> Figure:
    """One figure with every run of the report and the baseline."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    ax = figure.add_subplot()
    digits = interval_digits([r.ci95 for r in report.runs])
    for run, color in zip(report.runs, run_colors(len(report.runs)), strict=True):
        fate = report.fates.get(run.run)
        named = mpl(run.run, 40) + (f" ({fate})" if fate and fate != Fate.FINISHED else "")
        plot_run(ax, run, color=color, digits=digits, label=f"{named}: {figure_words(run, digits)}")
    plot_baseline(ax, report.baseline.value, report.baseline.unit)
    unit = next((r.unit for r in report.runs if r.unit), None) or report.baseline.unit
    ax.set_xlabel("step")
    ax.set_ylabel(f"throughput ({mpl(unit, 24)})" if unit else "throughput")
    short_ticks(ax.yaxis)
    ax.grid(True, linewidth=0.4, alpha=0.5)
    # below the axes, where it covers no step
    ax.legend(
        handles=_compare_key(ax, report), loc="upper center", bbox_to_anchor=(0.5, -0.14),
        fontsize=8, frameon=False, ncols=1 if len(report.runs) > 2 else 2,
    )  # fmt: skip
    levels = [judged(r)[0] for r in report.runs]
    levels += [v for r in report.runs if judged(r)[1] for v in judged(r)[1] or ()]
    lows = [r.p10 for r in report.runs if math.isfinite(r.p10)]
    lows += [v for v in levels if math.isfinite(v)]
    highs = [r.p90 for r in report.runs if math.isfinite(r.p90)]
    highs += [v for v in levels if math.isfinite(v)]
    if report.baseline.value is not None:
        lows.append(report.baseline.value)
        highs.append(report.baseline.value)
    if lows and highs:  # frame the steady levels; warm-up and stalls may leave the frame
        low, high = min(lows), max(highs)
        pad = 0.25 * (high - low) if high > low else 0.05 * high
        bottom, top = max(low - 2 * pad, 0.0), high + pad
        ax.set_ylim(bottom, top)
        colors = run_colors(len(report.runs))
        series = [
            (r.steps, r.values, c)
            for r, c in zip(report.runs, colors, strict=True)
            if r.steps is not None and r.values is not None
        ]
        clipped = mark_clipped(ax, series, bottom, top)
        if clipped:
            ax.set_xlabel(f"step — {clipped}")
    title = " vs ".join(r.run for r in report.runs)
    if report.comparisons:
        title = "; ".join(c.summary.split(" (")[0] for c in report.comparisons)
    ax.set_title(wrapped_title(title, width), fontsize=10)
    return figure


def wrapped_title(text: str, width_in: float, fontsize: float = 10.0, *, raw: bool = False) -> str:
    """A title broken at spaces into lines that fit `width_in` inches (never cut); `$`
    escaped unless `raw` (text already made for matplotlib)."""
    from ledger.report.glyphs import drawable, isolated
    from ledger.report.text import escape_math, one_line, wrap_words

    per_line = max(20, int(width_in * 72 / (fontsize * 0.6)))
    lines = wrap_words(drawable(one_line(text)), per_line)
    return isolated("\n".join(line if raw else escape_math(line) for line in lines))


def _compare_key(ax: Axes, report: CompareReport) -> list[Any]:
    """Each run's judged figure, the baseline, and what the marks mean."""
    from matplotlib.lines import Line2D

    handles, _ = ax.get_legend_handles_labels()
    handles.append(
        Line2D([], [], color="0.45", linewidth=0.9, alpha=0.6,
               label="thin line: running median of the steps (the typical step)")
    )  # fmt: skip
    said = [f"{mpl(r.run, 40)}: {w}" for r in report.runs if (w := stall_words(r))]
    if said:
        handles.append(
            Line2D([], [], marker="|", linestyle="", color="0.3", markersize=9,
                   label="stall steps — " + "; ".join(said))
        )  # fmt: skip
    return handles


PLOT_FORMATS = (".png", ".pdf", ".svg")  # what `compare --plot` says it accepts


def check_plot_path(path: str | os.PathLike[str]) -> Path:
    """Refuse a figure file of a format it cannot be drawn in, before any work."""
    from ledger.errors import UsageError

    found = Path(path)
    if found.suffix.lower() not in PLOT_FORMATS:
        raise UsageError(
            f"cannot draw the comparison as {found.name!r}: that format is not supported; "
            "name a .png, .pdf or .svg file"
        )
    return found


def save_compare_figure(report: CompareReport, path: str | os.PathLike[str]) -> Path:
    """Write the comparison figure to `path` (.png, .pdf or .svg, from its suffix); a
    missing folder is created, as `ledger report --out` does."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from ledger.errors import OutputFileError

    path = check_plot_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with plain_text():
            figure = compare_figure(report)
            FigureCanvasAgg(figure)
            figure.savefig(path, dpi=120)
    except OSError as exc:
        raise OutputFileError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path


def mark_clipped(
    ax: Axes, series: list[tuple[Any, Any, str]], low: float, high: float
) -> str | None:
    """Points of `series` ((steps, values, colour) each) that fall outside [low, high] are
    drawn on the edge they left by (▼ below, ▲ above), so warm-up and stalls stay visible
    on an axis framed for the steady level. Returns their count in words, or None."""
    below = above = 0
    lowest, highest = math.inf, -math.inf
    for steps, values, color in series:
        values = np.asarray(values, dtype=float)
        steps = np.asarray(steps)
        finite = np.isfinite(values)
        for mask, edge, marker in (
            (finite & (values < low), 0.012, "v"),
            (finite & (values > high), 0.988, "^"),
        ):
            if not mask.any():
                continue
            x, _ = thin(steps[mask], values[mask], MAX_POINTS // 4)
            ax.scatter(
                x, np.full(len(x), edge), transform=ax.get_xaxis_transform(), marker=marker,
                s=10, color=color, alpha=0.55, linewidths=0, clip_on=False, zorder=3,
            )  # fmt: skip
        below += int((finite & (values < low)).sum())
        above += int((finite & (values > high)).sum())
        if (finite & (values < low)).any():
            lowest = min(lowest, float(values[finite].min()))
        if (finite & (values > high)).any():
            highest = max(highest, float(values[finite].max()))
    words = []
    if below:
        words.append(f"▼ {below:,} below the axis (lowest {short_value(lowest)})")
    if above:
        words.append(f"▲ {above:,} above (highest {short_value(highest)})")
    return "; ".join(words) or None
