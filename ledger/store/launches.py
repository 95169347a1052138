"""Launches of a run: a run may be launched several times (a relaunch after a fix, under
the same name), and each launch keeps its own steps, events, log files and fate.

The highest `launch.number` of a run is its latest launch: what compare, watch, why and the
report judge unless a name asks for another (`eager_b@1`). The run's own fate is always
its latest launch's: starting a launch first freezes the run's fate into the launch it
ends, then clears it for the new one.

A launch begins with a relaunch deploy step, a `watch` of a new source, a StepMeter started
after the run's earlier launch ended, a log replaced or truncated under its path, and a new
log whose steps start again at or below where the latest launch's steps from another log
got to. A launch that holds nothing yet (no step, log file or event: a relaunch deploy
step just made it) is reused by the next beginning rather than left empty.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Table, exists, select, update
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.db.types import utcnow
from ledger.errors import NotFoundError, UsageError
from ledger.model import records
from ledger.model.terms import Fate
from ledger.store.lookup import find_run, run_names
from ledger.store.steps import latest_launch, placeholder

if TYPE_CHECKING:
    from ledger.model.analysis import RunAnalysis

LOG, WATCH, DEPLOY, HOOK, API, IMPORT = m.LAUNCH_SOURCES
_AT = re.compile(r"^(?P<run>.+)@(?P<launch>\d+)$")


@dataclass(frozen=True)
class Named:
    """A run as a name selected it: the run's row and the launch (its number)."""

    run: m.Run
    launch: int
    explicit: bool  # the name said which launch (RUN@N)

    @property
    def label(self) -> str:
        """How to say it: the run's name, with @N when the run has been launched again."""
        return f"{self.run.name}@{self.launch}" if self.explicit else self.run.name


def split_name(name: str) -> tuple[str, int | None]:
    """`eager_b@2` → ('eager_b', 2); a name without @N → (name, None)."""
    found = _AT.match(name)
    if found is None:
        return name, None
    return found["run"], int(found["launch"])


def latest(conn: Connection, run_id: int) -> int:
    """The run's latest launch number (1 for a run with no launch row)."""
    return latest_launch(conn, run_id)


def find(session: Session, inv: int, name: str) -> Named:
    """The run and launch `name` selects: `RUN` (its latest launch) or `RUN@N`. A run whose
    own name ends in @N is found by that name first."""
    row = find_run(session, inv, name)
    if row is not None:
        return Named(row, latest(session.connection(), row.id), False)
    run, number = split_name(name)
    row = find_run(session, inv, run) if number is not None else None
    if row is None or number is None:
        raise NotFoundError("run", name, run_names(session, inv))
    top = latest(session.connection(), row.id)
    if not 1 <= number <= top:
        known = ", ".join(f"{run}@{n}" for n in range(1, top + 1))
        raise UsageError(f"run {run!r} has no launch {number} (its launches: {known})")
    return Named(row, number, True)


def launch_row(session: Session, run_id: int, number: int) -> m.Launch:
    """The launch's row, made (as the run's first) for a run that has none."""
    row = session.scalar(
        select(m.Launch).where(m.Launch.run_id == run_id, m.Launch.number == number)
    )
    if row is None:
        run = session.get_one(m.Run, run_id)
        # a run without launch rows may hold steps already: which columns, unknown
        row = m.Launch(
            run_id=run_id, number=number, fate=run.fate, fate_reason=run.fate_reason,
            started_at=run.started_at or run.created_at or utcnow(), held_columns=None,
        )  # fmt: skip
        session.add(row)
        session.flush()
    return row


def first_source(session: Session, run: m.Run, source: str) -> None:
    """Who began the launch 1 of a run just made (lookup.ensure_run made it)."""
    row = launch_row(session, run.id, 1)
    row.source = row.source or source
    session.flush()


def is_empty(session: Session, run_id: int, number: int) -> bool:
    """Nothing belongs to the launch yet: no step, log file or event."""
    for model in (m.Step, m.LogFile, m.LogEvent):
        found = session.scalar(
            select(exists().where(model.run_id == run_id, model.launch == number))
        )
        if found:
            return False
    return True


def begin(session: Session, run: m.Run, source: str, command: str | None = None) -> records.Launch:
    """Start a new launch of `run` (or reuse its latest, while that holds nothing) and
    make it the run's current one; returns it."""
    number = latest(session.connection(), run.id)
    current = launch_row(session, run.id, number)
    now = utcnow()
    if is_empty(session, run.id, number):
        current.source = source if current.source in (None, DEPLOY) else current.source
        current.command = command or current.command
        current.started_at = now
    else:
        freeze(current, run, now)
        current = m.Launch(
            run_id=run.id, number=number + 1, source=source, fate=Fate.UNKNOWN,
            command=command, started_at=now,
        )  # fmt: skip
        session.add(current)
    run.fate, run.fate_reason = Fate.UNKNOWN, None
    run.started_at, run.ended_at = now, None
    session.flush()
    return record(current)


def freeze(launch: m.Launch, run: m.Run, now: datetime) -> None:
    """The launch a new one replaces keeps the fate the run had when it ended."""
    launch.fate, launch.fate_reason = run.fate, run.fate_reason
    launch.ended_at = launch.ended_at or run.ended_at or now


def set_fate(
    session: Session,
    run: m.Run,
    number: int,
    fate: Fate,
    reason: str | None,
    *,
    exit_code: int | None = None,
    ended: bool = False,
) -> None:
    """A launch's fate; the run's too when the launch is its latest."""
    row = launch_row(session, run.id, number)
    row.fate, row.fate_reason = fate, reason or None
    if exit_code is not None:
        row.exit_code = exit_code
    if ended:
        row.ended_at = row.ended_at or utcnow()
    if number == latest(session.connection(), run.id):
        run.fate, run.fate_reason = fate, reason or None
        if ended:
            run.ended_at = run.ended_at or utcnow()
    session.flush()


def mirror_run_fate(conn: Connection, run_id: int) -> None:
    """Copy the run's fate into its latest launch (after a write that set only the run's,
    as the hook's conditional fate updates do)."""
    launch, run = cast(Table, m.Launch.__table__), cast(Table, m.Run.__table__)
    number = latest(conn, run_id)
    fate, reason, ended = conn.execute(
        select(run.c.fate, run.c.fate_reason, run.c.ended_at).where(run.c.id == run_id)
    ).one()
    conn.execute(
        update(launch)
        .where(launch.c.run_id == run_id, launch.c.number == number)
        .values(fate=fate, fate_reason=reason, ended_at=ended)
    )


def record(row: m.Launch) -> records.Launch:
    return records.from_row(records.Launch, row)


def listed(session: Session, run: m.Run) -> list[records.Launch]:
    """The run's launches in order, the latest with the run's own fate."""
    rows = list(
        session.scalars(
            select(m.Launch).where(m.Launch.run_id == run.id).order_by(m.Launch.number)
        ).all()
    )
    out = [record(r) for r in rows] or [
        records.Launch(number=1, source=None, command=run.command, fate=run.fate,
                       fate_reason=run.fate_reason, exit_code=None,
                       started_at=run.started_at or run.created_at, ended_at=run.ended_at)
    ]  # fmt: skip
    out[-1] = dataclasses.replace(out[-1], fate=run.fate, fate_reason=run.fate_reason)
    return out


def fate_of(session: Session, run: m.Run, number: int) -> Fate:
    """The launch's fate: the run's own for its latest launch."""
    if number == latest(session.connection(), run.id):
        return run.fate
    found = session.scalar(
        select(m.Launch.fate).where(m.Launch.run_id == run.id, m.Launch.number == number)
    )
    return found or Fate.UNKNOWN


def starts_again(
    session: Session, run_id: int, lf: m.LogFile, steps: Sequence[tuple[Any, ...]]
) -> bool:
    """Whether a log's first steps (rank, step, wall_time, step_time_s, gpu_time_s, tokens,
    throughput…) begin a new launch: they start at or below the last step that another log
    of the launch holds for the same rank, and the step stored there is not the same one
    (a copy of a log, `tee`'d to two files, is the same launch)."""
    conn = session.connection()
    mark = placeholder(conn.dialect.name)
    mine = conn.exec_driver_sql(
        f"SELECT 1 FROM step WHERE run_id = {mark} AND launch = {mark} AND log_file_id = {mark} "
        "LIMIT 1",
        (run_id, lf.launch, lf.id),
    ).first()
    if mine is not None:
        return False  # the log has rows of its own already: it continues its launch
    rank, step = int(steps[0][0] or 0), int(steps[0][1])
    stored = conn.exec_driver_sql(
        f"SELECT max(step) FROM step WHERE run_id = {mark} AND launch = {mark} AND rank = {mark} "
        f"AND log_file_id IS NOT NULL AND log_file_id <> {mark}",
        (run_id, lf.launch, rank, lf.id),
    ).scalar()
    if stored is None or step > int(stored):
        return False
    same = conn.exec_driver_sql(
        f"SELECT throughput, step_time_s, wall_time, loss FROM step WHERE run_id = {mark} "
        f"AND launch = {mark} AND rank = {mark} AND step = {mark}",
        (run_id, lf.launch, rank, step),
    ).first()
    if same is None:
        return True
    first = steps[0]
    mine_values = (first[6], first[3], first[2], first[7])
    return not all(_equal(a, b) for a, b in zip(mine_values, same, strict=True))


def _equal(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    try:
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(a)))
    except (TypeError, ValueError):  # SQLite's 'NaN' text
        return str(a) == str(b)


def move_log(session: Session, lf: m.LogFile, number: int) -> None:
    """A log with no steps of its own yet moves to launch `number`, with its events."""
    session.execute(
        update(cast(Table, m.LogEvent.__table__))
        .where(m.LogEvent.log_file_id == lf.id)
        .values(launch=number)
    )
    lf.launch = number
    session.flush()


def ids(session: Session, inv: int, name: str) -> tuple[int, int]:
    """(run id, launch number) of what `name` selects (RUN or RUN@N)."""
    named = find(session, inv, name)
    return named.run.id, named.launch


def fate_and_reason(session: Session, run: m.Run, number: int) -> tuple[str, str | None]:
    """The launch's fate and reason: the run's own for its latest launch."""
    if number == latest(session.connection(), run.id):
        return run.fate, run.fate_reason
    row = session.scalar(
        select(m.Launch).where(m.Launch.run_id == run.id, m.Launch.number == number)
    )
    return (row.fate, row.fate_reason) if row is not None else (Fate.UNKNOWN, None)


def mark_comparison(
    session: Session,
    inv: int,
    comparison_id: int,
    run: str,
    against: str | None,
    launch: int | None,
) -> None:
    """Say which launches a stored comparison judged (b: `launch`, default the latest)."""
    row = session.get_one(m.Comparison, comparison_id)
    row.launch_b = launch if launch is not None else latest(session.connection(), row.run_b_id)
    if row.run_a_id is not None:
        row.launch_a = find(session, inv, against).launch if against else None
    session.flush()


def detailed(session: Session, run: m.Run) -> list[records.Launch]:
    """The run's launches with their steps and the last decision (watch or compare) on each."""
    from ledger.store.runs import step_counts

    out = []
    for launch in listed(session, run):
        steps, _, last = step_counts(session, run.id, launch.number)
        decided = session.scalar(
            select(m.Comparison)
            .where(m.Comparison.run_b_id == run.id, m.Comparison.launch_b == launch.number)
            .order_by(m.Comparison.created_at.desc(), m.Comparison.id.desc())
            .limit(1)
        )
        out.append(
            dataclasses.replace(
                launch,
                steps=steps,
                last_step=last,
                verdict=decided.verdict if decided is not None else None,
                effective=decided.effective_b if decided is not None else None,
            )
        )
    return out


def with_figures(detail: records.RunDetail, analysis: RunAnalysis) -> records.RunDetail:
    """`show`'s figures from the latest launch's analysis: the judged effective throughput
    (what compare and watch judge) and its % of the baseline."""
    effective = analysis.judged_effective
    return dataclasses.replace(
        detail,
        effective=effective if effective is not None and math.isfinite(effective) else None,
        pct_of_baseline=analysis.vs_baseline_pct,
    )
