"""Runs against runs and against the baseline: differences, intervals, p-values, verdicts.

Later runs are each compared with the first. The difference is the ratio of steady
medians minus one; its interval and p-value come from Welch's t-test on the logarithms
of the medians with batch-median standard errors (ledger.analyze.stats), so that
autocorrelated steps are not counted as independent evidence. A change needs both
significance (p < alpha, 0.01 by default) and a size of at least the practical
threshold (2 % by default); anything else is no-change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ledger.analyze.run import DEFAULT_ALPHA, DEFAULT_THRESHOLD, analyze_run
from ledger.analyze.series import StepColumns
from ledger.analyze.stats import MedianEstimate, difference
from ledger.analyze.wording import comparison_sentence
from ledger.errors import UsageError
from ledger.model.analysis import Baseline, CompareReport, RunAnalysis, RunComparison


def check_settings(threshold: float, alpha: float) -> None:
    if not 0.0 <= threshold < 1.0:
        raise UsageError(
            f"the threshold is a fraction between 0 and 1 (0.02 = 2 %), not {threshold}"
        )
    if not 0.0 < alpha < 1.0:
        raise UsageError(f"alpha is a probability between 0 and 1, not {alpha}")


def verdict(delta: float, p_value: float | None, threshold: float, alpha: float) -> str:
    """regression | improvement | no-change: significant and at least the threshold."""
    significant = p_value is not None and math.isfinite(p_value) and p_value < alpha
    if significant and abs(delta) >= threshold:
        return "improvement" if delta > 0 else "regression"
    return "no-change"


def compare_pair(
    a: RunAnalysis,
    b: RunAnalysis,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> RunComparison:
    """Run b against run a."""
    with np.errstate(all="ignore"):
        diff = difference(_estimate(a), _estimate(b))
    delta = diff.ratio - 1.0
    p = diff.p_value if math.isfinite(diff.p_value) else None
    ci = (
        (100.0 * (diff.low - 1.0), 100.0 * (diff.high - 1.0))
        if math.isfinite(diff.low) and math.isfinite(diff.high)
        else None
    )
    outcome = verdict(delta, p, threshold, alpha)
    return RunComparison(
        a=a.run,
        b=b.run,
        median_a=a.median,
        median_b=b.median,
        delta_pct=100.0 * delta,
        ci95_pct=ci,
        p_value=p,
        verdict=outcome,
        threshold_pct=100.0 * threshold,
        alpha=alpha,
        summary=comparison_sentence(a.run, b.run, 100.0 * delta, ci, p, outcome, 100.0 * threshold),
    )


def _estimate(run: RunAnalysis) -> MedianEstimate:
    return MedianEstimate(run.median, run.se_log, run.batches, run.tau_steps)


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


def resolution_status(comparison: RunComparison) -> str:
    """How a comparison resolves the hypothesis its second run tests.

    Faster confirms it; slower refutes it; no change refutes it when the interval rules
    out a change as large as the threshold, and is inconclusive when it does not.
    """
    if comparison.verdict == "improvement":
        return "confirmed"
    if comparison.verdict == "regression":
        return "refuted"
    ci = comparison.ci95_pct
    if ci is not None and -comparison.threshold_pct < ci[0] and ci[1] < comparison.threshold_pct:
        return "refuted"
    return "inconclusive"
