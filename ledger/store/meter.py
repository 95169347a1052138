"""What the torch-side hook (ledger.hook.StepMeter) writes besides step rows: the run's start,
its fate when a rank ends, and the hook's own figures (steps dropped, caller-side cost).

The hook's writer thread calls these; the training thread never does. Several ranks write
into one run at once, so every write here is safe to race: the run is created with a retry
when another rank created it first, the drop count is an atomic increment, and a fate only
replaces the fates it outranks (one rank finishing does not hide another rank's crash).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select, update
from sqlalchemy.exc import IntegrityError

from ledger.db import models as m
from ledger.db.engine import WRITE_OPTION, translate_errors
from ledger.db.types import sqlite_float, utcnow
from ledger.model import records
from ledger.model.records import FateChange
from ledger.store.base import LedgerBase
from ledger.store.steps import insert_statement, write_steps

CHUNK = 256  # rows per executemany

# Which fates a rank's new fate may replace. A failure never replaces another failure: the
# first rank to crash (or be killed) tells why the run ended; the others only follow it.
_IN_PROGRESS = ("unknown", "loading", "running", "stalled")
REPLACES: dict[str, tuple[str, ...]] = {
    "finished": (*_IN_PROGRESS, "finished"),
    "killed": (*_IN_PROGRESS, "finished"),
    "crashed": (*_IN_PROGRESS, "finished"),
    "oom": (*_IN_PROGRESS, "finished"),
    # A rank that caught the exception that left its `with` block and trained on.
    "running": ("crashed", "oom", "killed"),
}


@dataclasses.dataclass(frozen=True)
class MeterSummary(records.Record):
    """A run as the hook left it: its fate and the hook's own figures."""

    run: str
    fate: str
    fate_reason: str | None
    steps: int
    ranks: int
    dropped_steps: int
    hook_cost_us: float | None
    started_at: datetime | None
    ended_at: datetime | None


@dataclasses.dataclass(frozen=True)
class MeteredRun(records.Record):
    """The run a meter writes into, as it found it."""

    id: int
    run: str
    fate: str  # after the start: running, or the failure a peer rank already recorded
    earlier_steps: bool  # True when an earlier launch under this name left steps behind


_FAILURES = ("crashed", "oom", "nccl", "killed")


class MeterMixin(LedgerBase):
    def start_metered_run(
        self,
        run: str,
        *,
        host: str | None,
        command: str | None,
        launched_at: datetime,
    ) -> MeteredRun:
        """Create the run if needed and mark it running.

        `launched_at` is when this rank's process made its meter. A run that ended before
        that was an earlier launch under the same name; one that ended since was ended by
        a peer rank of this launch (which started or finished sooner): its failure stands,
        and its cost figure is kept. Ranks race to create the same run; on PostgreSQL the
        loser sees a unique violation and finds the winner's row on the next try.
        """
        for attempt in range(5):
            try:
                with self._write() as session:
                    row = self._ensure_run(session, run)
                    earlier_launch = row.ended_at is not None and row.ended_at < launched_at
                    earlier_steps = False
                    if earlier_launch:
                        row.hook_cost_us = None  # the figure is this launch's
                        any_step = select(m.Step.step).where(m.Step.run_id == row.id).limit(1)
                        earlier_steps = session.scalar(any_step) is not None
                    if earlier_launch or row.fate not in _FAILURES:
                        row.fate = "running"
                        row.fate_reason = None
                        row.ended_at = None
                    if row.started_at is None or earlier_launch:
                        row.started_at = utcnow()
                    row.host = row.host or host
                    row.command = row.command or command
                    session.flush()
                    return MeteredRun(row.id, row.name, row.fate, earlier_steps)
            except Exception as exc:
                if not isinstance(exc.__cause__ or exc, IntegrityError) or attempt == 4:
                    raise
                self._investigation_id = None
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def write_meter_batch(
        self,
        run_id: int,
        rows: Sequence[Mapping[str, Any]],
        *,
        metrics: Iterable[tuple[int, int, str, Any]] = (),
        dropped: int = 0,
        cost_us: float | None = None,
        fates: Sequence[FateChange] = (),
    ) -> None:
        """One transaction: step rows, loose metrics (rank, step, name, value), the run's
        drop count increment, the hook's cost, then fate changes in the order given."""
        engine = self.engine.execution_options(**{WRITE_OPTION: True})
        with translate_errors(self.location.url), engine.begin() as conn:
            for start in range(0, len(rows), CHUNK):
                write_steps(conn, run_id, rows[start : start + CHUNK])
                # Turning rows into parameters holds the GIL; between chunks, let the
                # training thread have it at once rather than after the 5 ms switch interval.
                time.sleep(0)
            _write_metrics(conn, run_id, metrics)
            run = m.Run.__table__
            if dropped:
                conn.execute(
                    update(run)
                    .where(run.c.id == run_id)
                    .values(hook_dropped_steps=run.c.hook_dropped_steps + dropped)
                )
            if cost_us is not None:
                # With several ranks, the run keeps the largest of their costs.
                conn.execute(
                    update(run)
                    .where(
                        run.c.id == run_id,
                        (run.c.hook_cost_us.is_(None)) | (run.c.hook_cost_us < cost_us),
                    )
                    .values(hook_cost_us=cost_us)
                )
            for change in fates:
                _apply_fate(conn, run_id, change)

    def meter_summary(self, run: str) -> MeterSummary:
        from ledger.store.runs import _step_counts

        with self._read() as session:
            row = self._run_row(session, run)
            steps, ranks, _ = _step_counts(session, row.id)
            return records.from_row(
                MeterSummary,
                row,
                run=row.name,
                steps=steps,
                ranks=ranks,
                dropped_steps=row.hook_dropped_steps,
            )

    def run_id(self, run: str) -> int:
        with self._read() as session:
            return self._run_row(session, run).id


def _write_metrics(
    conn: Connection, run_id: int, metrics: Iterable[tuple[int, int, str, Any]]
) -> None:
    fix = sqlite_float if conn.dialect.name == "sqlite" else _identity
    rows = [(run_id, rank, step, name, fix(value)) for rank, step, name, value in metrics]
    if rows:
        columns = ("run_id", "rank", "step", "name", "value")
        conn.exec_driver_sql(insert_statement(conn.dialect.name, "metric", columns), rows)


def _apply_fate(conn: Connection, run_id: int, change: FateChange) -> None:
    run = m.Run.__table__
    values: dict[str, Any] = {"fate": change.fate, "fate_reason": change.reason}
    if change.ended:
        values["ended_at"] = utcnow()
    conn.execute(
        update(run)
        .where(run.c.id == run_id, run.c.fate.in_(REPLACES[change.fate]))
        .values(**values)
    )


def _identity(value: Any) -> Any:
    return value
