"""GPU memory against the card's capacity, and utilisation: what probes (nvidia-smi),
samples taken during the run, and the steps themselves recorded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ledger.model.records import GpuSample
from ledger.model.report import Attempt, ReportData
from ledger.report.canvas import Look, figure_of, grid, legend_beside, new_figure
from ledger.report.colors import FATE_COLORS
from ledger.report.text import mpl

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MIB_PER_GIB = 1024.0
PROBE, SAMPLED = "probe", "sampled"


@dataclass(frozen=True)
class Reading:
    """GPUs read once: by a probe at one moment, or the run's samples per GPU."""

    source: str  # PROBE or SAMPLED
    gpus: tuple[GpuSample, ...]


def readings(attempt: Attempt) -> list[Reading]:
    found = [Reading(PROBE, tuple(p.gpus)) for p in attempt.detail.probes if p.gpus]
    if attempt.gpu_samples:
        found.append(Reading(SAMPLED, attempt.gpu_samples))
    return found


def has_gpu_data(data: ReportData) -> bool:
    return any(readings(a) or a.peak_memory_mib is not None for a in data.attempts)


def capacities(data: ReportData) -> dict[float, str | None]:
    """Each distinct card capacity (GiB, to 0.1) with the card's name when one name fits."""
    names: dict[float, set[str]] = {}
    for attempt in data.attempts:
        for reading in readings(attempt):
            for gpu in reading.gpus:
                total = gpu.memory_total_mib
                if total is not None and np.isfinite(total) and total > 0:
                    names.setdefault(round(total / MIB_PER_GIB, 1), set()).update(
                        [gpu.name] if gpu.name else []
                    )
    return {gib: (next(iter(n)) if len(n) == 1 else None) for gib, n in sorted(names.items())}


def gpu_figure(
    data: ReportData, look: Look, size: tuple[float, float] | None = None
) -> Figure | None:
    """Memory used against capacity, and utilisation, per run (None when nothing was read)."""
    if not has_gpu_data(data):
        return None
    figure = new_figure(*(size or (11, 3.8)))
    ax_memory, ax_util = figure.subplots(1, 2)
    gpu_memory_and_utilization(ax_memory, ax_util, data, look)
    return figure


def gpu_memory_and_utilization(
    ax_memory: Axes, ax_util: Axes, data: ReportData, look: Look
) -> Figure:
    runs = [a for a in data.attempts if readings(a) or a.peak_memory_mib is not None]
    used_max = 0.0
    for x, attempt in enumerate(runs):
        color = FATE_COLORS.get(attempt.fate, "#6c757d")
        found = readings(attempt)
        for slot, reading in enumerate(found):
            offset = (slot - (len(found) - 1) / 2) * min(0.28, 0.8 / max(len(found), 1))
            marker = "o" if reading.source == PROBE else "s"
            memory = [
                g.memory_used_mib / MIB_PER_GIB
                for g in reading.gpus
                if g.memory_used_mib is not None
            ]
            util = [g.utilization_pct for g in reading.gpus if g.utilization_pct is not None]
            for ax, values in ((ax_memory, memory), (ax_util, util)):
                if values:
                    ax.scatter([x + offset] * len(values), values, color=color, s=12, alpha=0.7,
                               marker=marker)  # fmt: skip
                    ax.plot([x + offset - 0.1, x + offset + 0.1], [np.mean(values)] * 2,
                            color=color, linewidth=2)  # fmt: skip
            used_max = max([used_max, *memory])
        if attempt.peak_memory_mib is not None:
            peak = attempt.peak_memory_mib / MIB_PER_GIB
            ax_memory.scatter([x], [peak], marker="D", s=34, facecolors="none", edgecolors=color,
                              linewidths=1.2, zorder=3)  # fmt: skip
            used_max = max(used_max, peak)
    caps = capacities(data)
    for gib, name in caps.items():
        label = f"capacity {gib:g} GiB" + (f" ({mpl(name, 28)})" if name else "")
        ax_memory.axhline(gib, color="0.25", linestyle="--", linewidth=1.0, label=label)
    top = max([used_max, *caps]) if caps or used_max else 1.0
    ax_memory.set_ylim(0, top * 1.08)
    ticks = [look.label(a, fate=True) for a in runs]
    for ax in (ax_memory, ax_util):
        ax.set_xticks(range(len(runs)), ticks, rotation=20, ha="right", fontsize=7.5)
        ax.set_xlim(-0.6, len(runs) - 0.4)
        grid(ax, "y")
    ax_memory.set_ylabel("GiB", fontsize=9)
    title = "GPU memory used against the card's capacity"
    if not caps:
        title += "\n(capacity unknown: add memory.total to the nvidia-smi query)"
    ax_memory.set_title(title, fontsize=9.5)
    ax_util.set_ylabel("%", fontsize=9)
    ax_util.set_ylim(-5, 105)
    ax_util.set_title("GPU utilisation", fontsize=9.5)
    sources = {r.source for a in runs for r in readings(a)}
    peaks = any(a.peak_memory_mib is not None for a in runs)
    legend_beside(ax_util, _key(ax_memory, sources, peaks))
    return figure_of(ax_memory)


def _key(ax_memory: Axes, sources: set[str], peaks: bool) -> list[Any]:
    """What each mark means, for the marks drawn."""
    from matplotlib.lines import Line2D

    handles: list[Any] = []
    if PROBE in sources:
        handles.append(Line2D([], [], marker="o", linestyle="", color="0.4", markersize=4,
                              label="a probe: a dot per GPU"))  # fmt: skip
    if SAMPLED in sources:
        handles.append(Line2D([], [], marker="s", linestyle="", color="0.4", markersize=4,
                              label="sampled in the run: most per GPU"))  # fmt: skip
    if sources:
        handles.append(Line2D([], [], color="0.4", linewidth=2, label="mean over the GPUs"))
    if peaks:
        handles.append(Line2D([], [], marker="D", linestyle="", markerfacecolor="none",
                              color="0.4", label="the most a step recorded"))  # fmt: skip
    handles.extend(ax_memory.get_legend_handles_labels()[0])  # the capacities
    return handles
