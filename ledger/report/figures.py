"""The report's figures. matplotlib's object API on Agg: each function draws on the axes it
is given and returns the figure; nothing here calls pyplot or opens a window."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import numpy as np

from ledger.analyze.wording import short_value
from ledger.model.report import Attempt, ReportData
from ledger.model.terms import FAULT_FATES
from ledger.report.colors import FATE_COLORS
from ledger.report.plots import plot_baseline, plot_run, run_colors

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def _grid(ax: Axes, axis: Literal["both", "x", "y"] = "both") -> None:
    ax.grid(True, axis=axis, linewidth=0.4, alpha=0.5)


def _figure(ax: Axes) -> Figure:
    """The figure an axes belongs to (the report draws no subfigures)."""
    from matplotlib.figure import Figure

    figure = ax.get_figure(root=True)
    assert isinstance(figure, Figure)
    return figure


def new_figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def throughput_panels(data: ReportData, *, columns: int = 2) -> Figure:
    """Throughput over steps, one small panel per analysed run, on a shared scale."""
    attempts = data.analysed
    rows = max(1, math.ceil(len(attempts) / columns))
    figure = new_figure(11, 2.6 * rows + 0.4)
    if not attempts:
        ax = figure.add_subplot()
        _empty(ax, "no run has enough steps to plot yet (ledger ingest LOG)")
        return figure
    axes = figure.subplots(rows, columns, sharey=True, squeeze=False).ravel()
    colors = run_colors(len(attempts))
    for ax, attempt, color in zip(axes, attempts, colors, strict=False):
        throughput_panel(ax, attempt, data, color)
    for ax in axes[len(attempts) :]:
        ax.set_visible(False)
    low, high = _levels(data)
    if low is not None and high is not None:
        pad = 0.25 * (high - low) if high > low else 0.05 * high
        axes[0].set_ylim(max(low - 2 * pad, 0.0), high + pad)
    figure.suptitle("Throughput over steps (warm-up shaded, change points dashed)", fontsize=11)
    return figure


def throughput_panel(ax: Axes, attempt: Attempt, data: ReportData, color: str) -> Figure:
    analysis = attempt.analysis
    assert analysis is not None
    plot_run(ax, analysis, color=color)
    plot_baseline(ax, data.baseline.value, data.baseline.unit)
    verdict = ""
    if analysis.vs_baseline_pct is not None:
        verdict = f" — {analysis.vs_baseline_pct:.1f} % of baseline"
    ax.set_title(
        f"{attempt.name} ({attempt.fate}){verdict}", fontsize=9, color=FATE_COLORS.get(attempt.fate)
    )
    ax.set_xlabel("step", fontsize=8)
    ax.set_ylabel(data.unit or "throughput", fontsize=8)
    ax.tick_params(labelsize=7)
    _grid(ax)
    ax.legend(loc="lower right", fontsize=7, frameon=False)
    return _figure(ax)


def marathon(ax: Axes, data: ReportData) -> Figure:
    """Every attempt in time order: steady median with its 95 % CI against the baseline,
    coloured by fate; attempts that died before a steady window are shown where they fell."""
    names = [a.name for a in data.attempts]
    xs = np.arange(len(names))
    floor = 0.0
    medians = [a.median for a in data.analyses]
    if medians:
        floor = min(medians) * 0.85
    for x, attempt in zip(xs, data.attempts, strict=True):
        color = FATE_COLORS.get(attempt.fate, FATE_COLORS["unknown"])
        analysis = attempt.analysis
        if analysis is not None:
            low, high = analysis.ci95 if analysis.ci95 is not None else (analysis.median,) * 2
            ax.errorbar(
                x,
                analysis.median,
                yerr=[[analysis.median - low], [high - analysis.median]],
                fmt="o",
                color=color,
                ecolor=color,
                capsize=5,
                markersize=8,
                linewidth=1.5,
            )
            ax.annotate(
                short_value(analysis.median),
                (x, high),
                xytext=(0, 6),
                textcoords="offset points",
                ha="center",
                fontsize=8,
            )
        if attempt.fate in FAULT_FATES or analysis is None:
            # A run that died (OOM, crash, NCCL) or never reached a steady window is shown
            # where it fell, marked, so the marathon hides no failed attempt.
            y = analysis.median if analysis is not None else floor
            marker = "X" if attempt.fate in FAULT_FATES else "s"
            ax.scatter([x], [y], marker=marker, s=130, color=color, zorder=3, edgecolors="white")
            label = attempt.fate.upper() if attempt.fate in FAULT_FATES else "no steady steps"
            ax.annotate(
                label,
                (x, y),
                xytext=(0, -18),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                color=color,
                fontweight="bold",
            )
        elif attempt.fate in ("killed", "stalled"):
            ax.annotate(
                attempt.fate,
                (x, analysis.median),
                xytext=(0, -18),
                textcoords="offset points",
                ha="center",
                fontsize=7,
                color=color,
            )
    plot_baseline(ax, data.baseline.value, data.baseline.unit)
    ax.set_xticks(xs, names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(f"steady median ({data.unit})" if data.unit else "steady median", fontsize=9)
    ax.set_title("The marathon: every attempt in order (95 % CI; colour = fate)", fontsize=10)
    _grid(ax, "y")
    if data.baseline.value is not None:
        ax.legend(loc="lower right", fontsize=8, frameon=False)
    if medians or data.baseline.value is not None:
        ax.set_ylim(bottom=floor * 0.95 if floor else None)
    ax.set_xlim(-0.6, len(names) - 0.4)
    _fate_legend(ax, data)
    return _figure(ax)


def step_time_distributions(ax: Axes, data: ReportData) -> Figure:
    """Step times of each run's steady window, side by side (box: quartiles; whiskers: p5–p95)."""
    series = [
        (a.name, a.step_times_s)
        for a in data.attempts
        if a.step_times_s is not None and len(a.step_times_s)
    ]
    if not series:
        return _empty(ax, "no step times recorded")
    labels = [name for name, _ in series]
    values = [np.asarray(v, dtype=float) * 1000 for _, v in series]
    box = ax.boxplot(values, whis=(5, 95), showfliers=False, patch_artist=True, widths=0.55)
    for patch, attempt in zip(
        box["boxes"], [a for a in data.attempts if a.name in labels], strict=False
    ):
        patch.set_facecolor(FATE_COLORS.get(attempt.fate, "#cccccc"))
        patch.set_alpha(0.45)
    ax.set_xticks(range(1, len(labels) + 1), labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("step time (ms)", fontsize=9)
    ax.set_title("Step-time distributions over the steady window", fontsize=10)
    _grid(ax, "y")
    return _figure(ax)


def gpu_memory_and_utilization(ax_memory: Axes, ax_util: Axes, data: ReportData) -> Figure:
    """What the probes saw on the GPUs: memory used and utilisation, per probe, per GPU."""
    points = []
    for attempt in data.attempts:
        for probe in attempt.detail.probes:
            if probe.gpus:
                points.append((attempt, probe))
    if not points:
        _empty(ax_memory, "no probe recorded GPU samples (ledger probe … -- nvidia-smi …)")
        ax_util.set_visible(False)
        return _figure(ax_memory)
    # Probes are grouped by run: one tick per run, its probes side by side in time order.
    runs = list(dict.fromkeys(attempt.name for attempt, _ in points))
    per_run: dict[str, int] = {}
    for attempt, probe in points:
        slot = per_run.get(attempt.name, 0)
        per_run[attempt.name] = slot + 1
        count = sum(1 for a, _ in points if a.name == attempt.name)
        x = runs.index(attempt.name) + (slot - (count - 1) / 2) * 0.28
        color = FATE_COLORS.get(attempt.fate, "#6c757d")
        memory = [g.memory_used_mib / 1024 for g in probe.gpus if g.memory_used_mib is not None]
        util = [g.utilization_pct for g in probe.gpus if g.utilization_pct is not None]
        for ax, values in ((ax_memory, memory), (ax_util, util)):
            if values:
                ax.scatter([x] * len(values), values, color=color, s=12, alpha=0.7)
                ax.plot([x - 0.1, x + 0.1], [np.mean(values)] * 2, color=color, linewidth=2)
    for ax, title, unit in (
        (ax_memory, "GPU memory used", "GiB"),
        (ax_util, "GPU utilisation", "%"),
    ):
        ax.set_xticks(range(len(runs)), runs, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel(unit, fontsize=9)
        ax.set_title(f"{title} per probe, in time order (dots: GPUs; bar: mean)", fontsize=10)
        _grid(ax, "y")
    ax_util.set_ylim(-5, 105)
    return _figure(ax_memory)


def overview_figures(data: ReportData) -> dict[str, Figure]:
    """The report's figures by name, in the order a reader meets them."""
    figures: dict[str, Figure] = {}
    figure = new_figure(11, 4.2)
    marathon(figure.add_subplot(), data)
    figures["marathon"] = figure
    figures["throughput"] = throughput_panels(data)
    figure = new_figure(11, 3.6)
    step_time_distributions(figure.add_subplot(), data)
    figures["step_times"] = figure
    if any(p.gpus for a in data.attempts for p in a.detail.probes):
        figure = new_figure(11, 3.4)
        ax_memory, ax_util = figure.subplots(1, 2)
        gpu_memory_and_utilization(ax_memory, ax_util, data)
        figures["gpus"] = figure
    return figures


def _levels(data: ReportData) -> tuple[float | None, float | None]:
    lows = [a.p10 for a in data.analyses if math.isfinite(a.p10)]
    highs = [a.p90 for a in data.analyses if math.isfinite(a.p90)]
    if data.baseline.value is not None:
        lows.append(data.baseline.value)
        highs.append(data.baseline.value)
    return (min(lows) if lows else None), (max(highs) if highs else None)


def _fate_legend(ax: Axes, data: ReportData) -> None:
    from matplotlib.lines import Line2D

    seen = list(dict.fromkeys(a.fate for a in data.attempts))
    handles = [
        Line2D([], [], marker="o", linestyle="", color=FATE_COLORS.get(f, "#6c757d"), label=f)
        for f in seen
    ]
    legend = ax.legend(
        handles=handles, loc="upper left", fontsize=7, frameon=False, title="fate", title_fontsize=7
    )
    ax.add_artist(legend)
    if data.baseline.value is not None:
        ax.legend(loc="lower right", fontsize=8, frameon=False)


def _empty(ax: Axes, message: str) -> Figure:
    ax.text(
        0.5,
        0.5,
        message,
        ha="center",
        va="center",
        fontsize=10,
        color="0.4",
        transform=ax.transAxes,
    )
    ax.set_axis_off()
    return _figure(ax)
