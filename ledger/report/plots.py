"""The comparison as a picture: throughput over steps per run, with what the analyzer saw.

Per run: the steps as light points, a running median as a line, the warm-up shaded,
change points marked, outliers as small crosses; the baseline as a dashed line. Long
runs are drawn from at most a few thousand points, so a million steps plot in a blink.

matplotlib's object API on the Agg canvas: functions take an `ax` and return the figure;
nothing here calls pyplot, so it works headless and never opens a window. The report
(ledger.report) reuses `plot_run` and `plot_baseline` on its own axes.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ledger.analyze.wording import short_value

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ledger.model.analysis import CompareReport, RunAnalysis

MAX_POINTS = 4000  # raw points drawn per run
LINE_BINS = 200  # bins of the running-median line


def _thin(steps: np.ndarray, values: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    if len(values) <= limit:
        return steps, values
    every = math.ceil(len(values) / limit)
    return steps[::every], values[::every]


def _binned_median(
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


def run_colors(count: int) -> list[str]:
    """The first `count` colours of matplotlib's default cycle (repeating)."""
    from matplotlib import rcParams

    cycle = rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    return [cycle[i % len(cycle)] for i in range(count)]


def plot_run(ax: Axes, run: RunAnalysis, *, color: str = "C0") -> Any:
    """Draw one run on `ax`: raw points, running median, warm-up, change points, outliers."""
    steps, values = run.steps, run.values
    if steps is None or values is None or len(values) == 0:
        return ax.figure
    mask = run.outlier_mask if run.outlier_mask is not None else np.zeros(len(values), bool)
    x, y = _thin(steps[~mask], values[~mask], MAX_POINTS)
    ax.scatter(x, y, s=2, alpha=0.15, color=color, linewidths=0, rasterized=True)
    mx, my = _binned_median(steps[~mask], values[~mask], LINE_BINS)
    label = f"{run.run}: {short_value(run.median)}"
    if run.ci95 is not None:
        label += f" ({short_value(run.ci95[0])}–{short_value(run.ci95[1])})"
    ax.plot(mx, my, color=color, linewidth=1.4, label=label)
    if mask.any():
        ox, oy = _thin(steps[mask], values[mask], MAX_POINTS // 4)
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


def plot_baseline(ax: Axes, value: float | None, unit: str | None = None) -> Any:
    """A dashed horizontal line at the baseline, labelled with its value."""
    if value is None:
        return ax.figure
    label = f"baseline {short_value(value)}" + (f" {unit}" if unit else "")
    ax.axhline(value, color="0.25", linewidth=1.0, linestyle="--", label=label)
    return ax.figure


def compare_figure(report: CompareReport, *, width: float = 9.0, height: float = 4.8) -> Figure:
    """One figure with every run of the report and the baseline."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    ax = figure.add_subplot()
    for run, color in zip(report.runs, run_colors(len(report.runs)), strict=True):
        plot_run(ax, run, color=color)
    plot_baseline(ax, report.baseline.value, report.baseline.unit)
    unit = next((r.unit for r in report.runs if r.unit), None) or report.baseline.unit
    ax.set_xlabel("step")
    ax.set_ylabel(f"throughput ({unit})" if unit else "throughput")
    ax.grid(True, linewidth=0.4, alpha=0.5)
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    lows = [r.p10 for r in report.runs if math.isfinite(r.p10)]
    highs = [r.p90 for r in report.runs if math.isfinite(r.p90)]
    if report.baseline.value is not None:
        lows.append(report.baseline.value)
        highs.append(report.baseline.value)
    if lows and highs:  # frame the steady levels; warm-up and stalls may leave the frame
        low, high = min(lows), max(highs)
        pad = 0.25 * (high - low) if high > low else 0.05 * high
        ax.set_ylim(max(low - 2 * pad, 0.0), high + pad)
    title = " vs ".join(r.run for r in report.runs)
    if report.comparisons:
        title = "; ".join(c.summary.split(" (")[0] for c in report.comparisons)
    ax.set_title(title, fontsize=10)
    return figure


PLOT_FORMATS = (".png", ".pdf", ".svg")


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
    """Write the comparison figure to `path` (.png, .pdf or .svg, from its suffix)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from ledger.errors import OutputFileError

    path = check_plot_path(path)
    figure = compare_figure(report)
    FigureCanvasAgg(figure)
    try:
        figure.savefig(path, dpi=120)
    except OSError as exc:
        raise OutputFileError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path
