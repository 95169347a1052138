"""What the analyzer hands out: plain records with `to_dict()` for `--json`.

Fields marked `internal` (the arrays behind a run, for plots) stay out of the JSON.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ledger.model.records import Record, jsonable

VERDICTS = ("regression", "improvement", "no-change")


# metadata of the fields that `to_dict()` leaves out (the arrays kept for plotting)
INTERNAL = {"internal": True}


class AnalysisRecord(Record):
    """A record whose nested records serialise themselves and whose internal fields stay out."""

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: _nested(getattr(self, f.name))
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if not f.metadata.get("internal")
        }


def _nested(value: Any) -> Any:
    if isinstance(value, AnalysisRecord):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [_nested(v) for v in value]
    return jsonable(value)


@dataclasses.dataclass(frozen=True)
class ChangePoint(AnalysisRecord):
    """The level moved at `step` (the first step at the new level) and stayed."""

    step: int
    before: float
    after: float
    shift_pct: float
    p_value: float


@dataclasses.dataclass(frozen=True)
class RankMedian(AnalysisRecord):
    rank: int
    median: float
    steps: int


@dataclasses.dataclass(frozen=True)
class RankSpread(AnalysisRecord):
    """Per-rank medians over the steady window: the slowest rank and how far apart they are."""

    ranks: int
    slowest_rank: int
    slowest_median: float
    fastest_rank: int
    fastest_median: float
    spread_pct: float  # (fastest − slowest) / median of the rank medians
    per_rank: list[RankMedian]


@dataclasses.dataclass(frozen=True)
class StepTimes(AnalysisRecord):
    """Step-time percentiles over the steady window, in seconds."""

    p50: float
    p90: float
    p99: float


@dataclasses.dataclass(frozen=True)
class Baseline(AnalysisRecord):
    value: float | None
    unit: str | None
    source: str | None  # "investigation", "option", or None when there is none


@dataclasses.dataclass(frozen=True)
class RunAnalysis(AnalysisRecord):
    """One run's steady state, statistics, outliers, change points and rank spread."""

    run: str
    unit: str | None
    source: str  # where the throughput came from (ledger.analyze.series)
    n_steps: int  # steps with a usable throughput
    first_step: int
    last_step: int
    steady_from_step: int
    settled: bool  # False: no steady stretch in the first half (the window is the second half)
    n_steady: int  # steps in the steady window, outliers included
    median: float
    ci95: tuple[float, float] | None
    mean: float
    p10: float
    p90: float
    cv: float
    batches: int  # batch medians behind the interval
    tau_steps: float  # integrated autocorrelation time of the steady window
    step_time_s: StepTimes | None
    outliers: int
    outlier_steps: list[int]  # the first few
    change_points: list[ChangePoint]
    ranks: RankSpread | None
    vs_baseline_pct: float | None
    recovered: bool | None  # median within the threshold of the baseline, or above it
    se_log: float = dataclasses.field(
        default=math.nan, repr=False, compare=False, metadata=INTERNAL
    )
    steps: Any = dataclasses.field(
        default=None, repr=False, compare=False, metadata=INTERNAL
    )  # numpy arrays, for plots
    values: Any = dataclasses.field(default=None, repr=False, compare=False, metadata=INTERNAL)
    outlier_mask: Any = dataclasses.field(
        default=None, repr=False, compare=False, metadata=INTERNAL
    )


@dataclasses.dataclass(frozen=True)
class RunComparison(AnalysisRecord):
    """Run b against run a: difference of steady medians, its interval, p-value, verdict."""

    a: str
    b: str
    median_a: float
    median_b: float
    delta_pct: float  # (median_b / median_a − 1) × 100
    ci95_pct: tuple[float, float] | None
    p_value: float | None
    verdict: str  # regression | improvement | no-change
    threshold_pct: float
    alpha: float
    summary: str  # the verdict in words


@dataclasses.dataclass(frozen=True)
class Resolution(AnalysisRecord):
    """What `--resolve H` did: the comparison stored and the status given to H."""

    hypothesis: int
    status: str
    comparison_ids: list[int]
    note: str


@dataclasses.dataclass(frozen=True)
class CompareReport(AnalysisRecord):
    baseline: Baseline
    threshold_pct: float
    alpha: float
    runs: list[RunAnalysis]
    comparisons: list[RunComparison]
    resolution: Resolution | None = None
    notes: list[str] = dataclasses.field(default_factory=list)  # warnings a person should read
    plot: str | None = None  # the figure written, when one was asked for
    fates: dict[str, str] = dataclasses.field(default_factory=dict)  # each run's fate

    def run(self, name: str) -> RunAnalysis:
        return next(r for r in self.runs if r.run == name)
