"""The report's figures. matplotlib's object API on Agg: each function draws on the axes it
is given and returns the figure; nothing here calls pyplot or opens a window.

Text from the ledger reaches an artist only through `ledger.report.text` (cleaned,
shortened, `$` escaped); draw and save inside `plots.plain_text()`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ledger.analyze.wording import counted
from ledger.model.report import Attempt, ReportData
from ledger.model.terms import FAULT_FATES, Fate
from ledger.report import story
from ledger.report.canvas import PAGE, Look, empty, figure_of, grid, legend_beside, new_figure
from ledger.report.colors import FATE_COLORS
from ledger.report.numbers import value_digits, value_text
from ledger.report.panels import loss_figure, throughput_figures
from ledger.report.plots import (
    TYPICAL_APART,
    judged,
    plain_text,
    plot_baseline,
    short_ticks,
    typical,
)
from ledger.report.resources import gpu_figure
from ledger.report.text import mpl

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PANELS_PER_PAGE = 6


def marathon(ax: Axes, data: ReportData, look: Look | None = None) -> Figure:
    """Every attempt in the order it ran: its effective throughput (the figure the verdict
    uses, stalls included) with its 95 % CI against the baseline, coloured by fate, and
    the typical step (median) as a small bar where it differs. A run that died is shown
    where it fell; a run with no steady steps is marked along the bottom, off the value
    scale (it was never measured); a run far off the baseline's scale is marked on the
    top edge, with its value."""
    look = look or Look(data)
    attempts = data.attempts
    xs = list(range(len(attempts)))
    comparable = [a for a in attempts if a.analysis is not None and not story.implausible(a)]
    digits = value_digits([judged(a.analysis)[0] for a in comparable if a.analysis])
    levels = [judged(a.analysis)[0] for a in comparable if a.analysis]
    levels += [typical(a.analysis) for a in comparable if a.analysis]
    levels += [v for a in comparable if a.analysis for v in judged(a.analysis)[1] or ()]
    shown_typical = False
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
        value, ci = judged(analysis)
        low, high = ci if ci is not None else (value, value)
        median = typical(analysis)
        if math.isfinite(median) and abs(median / value - 1.0) > TYPICAL_APART:
            ax.scatter([x + 0.12], [median], marker="_", s=160, color=color, linewidths=1.6,
                       alpha=0.7, zorder=3, gid="typical")  # fmt: skip
            ax.annotate(
                f"typical step {value_text(median, digits)}", (x + 0.12, median),
                xytext=(8, -3), textcoords="offset points", fontsize=7, color="0.35",
            )  # fmt: skip
            shown_typical = True
        ax.errorbar(
            x, value, yerr=[[value - low], [high - value]],
            fmt="X" if attempt.fate in FAULT_FATES else "o", color=color, ecolor=color,
            capsize=5, markersize=9 if attempt.fate in FAULT_FATES else 8, linewidth=1.5,
        )  # fmt: skip
        ax.annotate(
            value_text(value, digits), (x, high), xytext=(0, 6),
            textcoords="offset points", ha="center", fontsize=8,
        )  # fmt: skip
        if attempt.fate in FAULT_FATES or attempt.fate in (Fate.KILLED, Fate.STALLED):
            label = f"{attempt.fate.upper()}" if attempt.fate in FAULT_FATES else attempt.fate
            ax.annotate(
                label, (x, low), xytext=(0, -14), textcoords="offset points", ha="center",
                fontsize=7.5, color=color, fontweight="bold",
            )  # fmt: skip
    plot_baseline(ax, data.baseline.value, data.baseline.unit)
    ax.set_xticks(xs, [look.label(a, fate=True) for a in attempts], rotation=20, ha="right",
                  fontsize=7.5)  # fmt: skip
    unit = mpl(data.unit, 24) if data.unit else None
    ax.set_ylabel(f"effective throughput ({unit})" if unit else "effective throughput",
                  fontsize=9)  # fmt: skip
    ax.set_title(
        "The marathon: every attempt in the order it ran — effective throughput, stalls "
        "included (95 % CI; colour = fate)",
        fontsize=10,
    )
    grid(ax, "y")
    short_ticks(ax.yaxis)
    ax.set_ylim(bottom, top)
    ax.set_xlim(-0.6, max(len(attempts), 1) - 0.4)
    _fate_legend(ax, data, shown_typical)
    return figure_of(ax)


def _unmeasured(ax: Axes, x: float, attempt: Attempt, color: str) -> None:
    """A hollow mark on the bottom edge (axes coordinates): no value is implied."""
    ax.scatter(
        [x], [0.04], transform=ax.get_xaxis_transform(), marker="s", s=90, facecolors="none",
        edgecolors=color, linewidths=1.5, zorder=3, clip_on=False, gid="unmeasured",
    )  # fmt: skip
    steps = attempt.detail.steps
    words = "no steps" if not steps else f"{counted(steps, 'step')},\nnot measured"
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
        f"{value_text(judged(analysis)[0])}: not comparable\n(units or scale?)", (x, 0.97),
        xycoords=ax.get_xaxis_transform(), xytext=(0, -26), textcoords="offset points",
        ha="center", fontsize=7, color=FATE_COLORS["oom"],
    )  # fmt: skip


def _fate_legend(ax: Axes, data: ReportData, typical_shown: bool = False) -> None:
    from matplotlib.lines import Line2D

    seen = list(dict.fromkeys(a.fate for a in data.attempts))
    handles: list[Any] = [
        Line2D([], [], marker="o", linestyle="", color=FATE_COLORS.get(f, "#6c757d"), label=f)
        for f in seen
    ]
    handles += ax.get_legend_handles_labels()[0]  # the baseline
    if typical_shown:
        handles.append(
            Line2D([], [], marker="_", linestyle="", color="0.4", markersize=10,
                   label="typical step (median)")
        )  # fmt: skip
    legend_beside(ax, handles, title="fate", title_fontsize=7)


SPIKE = 2.0  # a step this many times the run's median step time is a spike


def step_time_distributions(ax: Axes, data: ReportData, look: Look | None = None) -> Figure:
    """Step times of each run's steady window, side by side (box: quartiles; whiskers:
    p5–p95), with every spike (a step over SPIKE × the median) drawn as a point and
    counted with the share of the run's step time it took: a run whose every 50th step
    costs 6× shows it, rather than hiding it past a whisker."""
    look = look or Look(data)
    runs = [a for a in data.attempts if a.step_times_s is not None and len(a.step_times_s)]
    if not runs:
        return empty(ax, "no step times recorded")
    values = [np.asarray(a.step_times_s, dtype=float) * 1000 for a in runs]
    box = ax.boxplot(values, whis=(5, 95), showfliers=False, patch_artist=True, widths=0.55)
    for patch, attempt in zip(box["boxes"], runs, strict=True):
        patch.set_facecolor(FATE_COLORS.get(attempt.fate, "#cccccc"))
        patch.set_alpha(0.45)
    spiky = False
    for i, times in enumerate(values, start=1):
        median = float(np.median(times))
        spikes = times[times > SPIKE * median]
        if not len(spikes):
            continue
        spiky = True
        jitter = np.linspace(-0.18, 0.18, len(spikes)) if len(spikes) > 1 else np.zeros(1)
        ax.scatter(i + jitter, spikes, marker="o", s=12, color=FATE_COLORS["oom"], alpha=0.7,
                   linewidths=0, zorder=3, gid="spikes")  # fmt: skip
        # what they add beyond a typical step, as the stall figure counts it
        share = 100.0 * float((spikes - median).sum()) / float(times.sum())
        ax.annotate(
            f"{counted(len(spikes), 'spike')} ≥ {SPIKE:g}× the median\n"
            f"adding {share:.1f} % of the time",
            (i, float(spikes.max())), xytext=(0, 6), textcoords="offset points", ha="center",
            fontsize=7, color=FATE_COLORS["oom"],
        )  # fmt: skip
    if spiky:  # room above the highest spike for its words
        top = max(float(v.max()) for v in values)
        ax.set_ylim(top=top * 1.22)
        short_ticks(ax.yaxis)
    ax.set_xticks(range(1, len(runs) + 1), [look.label(a, fate=True) for a in runs],
                  rotation=20, ha="right", fontsize=7.5)  # fmt: skip
    ax.set_ylabel("step time (ms)", fontsize=9)
    ax.set_title(
        "Step-time distributions over the steady window (box: quartiles; whiskers: p5–p95; "
        "points: spikes)",
        fontsize=10,
    )
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
