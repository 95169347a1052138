"""Runs: what `ledger runs` and `ledger show RUN` read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.model import records
from ledger.store.base import LedgerBase
from ledger.store.fixes import _patch_record

if TYPE_CHECKING:
    import pandas as pd


class RunsMixin(LedgerBase):
    def ensure_run(self, name: str) -> records.RunSummary:
        """The run called `name`, created (with fate unknown) when it does not exist yet."""
        with self._write() as session:
            self._ensure_run(session, name)
        return self.run_summary(name)

    def set_fate(self, run: str, fate: str, reason: str | None = None) -> None:
        from ledger.db.models import FATES
        from ledger.errors import UsageError

        if fate not in FATES:
            raise UsageError(f"fate must be one of {', '.join(FATES)}, not {fate!r}")
        with self._write() as session:
            row = self._run_row(session, run)
            row.fate = fate
            row.fate_reason = reason

    def run_names(self) -> list[str]:
        with self._read() as session:
            return list(
                session.scalars(
                    select(m.Run.name)
                    .where(m.Run.investigation_id == self._investigation_id_in(session))
                    .order_by(m.Run.created_at, m.Run.id)
                ).all()
            )

    def runs(self) -> list[records.RunSummary]:
        with self._read() as session:
            rows = session.scalars(
                select(m.Run)
                .where(m.Run.investigation_id == self._investigation_id_in(session))
                .order_by(m.Run.created_at, m.Run.id)
            ).all()
            return [_summary(session, row) for row in rows]

    def run_summary(self, run: str) -> records.RunSummary:
        with self._read() as session:
            return _summary(session, self._run_row(session, run))

    def show(self, run: str) -> records.RunDetail:
        """The run with its hypothesis, patch, deploy steps, log files and probes."""
        with self._read() as session:
            row = self._run_row(session, run)
            patch = _patch_record(session, row.patch_id) if row.patch_id is not None else None
            hypothesis = None
            if patch is not None:
                hypothesis = records.from_row(
                    records.Hypothesis, session.get_one(m.Hypothesis, patch.hypothesis_id)
                )
            steps, ranks, last = _step_counts(session, row.id)
            deploys = session.scalars(
                select(m.DeployStep)
                .where(m.DeployStep.run_id == row.id)
                .order_by(m.DeployStep.started_at, m.DeployStep.id)
            ).all()
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
                deploy_steps=[
                    records.from_row(records.DeployStep, d, run=row.name) for d in deploys
                ],
                log_files=[records.from_row(records.LogFile, f) for f in logs],
                probes=[_probe_record(session, p) for p in probes],
            )

    def runs_frame(self) -> pd.DataFrame:
        """`runs()` as a pandas DataFrame, one row per run."""
        import pandas as pd

        rows = [r.to_dict() for r in self.runs()]
        frame = pd.DataFrame(rows, columns=list(records.RunSummary.__dataclass_fields__))
        frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True)
        return frame


def _step_counts(session: Session, run_id: int) -> tuple[int, int, int | None]:
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


def _summary(session: Session, row: m.Run) -> records.RunSummary:
    steps, ranks, last = _step_counts(session, row.id)
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
        log_files=LedgerBase._count(session, m.LogFile, m.LogFile.run_id == row.id),
        probes=LedgerBase._count(session, m.Probe, m.Probe.run_id == row.id),
        created_at=row.created_at,
    )


def _probe_record(session: Session, probe: m.Probe) -> records.Probe:
    gpus = session.scalars(
        select(m.GpuSample).where(m.GpuSample.probe_id == probe.id).order_by(m.GpuSample.gpu_index)
    ).all()
    return records.from_row(
        records.Probe, probe, gpus=[records.from_row(records.GpuSample, g) for g in gpus]
    )
