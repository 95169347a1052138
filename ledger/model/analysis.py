"""What the analyzer hands out: plain records with `to_dict()` for `--json`.

Fields marked `internal` (the arrays behind a run, for plots) stay out of the JSON.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ledger.model.records import Record, jsonable
from ledger.model.terms import HypothesisStatus, Verdict, WatchPhase
from ledger.model.why import Finding

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
class Stalls(AnalysisRecord):
    """Steps of the steady window that cost far more wall time than a typical step."""

    recurring: int  # stalls counted in the effective figure (there were two or more)
    one_off: int  # 1 when there was a single stall: left out of the effective figure
    steps: list[int]  # the first few stall steps
    cost_pct: float  # share of the steady window's wall time the recurring stalls cost
    seconds: float | None  # what the recurring stalls cost (None: no times recorded)
    one_off_seconds: float | None  # what the one-off stall cost (None: none, or no times)
    at: Any = dataclasses.field(
        default=None, repr=False, compare=False, metadata=INTERNAL
    )  # every stall step (numpy), for plots


@dataclasses.dataclass(frozen=True)
class Regime(AnalysisRecord):
    """The stretch a run ends in, from its last change point on: what its verdict uses."""

    from_step: int
    n_steps: int
    shift_pct: float  # the move of the last change point
    median: float
    ci95: tuple[float, float] | None
    effective: float
    effective_ci95: tuple[float, float] | None
    stall_cost_pct: float
    median_se_log: float = dataclasses.field(
        default=math.nan, repr=False, compare=False, metadata=INTERNAL
    )
    median_batches: int = dataclasses.field(default=0, repr=False, compare=False, metadata=INTERNAL)
    effective_se_log: float = dataclasses.field(
        default=math.nan, repr=False, compare=False, metadata=INTERNAL
    )
    effective_batches: int = dataclasses.field(
        default=0, repr=False, compare=False, metadata=INTERNAL
    )


@dataclasses.dataclass(frozen=True)
class RunAnalysis(AnalysisRecord):
    """One run's steady state, statistics, outliers, change points and rank spread.

    `median` is the typical step over the steady window; `effective` what the window
    delivered per wall-clock second, recurring stalls included (docs/analysis.md). When
    the window holds a change point, `regime` has both figures for the stretch the run
    ends in, and the verdicts use it.
    """

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
    vs_baseline_pct: float | None  # the judged effective figure / baseline × 100
    recovered: bool | None  # that figure within the threshold of the baseline, or above it
    effective: float = math.nan  # Σ work / Σ wall-clock cost over the steady window
    effective_ci95: tuple[float, float] | None = None
    effective_basis: str = "throughput"  # what a step's cost was taken from
    stalls: Stalls | None = None
    regime: Regime | None = None  # the stretch after the last change point, if any
    se_log: float = dataclasses.field(
        default=math.nan, repr=False, compare=False, metadata=INTERNAL
    )
    effective_se_log: float = dataclasses.field(
        default=math.nan, repr=False, compare=False, metadata=INTERNAL
    )
    effective_batches: int = dataclasses.field(
        default=0, repr=False, compare=False, metadata=INTERNAL
    )
    steps: Any = dataclasses.field(
        default=None, repr=False, compare=False, metadata=INTERNAL
    )  # numpy arrays, for plots
    values: Any = dataclasses.field(default=None, repr=False, compare=False, metadata=INTERNAL)
    outlier_mask: Any = dataclasses.field(
        default=None, repr=False, compare=False, metadata=INTERNAL
    )

    @property
    def judged_effective(self) -> float:
        """The effective figure verdicts use: the final regime's, else the window's."""
        return self.regime.effective if self.regime is not None else self.effective

    @property
    def judged_effective_ci95(self) -> tuple[float, float] | None:
        return self.regime.effective_ci95 if self.regime is not None else self.effective_ci95


@dataclasses.dataclass(frozen=True)
class RunComparison(AnalysisRecord):
    """Run b against run a, judged on effective throughput over the stretches compared.

    The stretch of a run is its steady window, or the regime it ends in when the window
    holds a change point (`compared_from_a/b`). `delta_pct`, `ci95_pct` and `p_value`
    are the effective figures' difference, the evidence of `verdict`; the `median_*`
    fields give the typical step's beside it, and `whole_*` the effective difference over
    the whole steady windows.
    """

    a: str
    b: str
    median_a: float  # typical step over the stretch compared
    median_b: float
    delta_pct: float  # (effective_b / effective_a − 1) × 100
    ci95_pct: tuple[float, float] | None
    p_value: float | None
    verdict: Verdict  # regression | improvement | no-change
    threshold_pct: float
    alpha: float
    summary: str  # the verdict in words
    effective_a: float = math.nan
    effective_b: float = math.nan
    median_delta_pct: float = math.nan  # (median_b / median_a − 1) × 100
    median_ci95_pct: tuple[float, float] | None = None
    median_p_value: float | None = None
    whole_delta_pct: float = math.nan  # effective, whole steady windows
    whole_ci95_pct: tuple[float, float] | None = None
    compared_from_a: int | None = None  # first step of the stretch compared
    compared_from_b: int | None = None
    regime_used: bool = False  # a change point made either stretch shorter than its window
    stall_cost_a_pct: float = 0.0  # share of the stretch's wall time recurring stalls cost
    stall_cost_b_pct: float = 0.0


@dataclasses.dataclass(frozen=True)
class Resolution(AnalysisRecord):
    """What `--resolve H` did: the comparison stored and the status given to H."""

    hypothesis: int
    status: HypothesisStatus
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
    # the top finding of `why` for each later run against the first (docs/why.md)
    why: dict[str, Finding] = dataclasses.field(default_factory=dict)

    def run(self, name: str) -> RunAnalysis:
        return next(r for r in self.runs if r.run == name)


@dataclasses.dataclass(frozen=True)
class Reference(AnalysisRecord):
    """What a watched run is judged against: a number (the baseline) or another run."""

    kind: str  # "baseline" | "run"
    value: float  # effective throughput of the reference
    run: str | None = None
    low: float | None = None  # a run's interval (level 1 − alpha/2); None for a number
    high: float | None = None
    stall_every: float | None = None  # steps between a run's recurring stalls


@dataclasses.dataclass(frozen=True)
class MonitorState(AnalysisRecord):
    """Where a watched run stands after the steps fed so far (ledger.analyze.sequential).

    `effective_ci` and `pct_ci` are always-valid intervals (they may be looked at after
    every step); `median_ci95` is an ordinary 95 % interval, for reading only.
    """

    phase: WatchPhase  # warmup or steady
    steps: int  # rows received
    last_step: int | None
    steady_from_step: int | None
    steady_steps: int
    settled: bool  # False: warm-up never ended within the cap; steady was declared anyway
    effective: float | None  # tokens per wall-clock second over the steady steps
    effective_ci: tuple[float, float] | None
    median: float | None  # typical step's throughput over the steady steps
    median_ci95: tuple[float, float] | None
    reference: Reference
    pct_of_reference: float | None  # effective / reference × 100
    pct_ci: tuple[float, float] | None
    decision: Verdict | None  # regression, same or improvement; None while undecided
    decided_at_step: int | None
    remaining_steps: int | None  # about how many more steady steps a decision needs
    stalls: int  # stall steps seen (each cost at least twice a typical step)
    stall_cost_pct: float  # share of the steady wall time they cost
    basis: str  # what a step's cost was taken from (ledger.analyze.effective)
    seconds_per_step: float | None  # mean wall-clock cost of a steady step (None: no times)
    longest_step_s: float | None  # the longest any steady step cost (None: no times)
    threshold_pct: float
    alpha: float
    summary: str  # one line in words
