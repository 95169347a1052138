"""A launch's steps as the arrays ledger.analyze reads (ledger.readings.steps.StepColumns),
reading only the columns that hold something, and the steps themselves only when they
are not simply first, first + 1, …

A read is planned first (a few cheap queries on the key's index and the launch row), then
made: `step_columns` does both for one launch; `many` plans every launch it is given and
then makes their bulk reads side by side (ledger.store.columnar.fetch_floats_many).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from ledger.store.columnar import BULK_ROWS, Read, fetch_floats, fetch_floats_many
from ledger.store.extent import probed_ends, step_ends
from ledger.store.steps import (
    column_counts,
    held_columns,
    latest_launch,
    placeholder,
    rank_bounds,
)

if TYPE_CHECKING:
    from ledger.readings.steps import StepColumns

# What the analyzer reads of a step, beside its number: the throughput, and what its
# effective figure needs (tokens, and the time a step cost: inside it, between steps, or
# from one wall-clock reading to the next).
ANALYSED = ("throughput", "tokens", "step_time_s", "wait_s", "wall_time")

# The first steps a run stored, looked at to choose how to read it on SQLite
# (_all_held_early) when the ledger does not know which columns the launch holds.
EARLY_STEPS = 1000


@dataclass(frozen=True)
class Planned:
    """One launch's read, planned: what to fetch, and how to turn the table into arrays.

    `first` is set when the steps are consecutive (first, first + 1, …, `rows` of them),
    as counted or as a few seeks on the key's index suggested (steps.probed_ends), and
    then they are not read; `unbounded` is the read to make instead when fewer rows came
    back (a gap the seeks missed, or rows removed meanwhile); `drop_empty` drops the
    columns every row read left empty.
    """

    read: Read
    first: int | None = None
    rows: int = 0
    unbounded: Read | None = None
    drop_empty: bool = False


def step_columns(
    session: Session, run_id: int, after: int | None = None, launch: int | None = None
) -> StepColumns:
    """The steps of one launch of the run (default: its latest; those after step `after`,
    when given) as arrays for ledger.analyze, reading only the columns that hold something:
    those the launch's held_columns name (ledger.store.steps), or, where the ledger does not
    know them, what a count over the rows says (on SQLite, all of them in one scan when its
    first steps hold every one); rank only when the run has several."""
    conn = session.connection()
    planned = plan(conn, run_id, after, launch)
    read = planned.read
    return made(
        conn, planned, fetch_floats(conn, read.columns, read.tail, read.params, bulk=read.bulk)
    )


def many(
    session: Session,
    launches: Sequence[tuple[int, int]],
    counted: Sequence[int | None] | None = None,
) -> list[StepColumns]:
    """step_columns of each (run id, launch), their bulk reads made side by side, with
    only the columns the analysis can use (analysable).

    `counted`: each launch's steps as counted in this session already (None where not),
    which its plan then does not count again."""
    conn = session.connection()
    counts = list(counted) if counted is not None else [None] * len(launches)
    plans = [
        plan(conn, run_id, None, launch, rows, analysis_only=True)
        for (run_id, launch), rows in zip(launches, counts, strict=True)
    ]
    tables = fetch_floats_many(conn, [p.read for p in plans])
    return [made(conn, p, table) for p, table in zip(plans, tables, strict=True)]


def plan(
    conn: Connection,
    run_id: int,
    after: int | None,
    launch: int | None,
    counted: int | None = None,
    *,
    analysis_only: bool = False,
) -> Planned:
    """How to read the launch's steps (see step_columns). `counted`: the launch's steps,
    counted in this transaction already (with no `after`): not counted again.
    `analysis_only`: leave out the columns the analysis cannot use (analysable)."""
    launch = latest_launch(conn, run_id) if launch is None else launch
    low, high = rank_bounds(conn, run_id, launch)
    mark = placeholder(conn.dialect.name)
    where = f"FROM step WHERE run_id = {mark} AND launch = {mark}"
    params: tuple[int, ...] = (run_id, launch)
    if after is not None:
        where += f" AND step > {mark}"
        params = (run_id, launch, after)
    order = "ORDER BY rank, step"  # the primary key's order: no sort in the database
    known = held_columns(conn, run_id, launch)
    if known is not None:
        held = tuple(c for c in ANALYSED if c in known)
        rows, first, last = _extent(
            conn, where, params, low, high, counted if after is None else None
        )
    elif (
        conn.dialect.name == "sqlite"
        and low is not None
        and high is not None
        and _all_held_early(conn, where, params)
    ):
        return _one_scan(conn, where, params, low, high)
    else:
        # one scan: which columns hold something, and whether the steps are 0, 1, 2, …
        # apart from where they start (then they are not read, row by row, at all)
        held, rows, first, last = column_counts(conn, where, params, ANALYSED)
    if analysis_only:
        held = analysable(held)
    bulk = rows >= BULK_ROWS
    ranks: tuple[str, ...] = ("rank",) if low != high else ()
    unbounded = Read((*ranks, "step", *held), f"{where} {order}", params, bulk)
    if low == high and first is not None and last is not None and last - first + 1 == rows:
        # The bulk reader has a connection of its own, which may already see rows a
        # writer added since the count: read exactly the rows counted.
        bounded = f"{where} AND rank = {mark} AND step BETWEEN {mark} AND {mark} {order}"
        read = Read(held or ("step",), bounded, (*params, low, first, last), bulk)
        # a bit may outlive its rows' values (a step written twice): drop what is empty
        return Planned(read, first, rows, unbounded, drop_empty=known is not None)
    return Planned(unbounded, drop_empty=known is not None)


def analysable(held: tuple[str, ...]) -> tuple[str, ...]:
    """The held columns ledger.analyze.analyze_run can use: tokens only beside a step time
    or a wall clock. With neither, every step is taken to do the same work (the effective
    figure is the harmonic mean of the throughputs: ledger.analyze.effective) and no
    throughput is derived from tokens, so the column, a full one as costly to read as the
    throughput, would change nothing."""
    if "step_time_s" in held or "wall_time" in held:
        return held
    return tuple(c for c in held if c != "tokens")


def made(conn: Connection, planned: Planned, table: Any) -> StepColumns:
    """The arrays of a planned read, from the table it fetched."""
    import numpy as np

    read, step = planned.read, None
    if planned.first is not None:
        if len(table) == planned.rows:  # consecutive: first, first + 1, …, one per row
            step = planned.first + np.arange(len(table), dtype=np.int64)
        else:  # a gap, or rows removed meanwhile: read the steps too
            assert planned.unbounded is not None  # a bounded read always has one
            read = planned.unbounded
            table = fetch_floats(conn, read.columns, read.tail, read.params, bulk=read.bulk)
    names = read.columns if step is None or read.columns != ("step",) else ()
    column = {name: table[:, i] for i, name in enumerate(names)}
    if planned.drop_empty:
        _drop_empty(column)
    return _columns(column, step, len(table))


def _extent(
    conn: Connection,
    where: str,
    params: tuple[int, ...],
    low: int | None,
    high: int | None,
    counted: int | None = None,
) -> tuple[int, int | None, int | None]:
    """How many steps `where` selects, and, for one rank, the first and the last (the ends
    of the key).

    `counted` when given; for one rank whose steps look consecutive (probed_ends: a few
    seeks on the key's index), last − first + 1, which the read then checks (`made`);
    else a count on the key's index (no row read, but a walk of all its entries).
    """
    count = f"SELECT count(*) {where}"
    if low is None or low != high:
        if counted is not None:
            return counted, None, None
        return int(conn.exec_driver_sql(count, params).scalar_one()), None, None
    if counted is not None:
        return (counted, *step_ends(conn, where, params, low))
    first, last, consecutive = probed_ends(conn, where, params, low)
    if consecutive and first is not None and last is not None:
        return last - first + 1, first, last
    return int(conn.exec_driver_sql(count, params).scalar_one()), first, last


def _drop_empty(column: dict[str, Any]) -> None:
    """Drop the analysed columns no row read holds a number in (throughput stays)."""
    import numpy as np

    for name in ANALYSED:
        if name != "throughput" and name in column and np.isnan(column[name]).all():
            del column[name]


def _all_held_early(conn: Connection, where: str, params: tuple[int, ...]) -> bool:
    """Whether every analysed column holds a value in the run's first EARLY_STEPS rows.

    Then all of them are read in one scan (_one_scan). Otherwise a column is probably
    empty, and an empty column costs ADBC's driver as much as a full one (about 0.12 s a
    million rows): one scan that counts the columns (0.3 s), then a read of those that
    hold something, without the steps when they are consecutive, costs less.
    """
    counts = conn.exec_driver_sql(
        f"SELECT {', '.join(f'count({c})' for c in ANALYSED)} FROM "
        f"(SELECT {', '.join(ANALYSED)} {where} ORDER BY rank, step LIMIT {EARLY_STEPS})",
        params,
    ).one()
    return all(counts)


def _one_scan(
    conn: Connection, where: str, params: tuple[int, ...], low: int, high: int
) -> Planned:
    """SQLite: every analysed column in one bulk read (a NULL costs the driver nothing),
    the empty ones dropped after: one scan of the rows where a count of the columns that
    hold something and then the read made two. How many rows there are is judged from the
    ends of the key (cheap), to choose the bulk reader or the cursor."""
    mark = placeholder(conn.dialect.name)
    first, last = conn.exec_driver_sql(
        f"SELECT (SELECT min(step) {where} AND rank = {mark}), "
        f"(SELECT max(step) {where} AND rank = {mark})",
        (*params, low, *params, high),
    ).one()
    estimate = 0 if first is None or last is None else (last - first + 1) * (high - low + 1)
    names = ("step", *ANALYSED) if low == high else ("rank", "step", *ANALYSED)
    read = Read(names, f"{where} ORDER BY rank, step", params, estimate >= BULK_ROWS)
    return Planned(read, drop_empty=True)  # held by no row: as the count would have said


def _columns(column: dict[str, Any], step: Any, rows: int) -> StepColumns:
    import numpy as np

    from ledger.readings.steps import StepColumns

    return StepColumns(
        step=step if step is not None else column["step"].astype(np.int64),
        rank=column["rank"].astype(np.int64) if "rank" in column else None,
        throughput=column.get("throughput", np.full(rows, np.nan)),
        tokens=column.get("tokens"),
        step_time_s=column.get("step_time_s"),
        wall_time=column.get("wall_time"),
        wait_s=column.get("wait_s"),
    )
