"""The evidence `ledger why` reasons over, as plain data: what the store read of each run
(steps, memory, counters, log events, GPU samples, config) and what was recorded between
the reference and the run (patches, hypotheses). Nothing here touches a database.

`Side` is one run with its analysis done once (the steady window, its costs); `Pair` the
run, its reference, and the slowdown to explain. `score` turns how solid a finding's
evidence is and how much of the slowdown it accounts for into the 0-1 score of docs/why.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ledger.analyze.effective import StepCosts, step_costs
from ledger.analyze.series import StepColumns, Trace, build_trace
from ledger.model.analysis import RunAnalysis, RunComparison
from ledger.model.terms import Fate
from ledger.model.why import Evidence


@dataclass(frozen=True)
class EventRow:
    """A log event (log_event row)."""

    id: int
    kind: str
    text: str
    step: int | None
    line: int | None
    rank: int | None = None
    probe: bool = False  # read from a probe's output: `line` counts in that output

    def evidence(self) -> Evidence:
        where = "probe output line" if self.probe else "line"
        at = f" (step {self.step:,})" if self.step is not None else ""
        said = f"{where} {self.line}{at}: " if self.line is not None else f"step {self.step}: "
        text = self.text if len(self.text) <= 300 else self.text[:299] + "…"
        return Evidence("log_event", said + text, id=self.id, line=self.line)


@dataclass(frozen=True)
class GpuRow:
    """A GPU sample (gpu_sample row): a probe's nvidia-smi, or the hook's NVML."""

    id: int
    gpu_index: int
    probe_id: int | None = None
    rank: int | None = None
    step: int | None = None
    utilization_pct: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    throttle: str | None = None


@dataclass(frozen=True)
class ConfigRow:
    """One thing a run ran with (run_config row)."""

    key: str
    value: str | None
    source: str


@dataclass(frozen=True)
class ChangeRow:
    """A patch, a patch's file or a hypothesis recorded between the reference and the run."""

    table: str  # patch | patch_file | hypothesis
    id: int
    text: str


@dataclass(frozen=True)
class Memory:
    """Memory per step (the largest over ranks), MiB; NaN where unknown."""

    step: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray


@dataclass(frozen=True)
class RunEvidence:
    """Everything the store read about one run for `why`."""

    name: str
    id: int
    fate: Fate = Fate.UNKNOWN
    fate_reason: str | None = None
    unit: str | None = None
    columns: StepColumns | None = None
    memory: Memory | None = None
    # cumulative or per-step scalars by name (dynamo_recompiles, data_time…): (steps, values)
    metrics: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    events: tuple[EventRow, ...] = ()
    event_counts: dict[str, int] = field(default_factory=dict)  # every event, by kind
    gpu: tuple[GpuRow, ...] = ()
    config: tuple[ConfigRow, ...] = ()

    def events_of(self, *kinds: str) -> list[EventRow]:
        return [e for e in self.events if e.kind in kinds]

    def count(self, kind: str) -> int:
        return self.event_counts.get(kind, len(self.events_of(kind)))


@dataclass(frozen=True)
class Side:
    """One run, analysed once: its trace, the steady window and what each step cost."""

    ev: RunEvidence
    analysis: RunAnalysis | None
    trace: Trace | None
    costs: StepCosts | None
    start: int  # index of the first steady step in the trace
    # steps per row: 1 for the hook; N for a log that prints one line (the mean) every N steps
    spacing: int = 1
    # what the findings work out of this side more than once (its slow steps), by name
    memo: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.ev.name

    @property
    def steady_from(self) -> int | None:
        return self.analysis.steady_from_step if self.analysis is not None else None

    def steady_costs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(steps, work, cost) of the steady window; None without an analysis."""
        if self.trace is None or self.costs is None:
            return None
        s = slice(self.start, None)
        return self.trace.steps[s], self.costs.work[s], self.costs.cost[s]

    def total_cost(self) -> float:
        """What all its steps cost, warm-up included (seconds, or the costs' units)."""
        if self.costs is None:
            return math.nan
        return float(np.nansum(self.costs.cost))

    def wall_rate(self) -> float:
        """Work per unit of cost over every step, warm-up included; NaN without costs."""
        if self.costs is None:
            return math.nan
        work, cost = self.costs.work, self.costs.cost
        ok = np.isfinite(work) & np.isfinite(cost) & (cost > 0)
        total = float(cost[ok].sum())
        return float(work[ok].sum()) / total if total > 0 else math.nan


def row_spacing(steps: np.ndarray) -> int:
    """Steps per row: the median gap between logged step numbers (1 for every step)."""
    if len(steps) < 3:
        return 1
    gaps = np.diff(steps)
    gaps = gaps[gaps > 0]
    return max(1, int(np.median(gaps))) if len(gaps) else 1


def side(ev: RunEvidence, analysis: RunAnalysis | None) -> Side:
    if ev.columns is None or len(ev.columns) == 0 or analysis is None:
        return Side(ev, analysis, None, None, 0)
    with np.errstate(all="ignore"):
        trace = build_trace(ev.columns)
        start = int(np.searchsorted(trace.steps, analysis.steady_from_step))
        costs = step_costs(trace, start)
    return Side(ev, analysis, trace, costs, start, row_spacing(trace.steps[start:]))


@dataclass(frozen=True)
class Pair:
    """The run to explain, its reference (None: a number, or nothing), what was recorded
    between them, and the slowdown: 0.12 when RUN delivers 12 % less than REF."""

    run: Side
    ref: Side | None
    changes: tuple[ChangeRow, ...]
    comparison: RunComparison | None
    slowdown: float | None  # None: unknown; ≤ 0: not slower
    threshold: float = 0.02
    significant: bool = False  # the comparison's verdict is a regression

    @property
    def ref_name(self) -> str:
        return self.ref.name if self.ref is not None else "the reference"

    @property
    def wall_slowdown(self) -> float | None:
        """How much less work per second of wall clock RUN did than REF over all their
        steps, warm-up included (what a cost that falls in the warm-up is weighed
        against); None without a REF run whose costs are in the same terms."""
        if self.ref is None or self.run.costs is None or self.ref.costs is None:
            return None
        if self.run.costs.in_seconds != self.ref.costs.in_seconds:
            return None
        run, ref = self.run.wall_rate(), self.ref.wall_rate()
        if not (math.isfinite(run) and math.isfinite(ref) and ref > 0):
            return None
        return 1.0 - run / ref


def score(pair: Pair, strength: float, share: float | None = None, whole: bool = False) -> float:
    """A finding's score: how solid its evidence is (`strength`, 0-1), weighed by how much
    of the slowdown it accounts for (`share`: a fraction of RUN's wall time, or of its
    throughput), when both are known. A finding that accounts for all of a slowdown keeps
    its strength; one that accounts for none of it keeps 60 % of it. `whole`: the share is
    of the whole run's wall time (warm-up included), weighed against the whole run's
    slowdown where REF's is known (the larger of it and the steady one)."""
    strength = min(max(strength, 0.0), 1.0)
    slow = pair.slowdown
    if whole and pair.wall_slowdown is not None:
        slow = max(pair.wall_slowdown, slow if slow is not None else -math.inf)
    if share is None or slow is None or not math.isfinite(share) or not slow > 0:
        return round(strength * 0.8, 3)
    explained = min(max(share / slow, 0.0), 1.0)
    return round(strength * (0.6 + 0.4 * explained), 3)


def pct(x: float) -> str:
    """A fraction as a percentage in words: 0.123 → '12.3 %'."""
    return f"{100.0 * x:.1f} %" if abs(x) < 0.1 else f"{100.0 * x:.0f} %"


def mib(x: float) -> str:
    return f"{x / 1024:.1f} GiB" if abs(x) >= 1024 else f"{x:.0f} MiB"
