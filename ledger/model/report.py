"""What a report shows, gathered into plain objects before anything is drawn.

The store gathers what a `ReportData` holds (ledger.store.report) and the use case
analyses it (ledger.usecases.report); figures and HTML (ledger.report) only read it, so
they can be tested on hand-made data and never touch the database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ledger.model.terms import EventKind, Fate

if TYPE_CHECKING:
    from ledger.model.analysis import Baseline, RunAnalysis, RunComparison
    from ledger.model.records import GpuSample, Hypothesis, RunDetail, TimelineEntry
    from ledger.model.why import WhyResult

# Where the time an attempt ran was taken from, best first (see `Attempt.ran_at`).
RAN_FIRST_STEP = "first step"  # the wall time of its first step (the hook, a timestamped log)
RAN_STARTED = "run start"  # run.started_at
RAN_RELAUNCH = "relaunch"  # the last deploy step that (re)launched it
RAN_CREATED = "row created"  # when its row was made: the last resort


@dataclass(frozen=True)
class RunEvent:
    """A log event the report tells: a recompile, an OOM, an NCCL failure."""

    kind: EventKind
    text: str
    step: int | None  # the step it happened at; None when nothing said
    line: int | None
    rank: int | None
    from_probe: bool = False  # the line number counts in a probe's output, not in the log


@dataclass(frozen=True)
class Series:
    """One value per step (the mean over ranks), in step order, as numpy arrays."""

    steps: Any
    values: Any

    def __len__(self) -> int:
        return len(self.steps)


@dataclass(frozen=True)
class Attempt:
    """One run of the marathon with everything the report says about it."""

    detail: RunDetail
    analysis: RunAnalysis | None  # None: too few steps to analyse
    comparison: RunComparison | None  # against the first analysed run
    step_times_s: Any  # numpy array of the steady window's step times, or None
    why_not_analysed: str | None = None
    ran_at: datetime | None = None  # when it ran: what the report orders attempts by
    ran_from: str = RAN_CREATED  # which time `ran_at` is (RAN_FIRST_STEP, …)
    events: tuple[RunEvent, ...] = ()  # the latest few of each kind, in log order
    event_counts: dict[str, int] = field(default_factory=dict)  # all of them, by kind
    loss: Series | None = None
    peak_memory_mib: float | None = (
        None  # the most memory a step recorded (reserved, else allocated)
    )
    gpu_samples: tuple[GpuSample, ...] = ()  # sampled during the run, not by a probe: per GPU
    why: WhyResult | None = None  # slower than the reference: the likely causes (docs/why.md)

    @property
    def name(self) -> str:
        return self.detail.run

    @property
    def fate(self) -> Fate:
        return self.detail.fate


@dataclass(frozen=True)
class ReportData:
    db: str
    investigation: str
    baseline: Baseline
    attempts: list[Attempt]  # in the order they ran (Attempt.ran_at)
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
