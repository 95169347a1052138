"""Runs: what `ledger runs` and `ledger show RUN` read, and a run's fate."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.errors import UsageError
from ledger.model import records
from ledger.model.terms import FATES
from ledger.store import deploys
from ledger.store.fixes import patch_record
from ledger.store.lookup import count, run_row


def set_fate(session: Session, inv: int, run: str, fate: str, reason: str | None) -> None:
    if fate not in FATES:
        raise UsageError(f"a fate is one of {', '.join(FATES)}, not {fate!r}")
    row = run_row(session, inv, run)
    row.fate = fate
    row.fate_reason = reason or None


def ordered(session: Session, inv: int) -> list[m.Run]:
    query = select(m.Run).where(m.Run.investigation_id == inv).order_by(m.Run.created_at, m.Run.id)
    return list(session.scalars(query).all())


def step_counts(session: Session, run_id: int) -> tuple[int, int, int | None]:
    """(distinct steps, distinct ranks, last step) of a run."""
    steps, last = session.execute(
        select(func.count(func.distinct(m.Step.step)), func.max(m.Step.step)).where(
            m.Step.run_id == run_id
        )
    ).one()
    ranks = session.scalar(
        select(func.count(func.distinct(m.Step.rank))).where(m.Step.run_id == run_id)
    )
    return int(steps or 0), int(ranks or 0), last


def summary(session: Session, row: m.Run) -> records.RunSummary:
    steps, ranks, last = step_counts(session, row.id)
    hypothesis_id = None
    if row.patch_id is not None:
        hypothesis_id = session.scalar(
            select(m.Patch.hypothesis_id).where(m.Patch.id == row.patch_id)
        )
    deploy_count, checked, drifted = session.execute(
        select(
            func.count(m.DeployStep.id),
            func.count(m.DeployStep.drift),  # steps whose artifact was compared at all
            func.count(m.DeployStep.id).filter(m.DeployStep.drift.is_(True)),
        ).where(m.DeployStep.run_id == row.id)
    ).one()
    return records.RunSummary(
        run=row.name,
        fate=row.fate,
        steps=steps,
        ranks=ranks,
        last_step=last,
        hypothesis_id=hypothesis_id,
        patch_id=row.patch_id,
        deploy_steps=int(deploy_count or 0),
        drift=drifted > 0 if checked else None,
        log_files=count(session, m.LogFile, m.LogFile.run_id == row.id),
        probes=count(session, m.Probe, m.Probe.run_id == row.id),
        created_at=row.created_at,
    )


def detail(session: Session, row: m.Run) -> records.RunDetail:
    """The run with its hypothesis, patch, deploy steps, log files and probes."""
    patch = patch_record(session, row.patch_id) if row.patch_id is not None else None
    hypothesis = None
    if patch is not None:
        hypothesis = records.from_row(
            records.Hypothesis, session.get_one(m.Hypothesis, patch.hypothesis_id)
        )
    steps, ranks, last = step_counts(session, row.id)
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
    )


def probe_record(session: Session, probe: m.Probe) -> records.Probe:
    gpus = session.scalars(
        select(m.GpuSample).where(m.GpuSample.probe_id == probe.id).order_by(m.GpuSample.gpu_index)
    ).all()
    return records.from_row(
        records.Probe, probe, gpus=[records.from_row(records.GpuSample, g) for g in gpus]
    )
