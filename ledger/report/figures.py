"""The report's figures. matplotlib's object API on Agg: each function draws on the axes it
is given and returns the figure; nothing here calls pyplot or opens a window.

Text from the ledger reaches an artist only through `ledger.report.text` (cleaned,
shortened, `$` escaped); draw and save inside `plots.plain_text()`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ledger.model.report import Attempt, ReportData
from ledger.model.terms import FAULT_FATES
from ledger.report import story
from ledger.report.canvas import PAGE, Look, empty, figure_of, grid, legend_beside, new_figure
from ledger.report.colors import FATE_COLORS
from ledger.report.numbers import value_digits, value_text
from ledger.report.panels import loss_figure, throughput_figures
from ledger.report.plots import plain_text, plot_baseline, short_ticks
from ledger.report.resources import gpu_figure
from ledger.report.text import mpl

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PANELS_PER_PAGE = 6


def marathon(ax: Axes, data: ReportData, look: Look | None = None) -> Figure:
    """Every attempt in the order it ran: steady median with its 95 % CI against the
    baseline, coloured by fate. A run that died is shown where it fell; a run with no
    steady steps is marked along the bottom, off the value scale (it was never measured);
    a run far off the baseline's scale is marked on the top edge, with its value."""
    look = look or Look(data)
    attempts = data.attempts
    xs = list(range(len(attempts)))
    comparable = [a for a in attempts if a.analysis is not None and not story.implausible(a)]
    digits = value_digits([a.analysis.median for a in comparable if a.analysis])
    levels = [a.analysis.median for a in comparable if a.analysis]
    levels += [v for a in comparable if a.analysis and a.analysis.ci95 for v in a.analysis.ci95]
    if data.baseline.value is not None:
        levels.append(data.baseline.value)
    levels = [v for v in levels if math.isfinite(v)]
    bottom, top = (min(levels) * 0.85, max(levels) * 1.08) if levels else (0.0, 1.0)
    for x, attempt in zip(xs, attempts, strict=True):
        color = FATE_COLORS.get(attempt.fate, FATE_COLORS["unknown"])
        analysis = attempt.analysis
        if analysis is None:
            _unmeasured(ax, x, attempt, color)
            continue
        if story.implausible(attempt):
            _off_scale(ax, x, attempt, color)
            continue
        low, high = analysis.ci95 if analysis.ci95 is not None else (analysis.median,) * 2
        ax.errorbar(
            x, analysis.median, yerr=[[analysis.median - low], [high - analysis.median]],
            fmt="X" if attempt.fate in FAULT_FATES else "o", color=color, ecolor=color,
            capsize=5, markersize=9 if attempt.fate in FAULT_FATES else 8, linewidth=1.5,
        )  # fmt: skip
        ax.annotate(
            value_text(analysis.median, digits), (x, high), xytext=(0, 6),
            textcoords="offset points", ha="center", fontsize=8,
        )  # fmt: skip
        if attempt.fate in FAULT_FATES or attempt.fate in ("killed", "stalled"):
            label = f"{attempt.fate.upper()}" if attempt.fate in FAULT_FATES else attempt.fate
            ax.annotate(
                label, (x, low), xytext=(0, -14), textcoords="offset points", ha="center",
                fontsize=7.5, color=color, fontweight="bold",
            )  # fmt: skip
    plot_baseline(ax, data.baseline.value, data.baseline.unit)
    ax.set_xticks(xs, [look.label(a, fate=True) for a in attempts], rotation=20, ha="right",
                  fontsize=7.5)  # fmt: skip
    unit = mpl(data.unit, 24) if data.unit else None
    ax.set_ylabel(f"steady median ({unit})" if unit else "steady median", fontsize=9)
    ax.set_title(
        "The marathon: every attempt in the order it ran (95 % CI; colour = fate)", fontsize=10
    )
    grid(ax, "y")
    short_ticks(ax.yaxis)
    ax.set_ylim(bottom, top)
    ax.set_xlim(-0.6, max(len(attempts), 1) - 0.4)
    _fate_legend(ax, data)
    return figure_of(ax)


def _unmeasured(ax: Axes, x: float, attempt: Attempt, color: str) -> None:
    """A hollow mark on the bottom edge (axes coordinates): no value is implied."""
    ax.scatter(
        [x], [0.04], transform=ax.get_xaxis_transform(), marker="s", s=90, facecolors="none",
        edgecolors=color, linewidths=1.5, zorder=3, clip_on=False, gid="unmeasured",
    )  # fmt: skip
    steps = attempt.detail.steps
    words = "no steps" if not steps else f"{steps:,} steps,\nnot measured"
    ax.annotate(
        words, (x, 0.04), xycoords=ax.get_xaxis_transform(), xytext=(0, 10),
        textcoords="offset points", ha="center", fontsize=7, color=color,
    )  # fmt: skip


def _off_scale(ax: Axes, x: float, attempt: Attempt, color: str) -> None:
    """A run far off the baseline's scale, marked on the top edge with its value."""
    analysis = attempt.analysis
    assert analysis is not None
    ax.scatter(
        [x], [0.97], transform=ax.get_xaxis_transform(), marker="^", s=90, color=color,
        zorder=3, clip_on=False, gid="off-scale",
    )  # fmt: skip
    ax.annotate(
        f"{value_text(analysis.median)}: not comparable\n(units or scale?)", (x, 0.97),
        xycoords=ax.get_xaxis_transform(), xytext=(0, -26), textcoords="offset points",
        ha="center", fontsize=7, color=FATE_COLORS["oom"],
    )  # fmt: skip


def _fate_legend(ax: Axes, data: ReportData) -> None:
    from matplotlib.lines import Line2D

    seen = list(dict.fromkeys(a.fate for a in data.attempts))
    handles: list[Any] = [
        Line2D([], [], marker="o", linestyle="", color=FATE_COLORS.get(f, "#6c757d"), label=f)
        for f in seen
    ]
    handles += ax.get_legend_handles_labels()[0]  # the baseline
    legend_beside(ax, handles, title="fate", title_fontsize=7)


def step_time_distributions(ax: Axes, data: ReportData, look: Look | None = None) -> Figure:
    """Step times of each run's steady window, side by side (box: quartiles; whiskers: p5–p95)."""
    look = look or Look(data)
    runs = [a for a in data.attempts if a.step_times_s is not None and len(a.step_times_s)]
    if not runs:
        return empty(ax, "no step times recorded")
    values = [np.asarray(a.step_times_s, dtype=float) * 1000 for a in runs]
    box = ax.boxplot(values, whis=(5, 95), showfliers=False, patch_artist=True, widths=0.55)
    for patch, attempt in zip(box["boxes"], runs, strict=True):
        patch.set_facecolor(FATE_COLORS.get(attempt.fate, "#cccccc"))
        patch.set_alpha(0.45)
    ax.set_xticks(range(1, len(runs) + 1), [look.label(a, fate=True) for a in runs],
                  rotation=20, ha="right", fontsize=7.5)  # fmt: skip
    ax.set_ylabel("step time (ms)", fontsize=9)
    ax.set_title("Step-time distributions over the steady window", fontsize=10)
    grid(ax, "y")
    return figure_of(ax)


def overview_figures(data: ReportData, *, page: bool = False) -> dict[str, Figure]:
    """The report's figures by name, in the order a reader meets them. With `page`, every
    figure is a PDF page (A4 landscape) and the throughput panels take several if need be."""
    size = PAGE if page else None
    look = Look(data)
    figures: dict[str, Figure] = {}
    with plain_text():
        figure = new_figure(*(size or (11, 4.4)))
        marathon(figure.add_subplot(), data, look)
        figures["marathon"] = figure
        panels = throughput_figures(
            data, look, per_figure=PANELS_PER_PAGE if page else None, size=size
        )
        for i, figure in enumerate(panels):
            figures["throughput" if i == 0 else f"throughput_{i + 1}"] = figure
        loss = loss_figure(data, look, size)
        if loss is not None:
            figures["loss"] = loss
        figure = new_figure(*(size or (11, 3.6)))
        step_time_distributions(figure.add_subplot(), data, look)
        figures["step_times"] = figure
        gpus = gpu_figure(data, look, size)
        if gpus is not None:
            figures["gpus"] = gpus
    return figures
