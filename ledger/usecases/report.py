"""The report: the use case behind `ledger report`, `Ledger.report_data` and
`Ledger.write_report`. The store gathers every attempt in one read (ledger.store.report);
each is analysed and compared with the first analysed one here, and drawn by
ledger.report."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.errors import LedgerError
from ledger.model.analysis import RunAnalysis, RunComparison
from ledger.model.report import Attempt, ReportData
from ledger.model.terms import Verdict
from ledger.model.why import WhyResult
from ledger.store.report import Gathered, RunFacts

if TYPE_CHECKING:
    from ledger.readings.steps import StepColumns
    from ledger.store import Store


def report_data(
    store: Store, runs: Sequence[str] | None = None, *, threshold: float | None = None
) -> ReportData:
    """Everything `ledger report` draws, for `runs` (default: every run, oldest first)."""
    return build(store.report_inputs(runs), threshold)


def write_report(
    store: Store,
    out: str | os.PathLike[str],
    runs: Sequence[str] | None = None,
    *,
    threshold: float | None = None,
) -> Path:
    """Write the report to `out` (.html, .png or .pdf) and return its path."""
    from ledger.report.render import check_format
    from ledger.report.render import write_report as write

    check_format(out)  # before any work
    return write(report_data(store, runs, threshold=threshold), out)


def build(found: Gathered, threshold: float | None) -> ReportData:
    """Analyse each attempt and compare each with the first analysed one (in run order)."""
    from ledger.analyze import DEFAULT_THRESHOLD, analyze_run, compare_pair

    limit = DEFAULT_THRESHOLD if threshold is None else threshold
    attempts: list[Attempt] = []
    first: RunAnalysis | None = None
    first_facts: RunFacts | None = None
    for facts in found.runs:
        detail, columns = facts.detail, facts.columns
        analysis = comparison = step_times = None
        why = "no steps recorded" if columns is None else None
        if columns is not None:
            try:
                analysis = analyze_run(
                    detail.run,
                    columns,
                    unit=detail.throughput_unit,
                    threshold=limit,
                    baseline=found.baseline.value,
                )
            except LedgerError as exc:  # too few steps, no throughput…: shown, not fatal
                why = str(exc)
        if analysis is not None and columns is not None:
            if first is None:
                first, first_facts = analysis, facts
            else:
                comparison = compare_pair(first, analysis, threshold=limit)
            step_times = _steady_step_times(columns, analysis.steady_from_step)
        attempts.append(
            Attempt(
                detail,
                analysis,
                comparison,
                step_times,
                why,
                ran_at=facts.ran_at,
                ran_from=facts.ran_from,
                events=facts.events,
                event_counts=facts.event_counts,
                loss=facts.loss,
                peak_memory_mib=facts.peak_memory_mib,
                gpu_samples=facts.gpu_samples,
                why=_why(facts, first_facts, comparison, limit),
            )
        )
    return ReportData(
        db=found.db,
        investigation=found.investigation,
        baseline=found.baseline,
        attempts=attempts,
        hypotheses=found.hypotheses,
        timeline=found.timeline,
        generated_at=datetime.now(UTC),
    )


def _why(
    facts: RunFacts, reference: RunFacts | None, comparison: RunComparison | None, threshold: float
) -> WhyResult | None:
    """The likely causes for an attempt slower than the report's reference (the first
    analysed attempt); None for the others."""
    from ledger.analyze.diagnose import diagnose

    if reference is None or comparison is None or comparison.verdict != Verdict.REGRESSION:
        return None
    shared = (
        reference.detail.patch is not None
        and facts.detail.patch is not None
        and (reference.detail.patch.id == facts.detail.patch.id)
    )
    changes = () if shared else facts.changes
    return diagnose(facts.evidence, reference.evidence, changes, threshold=threshold)


def _steady_step_times(columns: StepColumns, steady_from: int) -> Any:
    import numpy as np

    if columns.step_time_s is None:
        return None
    times = columns.step_time_s[columns.step >= steady_from]
    times = times[np.isfinite(times)]
    return times if len(times) else None
