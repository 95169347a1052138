"""Where a rank's steps begin and end, and whether they look consecutive: a few seeks on
the key's index, which the bulk reads of compare and steps_frame plan with (a count of the
rows would walk every entry of it)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from ledger.store.steps import placeholder


def step_ends(
    conn: Connection, where: str, params: tuple[Any, ...], rank: int
) -> tuple[int | None, int | None]:
    """The first and the last step of one rank's rows under `where`."""
    mark = placeholder(conn.dialect.name)
    ranked = f"{where} AND rank = {mark}"
    # one aggregate a subquery: SQLite reads each end of the key, not the range between
    first, last = conn.exec_driver_sql(
        f"SELECT (SELECT min(step) {ranked}), (SELECT max(step) {ranked})",
        (*params, rank, *params, rank),
    ).one()
    return first, last


# Steps looked up between a rank's first and last before a read takes them for
# consecutive (probed_ends): the second and the next to last, which a log printed every
# k-th step never has, and a few evenly between.
PROBES = 8


def probed_ends(
    conn: Connection, where: str, params: tuple[Any, ...], rank: int
) -> tuple[int | None, int | None, bool]:
    """The first and last step of one rank's rows under `where`, and whether they look
    consecutive (first, first + 1, …, last): a few steps between them are all there.

    Each is a seek on the key's index, where a count of the rows costs a walk of all of
    them (0.04 s a million rows on SQLite). "Look" because a gap elsewhere passes: the
    caller reads the rows from first to last and takes them for consecutive only when
    last − first + 1 came back (the key is unique), else reads them all.
    """
    first, last = step_ends(conn, where, params, rank)
    if first is None or last is None:
        return None, None, False
    mark = placeholder(conn.dialect.name)
    ranked = f"{where} AND rank = {mark}"
    span = last - first + 1
    inside = {first + (span - 1) * i // (PROBES - 1) for i in range(PROBES)}
    probes = sorted(inside | {min(first + 1, last), max(last - 1, first)})
    found = conn.exec_driver_sql(
        f"SELECT count(*) {ranked} AND step IN ({', '.join([mark] * len(probes))})",
        (*params, rank, *probes),
    ).scalar_one()
    return int(first), int(last), int(found) == len(probes)
