"""Gathering a report: every attempt with when it ran, its events, loss and memory, its
analysis, its comparison with the first attempt, and its steady step times — read in one
read session; ledger.usecases.report analyses it after.

Attempts are ordered by when they ran, not by when their row was made: following the
README (`record-fix --run X`, then ingesting the older logs) makes X's row first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.model import records
from ledger.model.analysis import Baseline
from ledger.model.report import (
    RAN_CREATED,
    RAN_FIRST_STEP,
    RAN_RELAUNCH,
    RAN_STARTED,
    RunEvent,
    Series,
)
from ledger.model.terms import EventKind
from ledger.store import analysed, compare, hypotheses, runs, timeline, why
from ledger.store.columnar import fetch_floats
from ledger.store.lookup import run_row
from ledger.store.steps import placeholder

if TYPE_CHECKING:
    from ledger.readings.evidence import ChangeRow, RunEvidence
    from ledger.readings.steps import StepColumns

# The events that tell an attempt's story, and how many of each kind a report keeps.
REPORTED_EVENTS: tuple[str, ...] = (EventKind.RECOMPILE, EventKind.OOM, EventKind.NCCL)
EVENTS_KEPT = 200  # per run and kind, the latest: enough to mark a plot, never a flood
# A wall time before this is not a clock reading (a counter, seconds since launch…).
EARLIEST_WALL_TIME = datetime(2000, 1, 1, tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class RunFacts:
    """What the database says about one run, before any analysis."""

    detail: records.RunDetail
    columns: StepColumns | None  # None: the run has no steps
    ran_at: datetime
    ran_from: str
    events: tuple[RunEvent, ...]
    event_counts: dict[str, int]
    loss: Series | None
    peak_memory_mib: float | None
    gpu_samples: tuple[records.GpuSample, ...]
    evidence: RunEvidence  # what `why` reads (ledger.store.why)
    changes: tuple[ChangeRow, ...]  # the run's patch, its files and hypothesis


@dataclass(frozen=True)
class Gathered:
    """What a report needs from the database."""

    db: str
    investigation: str
    baseline: Baseline
    runs: list[RunFacts]  # in the order they ran
    hypotheses: list[records.Hypothesis]
    timeline: list[records.TimelineEntry]


def gather(
    session: Session, inv: int, investigation: str, db: str, names: Sequence[str] | None
) -> Gathered:
    """Everything the report draws, for `names` (default: every run), in the order they ran."""
    rows = [run_row(session, inv, n) for n in names] if names else runs.ordered(session, inv)
    facts = [_facts(session, row) for row in rows]
    # created_at and id break ties, so runs with no time of their own keep their order
    facts.sort(key=lambda f: (f.ran_at, f.detail.created_at, f.detail.id))
    return Gathered(
        db=db,
        investigation=investigation,
        baseline=compare.baseline(session, investigation),
        runs=facts,
        hypotheses=hypotheses.listed(session, inv, None),
        timeline=timeline.entries(session, inv),
    )


def _facts(session: Session, row: m.Run) -> RunFacts:
    detail = runs.detail(session, row)
    has_steps = detail.steps > 0
    ran_at, ran_from = ran_time(session, row, detail)
    events, counts = run_events(session, row.id)
    columns = analysed.step_columns(session, row.id) if has_steps else None
    return RunFacts(
        detail=detail,
        columns=columns,
        ran_at=ran_at,
        ran_from=ran_from,
        events=events,
        event_counts=counts,
        loss=loss_series(session, row.id) if has_steps else None,
        peak_memory_mib=peak_memory(session, row.id) if has_steps else None,
        gpu_samples=run_gpu_samples(session, row.id),
        evidence=why.evidence(session, row, columns),
        changes=tuple(why.changes_between(session, None, row)),
    )


def ran_time(session: Session, row: m.Run, detail: records.RunDetail) -> tuple[datetime, str]:
    """When the run ran: its first step's wall time, else when it started, else when it was
    (re)launched by a deploy step, else when its row was made."""
    first = session.scalar(
        select(m.Step.wall_time)
        .where(m.Step.run_id == row.id, m.Step.wall_time.is_not(None))
        .order_by(m.Step.step, m.Step.rank)
        .limit(1)
    )
    when = _clock(first)
    if when is not None:
        return when, RAN_FIRST_STEP
    if row.started_at is not None:
        return _aware(row.started_at), RAN_STARTED
    launches = [s.started_at for s in detail.deploy_steps if "launch" in s.name.casefold()]
    if launches:
        return _aware(max(launches)), RAN_RELAUNCH
    return _aware(row.created_at), RAN_CREATED


def _clock(seconds: float | None) -> datetime | None:
    """A step's wall time as a UTC datetime, or None when it cannot be a clock reading."""
    if seconds is None or not math.isfinite(seconds) or seconds < EARLIEST_WALL_TIME:
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):  # past what a datetime holds
        return None


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def run_events(session: Session, run_id: int) -> tuple[tuple[RunEvent, ...], dict[str, int]]:
    """The run's recompiles, OOMs and NCCL failures: the latest few of each kind in log
    order, and how many of each there are."""
    counts = {
        kind: int(n)
        for kind, n in session.execute(
            select(m.LogEvent.kind, func.count(m.LogEvent.id))
            .where(m.LogEvent.run_id == run_id, m.LogEvent.kind.in_(REPORTED_EVENTS))
            .group_by(m.LogEvent.kind)
        ).all()
    }
    kept: list[tuple[tuple[int, int, int], RunEvent]] = []
    for kind in counts:
        rows = session.execute(
            select(m.LogEvent)
            .where(m.LogEvent.run_id == run_id, m.LogEvent.kind == kind)
            .order_by(m.LogEvent.log_file_id.desc(), m.LogEvent.line.desc(), m.LogEvent.id.desc())
            .limit(EVENTS_KEPT)
        ).scalars()
        for e in rows:
            order = (e.log_file_id or 0, e.line or 0, e.id)
            kept.append((order, _event(e)))
    kept.sort(key=lambda pair: pair[0])
    return tuple(event for _, event in kept), counts


def _event(row: m.LogEvent) -> RunEvent:
    return RunEvent(
        kind=EventKind(row.kind),  # the column's CHECK holds it to the enum
        text=row.text,
        step=row.step,
        line=row.line,
        rank=row.rank,
        from_probe=row.probe_id is not None,
    )


def loss_series(session: Session, run_id: int) -> Series | None:
    """The loss at each step (the mean over ranks), or None when no step has one."""
    conn = session.connection()
    mark = placeholder(conn.dialect.name)
    table = fetch_floats(
        conn,
        ("step", "AVG(loss)"),
        f"FROM step WHERE run_id = {mark} AND loss IS NOT NULL GROUP BY step ORDER BY step",
        (run_id,),
    )
    import numpy as np

    table = table[np.isfinite(table[:, 1])]
    if not len(table):
        return None
    return Series(steps=table[:, 0].astype(np.int64), values=table[:, 1])


def peak_memory(session: Session, run_id: int) -> float | None:
    """The most GPU memory a step recorded: reserved where known, else allocated (MiB)."""
    reserved, allocated = session.execute(
        select(func.max(m.Step.memory_reserved_mib), func.max(m.Step.memory_allocated_mib)).where(
            m.Step.run_id == run_id
        )
    ).one()
    for value in (reserved, allocated):
        if value is not None and math.isfinite(value) and value > 0:
            return float(value)
    return None


def run_gpu_samples(session: Session, run_id: int) -> tuple[records.GpuSample, ...]:
    """What was sampled on each GPU while the run ran (not by a probe): the most memory
    used, the card's capacity and the mean utilisation, per GPU."""
    rows = session.execute(
        select(
            m.GpuSample.gpu_index,
            func.max(m.GpuSample.name),
            func.max(m.GpuSample.memory_used_mib),
            func.max(m.GpuSample.memory_total_mib),
            func.avg(m.GpuSample.utilization_pct),
        )
        .where(m.GpuSample.run_id == run_id, m.GpuSample.probe_id.is_(None))
        .group_by(m.GpuSample.gpu_index)
        .order_by(m.GpuSample.gpu_index)
    ).all()
    return tuple(
        records.GpuSample(
            gpu_index=int(index),
            name=name,
            memory_used_mib=_number(used),
            memory_total_mib=_number(total),
            utilization_pct=_number(util),
        )
        for index, name, used, total, util in rows
    )


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None
