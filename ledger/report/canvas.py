"""What every figure of the report shares: a headless figure, the grid, the empty panel,
legends that sit beside the data rather than on it, one colour and one short label per
run across all figures."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from ledger.model.report import Attempt, ReportData
from ledger.report.glyphs import drawable, isolate, isolated
from ledger.report.plots import run_colors
from ledger.report.text import FIGURE_NAME_CHARS, escape_math, short_names

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.legend import Legend

PAGE = (11.69, 8.27)  # A4 landscape, in inches: every page of the PDF


def new_figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def figure_of(ax: Axes) -> Figure:
    """The figure an axes belongs to (the report draws no subfigures)."""
    from matplotlib.figure import Figure

    figure = ax.get_figure(root=True)
    assert isinstance(figure, Figure)
    return figure


def grid(ax: Axes, axis: Literal["both", "x", "y"] = "both") -> None:
    ax.grid(True, axis=axis, linewidth=0.4, alpha=0.5)


def empty(ax: Axes, message: str) -> Figure:
    ax.text(
        0.5, 0.5, message, ha="center", va="center", fontsize=10, color="0.4",
        transform=ax.transAxes,
    )  # fmt: skip
    ax.set_axis_off()
    return figure_of(ax)


def legend_beside(ax: Axes, handles: list[Any] | None = None, **options: Any) -> Legend:
    """A legend to the right of the axes, outside them, so it covers no data."""
    settings: dict[str, Any] = {
        "loc": "upper left",
        "bbox_to_anchor": (1.01, 1.0),
        "borderaxespad": 0.0,
        "fontsize": 7,
        "frameon": False,
    }
    settings.update(options)
    if handles is not None:
        return ax.legend(handles=handles, **settings)
    return ax.legend(**settings)


class Look:
    """One colour and one short, distinct label per run, the same in every figure."""

    def __init__(self, data: ReportData) -> None:
        names = [a.name for a in data.attempts]
        self.labels = {
            name: isolate(escape_math(drawable(label)))
            for name, label in short_names(names, FIGURE_NAME_CHARS).items()
        }
        self.colors = dict(zip(names, run_colors(len(names)), strict=True))

    def label(self, attempt: Attempt, *, fate: bool = False) -> str:
        """The run's label as drawn (isolated from the text beside it)."""
        return isolated(self.marked(attempt, fate=fate))

    def marked(self, attempt: Attempt, *, fate: bool = False) -> str:
        """The label with its isolation marks still stand-ins (for text cleaned later)."""
        text = self.labels[attempt.name]
        return f"{text} ({attempt.fate})" if fate else text

    def color(self, attempt: Attempt) -> str:
        return self.colors[attempt.name]
