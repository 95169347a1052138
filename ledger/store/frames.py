"""A run's rows as pandas DataFrames: its steps, its further scalars (metrics) in long form,
and both pivoted into one wide frame, one row per step.

Everything is read in bulk (ledger.store.columnar): no Python object per value. Metric
names, the only text, are read once (the distinct names of the run) and each row carries
the name's position in that list, so the rows themselves are numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from ledger.model.terms import STEP_COLUMNS
from ledger.store import columnar
from ledger.store.extent import probed_ends
from ledger.store.steps import (
    column_counts,
    held_columns,
    placeholder,
    rank_bounds,
)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


def steps_frame(
    conn: Connection, run_id: int, wanted: tuple[str, ...], launch: int
) -> pd.DataFrame:
    """A launch's steps as a DataFrame (rank, step, then `wanted`), ordered by step then rank."""
    import pandas as pd

    names = ("rank", "step", *wanted)
    mark = placeholder(conn.dialect.name)
    found = _consecutive(conn, run_id, wanted, launch) if wanted else None
    # the arrays are the frame's alone: pandas need not copy them (8 MB a column a
    # million steps, and the pages of the copy faulted in afresh)
    if found is not None:
        return pd.DataFrame(found, columns=list(names), copy=False)
    # (launch, rank, step) is the primary key's order: no sort in the database
    table = columnar.fetch_floats(
        conn,
        names,
        f"FROM step WHERE run_id = {mark} AND launch = {mark} ORDER BY rank, step",
        (run_id, launch),
    )
    rank, step, table = _by_step(table)
    data: dict[str, Any] = {"rank": rank, "step": step}
    data.update({name: table[:, i + 2] for i, name in enumerate(wanted)})
    return pd.DataFrame(data, columns=list(names), copy=False)


def _consecutive(
    conn: Connection, run_id: int, wanted: tuple[str, ...], launch: int
) -> dict[str, Any] | None:
    """The frame's columns when the launch has one rank and its steps are first, first + 1,
    …: then neither rank nor step is read row by row (each costs the bulk reader as much
    as a column of values), only `wanted`. None otherwise.

    The ends of the key and a few seeks between them suggest it (steps.probed_ends; a
    count of the rows would walk the whole index); the rows from first to last are read,
    and taken only if all last − first + 1 came back (the key is unique). The read is
    bounded to those ends, since the bulk reader's own connection may see rows a writer
    added since.
    """
    import numpy as np

    low, high = rank_bounds(conn, run_id, launch)
    if low is None or low != high:
        return None
    mark = placeholder(conn.dialect.name)
    where = f"FROM step WHERE run_id = {mark} AND launch = {mark}"
    first, last, consecutive = probed_ends(conn, where, (run_id, launch), low)
    if not consecutive or first is None or last is None:
        return None
    rows = last - first + 1
    bounded = f"{where} AND rank = {mark} AND step BETWEEN {mark} AND {mark} ORDER BY rank, step"
    table = columnar.fetch_floats(conn, wanted, bounded, (run_id, launch, low, first, last))
    if len(table) != rows:  # a gap the seeks missed: the caller reads the steps too
        return None
    data: dict[str, Any] = {
        "rank": np.full(rows, low, dtype=np.int64),
        "step": first + np.arange(rows, dtype=np.int64),
    }
    data.update({name: table[:, i] for i, name in enumerate(wanted)})
    return data


def metrics_frame(conn: Connection, run_id: int, launch: int) -> pd.DataFrame:
    """A run's further scalars in long form: rank, step, name, value (by step, rank, name)."""
    import numpy as np
    import pandas as pd

    names, table = _metric_rows(conn, run_id, launch)
    rank, step, table = _by_step(table)
    codes = table[:, 3].astype(np.int64)
    if len(codes) and (rank != rank[0]).any():  # by step, then rank, then name
        order = np.lexsort((codes, rank, step))
        rank, step, codes, table = rank[order], step[order], codes[order], table[order]
    name = np.array(names, dtype=object)[codes] if names else np.empty(0, dtype=object)
    return pd.DataFrame({"rank": rank, "step": step, "name": name, "value": table[:, 2]})


def wide_frame(conn: Connection, run_id: int, launch: int) -> pd.DataFrame:
    """One row per (step, rank): the step columns that hold a value, then one column per
    metric name (a step column's name wins over a metric of the same name)."""
    import numpy as np
    import pandas as pd

    known = held_columns(conn, run_id, launch)  # the writer kept them; else count
    if known is not None:
        held = tuple(c for c in STEP_COLUMNS if c in known)
    else:
        mark = placeholder(conn.dialect.name)
        where = f"FROM step WHERE run_id = {mark} AND launch = {mark}"
        held = column_counts(conn, where, (run_id, launch), STEP_COLUMNS)[0]
    steps = steps_frame(conn, run_id, held, launch)
    names, table = _metric_rows(conn, run_id, launch)
    if not len(table):
        return steps
    m_rank, m_step, table = _by_step(table)
    codes = table[:, 3].astype(np.int64)
    s_rank = steps["rank"].to_numpy()
    s_step = steps["step"].to_numpy()
    keys = _union(s_step, s_rank, m_step, m_rank)
    step, rank = keys[:, 0], keys[:, 1]
    frame = pd.DataFrame({"rank": rank, "step": step})
    at_s = _positions(keys, s_step, s_rank)
    for name in held:
        column = np.full(len(keys), np.nan)
        column[at_s] = steps[name].to_numpy()
        frame[name] = column
    at_m = _positions(keys, m_step, m_rank)
    grid = np.full((len(keys), len(names)), np.nan)
    grid[at_m, codes] = table[:, 2]
    for i in range(len(names)):  # in the database's order of names
        if names[i] not in frame.columns:
            frame[names[i]] = grid[:, i]
    return frame


def _metric_rows(conn: Connection, run_id: int, launch: int) -> tuple[list[str], np.ndarray]:
    """The run's distinct metric names (sorted), and its metric rows as numbers: rank,
    step, value, the name's position in that list — in the key's order (rank, step)."""
    import numpy as np

    mark = placeholder(conn.dialect.name)
    where = f"FROM metric WHERE run_id = {mark} AND launch = {mark}"
    key = (run_id, launch)
    low, high = conn.exec_driver_sql(  # each end of the key: no scan
        f"SELECT (SELECT min(rank) {where}), (SELECT max(rank) {where})", (*key, *key)
    ).one()
    if low is None:
        return [], np.empty((0, 4))

    def names() -> list[str]:
        query = f"SELECT DISTINCT name {where} ORDER BY name"
        return [str(n) for (n,) in conn.exec_driver_sql(query, key)]

    tail = f"{where} ORDER BY rank, step, name"
    one_rank = low == high  # the rank need not be read, row by row
    columns = ("step", "value") if one_rank else ("rank", "step", "value")
    labels, table = columnar.fetch_labelled(conn, columns, "name", tail, key, names)
    if one_rank:
        table = np.column_stack([np.full(len(table), float(low)), table])
    return labels, table


def _by_step(table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rank and step as ints, and the rows ordered by step then rank (rows come in the
    primary key's order, rank first: reordered only when there are several ranks)."""
    import numpy as np

    rank = table[:, 0].astype(np.int64)
    step = table[:, 1].astype(np.int64)
    if len(rank) and (rank != rank[0]).any():
        order = np.lexsort((rank, step))
        table, rank, step = table[order], rank[order], step[order]
    return rank, step, table


def _union(
    s_step: np.ndarray, s_rank: np.ndarray, m_step: np.ndarray, m_rank: np.ndarray
) -> np.ndarray:
    """The (step, rank) pairs of both tables, unique, sorted by step then rank."""
    import numpy as np

    step = np.concatenate([s_step, m_step])
    rank = np.concatenate([s_rank, m_rank])
    low = int(rank.min())
    span = int(rank.max()) - low + 1
    largest = max(abs(int(step.min())), abs(int(step.max())))
    if largest < (1 << 62) // span:  # (step, rank) as one int, in the same order
        combined = np.unique(step * span + (rank - low))
        return np.stack([combined // span, combined % span + low], axis=1)
    pairs: np.ndarray = np.unique(np.stack([step, rank], axis=1), axis=0)
    return pairs


def _positions(keys: np.ndarray, step: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Where each (step, rank) lies in `keys` (unique, sorted by step then rank, holding
    every pair asked for)."""
    import numpy as np

    if not len(step):
        return np.empty(0, dtype=np.int64)
    low = int(keys[:, 1].min())
    span = int(keys[:, 1].max()) - low + 1
    if span == 1:  # one rank: the step alone finds the row
        found: np.ndarray = np.searchsorted(keys[:, 0], step)
        return found
    largest = max(abs(int(keys[:, 0].min())), abs(int(keys[:, 0].max())))
    if largest < (1 << 62) // span:  # (step, rank) as one int, in the same order
        combined = keys[:, 0] * span + (keys[:, 1] - low)
        at: np.ndarray = np.searchsorted(combined, step * span + (rank - low))
        return at
    where = {(int(s), int(r)): i for i, (s, r) in enumerate(keys)}
    return np.array([where[(int(s), int(r))] for s, r in zip(step, rank, strict=True)])
