"""Storing runs other trackers recorded (`ledger import`): idempotent and incremental.

ledger.importers reads the files into TrackedRuns with no transaction open; this module
writes them in one. Each tracked run has a log_file row (its format the tracker's name, its
path what identifies the run there), its scalars become step rows (the names the column map
sends to step columns) and metric rows (all the others) through the one step writer, its
params become run_config rows with source 'import'. Rows already stored are not sent again:
importing twice adds nothing, a run that grew adds only its new steps, and a value the
tracker logged since at a step imported before fills that step's empty column (never
changing a value already stored). A run per rank lands as that rank of one ledger run.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.db.types import utcnow
from ledger.errors import ConflictError
from ledger.model.imports import ColumnMap, ImportedRun, ImportResult, Point, TrackedRun
from ledger.model.terms import FINAL_FATES, Fate
from ledger.store.ingest import write_config
from ledger.store.lookup import ensure_run, insert_if_missing
from ledger.store.steps import StepWriter, latest_launch, placeholder
from ledger.store.units import house_spelling

Key = tuple[int, int]  # (rank, step)


def store_all(
    session: Session, inv: int, tracked: list[TrackedRun], cmap: ColumnMap
) -> ImportResult:
    return ImportResult(runs=[store_run(session, inv, t, cmap) for t in tracked])


def store_run(session: Session, inv: int, tracked: TrackedRun, cmap: ColumnMap) -> ImportedRun:
    """Write what is new of one tracked run into the ledger run of its name."""
    tracked.name = _owner(session, inv, tracked)
    run_row, created = ensure_run(session, inv, tracked.name)
    lf = _source_row(session, run_row.id, tracked)
    conn = session.connection()
    chosen = claim_columns(tracked.scalars, cmap)
    columns = tuple(dict.fromkeys(["wall_time", *chosen.values()]))
    rows = step_rows(tracked.scalars, chosen, columns)
    metric_rows = [
        (rank, step, name, value)
        for name, points in tracked.scalars.items()
        if name not in chosen
        for rank, step, value, _ in last_per_step(points)
    ]
    known_steps, known_metrics = _known(conn, run_row.id, lf.id, columns)
    fills = [r for r in rows if _fills(r, known_steps.get((r[0], r[1])))]
    rows = [r for r in rows if (r[0], r[1]) not in known_steps]
    metric_rows = [r for r in metric_rows if (r[0], r[1], r[2]) not in known_metrics]
    writer = StepWriter(conn, run_row.id, log_file_id=lf.id, columns=columns)
    sent = writer.write(rows, metric_rows)
    filled, unfilled = writer.fill(fills)
    sent += unfilled
    config = write_config(session, run_row.id, "import", list(tracked.config.items()))
    unit = next((cmap.unit(n) for n, c in chosen.items() if c == "throughput"), None)
    if unit and not run_row.throughput_unit:
        run_row.throughput_unit = house_spelling(session, run_row, unit)
    _times_and_fate(run_row, tracked, bool(rows or fills))
    lf.size = lf.offset = tracked.size
    lf.lines = sum(len(p) for p in tracked.scalars.values())  # the points read
    lf.ingested_at = utcnow()
    last = session.scalar(select(m.Step.step).where(m.Step.run_id == run_row.id).order_by(
        m.Step.step.desc()).limit(1))  # fmt: skip
    ranks = tuple(sorted({p[0] for points in tracked.scalars.values() for p in points}))
    return ImportedRun(
        run=run_row.name, source=tracked.source, origin=tracked.origin, steps=sent.steps,
        filled=filled, metrics=sent.metrics, config=config, columns=dict(chosen),
        last_step=last, fate=run_row.fate, run_created=created,
        bad_values=sent.bad_values + sent.bad_rows, skipped=tracked.skips,
        problems=(*tracked.problems, *tracked.skip_lines(), *sent.problems),
        ranks=ranks or (tracked.rank,),
    )  # fmt: skip


def claim_columns(scalars: dict[str, list[Point]], cmap: ColumnMap) -> dict[str, str]:
    """scalar name → step column, for the names the map sends to a column; when two names
    present fill one column, the map's first one wins and the other stays a metric."""
    present = {name.lower(): name for name in reversed(list(scalars))}
    present.update({name: name for name in scalars})
    chosen: dict[str, str] = {}
    taken: set[str] = set()
    for name, column in cmap.columns.items():
        source = present.get(name) or present.get(name.lower())
        if source is None or column in taken or source in chosen:
            continue
        chosen[source] = column
        taken.add(column)
    return chosen


def last_per_step(points: list[Point]) -> list[Point]:
    """One point per rank and step, the one read last (a value logged twice, a restarted
    run)."""
    by_step = {(point[0], point[1]): point for point in points}
    return [by_step[key] for key in sorted(by_step)]


def step_rows(
    scalars: dict[str, list[Point]], chosen: dict[str, str], columns: tuple[str, ...]
) -> list[tuple[Any, ...]]:
    """(rank, step, wall_time, *columns) for every step at which a chosen name has a value;
    the wall time is the latest the tracker gave for that step."""
    values: dict[Key, dict[str, Any]] = {}
    for name, column in chosen.items():
        for rank, step, value, wall in last_per_step(scalars[name]):
            row = values.setdefault((rank, step), {})
            row[column] = value
            if wall is not None and wall > row.get("wall_time", float("-inf")):
                row["wall_time"] = wall
    return [(*key, *(values[key].get(c) for c in columns)) for key in sorted(values)]


def _known(
    conn: Any, run_id: int, log_file_id: int, columns: tuple[str, ...]
) -> tuple[dict[Key, int], set[tuple[int, int, str]]]:
    """The run's stored steps, each with a bit set for every one of `columns` it holds no
    value in (0 for rows another source wrote: an import fills only its own), and its
    stored (rank, step, metric name)s. The database computes the bits: one small integer
    per row comes back, so a second import of a large run costs little more than the first
    read of its keys."""
    mark = placeholder(conn.dialect.name)
    launch = latest_launch(conn, run_id)  # the launch the step writer writes into
    empty = " + ".join(f'(CASE WHEN "{c}" IS NULL THEN {1 << i} ELSE 0 END)' for i, c in
                       enumerate(columns))  # fmt: skip
    steps = conn.exec_driver_sql(
        f"SELECT rank, step, CASE WHEN log_file_id = {mark} THEN {empty} ELSE 0 END "
        f"FROM step WHERE run_id = {mark} AND launch = {mark}",
        (log_file_id, run_id, launch),
    ).fetchall()
    metrics = conn.exec_driver_sql(
        f"SELECT rank, step, name FROM metric WHERE run_id = {mark} AND launch = {mark}",
        (run_id, launch),
    ).fetchall()
    return (
        {(int(r), int(s)): int(bits) for r, s, bits in steps},
        {(int(r), int(s), str(n)) for r, s, n in metrics},
    )


def _fills(row: tuple[Any, ...], empty: int | None) -> bool:
    """Whether a stored row (its empty columns' bits) lacks a value `row` has."""
    if not empty:
        return False
    return any(empty & (1 << i) and value is not None for i, value in enumerate(row[2:]))


def _source_row(session: Session, run_id: int, tracked: TrackedRun) -> m.LogFile:
    insert_if_missing(
        session, m.LogFile, run_id=run_id, path=tracked.origin, size=0, offset=0, lines=0,
        format=tracked.source,
    )  # fmt: skip
    query = select(m.LogFile).where(m.LogFile.run_id == run_id, m.LogFile.path == tracked.origin)
    return session.scalars(query.with_for_update()).one()


def _owner(session: Session, inv: int, tracked: TrackedRun) -> str:
    """The ledger run a tracked run goes into: the one it was imported into before (under
    whatever name it was given then), else its own name."""
    owner = session.scalar(
        select(m.Run.name)
        .join(m.LogFile, m.LogFile.run_id == m.Run.id)
        .where(m.Run.investigation_id == inv, m.LogFile.path == tracked.origin)
    )
    if owner is None or owner == tracked.name:
        return tracked.name
    if tracked.named:
        raise ConflictError(
            f"{tracked.origin} was imported before as run {owner!r}; import it under that "
            "name (or its own) to add what is new"
        )
    return str(owner)


def _times_and_fate(run_row: m.Run, tracked: TrackedRun, wrote: bool) -> None:
    walls = [p[3] for points in tracked.scalars.values() for p in points if p[3] is not None]
    if walls and run_row.started_at is None:
        run_row.started_at = datetime.fromtimestamp(min(walls), UTC)
    fate = tracked.fate
    if fate is None:
        return
    if run_row.fate in (Fate.UNKNOWN, Fate.RUNNING, Fate.LOADING) or wrote:
        run_row.fate = fate
        run_row.fate_reason = tracked.fate_reason
        if fate in FINAL_FATES and walls:
            run_row.ended_at = datetime.fromtimestamp(max(walls), UTC)
