"""Runs: what `ledger runs` and `ledger show RUN` read, and a run's fate."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.errors import UsageError
from ledger.model import records
from ledger.model.terms import EVENT_KINDS, FATES, EventKind, Fate
from ledger.store import deploys, launches
from ledger.store.fixes import patch_record
from ledger.store.lookup import count, run_row
from ledger.store.steps import latest_launch


def set_fate(session: Session, inv: int, run: str, fate: str, reason: str | None) -> None:
    if fate not in FATES:
        raise UsageError(f"a fate is one of {', '.join(FATES)}, not {fate!r}")
    row = run_row(session, inv, run)
    launches.set_fate(session, row, latest_launch(session.connection(), row.id), Fate(fate), reason)


def ordered(session: Session, inv: int) -> list[m.Run]:
    query = select(m.Run).where(m.Run.investigation_id == inv).order_by(m.Run.created_at, m.Run.id)
    return list(session.scalars(query).all())


def step_counts(
    session: Session, run_id: int, launch: int | None = None
) -> tuple[int, int, int | None]:
    """(distinct steps, distinct ranks, last step) of a launch of a run (default: its latest)."""
    if launch is None:
        launch = latest_launch(session.connection(), run_id)
    where = (m.Step.run_id == run_id, m.Step.launch == launch)
    steps, last = session.execute(
        select(func.count(func.distinct(m.Step.step)), func.max(m.Step.step)).where(*where)
    ).one()
    ranks = session.scalar(select(func.count(func.distinct(m.Step.rank))).where(*where))
    return int(steps or 0), int(ranks or 0), last


def summary(session: Session, row: m.Run) -> records.RunSummary:
    launch = latest_launch(session.connection(), row.id)
    steps, ranks, last = step_counts(session, row.id, launch)
    hypothesis_id = None
    if row.patch_id is not None:
        hypothesis_id = session.scalar(
            select(m.Patch.hypothesis_id).where(m.Patch.id == row.patch_id)
        )
    deploy_count = count(session, m.DeployStep, m.DeployStep.run_id == row.id)
    return records.RunSummary(
        run=row.name,
        fate=row.fate,
        steps=steps,
        ranks=ranks,
        last_step=last,
        hypothesis_id=hypothesis_id,
        patch_id=row.patch_id,
        deploy_steps=deploy_count,
        drift=deploys.current_drift(session, row.id),
        log_files=count(session, m.LogFile, m.LogFile.run_id == row.id),
        probes=count(session, m.Probe, m.Probe.run_id == row.id),
        created_at=row.created_at,
        launch=launch,
    )


def detail(session: Session, row: m.Run) -> records.RunDetail:
    """The run with its hypothesis, patch, deploy steps, log files and probes."""
    patch = patch_record(session, row.patch_id) if row.patch_id is not None else None
    hypothesis = None
    if patch is not None:
        hypothesis = records.from_row(
            records.Hypothesis, session.get_one(m.Hypothesis, patch.hypothesis_id)
        )
    launch = latest_launch(session.connection(), row.id)
    steps, ranks, last = step_counts(session, row.id, launch)
    logs = session.scalars(
        select(m.LogFile).where(m.LogFile.run_id == row.id).order_by(m.LogFile.id)
    ).all()
    probes = session.scalars(
        select(m.Probe).where(m.Probe.run_id == row.id).order_by(m.Probe.started_at)
    ).all()
    return records.from_row(
        records.RunDetail,
        row,
        run=row.name,
        steps=steps,
        ranks=ranks,
        last_step=last,
        hypothesis=hypothesis,
        patch=patch,
        deploy_steps=deploys.steps_of(session, row.id, row.name),
        log_files=[records.from_row(records.LogFile, f) for f in logs],
        probes=[probe_record(session, p) for p in probes],
        events=notable_events(session, row.id, {f.id: f.path for f in logs}, launch=launch),
        event_counts=event_counts(session, row.id, launch),
        launch=launch,
        launches=launches.detailed(session, row),
        decision=last_decision(session, row),
        drift=deploys.current_drift(session, row.id),
    )


def last_decision(session: Session, row: m.Run) -> records.StoredComparison | None:
    """The last verdict of watch or compare on the run (as run b)."""
    found = session.scalar(
        select(m.Comparison)
        .where(m.Comparison.run_b_id == row.id)
        .order_by(m.Comparison.created_at.desc(), m.Comparison.id.desc())
        .limit(1)
    )
    if found is None:
        return None
    from ledger.store.compare import stored_record

    return stored_record(session, found)


NOTABLE = (
    EventKind.OOM, EventKind.NCCL, EventKind.RECOMPILE, EventKind.GRAPH_BREAK,
    EventKind.TRACEBACK, EventKind.SIGNAL, EventKind.EXIT, EventKind.STALL, EventKind.RESTART,
)  # fmt: skip
NOTABLE_SHOWN = 50


def event_counts(session: Session, run_id: int, launch: int | None = None) -> dict[str, int]:
    """Events of each kind of a launch of the run (default: its latest)."""
    if launch is None:
        launch = latest_launch(session.connection(), run_id)
    rows = session.execute(
        select(m.LogEvent.kind, func.count())
        .where(m.LogEvent.run_id == run_id, m.LogEvent.launch == launch)
        .group_by(m.LogEvent.kind)
        .order_by(m.LogEvent.kind)
    ).all()
    return {str(kind): int(n) for kind, n in rows}


def notable_events(
    session: Session,
    run_id: int,
    log_paths: dict[int, str],
    limit: int = NOTABLE_SHOWN,
    launch: int | None = None,
) -> list[records.Event]:
    """The last `limit` OOMs, NCCL failures, recompiles, tracebacks… of a launch of the run
    (default: its latest) in order."""
    if launch is None:
        launch = latest_launch(session.connection(), run_id)
    rows = session.scalars(
        select(m.LogEvent)
        .where(
            m.LogEvent.run_id == run_id,
            m.LogEvent.launch == launch,
            m.LogEvent.kind.in_(NOTABLE),
        )
        .order_by(m.LogEvent.id.desc())
        .limit(limit)
    ).all()
    return [event_record(e, log_paths) for e in reversed(rows)]


def event_record(e: m.LogEvent, log_paths: dict[int, str]) -> records.Event:
    if e.probe_id is not None:
        where = f"line {e.line} of probe #{e.probe_id}'s output"
    elif e.log_file_id is not None:
        where = f"line {e.line} of {log_paths.get(e.log_file_id, 'its log')}"
    else:
        where = "recorded without a line"
    return records.from_row(records.Event, e, where=where)


def probe_record(session: Session, probe: m.Probe) -> records.Probe:
    gpus = session.scalars(
        select(m.GpuSample).where(m.GpuSample.probe_id == probe.id).order_by(m.GpuSample.gpu_index)
    ).all()
    return records.from_row(
        records.Probe, probe, gpus=[records.from_row(records.GpuSample, g) for g in gpus]
    )


def add_event(
    session: Session, inv: int, run: str, kind: str, text: str, step: int | None,
    launch: int | None = None,
) -> records.Event:  # fmt: skip
    """An event that no log line holds: a stall `watch` saw, a decision it took."""
    if kind not in EVENT_KINDS:
        raise UsageError(f"an event kind is one of {', '.join(EVENT_KINDS)}, not {kind!r}")
    run_id = run_row(session, inv, run).id
    row = m.LogEvent(
        run_id=run_id, kind=kind, text=text, step=step,
        launch=latest_launch(session.connection(), run_id) if launch is None else launch,
    )  # fmt: skip
    session.add(row)
    session.flush()
    return event_record(row, {})
