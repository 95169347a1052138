"""One run from step rows to its steady-state analysis (ledger.model.analysis.RunAnalysis).

The typical step (the median, outliers out) and the effective throughput (work over
wall-clock cost, recurring stalls in: ledger.analyze.effective) over the steady window,
and both again over the regime the run ends in when the window holds a change point.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ledger.analyze import robust
from ledger.analyze.changepoints import Shift, find_change_points
from ledger.analyze.effective import estimate_effective, find_stalls, step_costs
from ledger.analyze.series import RankValues, StepColumns, Trace, build_trace
from ledger.analyze.stats import Estimate, estimate_median, percentiles, summarize
from ledger.analyze.steady import find_outliers, find_steady_start
from ledger.errors import LedgerError
from ledger.model.analysis import (
    ChangePoint,
    RankMedian,
    RankSpread,
    Regime,
    RunAnalysis,
    Stalls,
    StepTimes,
)

DEFAULT_THRESHOLD = 0.02
DEFAULT_ALPHA = 0.01
MIN_STEPS = 3
OUTLIER_STEPS_SHOWN = 20


class NotEnoughStepsError(LedgerError):
    """Raised when a run has too few steps with a throughput to analyse."""


def analyze_run(
    name: str,
    columns: StepColumns,
    *,
    unit: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    baseline: float | None = None,
) -> RunAnalysis:
    """Steady window, robust statistics, outliers, change points and rank spread of a run.

    `threshold` is relative (0.02 = 2 %): the smallest change point worth reporting and
    the margin within which a run counts as back at `baseline`.
    """
    # Absurd inputs (1e-300 next to 1e300) overflow on the way; NaN and inf are handled
    # where they matter, so numpy's floating-point warnings would only be noise on stderr.
    with np.errstate(all="ignore"):
        return _analyze(name, columns, unit=unit, threshold=threshold, baseline=baseline)


def _analyze(
    name: str,
    columns: StepColumns,
    *,
    unit: str | None,
    threshold: float,
    baseline: float | None,
) -> RunAnalysis:
    trace = build_trace(columns)
    values = trace.values
    if len(values) < MIN_STEPS:
        what = "no steps" if len(columns) == 0 else f"{len(values)} step(s) with a throughput"
        raise NotEnoughStepsError(
            f"run {name!r} has {what}; comparing needs at least {MIN_STEPS} "
            "(a throughput, or tokens and step_time_s, per step)"
        )
    outliers = find_outliers(values)
    steady = find_steady_start(values, outliers, threshold)
    start = steady.start
    window = values[start:]
    mask = outliers.mask[start:]
    clean = window[~mask]
    if len(clean) == 0:  # everything flagged: better to use all than nothing
        clean, mask = window, np.zeros(len(window), dtype=bool)
    estimate = estimate_median(clean)
    summary = summarize(clean)
    step_times = None
    if trace.step_time_s is not None:
        found = percentiles(trace.step_time_s[start:][~mask], (50, 90, 99))
        step_times = StepTimes(*found) if found is not None else None
    shifts = find_change_points(np.where(mask, np.nan, window), threshold)
    steady_steps = trace.steps[start:]
    change_points = [
        ChangePoint(
            step=int(steady_steps[s.index]),
            before=s.before,
            after=s.after,
            shift_pct=100.0 * s.relative,
            p_value=s.p_value,
        )
        for s in shifts
    ]
    steady_from = int(trace.steps[start])
    ranks = rank_spread(trace.ranks, steady_from) if trace.ranks is not None else None
    effective, basis, stalls, regime = _effective(trace, start, mask, shifts, change_points)
    judged = regime.effective if regime is not None else effective.value
    vs_baseline, recovered = _against(judged, baseline, threshold)
    ci = estimate.interval()
    outlier_index = np.flatnonzero(mask)[:OUTLIER_STEPS_SHOWN]
    return RunAnalysis(
        run=name,
        unit=_unit(unit, trace.source),
        source=trace.source,
        n_steps=len(values),
        first_step=int(trace.steps[0]),
        last_step=int(trace.steps[-1]),
        steady_from_step=steady_from,
        settled=steady.settled,
        n_steady=len(window),
        median=estimate.value,
        ci95=ci,
        mean=summary.mean,
        p10=summary.p10,
        p90=summary.p90,
        cv=summary.cv,
        batches=estimate.batches,
        tau_steps=estimate.tau,
        step_time_s=step_times,
        outliers=int(mask.sum()),
        outlier_steps=[int(s) for s in steady_steps[outlier_index]],
        change_points=change_points,
        ranks=ranks,
        vs_baseline_pct=vs_baseline,
        recovered=recovered,
        effective=effective.value,
        effective_ci95=effective.interval(),
        effective_basis=basis,
        stalls=stalls,
        regime=regime,
        se_log=estimate.se_log,
        effective_se_log=effective.se_log,
        effective_batches=effective.batches,
        steps=trace.steps,
        values=values,
        outlier_mask=outliers.mask,
    )


def reframed(
    analysis: RunAnalysis,
    name: str,
    *,
    unit: str | None,
    threshold: float,
    baseline: float | None,
) -> RunAnalysis:
    """An analysis made before (kept: ledger.model.kept) as `analyze_run` makes it under
    this name, unit and baseline: besides the steps and the threshold, those are all it
    depends on."""
    vs_baseline, recovered = _against(analysis.judged_effective, baseline, threshold)
    return dataclasses.replace(
        analysis,
        run=name,
        unit=_unit(unit, analysis.source),
        vs_baseline_pct=vs_baseline,
        recovered=recovered,
    )


def _against(
    judged: float, baseline: float | None, threshold: float
) -> tuple[float | None, bool | None]:
    """The judged effective figure as a % of the baseline, and whether it is back at it."""
    if baseline is not None and baseline > 0 and math.isfinite(judged):
        return 100.0 * judged / baseline, bool(judged >= baseline * (1.0 - threshold))
    return None, None


def _unit(unit: str | None, source: str) -> str | None:
    return unit if source != "1/step_time" else "steps/s"


def _effective(
    trace: Trace,
    start: int,
    outlier_mask: np.ndarray,  # of the steady window
    shifts: list[Shift],
    change_points: list[ChangePoint],
) -> tuple[Estimate, str, Stalls, Regime | None]:
    """The effective figure of the steady window, its basis, its stalls, the final regime."""
    costs = step_costs(trace, start)
    work, cost = costs.work[start:], costs.cost[start:]
    split = find_stalls(work, cost)
    # a one-off stall is left out; recurring stalls count, and batches end after them
    counted_work = np.where(split.keep, work, np.nan)
    counted = split.mask if split.counted else None
    whole = estimate_effective(counted_work, cost, counted)
    steady_steps = trace.steps[start:]
    lost = split.lost(work, cost)
    seconds = costs.in_seconds and split.count > 0
    stalls = Stalls(
        recurring=split.count if split.counted else 0,
        one_off=0 if split.counted else split.count,
        steps=[int(s) for s in steady_steps[split.mask][:OUTLIER_STEPS_SHOWN]],
        cost_pct=split.cost_pct(work, cost),
        seconds=lost if seconds and split.counted else None,
        one_off_seconds=lost if seconds and not split.counted else None,
        at=steady_steps[split.mask],
    )
    if not shifts:
        return whole, costs.basis, stalls, None
    at = shifts[-1].index
    tail = slice(at, None)
    values = trace.values[start:][tail]
    clean = values[~outlier_mask[tail]]
    median = estimate_median(clean if len(clean) else values)
    part = estimate_effective(
        counted_work[tail], cost[tail], counted[tail] if counted is not None else None
    )
    regime = Regime(
        from_step=int(steady_steps[at]),
        n_steps=len(values),
        shift_pct=change_points[-1].shift_pct,
        median=median.value,
        ci95=median.interval(),
        effective=part.value,
        effective_ci95=part.interval(),
        stall_cost_pct=split.cost_pct(work, cost, tail),
        median_se_log=median.se_log,
        median_batches=median.batches,
        effective_se_log=part.se_log,
        effective_batches=part.batches,
    )
    return whole, costs.basis, stalls, regime


def rank_spread(ranks: RankValues, steady_from: int) -> RankSpread | None:
    """Each rank's median throughput over the steady window; None with a single rank."""
    keep = (ranks.step >= steady_from) & np.isfinite(ranks.value)
    rank, value = ranks.rank[keep], ranks.value[keep]
    if len(rank) == 0:
        return None
    order = np.argsort(rank, kind="stable")
    rank, value = rank[order], value[order]
    names, starts = np.unique(rank, return_index=True)
    if len(names) < 2:
        return None
    groups = np.split(value, starts[1:])
    per_rank = [
        RankMedian(rank=int(r), median=robust.median(g), steps=len(g))
        for r, g in zip(names, groups, strict=True)
    ]
    medians = np.array([r.median for r in per_rank])
    slow, fast = int(np.argmin(medians)), int(np.argmax(medians))
    middle = robust.median(medians)
    return RankSpread(
        ranks=len(per_rank),
        slowest_rank=per_rank[slow].rank,
        slowest_median=per_rank[slow].median,
        fastest_rank=per_rank[fast].rank,
        fastest_median=per_rank[fast].median,
        spread_pct=100.0 * (medians[fast] - medians[slow]) / middle if middle else math.nan,
        per_rank=per_rank,
    )
