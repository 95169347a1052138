"""Throughput over steps, one panel per measured run, with what happened marked at the step
it happened (recompiles, OOMs, NCCL failures) and the points the axis leaves out marked on
its edge; and the loss over steps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ledger.analyze.wording import short_value
from ledger.model.report import Attempt, ReportData
from ledger.model.terms import EventKind
from ledger.report import story
from ledger.report.canvas import Look, empty, figure_of, grid, legend_beside, new_figure
from ledger.report.colors import FATE_COLORS
from ledger.report.numbers import grouped
from ledger.report.plots import (
    TYPICAL_APART,
    binned_median,
    judged,
    mark_clipped,
    plot_baseline,
    plot_run,
    short_ticks,
    stall_words,
    thin,
    typical,
    wrapped_title,
)
from ledger.report.text import mpl

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# How each kind of event is marked along the top of a panel.
EVENT_MARKS: dict[str, dict[str, Any]] = {
    EventKind.RECOMPILE: {"color": "#7b2cbf", "marker": "v", "label": "recompile"},
    EventKind.OOM: {"color": "#d62828", "marker": "X", "label": "OOM"},
    EventKind.NCCL: {"color": "#f77f00", "marker": "D", "label": "NCCL failure"},
}
PANEL_TITLE_IN = 4.6  # the width a panel's title may take, in inches
LINES_PER_KIND = 20  # vertical lines drawn per kind of failure; more would hide the data


def throughput_figures(
    data: ReportData,
    look: Look,
    *,
    per_figure: int | None = None,
    size: tuple[float, float] | None = None,
) -> list[Figure]:
    """The panels, all of them in one figure, or `per_figure` to a figure (PDF pages)."""
    attempts = data.analysed
    if per_figure is None or len(attempts) <= per_figure:
        return [throughput_panels(data, attempts, look, size=size)]
    return [
        throughput_panels(data, attempts[i : i + per_figure], look, size=size)
        for i in range(0, len(attempts), per_figure)
    ]


def throughput_panels(
    data: ReportData,
    attempts: Sequence[Attempt],
    look: Look,
    *,
    columns: int = 2,
    size: tuple[float, float] | None = None,
) -> Figure:
    """Throughput over steps, a panel per run; runs on the same scale share the y range."""
    rows = max(1, math.ceil(len(attempts) / columns))
    figure = new_figure(*(size or (11, 2.7 * rows + 1.0)))
    if not attempts:
        empty(figure.add_subplot(), "no run has enough steps to plot yet (ledger ingest LOG)")
        return figure
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    # Every comparable run on one scale (across pages too); a run in another unit or scale
    # (not comparable with the baseline) gets its own, or it would flatten the others.
    comparable = [a for a in data.analysed if not story.implausible(a)]
    shared = _levels(comparable, data.baseline.value)
    kinds: set[str] = set()
    clipped = False
    for ax, attempt in zip(axes, attempts, strict=False):
        levels = _levels([attempt], None) if story.implausible(attempt) else shared
        found, was_clipped = throughput_panel(ax, attempt, data, look, levels)
        kinds |= found
        clipped = clipped or was_clipped
    for ax in axes[len(attempts) :]:
        ax.set_visible(False)
    figure.suptitle("Throughput over steps", fontsize=11)
    figure.legend(
        handles=_key(data, kinds, clipped),
        loc="outside lower center",
        ncols=4,
        fontsize=7,
        frameon=False,
    )
    return figure


def throughput_panel(
    ax: Axes,
    attempt: Attempt,
    data: ReportData,
    look: Look,
    levels: tuple[float | None, float | None],
) -> tuple[set[str], bool]:
    """One run's panel; returns the kinds of events marked and whether points were clipped."""
    analysis = attempt.analysis
    assert analysis is not None
    color = look.color(attempt)
    plot_run(ax, analysis, color=color, label="_median")
    plot_baseline(ax, data.baseline.value, data.baseline.unit)
    xlabel = "step"
    low, high = levels
    if low is not None and high is not None:
        pad = 0.25 * (high - low) if high > low else 0.05 * abs(high)
        bottom, top = max(low - 2 * pad, 0.0), high + pad
        if top > bottom:
            ax.set_ylim(bottom, top)
            series = (
                [(analysis.steps, analysis.values, color)] if analysis.values is not None else []
            )
            words = mark_clipped(ax, series, bottom, top)
            if words:
                xlabel = f"step — {words}"
    kinds = mark_events(ax, attempt)
    ax.set_title(_title(attempt, look), fontsize=8.5, color=FATE_COLORS.get(attempt.fate))
    ax.set_xlabel(xlabel, fontsize=7.5)
    ax.set_ylabel(mpl(data.unit or "throughput", 24), fontsize=8)
    ax.tick_params(labelsize=7)
    short_ticks(ax.yaxis)
    grid(ax)
    return kinds, xlabel != "step"


def _title(attempt: Attempt, look: Look) -> str:
    """'NAME (fate): 12.8K tok/s effective (typical step 14.2K), 90.4 % of baseline;
    12 stall steps, 9.6 % of the wall time', on as many lines as the panel needs."""
    a = attempt.analysis
    assert a is not None
    unit = f" {mpl(a.unit, 16)}" if a.unit else ""
    value, _ = judged(a)
    median = typical(a)
    words = f"({attempt.fate}): "
    if math.isfinite(value):
        words += f"{short_value(value)}{unit} effective"
        if math.isfinite(median) and abs(median / value - 1.0) > TYPICAL_APART:
            words += f" (typical step {short_value(median)})"
    else:
        words += f"{short_value(median)}{unit} typical step"
    if story.died(attempt):
        words += f" before {story.death(attempt)}"
    if a.vs_baseline_pct is not None:
        words += f", {grouped(a.vs_baseline_pct)} % of baseline"
        if story.implausible(attempt):
            words += " — not comparable"
    stalls = stall_words(a)
    if stalls:
        words += f"; {stalls}"
    # broken at spaces only: a name is never split (the look has shortened it)
    return wrapped_title(f"{look.marked(attempt)} {words}", PANEL_TITLE_IN, 8.5, raw=True)


def mark_events(ax: Axes, attempt: Attempt) -> set[str]:
    """Each event with a step as a mark along the top of the panel at that step (and a
    line for an OOM or NCCL failure). Events whose step is unknown are left to the card."""
    kinds = set()
    for kind, style in EVENT_MARKS.items():
        steps = sorted({e.step for e in attempt.events if e.kind == kind and e.step is not None})
        if not steps:
            continue
        kinds.add(kind)
        ax.scatter(
            steps, np.full(len(steps), 0.95), transform=ax.get_xaxis_transform(),
            marker=style["marker"], color=style["color"], s=26, zorder=4, clip_on=False,
            linewidths=0.4, edgecolors="white", gid=f"event:{kind}",
        )  # fmt: skip
        if kind != EventKind.RECOMPILE:
            for step in steps[-LINES_PER_KIND:]:
                ax.axvline(step, color=style["color"], linewidth=0.9, alpha=0.6)
    return kinds


def _key(data: ReportData, kinds: set[str], clipped: bool) -> list[Any]:
    """The figure's legend: what each mark means, once for all panels, below them."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [
        Line2D([], [], marker="o", linestyle="", color="0.5", alpha=0.5, markersize=3,
               label="a step"),
        Line2D([], [], color="0.3", linewidth=0.9, alpha=0.6,
               label="running median (the typical step)"),
        Line2D([], [], color="0.3", linewidth=2.2,
               label="effective throughput (stalls included; band: 95 % CI)"),
        Line2D([], [], marker="|", linestyle="", color="0.3", markersize=8,
               label="a stall step (counted in the effective figure)"),
        Patch(color="0.5", alpha=0.15, label="warm-up (left out of the statistics)"),
        Line2D([], [], color="0.3", linestyle="--", linewidth=1.0, label="change point"),
    ]  # fmt: skip
    if data.baseline.value is not None:
        handles.append(
            Line2D([], [], color="0.25", linestyle="--", linewidth=1.0, label="baseline")
        )
    for kind, style in EVENT_MARKS.items():
        if kind in kinds:
            handles.append(
                Line2D([], [], marker=style["marker"], linestyle="", color=style["color"],
                       label=f"{style['label']} (at its step)")
            )  # fmt: skip
    if clipped:
        handles.append(
            Line2D([], [], marker="v", linestyle="", color="0.4", markersize=4,
                   label="a step off the axis (warm-up, stall)")
        )  # fmt: skip
    return handles


def _levels(
    attempts: Sequence[Attempt], baseline: float | None
) -> tuple[float | None, float | None]:
    """The steady levels the axis frames: p10 to p90 of the runs, and the baseline."""
    analyses = [a.analysis for a in attempts if a.analysis is not None]
    lows = [a.p10 for a in analyses if math.isfinite(a.p10)]
    highs = [a.p90 for a in analyses if math.isfinite(a.p90)]
    for a in analyses:  # the judged figure and its interval stay on the axis
        value, ci = judged(a)
        for v in (value, *(ci or ())):
            if math.isfinite(v):
                lows.append(v)
                highs.append(v)
    if baseline is not None:
        lows.append(baseline)
        highs.append(baseline)
    return (min(lows) if lows else None), (max(highs) if highs else None)


def loss_figure(
    data: ReportData, look: Look, size: tuple[float, float] | None = None
) -> Figure | None:
    """The loss over steps of every run that recorded one (None when none did)."""
    runs = [a for a in data.attempts if a.loss is not None and len(a.loss)]
    if not runs:
        return None
    figure = new_figure(*(size or (11, 3.6)))
    loss_over_steps(figure.add_subplot(), runs, look)
    return figure


def loss_over_steps(ax: Axes, runs: Sequence[Attempt], look: Look) -> Figure:
    lowest = math.inf
    highest = -math.inf
    for attempt in runs:
        assert attempt.loss is not None
        steps = np.asarray(attempt.loss.steps)
        values = np.asarray(attempt.loss.values, dtype=float)
        color = look.color(attempt)
        x, y = thin(steps, values, 3000)
        ax.scatter(x, y, s=2, alpha=0.12, color=color, linewidths=0, rasterized=True)
        mx, my = binned_median(steps, values, 200)
        ax.plot(mx, my, color=color, linewidth=1.3, label=look.label(attempt, fate=True))
        if story.died(attempt):
            ax.scatter(
                [steps[-1]], [values[-1]], marker="X", s=60, color=FATE_COLORS[attempt.fate],
                zorder=4, edgecolors="white", linewidths=0.5,
            )  # fmt: skip
        lowest = min(lowest, float(values.min()))
        highest = max(highest, float(values.max()))
    if lowest > 0 and highest / lowest > 20:  # a loss falling by orders of magnitude
        ax.set_yscale("log")
    ax.set_xlabel("step", fontsize=9)
    ax.set_ylabel("loss (mean over ranks)", fontsize=9)
    ax.set_title("Loss over steps (line: running median; ×: the last step of a run that died)",
                 fontsize=10)  # fmt: skip
    grid(ax)
    legend_beside(ax)
    return figure_of(ax)
