"""The sequential decision of `ledger watch`: feed steps as they come, ask after each one.

Warm-up is found online: the typical-step throughput is cut into blocks of BLOCK
steps and each block summarised by its median (so a stall or a compile step cannot move
it); after every block, the mean log-median of the last WINDOW blocks is compared with
that of the WINDOW before. While it is clearly higher (by more than Z_RISE standard
errors, and RISE_TOL) the run is still warming up. Once it is not, GAP more steps are
skipped, so that neither the steps that decided it nor their autocorrelated
neighbours enter the statistics (deciding on the very steps that ended a dip would bias
them low), and the steady window starts. A run that still climbs after WARMUP_CAP
steps is declared steady anyway, and says so (`settled` false).

From then on every step adds its work and cost (ledger.analyze.effective) to running
sums, and the effective throughput R̂ = Σ work / Σ cost gets an always-valid interval
(ledger.analyze.confseq): its chance of ever missing the truth, at any of the steps
it is looked at, is at most alpha. Against a reference r (a number: the baseline; or
another run, whose own interval takes half of alpha), with the run's share of alpha
split between the effective interval and one for the typical-step rate (every stall
step costing what a typical step does):

- `regression`: the effective interval, or the typical-step interval (stalls can only
  add to the cost), lies below r, and R̂ is more than the threshold below it;
- `improvement`: the interval lies above r and R̂ is more than the threshold above it;
- `same`: the interval lies within ±threshold of r.

Stalls that have not come yet can only make a run slower, so `regression` may be said
from MIN_STEADY steady steps on, but `same` and `improvement` only from MIN_SAME (or
three of the reference run's stall intervals, when that is longer). A stall is a step
that costs at least twice a typical one (its rate below STALL_RATIO × the level at the
start of the steady window). Every stall counts (online, a one-off cannot be told from
the first of many); a single long one widens the interval rather than deciding.

Each `add` costs O(1) amortised (block sums are kept by a binary counter), each
`state` O(log n); the median shown beside the effective figure is recomputed when the
window has grown by 2 %, so it costs O(1) amortised too.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections import deque

import numpy as np

from ledger.analyze import clock, confseq
from ledger.analyze.effective import (
    BASIS_CLOCK,
    BASIS_STEP,
    BASIS_STEP_WAIT,
    BASIS_THROUGHPUT,
    BASIS_WALL,
)
from ledger.analyze.running import RunningSums
from ledger.analyze.series import StepColumns, build_trace
from ledger.analyze.stats import estimate_median
from ledger.analyze.wording import monitor_sentence
from ledger.model.analysis import MonitorState, Reference, RunAnalysis
from ledger.model.terms import Verdict, WatchPhase

DEFAULT_THRESHOLD = 0.02
DEFAULT_ALPHA = confseq.ALPHA
BLOCK = 8  # steps per block median of the warm-up detector
WINDOW = 4  # blocks compared with the WINDOW before them
Z_RISE = 1.0  # "clearly higher": standard errors of that comparison ...
RISE_TOL = 0.0025  # ... and at least 0.25 %
GAP = 32  # steps skipped between the end of warm-up and the steady window
WARMUP_CAP = 2048  # steps after which the steady window starts anyway
MIN_STEADY = 20  # steady steps before `regression` may be said
MIN_SAME = 100  # ... before `same` or `improvement`
STALL_RATIO = 0.5  # a step slower than this × the level is a stall
MEDIAN_GROWTH = 0.02  # the median shown is recomputed when the window grew this much
# (and by 16 steps at least); so is the remaining-steps estimate:
REMAINING_GROWTH = 0.015
STAMPS_KEPT = 256  # distinct stamps read for the clock's tick


def reference_from_run(run: RunAnalysis, alpha: float = DEFAULT_ALPHA) -> Reference:
    """Another run as the reference: its judged effective figure and its interval at
    level 1 − alpha/2 (the other half of alpha goes to the watched run)."""
    if run.regime is not None:
        regime = run.regime
        value, se, batches = regime.effective, regime.effective_se_log, regime.effective_batches
    else:
        value, se, batches = run.effective, run.effective_se_log, run.effective_batches
    low = high = None
    if math.isfinite(se) and batches >= 2 and value > 0:
        t = confseq.interval_t(1.0 - alpha / 2.0, batches)
        low, high = value * math.exp(-t * se), value * math.exp(t * se)
    stall_every = None
    if run.stalls is not None and run.stalls.recurring >= 2:
        stall_every = run.n_steady / run.stalls.recurring
    return Reference("run", value, run.run, low, high, stall_every)


def baseline_reference(value: float) -> Reference:
    """A number as the reference (the investigation's baseline): no uncertainty."""
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"the reference is a throughput above 0, not {value}")
    return Reference("baseline", float(value))


class SequentialMonitor:
    """Follows one run step by step and decides, as soon as the numbers allow, whether
    it is slower than, the same as, or faster than a reference (see the module's
    docstring).

        monitor = SequentialMonitor(14_200.0)          # or reference_from_run(analysis)
        for row in rows:
            monitor.add(row.step, tokens=row.tokens, step_time_s=row.step_time_s,
                        wait_s=row.wait_s, wall_time=row.wall_time)
            state = monitor.state()                    # MonitorState
            if state.decision: break
    """

    def __init__(
        self,
        reference: float | Reference,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        alpha: float = DEFAULT_ALPHA,
    ) -> None:
        if not 0.0 <= threshold < 1.0:
            raise ValueError(f"the threshold is a fraction between 0 and 1, not {threshold}")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha is a probability between 0 and 1, not {alpha}")
        self.reference = (
            reference if isinstance(reference, Reference) else baseline_reference(reference)
        )
        self.threshold = threshold
        self.alpha = alpha
        by_run = self.reference.kind == "run"
        self._alpha = alpha / 2.0 if by_run else alpha  # the run's share of alpha
        ref = self.reference
        self._ref_low = ref.low if by_run else ref.value
        self._ref_high = ref.high if by_run else ref.value
        self.min_same = MIN_SAME
        if ref.stall_every is not None:
            self.min_same = max(MIN_SAME, math.ceil(3 * ref.stall_every))
        self.rows = 0
        self.ignored = 0  # rows that could not be used (no throughput, out of order)
        self._last_step: int | None = None
        self._last_wall: float | None = None
        # the clock (ledger.analyze.clock): midnight, its tick, and on a coarse clock the
        # steps waiting for the next tick to share the time it says passed
        self._wall_step = 0  # the step at which the clock last moved
        self._day = 0.0  # days added to time-of-day stamps that crossed midnight
        self._stamps: list[float] = []  # the first stamps, to tell the clock's tick
        self._tick = 0.0
        self._stamped = 0  # rows with a stamp
        self._pending: list[tuple[int, float, float, float]] = []  # step, tp, work, printed
        self._clock_started = False
        self._clock_sums = [0.0, 0.0]  # clock seconds and printed cost between stalls
        self._work_unit = 1.0  # tokens per unit of work (steps, on a clock without tokens)
        self._basis: str | None = None
        # warm-up
        self._block: list[float] = []
        self._medians: deque[float] = deque(maxlen=2 * WINDOW)
        self._blocks = 0
        self._gap = -1  # steps still to skip; -1 while warming up
        self._level = math.nan
        self._settled = True
        self._tokens_per_step: deque[float] = deque(maxlen=2 * WINDOW * BLOCK)
        self._steady_from: int | None = None
        # steady
        self._sums = RunningSums()
        self._scale: tuple[float, float] | None = None
        self._longest = 0.0  # seconds, on a basis in seconds
        self._typical = np.empty(1024)
        self._median_at = 0
        self._median: tuple[float, tuple[float, float] | None] | None = None
        self._remaining: tuple[int, int | None] = (0, None)
        self.decision: Verdict | None = None
        self.decided_at_step: int | None = None
        self._decided_n = 0

    # -- feeding ------------------------------------------------------------------------------

    def add(
        self,
        step: int,
        *,
        throughput: float | None = None,
        tokens: float | None = None,
        step_time_s: float | None = None,
        wall_time: float | None = None,
        wait_s: float | None = None,
    ) -> None:
        """One step (one rank's row, or a step reduced over ranks), in step order."""
        if self._last_step is not None and step <= self._last_step:
            self.ignored += 1
            return
        gap = step - self._last_step if self._last_step is not None else 1
        interval = None
        covered = gap
        if wall_time is not None and _finite(wall_time):
            wall = self._unwrapped(wall_time)
            if self._last_wall is not None and wall > self._last_wall:
                interval = wall - self._last_wall
                covered = max(step - self._wall_step, 1)
            self._stamped += 1
            if self._last_wall is None or wall != self._last_wall:
                self._last_wall, self._wall_step = wall, step  # moved on, or back
                if len(self._stamps) < STAMPS_KEPT:  # distinct ones: the clock's tick
                    self._stamps.append(wall)
                    if self._basis == BASIS_CLOCK:
                        self._tick = clock.resolution(np.array(self._stamps))
        tokens = tokens if _positive(tokens) else None
        step_time_s = step_time_s if _positive(step_time_s) else None
        if not _positive(throughput):
            throughput = tokens / step_time_s if tokens and step_time_s else None
            if throughput is None and step_time_s is not None:
                throughput = 1.0 / step_time_s
        if throughput is None:
            self.ignored += 1
            return
        self._last_step = step
        self.rows += 1
        if self._gap < 0:
            self._warm(throughput, tokens, step_time_s, interval, covered)
            return
        if self._gap > 0:
            self._gap -= 1
            return
        if self._basis is None:
            self._choose_basis(step_time_s, wait_s, interval)
        if self._basis == BASIS_CLOCK:
            self._clock_step(step, throughput, tokens, step_time_s, interval, gap)
            return
        work, cost = self._work_and_cost(throughput, tokens, step_time_s, wait_s, interval, covered)
        if work is None or cost is None:
            self.ignored += 1
            return
        self._steady(step, throughput, work, cost)

    def extend(self, columns: StepColumns) -> None:
        """Steps in a batch (several ranks are reduced per step as compare does)."""
        trace = build_trace(columns)
        n = len(trace)

        def at(values: np.ndarray | None, i: int) -> float | None:
            return float(values[i]) if values is not None and _finite(values[i]) else None

        for i in range(n):
            self.add(
                int(trace.steps[i]),
                throughput=float(trace.values[i]),
                tokens=at(trace.tokens, i),
                step_time_s=at(trace.step_time_s, i),
                wall_time=at(trace.wall_time, i),
                wait_s=at(trace.wait_s, i),
            )

    def _warm(
        self,
        throughput: float,
        tokens: float | None,
        step_time_s: float | None,
        interval: float | None,
        gap: int,
    ) -> None:
        if tokens is None and step_time_s is None and interval is not None:
            self._tokens_per_step.append(throughput * interval / gap)
        self._block.append(throughput)
        if len(self._block) < BLOCK:
            return
        self._medians.append(math.log(statistics.median(self._block)))
        self._block = []
        self._blocks += 1
        done = False
        if len(self._medians) == 2 * WINDOW:
            y = list(self._medians)
            later = sum(y[WINDOW:]) / WINDOW
            earlier = sum(y[:WINDOW]) / WINDOW
            jumps = sum(abs(b - a) for a, b in itertools.pairwise(y)) / (2 * WINDOW - 1)
            se = jumps * math.sqrt(math.pi) / 2.0 * math.sqrt(2.0 / WINDOW)
            done = later - earlier <= max(Z_RISE * se, RISE_TOL)
            self._level = math.exp(later)
        if not done and self._blocks > WARMUP_CAP // BLOCK:
            done, self._settled = True, False
            tail = list(self._medians)[-WINDOW:]
            self._level = math.exp(sum(tail) / len(tail))
        if done:
            self._gap = GAP

    def _work_and_cost(
        self,
        throughput: float,
        tokens: float | None,
        step_time_s: float | None,
        wait_s: float | None,
        interval: float | None,
        gap: int,
    ) -> tuple[float | None, float | None]:
        """Work and cost of a step on the run's basis (chosen at the first steady step)."""
        work = tokens if tokens is not None else None
        if work is None and step_time_s is not None:
            work = throughput * step_time_s
        if self._basis == BASIS_STEP_WAIT:
            if step_time_s is None:
                return None, None
            extra = wait_s if wait_s is not None and _finite(wait_s) and wait_s > 0 else 0.0
            return work, step_time_s + extra
        if self._basis == BASIS_WALL:
            if interval is None:
                return None, None
            if work is None:
                if not self._tokens_per_step:
                    return None, None
                work = statistics.median(self._tokens_per_step)
            return work * gap, interval
        if self._basis == BASIS_STEP:
            return (work, step_time_s) if step_time_s is not None else (None, None)
        return 1.0, 1.0 / throughput

    def _choose_basis(
        self, step_time_s: float | None, wait_s: float | None, interval: float | None
    ) -> None:
        """The run's basis, at its first steady step (ledger.analyze.effective)."""
        stamps = np.array(self._stamps)
        steps = np.arange(len(stamps))
        if step_time_s is not None and wait_s is not None and _finite(wait_s):
            self._basis = BASIS_STEP_WAIT
        elif self._last_wall is not None and (
            self._stamped > 1.01 * len(stamps) or clock.coarse(stamps, steps)
        ):
            self._basis, self._tick = BASIS_CLOCK, clock.resolution(stamps)
        elif interval is not None:
            self._basis = BASIS_WALL
        elif step_time_s is not None:
            self._basis = BASIS_STEP
        else:
            self._basis = BASIS_THROUGHPUT

    def _unwrapped(self, wall: float) -> float:
        """A time-of-day stamp that fell by more than half a day is the next day's."""
        last = self._last_wall
        if last is not None and 0.0 <= wall < clock.DAY and wall + self._day < last - clock.DAY / 2:
            self._day += clock.DAY
        return wall + self._day

    def _clock_step(
        self,
        step: int,
        throughput: float,
        tokens: float | None,
        step_time_s: float | None,
        interval: float | None,
        gap: int,
    ) -> None:
        """A step on a coarse clock: it waits for the clock's next tick, whose time the
        waiting steps share by what the trainer printed they cost (ledger.analyze.clock)."""
        if step_time_s is not None:
            printed, work = step_time_s, tokens or throughput * step_time_s
        elif tokens is not None:
            printed, work = tokens / throughput, tokens
        else:
            printed, work = 1.0 / throughput, 1.0  # tokens per step: the clock's scale
        self._pending.append((step, throughput, work * gap, printed * gap))
        if interval is None:
            if self._last_wall is not None and self._wall_step == step:  # the clock went back
                self._pending.clear()
            return
        if not self._clock_started:  # the first tick's interval began before the window
            self._clock_started = True
            self._pending.clear()
            return
        pending, self._pending = self._pending, []
        total = sum(p[3] for p in pending)
        if total <= 0:
            return
        seconds, costs = self._clock_sums
        per = seconds / costs if costs > 0 else None
        clean = per is None or interval <= (
            total * per * (1.0 + clock.STALL_SHARE) + clock.STALL_TICKS * self._tick
        )
        if clean:
            self._clock_sums = [seconds + interval, costs + total]
        if tokens is None and step_time_s is None and self._clock_sums[1] > 0:
            self._work_unit = self._clock_sums[0] / self._clock_sums[1]
        per = self._clock_sums[0] / self._clock_sums[1] if self._clock_sums[1] > 0 else None
        for at, value, work_done, cost in pending:
            share = interval * cost / total
            stall = per is not None and share > cost * per / STALL_RATIO
            self._steady(at, value, work_done, share, stall)

    def _steady(
        self, step: int, throughput: float, work: float, cost: float, stall: bool | None = None
    ) -> None:
        if self._steady_from is None:
            self._steady_from = step
        if self._scale is None:
            self._scale = (work, cost)
        self._longest = max(self._longest, cost)
        w, c = work / self._scale[0], cost / self._scale[1]
        level = self._level * self._scale[1] / self._scale[0] / self._work_unit
        if stall is None:
            stall = w / c < STALL_RATIO * level
        # the AR(1) bound reads a stall step as a typical one: the stalls' own spread is
        # the batches' business, and spikes would hide the memory of the rest
        self._sums.add(w, c, stall, w / level if stall else c)
        s = self._sums
        if s.n > len(self._typical):
            self._typical = np.concatenate([self._typical, np.empty(len(self._typical))])
        self._typical[s.n - 1] = throughput
        if self.decision is None:
            self.decision = self._decide()
            if self.decision is not None:
                self.decided_at_step = step
                self._decided_n = s.n

    # -- deciding -----------------------------------------------------------------------------

    def _interval(self, capped: bool = False) -> tuple[float, float, float] | None:
        """(R̂, lower, upper) in the run's units, or None before the steady window; with
        `capped`, of the typical-step rate (stalls costing a typical step)."""
        s = self._sums
        if s.n == 0 or self._scale is None or not s.c > 0:
            return None
        ratio, steps, variance = s.estimate(capped)
        ratio *= self._scale[0] / self._scale[1] * self._work_unit
        h = float(confseq.half_width(math.sqrt(variance), steps, self._alpha / 2.0))
        return ratio, ratio * max(1.0 - h, 0.0), ratio * (1.0 + h)

    def _decide(self) -> Verdict | None:
        n = self._sums.n
        if n < MIN_STEADY or self._ref_low is None or self._ref_high is None:
            return None
        found = self._interval()
        typical = self._interval(capped=True)
        if found is None or typical is None:
            return None
        ratio, low, high = found
        q = ratio / self.reference.value
        lo, hi = low / self._ref_high, high / self._ref_low
        d = self.threshold
        # slower for sure: the effective interval, or even the typical steps' (stalls can
        # only add to the cost), lies below the reference
        below = hi < 1.0 or typical[2] / self._ref_low < 1.0
        if below and q < 1.0 - d:
            return Verdict.REGRESSION
        if n < self.min_same:
            return None
        if lo > 1.0 and q > 1.0 + d:
            return Verdict.IMPROVEMENT
        if lo > 1.0 - d and hi < 1.0 + d:
            return Verdict.SAME
        return None

    def remaining_steps(self) -> int | None:
        """About how many more steady steps a decision needs if the estimate stays put.

        Recomputed when the window has grown by REMAINING_GROWTH (at least 16 steps);
        in between, the last estimate counts down.
        """
        if self.decision is not None:
            return 0
        n = self._sums.n
        at, cached = self._remaining
        if at > 0 and n - at < max(16.0, REMAINING_GROWTH * at):
            return max(cached - (n - at), 1) if cached is not None else None
        found = self._remaining_now()
        self._remaining = (n, found)
        return found

    def _remaining_now(self) -> int | None:
        s = self._sums
        found = self._interval()
        if found is None or self._ref_low is None or self._ref_high is None:
            return None
        ratio = found[0]
        q = ratio / self.reference.value
        lo_f, hi_f = self.reference.value / self._ref_high, self.reference.value / self._ref_low
        d = self.threshold
        if hi_f >= 1.0 + d or lo_f <= 1.0 - d:
            return None  # the reference alone is too uncertain to resolve ±threshold
        if q < 1.0 - d:
            need = 1.0 / (q * hi_f) - 1.0
        elif q > 1.0 + d:
            need = 1.0 - 1.0 / (q * lo_f)
        else:
            need = min(1.0 - (1.0 - d) / (q * lo_f), (1.0 + d) / (q * hi_f) - 1.0)
            if need <= 0.0:
                return None  # the reference's own interval leaves no room at this estimate
        target = max(need, d / 4.0)
        _, steps, variance = s.estimate()
        total = confseq.steps_to(target, math.sqrt(variance), steps, self._alpha / 2.0)
        if total is None:
            return None
        total += s.n - steps  # the steps behind the estimate lag the window
        floor = MIN_STEADY if q < 1.0 - d else self.min_same
        return max(total - s.n, floor - s.n, 1)

    # -- reading ------------------------------------------------------------------------------

    def state(self) -> MonitorState:
        """Where the run stands now (a MonitorState)."""
        s = self._sums
        steady = self._gap == 0 and s.n > 0
        found = self._interval() if steady else None
        ratio = low = high = None
        pct_of = pct_ci = None
        if found is not None:
            ratio, low, high = found
            ref = self.reference.value
            pct_of = 100.0 * ratio / ref
            if self._ref_low is not None and self._ref_high is not None:
                pct_ci = (100.0 * low / self._ref_high, 100.0 * high / self._ref_low)
        median, median_ci = self._median_figures() if steady else (None, None)
        cost_pct = 0.0
        if s.stalls and s.n > s.stalls and s.c > 0:
            typical = (s.w - s.stall_w) / (s.c - s.stall_c)
            cost_pct = 100.0 * max(s.stall_c - s.stall_w / typical, 0.0) / s.c
        remaining = self.remaining_steps() if steady else None
        in_seconds = self._basis not in (None, BASIS_THROUGHPUT) and self._scale is not None
        pace = s.c * self._scale[1] / s.n if in_seconds and self._scale and s.n else None
        state = MonitorState(
            phase=WatchPhase.STEADY if steady else WatchPhase.WARMUP,
            steps=self.rows,
            last_step=self._last_step,
            steady_from_step=self._steady_from,
            steady_steps=s.n,
            settled=self._settled,
            effective=ratio,
            effective_ci=(low, high) if low is not None and high is not None else None,
            median=median,
            median_ci95=median_ci,
            reference=self.reference,
            pct_of_reference=pct_of,
            pct_ci=pct_ci,
            decision=self.decision,
            decided_at_step=self.decided_at_step,
            remaining_steps=remaining,
            stalls=s.stalls,
            stall_cost_pct=cost_pct,
            basis=self._basis or BASIS_THROUGHPUT,
            seconds_per_step=pace,
            longest_step_s=self._longest if pace is not None else None,
            threshold_pct=100.0 * self.threshold,
            alpha=self.alpha,
            summary="",
        )
        return _with_summary(state, self._decided_n)

    def _median_figures(self) -> tuple[float | None, tuple[float, float] | None]:
        n = self._sums.n
        if self._median is None or n >= self._median_at + max(16.0, MEDIAN_GROWTH * n):
            estimate = estimate_median(self._typical[:n])
            self._median = (estimate.value, estimate.interval())
            self._median_at = n
        return self._median


def _with_summary(state: MonitorState, decided_n: int) -> MonitorState:
    return dataclasses.replace(state, summary=monitor_sentence(state, decided_n))


def _finite(value: float) -> bool:
    return math.isfinite(value)


def _positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0
