"""What a report shows, gathered into plain objects before anything is drawn.

The store fills a `ReportData` (ledger.store.report); figures and HTML (ledger.report)
only read it, so they can be tested on hand-made data and never touch the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger.model.analysis import Baseline, RunAnalysis, RunComparison
    from ledger.model.records import Hypothesis, RunDetail, TimelineEntry


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
    def analyses(self) -> list[RunAnalysis]:
        """The analyses of the analysed attempts, in the same order as `analysed`."""
        return [a.analysis for a in self.attempts if a.analysis is not None]

    @property
    def unit(self) -> str | None:
        units = [a.unit for a in self.analyses if a.unit]
        return units[0] if units else self.baseline.unit
