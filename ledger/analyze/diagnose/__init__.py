"""`ledger why`: the likely causes of a difference between two runs, ranked.

Pure functions over plain data (ledger.analyze.diagnose.evidence): the store reads a
`RunEvidence` for RUN and REF and what was recorded between them; `diagnose` states the
difference as compare does (ledger.analyze.compare) and asks each family of findings
(dynamo, memory, timing, ranks, gpu, config) what its evidence shows; then the symptoms a cause
covers are folded into it (ledger.analyze.diagnose.causal). A finding is made only when
its test holds; docs/why.md lists every kind and the evidence it needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ledger.analyze.diagnose import causal, config, dynamo, gpu, memory, ranks, timing
from ledger.analyze.diagnose.evidence import ChangeRow, Pair, RunEvidence, Side, side
from ledger.errors import LedgerError
from ledger.model.analysis import RunAnalysis, RunComparison
from ledger.model.terms import Verdict
from ledger.model.why import (
    AGAINST_BASELINE,
    AGAINST_NONE,
    AGAINST_RUN,
    FINDING_KINDS,
    Finding,
    WhyResult,
)

FAMILIES = (dynamo, memory, timing, ranks, gpu, config)


def analysed(ev: RunEvidence, threshold: float) -> tuple[RunAnalysis | None, str | None]:
    """The run's analysis, or None and why not (too few steps)."""
    from ledger.analyze.run import analyze_run

    if ev.columns is None or len(ev.columns) == 0:
        return None, f"{ev.name} has no steps: only its events, samples and config are read"
    try:
        return analyze_run(ev.name, ev.columns, unit=ev.unit, threshold=threshold), None
    except LedgerError as exc:
        return None, str(exc)


def diagnose(
    run: RunEvidence,
    ref: RunEvidence | None,
    changes: Sequence[ChangeRow] = (),
    *,
    baseline: float | None = None,
    threshold: float = 0.02,
    alpha: float = 0.01,
    analyses: tuple[RunAnalysis | None, RunAnalysis | None] | None = None,
) -> WhyResult:
    """The difference between `run` and `ref` (or the `baseline` number) and the findings
    that explain it, best first. `analyses`: the runs' analyses when already made (by
    compare, with the same threshold)."""
    with np.errstate(all="ignore"):
        return _diagnose(run, ref, tuple(changes), baseline, threshold, alpha, analyses)


def _diagnose(
    run: RunEvidence,
    ref: RunEvidence | None,
    changes: tuple[ChangeRow, ...],
    baseline: float | None,
    threshold: float,
    alpha: float,
    analyses: tuple[RunAnalysis | None, RunAnalysis | None] | None,
) -> WhyResult:
    from ledger.analyze.compare import compare_pair

    notes: list[str] = []
    if analyses is not None:
        run_analysis, ref_analysis = analyses
    else:
        run_analysis, why_not = analysed(run, threshold)
        if why_not:
            notes.append(why_not)
        ref_analysis = None
        if ref is not None:
            ref_analysis, why_not = analysed(ref, threshold)
            if why_not:
                notes.append(why_not)
    if ref is not None and run.unit and ref.unit and run.unit != ref.unit:
        notes.append(f"{run.name} is in {run.unit}, {ref.name} in {ref.unit}: not comparable")
    comparison = None
    if run_analysis is not None and ref_analysis is not None:
        comparison = compare_pair(ref_analysis, run_analysis, threshold=threshold, alpha=alpha)
    pair = Pair(
        run=side(run, run_analysis),
        ref=side(ref, ref_analysis) if ref is not None else None,
        changes=changes,
        comparison=comparison,
        slowdown=_slowdown(comparison, run_analysis, baseline if ref is None else None),
        threshold=threshold,
        significant=comparison is not None and comparison.verdict == Verdict.REGRESSION,
    )
    found: list[Finding] = []
    for family in FAMILIES:
        try:
            found.extend(family.findings(pair))
        except (ValueError, FloatingPointError, ZeroDivisionError, IndexError) as exc:
            # one family's arithmetic on odd data must not hide the others: said, not lost
            notes.append(f"{family.__name__.rsplit('.', 1)[-1]} findings skipped: {exc}")
    # causes before symptoms: a symptom a cause's evidence covers is said inside it
    found = causal.fold(pair, found)
    order = {k: i for i, k in enumerate(FINDING_KINDS)}
    found.sort(key=lambda f: (-f.score, order.get(f.kind, len(order))))
    return _result(
        run, ref, run_analysis, ref_analysis, comparison, baseline, threshold, found, notes
    )


def _slowdown(
    comparison: RunComparison | None, run: RunAnalysis | None, baseline: float | None
) -> float | None:
    """How much less RUN delivers than its reference, as a fraction (≤ 0: not slower)."""
    if comparison is not None and math.isfinite(comparison.delta_pct):
        return -comparison.delta_pct / 100.0
    if run is not None and baseline and math.isfinite(run.judged_effective):
        return 1.0 - run.judged_effective / baseline
    return None


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _result(
    run: RunEvidence,
    ref: RunEvidence | None,
    run_analysis: RunAnalysis | None,
    ref_analysis: RunAnalysis | None,
    comparison: RunComparison | None,
    baseline: float | None,
    threshold: float,
    found: list[Finding],
    notes: list[str],
) -> WhyResult:
    from ledger.analyze.wording import short_value

    unit = (run_analysis.unit if run_analysis else None) or run.unit
    kind = AGAINST_RUN if ref is not None else AGAINST_BASELINE if baseline else AGAINST_NONE
    common = {
        "run": run.name,
        "against": ref.name if ref is not None else None,
        "against_kind": kind,
        "unit": unit,
        "findings": found,
        "notes": notes,
    }
    if comparison is not None:
        return WhyResult(
            **common,  # type: ignore[arg-type]  # the shared fields, typed above
            verdict=comparison.verdict,
            summary=comparison.summary,
            delta_pct=_finite(comparison.delta_pct),
            median_delta_pct=_finite(comparison.median_delta_pct),
            effective_run=_finite(comparison.effective_b),
            effective_ref=_finite(comparison.effective_a),
            median_run=_finite(comparison.median_b),
            median_ref=_finite(comparison.median_a),
        )
    effective = _finite(run_analysis.judged_effective) if run_analysis is not None else None
    median = _finite(run_analysis.median) if run_analysis is not None else None
    if ref is None and baseline and effective is not None:
        delta = 100.0 * (effective / baseline - 1.0)
        verdict = (
            Verdict.REGRESSION
            if delta <= -100 * threshold
            else (Verdict.IMPROVEMENT if delta >= 100 * threshold else Verdict.NO_CHANGE)
        )
        summary = (
            f"{run.name} delivers {short_value(effective)} {unit or ''}, {delta:+.1f} % against "
            f"the baseline {short_value(baseline)} (a number: no interval)"
        ).replace("  ", " ")
        return WhyResult(
            **common,  # type: ignore[arg-type]  # the shared fields, typed above
            verdict=verdict, summary=summary, delta_pct=delta, median_delta_pct=None,
            effective_run=effective, effective_ref=baseline, median_run=median, median_ref=None,
        )  # fmt: skip
    if ref is None:
        summary = f"{run.name} has nothing to be compared with: its own evidence only"
    else:
        summary = f"the difference between {ref.name} and {run.name} is unknown (too few steps)"
    ref_effective = _finite(ref_analysis.judged_effective) if ref_analysis is not None else None
    return WhyResult(
        **common,  # type: ignore[arg-type]  # the shared fields, typed above
        verdict=None, summary=summary, delta_pct=None, median_delta_pct=None,
        effective_run=effective, effective_ref=ref_effective, median_run=median,
        median_ref=_finite(ref_analysis.median) if ref_analysis is not None else None,
    )  # fmt: skip


__all__ = ["ChangeRow", "RunEvidence", "Side", "diagnose"]
