"""What the torch-side hook (ledger.hook.StepMeter) writes besides step rows: the run's start,
its fate when a rank ends, and the hook's own figures (steps dropped, caller-side cost).

The hook's writer calls these; the training thread never does. Several ranks write into
one run at once, so every write here is safe to race: the run is created with
INSERT … ON CONFLICT DO NOTHING, the drop count is an atomic increment, and a fate only
replaces the fates it outranks (one rank finishing does not hide another rank's crash).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from sqlalchemy import Connection, Table, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.db.types import utcnow
from ledger.errors import LedgerError
from ledger.model import records
from ledger.model.records import FateChange, StepWrite
from ledger.model.terms import FAILED_FATES, IN_PROGRESS_FATES, Fate
from ledger.store import gate, launches
from ledger.store.config_rows import Keep, write_config
from ledger.store.lookup import ensure_run, run_row
from ledger.store.runs import step_counts
from ledger.store.steps import StepWriter

_RUN = cast(Table, m.Run.__table__)  # Core updates: atomic increments, conditional fates
_GPU = cast(Table, m.GpuSample.__table__)
CHUNK = 256  # rows per executemany, with the GIL handed back between chunks

# Which fates a rank's new fate may replace. A failure never replaces another failure: the
# first rank to crash (or be killed) tells why the run ended; the others only follow it.
_ENDED_BY = (*IN_PROGRESS_FATES, Fate.FINISHED)
REPLACES: dict[str, tuple[str, ...]] = {
    Fate.FINISHED: _ENDED_BY,
    Fate.KILLED: _ENDED_BY,
    Fate.CRASHED: _ENDED_BY,
    Fate.OOM: _ENDED_BY,
    Fate.NCCL: _ENDED_BY,
    # A rank that caught the exception that left its `with` block and trained on.
    Fate.RUNNING: (Fate.CRASHED, Fate.OOM, Fate.KILLED),
}


T = TypeVar("T")


def retry_race(start: Callable[[], T], attempts: int = 5) -> T:
    """Run `start` again when it lost a race: ranks create the same run at once, and on
    PostgreSQL a loser may see a unique violation, then finds the winner's row."""
    for attempt in range(attempts):
        try:
            return start()
        except (LedgerError, IntegrityError) as exc:
            lost = isinstance(exc, IntegrityError) or isinstance(exc.__cause__, IntegrityError)
            if not lost or attempt == attempts - 1:
                raise
        time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def start_run(
    session: Session,
    inv: int,
    run: str,
    *,
    host: str | None,
    command: str | None,
    launched_at: datetime,
) -> records.MeteredRun:
    """Create the run if needed and mark it running.

    `launched_at` is when this rank's process made its meter. A run that ended before
    that was an earlier launch under the same name; one that ended since was ended by a
    peer rank of this launch (which started or finished sooner): its failure stands, and
    its cost figure is kept.
    """
    row, created = ensure_run(session, inv, run)
    if created:
        launches.first_source(session, row, launches.HOOK)
    earlier_launch = row.ended_at is not None and row.ended_at < launched_at
    earlier_steps = False
    if earlier_launch:
        row.hook_cost_us = None  # the figure is this launch's
        any_step = select(m.Step.step).where(m.Step.run_id == row.id).limit(1)
        earlier_steps = session.scalar(any_step) is not None
        # A launch of its own: the earlier one's steps stay apart (ledger.store.launches).
        launches.begin(session, row, launches.HOOK, command)
    if earlier_launch or row.fate not in FAILED_FATES:
        row.fate = Fate.RUNNING
        row.fate_reason = None
        row.ended_at = None
    if row.started_at is None or earlier_launch:
        row.started_at = utcnow()
    row.host = row.host or host
    row.command = row.command or command
    session.flush()
    return records.MeteredRun(row.id, row.name, row.fate, earlier_steps)


def write_batch(
    conn: Connection,
    run_id: int,
    rows: Sequence[Mapping[str, Any]],
    *,
    metrics: Iterable[tuple[int, int, str, Any]],
    dropped: int,
    cost_us: float | None,
    fates: Sequence[FateChange],
    config: Mapping[str, str] | None = None,
    gpus: Sequence[Mapping[str, Any]] = (),
) -> StepWrite:
    """Step rows, loose metrics (rank, step, name, value), the drop count increment (plus
    the rows that could not be stored), the hook's cost, the run's configuration (source
    'hook', the first value of a key stands), NVML samples, then fate changes in order."""
    if config:
        write_config(conn, run_id, "hook", config, keep=Keep.FIRST)
    if gpus:
        conn.execute(
            insert(_GPU), [gate.clean_values("gpu_sample", {**g, "run_id": run_id}) for g in gpus]
        )
    writer = StepWriter(conn, run_id)
    report = StepWrite()
    for start in range(0, len(rows), CHUNK):
        report += writer.write_mappings(rows[start : start + CHUNK])
        # Turning rows into parameters holds the GIL; between chunks, let the training
        # thread have it at once rather than after the 5 ms switch interval.
        time.sleep(0)
    report += writer.write((), list(metrics))
    run = _RUN
    lost = dropped + report.bad_rows
    if lost:
        conn.execute(
            update(run)
            .where(run.c.id == run_id)
            .values(hook_dropped_steps=run.c.hook_dropped_steps + lost)
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
    return report


def summary(session: Session, inv: int, run: str) -> records.MeterSummary:
    row = run_row(session, inv, run)
    steps, ranks, _ = step_counts(session, row.id)
    return records.from_row(
        records.MeterSummary,
        row,
        run=row.name,
        steps=steps,
        ranks=ranks,
        dropped_steps=row.hook_dropped_steps,
    )


def _apply_fate(conn: Connection, run_id: int, change: FateChange) -> None:
    run = _RUN
    values: dict[str, Any] = {"fate": change.fate, "fate_reason": change.reason or None}
    if change.ended:
        values["ended_at"] = utcnow()
    done = conn.execute(
        update(run)
        .where(run.c.id == run_id, run.c.fate.in_(REPLACES[change.fate]))
        .values(**gate.clean_values("run", values))
    )
    if done.rowcount:
        launches.mirror_run_fate(conn, run_id)
