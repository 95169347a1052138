"""Runs against runs and against the baseline: differences, intervals, p-values, verdicts.

Later runs are each compared with the first. The verdict is judged on effective
throughput (work per wall-clock second, recurring stalls included:
ledger.analyze.effective) over the stretch each run ends in: its steady window, or the
regime after its last change point when the window holds one. The difference is the
ratio of those figures minus one; its interval and p-value come from Welch's t-test on
their logarithms with batch standard errors (ledger.analyze.stats), so that
autocorrelated steps are not counted as independent evidence. A change needs both
significance (p < alpha, 0.01 by default) and a size of at least the practical threshold
(2 % by default); anything else is no-change. The typical step (the median) and the
whole-window figure are compared the same way and reported beside it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ledger.analyze.run import DEFAULT_ALPHA, DEFAULT_THRESHOLD, analyze_run
from ledger.analyze.series import StepColumns
from ledger.analyze.stats import Difference, Estimate, difference
from ledger.analyze.wording import ComparedStretch, comparison_sentence
from ledger.errors import UsageError
from ledger.model.analysis import Baseline, CompareReport, RunAnalysis, RunComparison
from ledger.model.terms import HypothesisStatus, Verdict


def check_settings(threshold: float, alpha: float) -> None:
    if not 0.0 <= threshold < 1.0:
        raise UsageError(
            f"the threshold is a fraction between 0 and 1 (0.02 = 2 %), not {threshold}"
        )
    if not 0.0 < alpha < 1.0:
        raise UsageError(f"alpha is a probability between 0 and 1, not {alpha}")


def verdict(delta: float, p_value: float | None, threshold: float, alpha: float) -> Verdict:
    """regression | improvement | no-change: significant and at least the threshold."""
    significant = p_value is not None and math.isfinite(p_value) and p_value < alpha
    if significant and abs(delta) >= threshold:
        return Verdict.IMPROVEMENT if delta > 0 else Verdict.REGRESSION
    return Verdict.NO_CHANGE


def compare_pair(
    a: RunAnalysis,
    b: RunAnalysis,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> RunComparison:
    """Run b against run a (see the module's docstring)."""
    with np.errstate(all="ignore"):
        judged = _difference(_effective(a, True), _effective(b, True))
        whole = _difference(_effective(a, False), _effective(b, False))
        typical = _difference(_median(a), _median(b))
    delta = judged.ratio - 1.0
    p = _p(judged)
    ci = _ci_pct(judged)
    outcome = verdict(delta, p, threshold, alpha)
    stall_a, stall_b = _stall_cost(a), _stall_cost(b)
    regime_used = a.regime is not None or b.regime is not None
    sentence = comparison_sentence(
        a.run,
        b.run,
        100.0 * delta,
        ci,
        p,
        outcome,
        100.0 * threshold,
        stretch_a=_stretch(a),
        stretch_b=_stretch(b),
        whole_delta_pct=100.0 * (whole.ratio - 1.0) if regime_used else None,
        median_delta_pct=100.0 * (typical.ratio - 1.0),
        stall_cost_pct=(stall_a, stall_b),
    )
    return RunComparison(
        a=a.run,
        b=b.run,
        median_a=_median(a).value,
        median_b=_median(b).value,
        delta_pct=100.0 * delta,
        ci95_pct=ci,
        p_value=p,
        verdict=outcome,
        threshold_pct=100.0 * threshold,
        alpha=alpha,
        summary=sentence,
        effective_a=a.judged_effective,
        effective_b=b.judged_effective,
        median_delta_pct=100.0 * (typical.ratio - 1.0),
        median_ci95_pct=_ci_pct(typical),
        median_p_value=_p(typical),
        whole_delta_pct=100.0 * (whole.ratio - 1.0),
        whole_ci95_pct=_ci_pct(whole),
        compared_from_a=a.regime.from_step if a.regime is not None else a.steady_from_step,
        compared_from_b=b.regime.from_step if b.regime is not None else b.steady_from_step,
        regime_used=regime_used,
        stall_cost_a_pct=stall_a,
        stall_cost_b_pct=stall_b,
    )


def _difference(a: Estimate, b: Estimate) -> Difference:
    if not (a.value > 0 and b.value > 0):  # NaN or zero: nothing to compare
        return Difference(math.nan, math.nan, math.nan, math.nan, math.nan)
    return difference(a, b)


def _p(diff: Difference) -> float | None:
    return diff.p_value if math.isfinite(diff.p_value) else None


def _ci_pct(diff: Difference) -> tuple[float, float] | None:
    if math.isfinite(diff.low) and math.isfinite(diff.high):
        return (100.0 * (diff.low - 1.0), 100.0 * (diff.high - 1.0))
    return None


def _effective(run: RunAnalysis, judged: bool) -> Estimate:
    """The effective estimate of the stretch compared (judged) or of the whole window."""
    if judged and run.regime is not None:
        r = run.regime
        return Estimate(r.effective, r.effective_se_log, r.effective_batches, run.tau_steps)
    return Estimate(run.effective, run.effective_se_log, run.effective_batches, run.tau_steps)


def _median(run: RunAnalysis) -> Estimate:
    if run.regime is not None:
        r = run.regime
        return Estimate(r.median, r.median_se_log, r.median_batches, run.tau_steps)
    return Estimate(run.median, run.se_log, run.batches, run.tau_steps)


def _stall_cost(run: RunAnalysis) -> float:
    if run.regime is not None:
        return run.regime.stall_cost_pct
    return run.stalls.cost_pct if run.stalls is not None else 0.0


def _stretch(run: RunAnalysis) -> ComparedStretch | None:
    if run.regime is None:
        return None
    return ComparedStretch(run.regime.from_step, run.regime.shift_pct)


def compare_runs(
    runs: Sequence[tuple[str, StepColumns, str | None]],
    *,
    baseline: Baseline | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> CompareReport:
    """Analyse each (name, columns, unit) and compare every later run with the first."""
    check_settings(threshold, alpha)
    if len(runs) < 1:
        raise UsageError("name at least one run")
    baseline = baseline or Baseline(None, None, None)
    analyses = [
        analyze_run(name, columns, unit=unit, threshold=threshold, baseline=baseline.value)
        for name, columns, unit in runs
    ]
    return compare_analyses(analyses, baseline=baseline, threshold=threshold, alpha=alpha)


def compare_analyses(
    analyses: Sequence[RunAnalysis],
    *,
    baseline: Baseline | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> CompareReport:
    """Compare every later analysis with the first (made with this threshold and baseline:
    `analyze_run`, or a kept one `reframed`)."""
    check_settings(threshold, alpha)
    if len(analyses) < 1:
        raise UsageError("name at least one run")
    baseline = baseline or Baseline(None, None, None)
    analyses = list(analyses)
    first = analyses[0]
    comparisons = [
        compare_pair(first, other, threshold=threshold, alpha=alpha) for other in analyses[1:]
    ]
    return CompareReport(
        baseline=baseline,
        threshold_pct=100.0 * threshold,
        alpha=alpha,
        runs=analyses,
        comparisons=comparisons,
    )


def resolution_status(comparison: RunComparison) -> HypothesisStatus:
    """How a comparison resolves the hypothesis its second run tests.

    Faster confirms it; slower refutes it; no change refutes it when the interval rules
    out a change as large as the threshold, and is inconclusive when it does not.
    """
    if comparison.verdict == Verdict.IMPROVEMENT:
        return HypothesisStatus.CONFIRMED
    if comparison.verdict == Verdict.REGRESSION:
        return HypothesisStatus.REFUTED
    ci = comparison.ci95_pct
    if ci is not None and -comparison.threshold_pct < ci[0] and ci[1] < comparison.threshold_pct:
        return HypothesisStatus.REFUTED
    return HypothesisStatus.INCONCLUSIVE
