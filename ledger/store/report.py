"""Gathering a report: every attempt with its analysis, its comparison with the first
attempt, and its steady step times — read in one read session, analysed after it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from ledger.errors import LedgerError
from ledger.model import records
from ledger.model.analysis import Baseline, RunAnalysis
from ledger.model.report import Attempt, ReportData
from ledger.store import compare, hypotheses, runs, timeline
from ledger.store.lookup import run_row

if TYPE_CHECKING:
    from ledger.analyze import StepColumns


@dataclass(frozen=True)
class Gathered:
    """What a report needs from the database."""

    db: str
    investigation: str
    baseline: Baseline
    details: list[records.RunDetail]
    columns: list[StepColumns | None]  # None: the run has no steps
    hypotheses: list[records.Hypothesis]
    timeline: list[records.TimelineEntry]


def gather(
    session: Session, inv: int, investigation: str, db: str, names: Sequence[str] | None
) -> Gathered:
    """Everything the report draws, for `names` (default: every run, oldest first)."""
    rows = [run_row(session, inv, n) for n in names] if names else runs.ordered(session, inv)
    details = [runs.detail(session, row) for row in rows]
    columns = [
        compare.step_columns(session, row.id) if detail.steps else None
        for row, detail in zip(rows, details, strict=True)
    ]
    return Gathered(
        db=db,
        investigation=investigation,
        baseline=compare.baseline(session, investigation),
        details=details,
        columns=columns,
        hypotheses=hypotheses.listed(session, inv, None),
        timeline=timeline.entries(session, inv),
    )


def build(found: Gathered, threshold: float | None) -> ReportData:
    """Analyse each attempt and compare each with the first analysed one."""
    from ledger.analyze import DEFAULT_THRESHOLD, analyze_run, compare_pair

    limit = DEFAULT_THRESHOLD if threshold is None else threshold
    attempts: list[Attempt] = []
    first: RunAnalysis | None = None
    for detail, columns in zip(found.details, found.columns, strict=True):
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
                first = analysis
            else:
                comparison = compare_pair(first, analysis, threshold=limit)
            step_times = _steady_step_times(columns, analysis.steady_from_step)
        attempts.append(Attempt(detail, analysis, comparison, step_times, why))
    return ReportData(
        db=found.db,
        investigation=found.investigation,
        baseline=found.baseline,
        attempts=attempts,
        hypotheses=found.hypotheses,
        timeline=found.timeline,
        generated_at=datetime.now(UTC),
    )


def _steady_step_times(columns: StepColumns, steady_from: int) -> Any:
    import numpy as np

    if columns.step_time_s is None:
        return None
    times = columns.step_time_s[columns.step >= steady_from]
    times = times[np.isfinite(times)]
    return times if len(times) else None
