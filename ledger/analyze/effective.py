"""Effective throughput: the work a run did per second of wall clock, stalls included.

What each step cost, by what the data has (the first basis that most steady steps fit):

- `step_time+wait`: the step's time plus the wait after it, until the next step starts
  (the hook measures both; a checkpoint, an eval or a slow data loader between steps
  shows in the wait).
- `wall_time`: the time since the previous step ended (timestamped logs); when a log
  prints every k steps, the interval covers k steps and their work.
- `printed+clock`: timestamps whose tick is a large share of a step (to the second at
  3.7 s a step), that repeat or go back: each step costs what the trainer printed (its
  step time, else its tokens / throughput, else 1 / throughput for a constant number of
  tokens per step), scaled so the steps between two ticks fill the time the clock says
  passed; the stalls are the ticks that say far more (ledger.analyze.clock). Without
  stalls this is the harmonic mean of the printed throughput.
- `step_time`: the step's time alone (logs with a time per step; a stall shows as one
  long step).
- `throughput`: nothing but a throughput per step; every step is taken to do the same
  work, so the effective figure is the harmonic mean of the throughputs.

What each step did: its tokens where recorded, else throughput × step time; on the
`wall_time` basis without either, the typical tokens per step (the median of throughput
× interval / steps), so a long interval counts as time, not as work.

The effective throughput of a stretch is the ratio Σ work / Σ cost. Its interval comes
from the same batches as the median's (ledger.analyze.stats), as a ratio estimator:
with batch totals W_b and C_b, se(log R) = sd(W_b − R·C_b) / (√K · mean W_b), and
Student's t with K − 1 degrees of freedom. When stalls recur at least once per batch,
the batch boundaries are moved to just after a stall, so that every batch holds whole
cycles between stalls and a regular checkpoint does not look like noise.

A stall is a step whose rate (work / cost) is an outlier on the slow side (the rule of
ledger.analyze.steady). Two or more in the steady window recur: they count, and what
they cost is reported. A single one is a one-off: it is left out, and reported too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ledger.analyze.clock import clock_costs, coarse, unwrap
from ledger.analyze.robust import integrated_time, median
from ledger.analyze.series import Trace
from ledger.analyze.stats import Estimate, batch_count
from ledger.analyze.steady import find_outliers

BASIS_STEP_WAIT = "step_time+wait"
BASIS_WALL = "wall_time"
BASIS_STEP = "step_time"
BASIS_THROUGHPUT = "throughput"
BASIS_CLOCK = "printed+clock"
MOST = 0.5  # a basis is used when at least this share of the steps has what it needs
RECURRING = 2  # stalls in the steady window from which they count as recurring


@dataclass(frozen=True)
class StepCosts:
    """What each step did (work) and what it cost (seconds, or 1/throughput units)."""

    work: np.ndarray  # NaN where unknown
    cost: np.ndarray  # NaN where unknown
    basis: str

    @property
    def in_seconds(self) -> bool:
        return self.basis != BASIS_THROUGHPUT

    @property
    def rate(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(self.work / self.cost)


def _share(mask: np.ndarray) -> float:
    return float(mask.mean()) if len(mask) else 0.0


def _positive(values: np.ndarray | None, n: int) -> np.ndarray:
    if values is None:
        return np.full(n, np.nan)
    out = np.array(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out[~(np.isfinite(out) & (out > 0))] = np.nan
    return out


def step_costs(trace: Trace, start: int = 0) -> StepCosts:
    """Work and cost of every step of `trace` (see the module's docstring).

    The basis is chosen on the steps from `start` (the steady window) on.
    """
    n = len(trace)
    throughput = trace.values
    step_time = _positive(trace.step_time_s, n)
    tokens = _positive(trace.tokens, n)
    wait = np.array(trace.wait_s, dtype=np.float64) if trace.wait_s is not None else None
    wall = np.array(trace.wall_time, dtype=np.float64) if trace.wall_time is not None else None
    steady = slice(start, n)
    # tokens where recorded, else throughput × step time
    work = np.where(np.isfinite(tokens), tokens, throughput * step_time)
    has_time = np.isfinite(step_time)
    if wait is not None and np.isfinite(wait[steady]).any() and _share(has_time[steady]) >= MOST:
        extra = np.where(np.isfinite(wait) & (wait > 0), wait, 0.0)
        return StepCosts(work, np.where(has_time, step_time + extra, np.nan), BASIS_STEP_WAIT)
    if wall is not None:
        wall = unwrap(wall)
        stamped = np.isfinite(wall)
        if _share(stamped[steady]) >= MOST and coarse(wall[steady], trace.steps[steady]):
            return _clock_basis(trace, wall, work, step_time, tokens, start)
        interval, steps = _intervals(wall, trace.steps)
        if _share(np.isfinite(interval)[steady]) >= MOST:
            per_step = work
            if not np.isfinite(per_step[steady]).any():
                # neither tokens nor step times: the typical tokens per step, from the
                # steps whose interval was not stretched (the median is blind to stalls)
                typical = throughput * interval / steps
                finite = typical[steady][np.isfinite(typical[steady])]
                per_step = np.full(n, median(finite) if len(finite) else np.nan)
            return StepCosts(per_step * steps, interval, BASIS_WALL)
    if _share(has_time[steady]) >= MOST:
        return StepCosts(work, step_time, BASIS_STEP)
    # a throughput alone: equal work per step, the time of a step ∝ 1 / throughput
    return StepCosts(np.ones(n), 1.0 / throughput, BASIS_THROUGHPUT)


def _clock_basis(
    trace: Trace,
    wall: np.ndarray,
    work: np.ndarray,
    step_time: np.ndarray,
    tokens: np.ndarray,
    start: int,
) -> StepCosts:
    """Costs from what the trainer printed, fitted to a coarse clock (BASIS_CLOCK)."""
    steady = slice(start, len(wall))
    covered = np.ones(len(wall))
    if len(wall) > 1:
        covered[1:] = np.maximum(np.diff(trace.steps), 1)
    if _share(np.isfinite(step_time)[steady]) >= MOST:
        printed = step_time
    elif _share(np.isfinite(tokens)[steady]) >= MOST:
        printed = tokens / trace.values
    else:
        printed = 1.0 / trace.values  # a constant number of tokens per step: the scale
    costs = clock_costs(wall, printed * covered, start)
    if not np.isfinite(work[steady]).any():
        work = np.full(len(wall), costs.scale)  # tokens per step: the clock's scale
    cost = np.where(np.isfinite(printed), costs.cost, np.nan)
    return StepCosts(work * covered, cost, BASIS_CLOCK)


def _intervals(wall: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Seconds since the previous step's end and how many steps that covers (NaN: unknown)."""
    n = len(wall)
    interval = np.full(n, np.nan)
    covered = np.ones(n)
    if n > 1:
        with np.errstate(invalid="ignore"):
            gap = np.diff(wall)
            count = np.diff(steps).astype(np.float64)
            good = np.isfinite(gap) & (gap > 0) & (count > 0)
        interval[1:] = np.where(good, gap, np.nan)
        covered[1:] = np.where(good, count, 1.0)
    return interval, covered


# -- stalls ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StallSplit:
    """The stalls of a steady window: which steps, and whether they count (recur)."""

    mask: np.ndarray  # True for a stall step (in the window's index)
    counted: bool  # recurring: the stalls are in the effective figure
    typical: float  # the rate of the other steps (work per unit of cost)

    @property
    def count(self) -> int:
        return int(self.mask.sum())

    @property
    def keep(self) -> np.ndarray:
        """Steps in the effective figure: all of them, or all but a one-off stall."""
        return np.ones(len(self.mask), dtype=bool) if self.counted else ~self.mask

    def lost(self, work: np.ndarray, cost: np.ndarray, part: slice = slice(None)) -> float:
        """Cost the stalls in `part` added beyond what a typical step would have taken."""
        mask = self.mask[part]
        if not mask.any() or not (math.isfinite(self.typical) and self.typical > 0):
            return 0.0
        extra = cost[part][mask] - work[part][mask] / self.typical
        return float(np.nansum(np.maximum(extra, 0.0)))

    def cost_pct(self, work: np.ndarray, cost: np.ndarray, part: slice = slice(None)) -> float:
        """Share (%) of the cost of `part` that counted stalls added; 0 when they do not count."""
        if not self.counted:
            return 0.0
        usable = np.isfinite(work[part]) & np.isfinite(cost[part]) & (cost[part] > 0)
        total = float(cost[part][usable].sum())
        return 100.0 * self.lost(work, cost, part) / total if total > 0 else 0.0


def find_stalls(work: np.ndarray, cost: np.ndarray) -> StallSplit:
    """Slow outliers of the rate work / cost; counted when there are RECURRING or more."""
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = work / cost
    usable = np.isfinite(rate) & (rate > 0)
    mask = np.zeros(len(rate), dtype=bool)
    if usable.sum() >= 5:
        values = rate[usable]
        outliers = find_outliers(values)
        slow = outliers.mask & (values < median(values))
        mask[np.flatnonzero(usable)[slow]] = True
    clean = usable & ~mask
    typical = float(work[clean].sum() / cost[clean].sum()) if clean.any() else math.nan
    return StallSplit(mask, int(mask.sum()) >= RECURRING, typical)


# -- the ratio estimate ---------------------------------------------------------------------


def estimate_effective(
    work: np.ndarray, cost: np.ndarray, stalls: np.ndarray | None = None
) -> Estimate:
    """Σ work / Σ cost with its batch standard error (see the module's docstring).

    `stalls` marks stall steps that count: batch boundaries move to just after them when
    they come at least once per batch. Steps without a finite positive work and cost
    are left out.
    """
    usable = np.isfinite(work) & np.isfinite(cost) & (work > 0) & (cost > 0)
    w, c = work[usable], cost[usable]
    n = len(w)
    if n == 0:
        return Estimate(math.nan, math.nan, 0, math.nan)
    ratio = float(w.sum() / c.sum())
    rate = w / c
    if stalls is not None:
        # the memory of the steps between stalls: spikes would read as independent noise
        rate = np.where(stalls[usable], np.nan, rate)
    tau = integrated_time(rate)
    k = batch_count(n, tau)
    if k < 2:
        return Estimate(ratio, math.nan, k, tau)
    bounds = np.linspace(0, n, k + 1).round().astype(np.int64)
    if stalls is not None:
        at = np.flatnonzero(stalls[usable])
        if len(at) >= k:
            bounds = _after_stalls(bounds, at)
    k = len(bounds) - 1
    if k < 2:
        return Estimate(ratio, math.nan, k, tau)
    batch_w = np.add.reduceat(w, bounds[:-1])
    batch_c = np.add.reduceat(c, bounds[:-1])
    residual = batch_w - ratio * batch_c
    se = float(np.sqrt(np.sum(residual**2) / (k * (k - 1))) / batch_w.mean())
    return Estimate(ratio, se, k, tau)


def _after_stalls(bounds: np.ndarray, stalls: np.ndarray) -> np.ndarray:
    """Move each inner boundary to just after the last stall before it (duplicates go)."""
    inner = bounds[1:-1]
    where = np.searchsorted(stalls, inner, side="left") - 1
    moved = np.where(where >= 0, stalls[np.maximum(where, 0)] + 1, inner)
    return np.unique(np.concatenate([[bounds[0]], moved, [bounds[-1]]]))
