"""Comparisons: read steps (only the columns needed) in one read, for the use cases to
hand to ledger.analyze, and keep what resolving a hypothesis and watch decided. The
baseline lives on the investigation."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.db.types import utcnow
from ledger.errors import UsageError
from ledger.model import records
from ledger.model.analysis import Baseline, CompareReport, MonitorState, Resolution
from ledger.model.terms import ComparisonKind, HypothesisStatus
from ledger.store import analysed, launches
from ledger.store import kept as kept_rows
from ledger.store.lookup import hypothesis_row, investigation_row, run_row

if TYPE_CHECKING:
    from ledger.readings.steps import StepColumns

DEFAULT_UNIT = "tok/s"


@dataclass(frozen=True)
class Inputs:
    """What compare analyses, read in one session (ledger.store.facade.Store.compare_inputs).

    A run whose analysis was kept (ledger.store.kept) and whose steps have not changed
    since has no steps here (None) but its analysis in `kept`; every other run has its
    steps. `versions` says what each read run's steps were (ledger.store.kept), to keep
    the analysis made of them.
    """

    data: list[tuple[str, StepColumns | None, str | None]]  # label, steps, unit: as named
    fates: dict[str, tuple[str, str | None]]  # label → fate, reason
    baseline: Baseline  # the one chosen: the investigation's, or the override
    kept: dict[str, str] = field(default_factory=dict)  # label → kept analysis (JSON)
    versions: dict[str, tuple[int, int, kept_rows.Version]] = field(default_factory=dict)


def inputs(
    session: Session,
    inv: int,
    investigation: str,
    names: Sequence[str],
    baseline_value: float | None,
    settings: str | None,
) -> Inputs:
    """What compare analyses (Inputs): with `settings`, a run whose analysis was kept with
    them over the steps it still has is not read again."""
    named = [launches.find(session, inv, name) for name in names]
    units = [n.run.throughput_unit for n in named]
    fates = {n.label: launches.fate_and_reason(session, n.run, n.launch) for n in named}
    chosen = override(baseline(session, investigation), baseline_value, units)
    found: dict[str, str] = {}
    looked: dict[str, kept_rows.Found] = {}
    rewritten: dict[str, int] = {}
    for n in named:
        if settings is None:
            continue
        seen = looked[n.label] = kept_rows.find(session, n.run.id, n.launch, settings)
        if seen.body is not None:
            found[n.label] = seen.body
        else:  # read before the steps are
            rewritten[n.label] = (
                seen.now.rewritten
                if seen.now is not None
                else kept_rows.rewritten(session, n.run.id, n.launch)
            )
    unread = [n for n in named if n.label not in found]
    # a launch counted to tell its kept analysis stale: its read need not count again
    counts = {label: f.now.steps for label, f in looked.items() if f.now is not None}
    steps = analysed.many(
        session, [(n.run.id, n.launch) for n in unread], [counts.get(n.label) for n in unread]
    )
    read = dict(zip([n.label for n in unread], steps, strict=True))
    versions: dict[str, tuple[int, int, kept_rows.Version]] = {}
    for n in named:
        now = looked[n.label].now if n.label in found else None
        if now is not None:  # kept, and counted to tell: an unreadable one is made again
            versions[n.label] = (n.run.id, n.launch, now)
        elif n.label in rewritten:
            # counted before the read where a kept analysis was told stale, else the rows
            # the read returned: the analysis made of them covers exactly those
            rows = counts.get(n.label, len(read[n.label]))
            versions[n.label] = (n.run.id, n.launch, kept_rows.Version(rows, rewritten[n.label]))
    data = [(n.label, read.get(n.label), n.run.throughput_unit) for n in named]
    return Inputs(data, fates, chosen, found, versions)


# No training throughput comes near this in any unit (tokens, samples, words or FLOP per
# second are all below 1e15 on the largest clusters); past it a figure is a typo.
MAX_BASELINE = 1e15


def check_baseline(value: float | None) -> float | None:
    """A baseline is a finite throughput above 0 and at most MAX_BASELINE (None clears it)."""
    if value is None:
        return None
    if not isinstance(value, int | float) or not math.isfinite(value) or not value > 0:
        raise UsageError(f"the baseline is a finite throughput above 0, not {value!r}")
    if value > MAX_BASELINE:
        raise UsageError(
            f"a baseline of {value:.3g} is past any training throughput (at most {MAX_BASELINE:g})"
        )
    return float(value)


def baseline(session: Session, investigation: str) -> Baseline:
    """The investigation's baseline (value None when there is none)."""
    inv = session.scalar(select(m.Investigation).where(m.Investigation.name == investigation))
    if inv is None or inv.baseline_value is None:
        return Baseline(None, None, None)
    return Baseline(inv.baseline_value, inv.baseline_unit, "investigation")


def set_baseline(
    session: Session, investigation: str, value: float | None, unit: str | None, source: str
) -> Baseline:
    """Store the baseline; the unit stays unless given (tok/s when there was none)."""
    row = investigation_row(session, investigation)
    row.baseline_value = value
    if value is None:
        row.baseline_unit = None
        return Baseline(None, None, None)
    if unit is not None and unit.strip():
        row.baseline_unit = unit.strip()
    elif not row.baseline_unit:
        row.baseline_unit = DEFAULT_UNIT
    return Baseline(value, row.baseline_unit, source)


def override(stored: Baseline, value: float | None, units: Sequence[str | None]) -> Baseline:
    """The baseline a comparison uses: `value` when given (in the stored unit, else the runs')."""
    if value is None:
        return stored
    value = check_baseline(value)
    unit = stored.unit or next((u for u in units if u), None)
    return Baseline(value, unit, "option")


def check_names(runs: Sequence[str], resolve: int | None) -> list[str]:
    names = list(runs)
    if not names:
        raise UsageError("name the runs to compare, e.g. ledger compare eager_a eager_b")
    if len(set(names)) != len(names):
        raise UsageError("each run can be named once")
    if resolve is not None and len(names) != 2:
        raise UsageError(
            f"resolving hypothesis {resolve} takes exactly two runs: the one before the fix, "
            "then the one that tests it"
        )
    return names


def resolve(
    session: Session,
    investigation: str,
    report: CompareReport,
    hypothesis_id: int,
    status: HypothesisStatus,
) -> Resolution:
    """Store the comparison on the hypothesis and resolve it as `status` (what its verdict
    says, ledger.analyze.resolution_status)."""
    inv = investigation_row(session, investigation).id
    comparison = report.comparisons[0]
    first, second = report.runs
    line = f"compare {comparison.a} {comparison.b}: {comparison.summary} → {status}"
    hypothesis = hypothesis_row(session, inv, hypothesis_id)
    # RUN or RUN@N: the launches compared are kept with the runs
    a, b = launches.find(session, inv, comparison.a), launches.find(session, inv, comparison.b)
    row = m.Comparison(
        investigation_id=inv,
        hypothesis_id=hypothesis.id,
        run_a_id=a.run.id,
        run_b_id=b.run.id,
        launch_a=a.launch,
        launch_b=b.launch,
        kind=ComparisonKind.COMPARE,
        unit=second.unit or first.unit,
        steady_from_a=first.steady_from_step,
        steady_from_b=second.steady_from_step,
        median_a=comparison.median_a,
        median_b=comparison.median_b,
        effective_a=comparison.effective_a,
        effective_b=comparison.effective_b,
        delta_pct=comparison.delta_pct,
        ci_low_pct=comparison.ci95_pct[0] if comparison.ci95_pct else None,
        ci_high_pct=comparison.ci95_pct[1] if comparison.ci95_pct else None,
        p_value=comparison.p_value,
        threshold_pct=comparison.threshold_pct,
        alpha=comparison.alpha,
        verdict=comparison.verdict,
        summary=comparison.summary,
    )
    session.add(row)
    hypothesis.status = status
    hypothesis.resolved_at = utcnow()
    hypothesis.note = f"{hypothesis.note}\n{line}" if hypothesis.note else line
    session.flush()
    return Resolution(hypothesis=hypothesis.id, status=status, comparison_ids=[row.id], note=line)


def stored(session: Session, inv: int, hypothesis: int | None) -> list[records.StoredComparison]:
    """Recorded comparisons, oldest first (of one hypothesis if given)."""
    query = select(m.Comparison).where(m.Comparison.investigation_id == inv)
    if hypothesis is not None:
        query = query.where(m.Comparison.hypothesis_id == hypothesis)
    rows = session.scalars(query.order_by(m.Comparison.id)).all()
    ids = {r.run_b_id for r in rows} | {r.run_a_id for r in rows if r.run_a_id is not None}
    names = dict(session.execute(select(m.Run.id, m.Run.name).where(m.Run.id.in_(ids))).all())
    return [_stored(row, names) for row in rows]


def stored_record(session: Session, row: m.Comparison) -> records.StoredComparison:
    """One stored comparison, with its runs by name."""
    ids = [i for i in (row.run_a_id, row.run_b_id) if i is not None]
    names = dict(session.execute(select(m.Run.id, m.Run.name).where(m.Run.id.in_(ids))).all())
    return _stored(row, names)


def _stored(row: m.Comparison, names: dict[int, str]) -> records.StoredComparison:
    ci = None
    if row.ci_low_pct is not None and row.ci_high_pct is not None:
        ci = (row.ci_low_pct, row.ci_high_pct)
    return records.from_row(
        records.StoredComparison,
        row,
        a=names.get(row.run_a_id) if row.run_a_id is not None else None,
        b=names.get(row.run_b_id, "?"),
        ci95_pct=ci,
    )


def watch_decision(
    session: Session,
    inv: int,
    run: str,
    against: str | None,
    state: MonitorState,
    outcome: str,
    summary: str,
) -> records.StoredComparison:
    """Keep what `ledger watch` decided about `run` (against a run, or the baseline)."""
    run_b = run_row(session, inv, run)
    run_a = launches.find(session, inv, against).run if against is not None else None
    ci = state.pct_ci
    row = m.Comparison(
        investigation_id=inv,
        run_a_id=run_a.id if run_a is not None else None,
        run_b_id=run_b.id,
        kind=ComparisonKind.WATCH,
        unit=run_b.throughput_unit,
        steady_from_b=state.steady_from_step,
        median_b=state.median,
        effective_a=state.reference.value if run_a is not None else None,
        effective_b=state.effective,
        reference_value=state.reference.value if run_a is None else None,
        delta_pct=state.pct_of_reference - 100.0 if state.pct_of_reference is not None else None,
        ci_low_pct=ci[0] - 100.0 if ci is not None else None,
        ci_high_pct=ci[1] - 100.0 if ci is not None else None,
        threshold_pct=state.threshold_pct,
        alpha=state.alpha,
        verdict=outcome,
        decided_at_step=state.decided_at_step,
        summary=summary,
    )
    session.add(row)
    session.flush()
    names = {run_b.id: run_b.name, **({run_a.id: run_a.name} if run_a is not None else {})}
    return _stored(row, names)
