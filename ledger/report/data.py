"""What a report shows, gathered into plain objects before anything is drawn.

The store fills a `ReportData` (ledger.store.report); figures and HTML only read it, so
they can be tested on hand-made data and never touch the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger.model.analysis import Baseline, RunAnalysis, RunComparison
    from ledger.model.records import Hypothesis, RunDetail, TimelineEntry

FATE_COLORS = {
    "finished": "#2a9d8f",
    "running": "#457b9d",
    "loading": "#8d99ae",
    "stalled": "#e9c46a",
    "oom": "#d62828",
    "crashed": "#9d0208",
    "nccl": "#f77f00",
    "killed": "#6a040f",
    "unknown": "#6c757d",
}
# Fates that mean the attempt failed on its own; `killed` is often the engineer stopping a
# run to try the next idea, so it is labelled but not marked as a failure.
FAILED_FATES = ("oom", "crashed", "nccl")


@dataclass(frozen=True)
class Attempt:
    """One run of the marathon with everything the report says about it."""

    detail: RunDetail
    analysis: RunAnalysis | None  # None: too few steps to analyse
    comparison: RunComparison | None  # against the first analysed run
    step_times_s: Any  # numpy array of the steady window's step times, or None
    why_not_analysed: str | None = None

    @property
    def name(self) -> str:
        return self.detail.run

    @property
    def fate(self) -> str:
        return self.detail.fate


@dataclass(frozen=True)
class ReportData:
    db: str
    investigation: str
    baseline: Baseline
    attempts: list[Attempt]  # in the order the runs were created
    hypotheses: list[Hypothesis]
    timeline: list[TimelineEntry]
    generated_at: datetime

    @property
    def analysed(self) -> list[Attempt]:
        return [a for a in self.attempts if a.analysis is not None]

    @property
    def unit(self) -> str | None:
        units = [a.analysis.unit for a in self.analysed if a.analysis.unit]  # type: ignore[union-attr]
        return units[0] if units else self.baseline.unit
