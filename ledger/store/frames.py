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
from ledger.store.steps import placeholder

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

# Above this many distinct names a run's metrics are read as text (the name → position
# mapping is one CASE term per name on SQLite).
MAX_CODED_NAMES = 2000


def steps_frame(conn: Connection, run_id: int, wanted: tuple[str, ...]) -> pd.DataFrame:
    """A run's steps as a DataFrame (rank, step, then `wanted`), ordered by step then rank."""
    import pandas as pd

    names = ("rank", "step", *wanted)
    # (rank, step) is the primary key's order: no sort in the database
    table = columnar.fetch_floats(
        conn,
        names,
        f"FROM step WHERE run_id = {placeholder(conn.dialect.name)} ORDER BY rank, step",
        (run_id,),
    )
    rank, step, table = _by_step(table)
    data: dict[str, Any] = {"rank": rank, "step": step}
    data.update({name: table[:, i + 2] for i, name in enumerate(wanted)})
    return pd.DataFrame(data, columns=list(names))


def metrics_frame(conn: Connection, run_id: int) -> pd.DataFrame:
    """A run's further scalars in long form: rank, step, name, value (by step, rank, name)."""
    import numpy as np
    import pandas as pd

    names, table = _metric_rows(conn, run_id)
    rank, step, table = _by_step(table)
    codes = table[:, 2].astype(np.int64)
    if len(codes) and (rank != rank[0]).any():  # by step, then rank, then name
        order = np.lexsort((codes, rank, step))
        rank, step, codes, table = rank[order], step[order], codes[order], table[order]
    name = np.array(names, dtype=object)[codes] if names else np.empty(0, dtype=object)
    return pd.DataFrame({"rank": rank, "step": step, "name": name, "value": table[:, 3]})


def wide_frame(conn: Connection, run_id: int) -> pd.DataFrame:
    """One row per (step, rank): the step columns that hold a value, then one column per
    metric name (a step column's name wins over a metric of the same name)."""
    import numpy as np
    import pandas as pd

    held = _held_columns(conn, run_id)
    steps = steps_frame(conn, run_id, held)
    names, table = _metric_rows(conn, run_id)
    if not len(table):
        return steps
    m_rank, m_step, table = _by_step(table)
    codes = table[:, 2].astype(np.int64)
    # the union of the (rank, step) keys of both tables, in order
    s_rank = steps["rank"].to_numpy()
    s_step = steps["step"].to_numpy()
    keys = np.unique(
        np.concatenate([np.stack([s_step, s_rank], axis=1), np.stack([m_step, m_rank], axis=1)]),
        axis=0,
    )
    step, rank = keys[:, 0], keys[:, 1]
    index = {"rank": rank, "step": step}
    frame = pd.DataFrame(index)
    at_s = _positions(keys, s_step, s_rank)
    for name in held:
        column = np.full(len(keys), np.nan)
        column[at_s] = steps[name].to_numpy()
        frame[name] = column
    at_m = _positions(keys, m_step, m_rank)
    grid = np.full((len(keys), len(names)), np.nan)
    grid[at_m, codes] = table[:, 3]
    for i in range(len(names)):  # in the database's order of names
        if names[i] not in frame.columns:
            frame[names[i]] = grid[:, i]
    return frame


def _held_columns(conn: Connection, run_id: int) -> tuple[str, ...]:
    mark = placeholder(conn.dialect.name)
    counts = conn.exec_driver_sql(
        f"SELECT {', '.join(f'count({c})' for c in STEP_COLUMNS)} FROM step WHERE run_id = {mark}",
        (run_id,),
    ).one()
    return tuple(c for c, n in zip(STEP_COLUMNS, counts, strict=True) if n)


def _metric_rows(conn: Connection, run_id: int) -> tuple[list[str], np.ndarray]:
    """The run's distinct metric names (sorted), and its metric rows as numbers: rank,
    step, the name's position in that list, value — in the key's order (rank, step)."""
    import numpy as np

    mark = placeholder(conn.dialect.name)
    names = [
        str(n)
        for (n,) in conn.exec_driver_sql(
            f"SELECT DISTINCT name FROM metric WHERE run_id = {mark} ORDER BY name", (run_id,)
        )
    ]
    if not names:
        return [], np.empty((0, 4))
    tail = f"FROM metric WHERE run_id = {mark} ORDER BY rank, step, name"
    if conn.dialect.name == "postgresql":
        code = f"array_position({mark}::text[], name) - 1"
        return names, columnar.fetch_floats(conn, ("rank", "step", code, "value"), tail,
                                            (names, run_id))  # fmt: skip
    if len(names) <= MAX_CODED_NAMES:
        code = "CASE name " + " ".join(f"WHEN {mark} THEN {i}" for i in range(len(names))) + " END"
        return names, columnar.fetch_floats(conn, ("rank", "step", code, "value"), tail,
                                            (*names, run_id))  # fmt: skip
    rows = conn.exec_driver_sql(f"SELECT rank, step, name, value {tail}", (run_id,)).fetchall()
    position = {n: i for i, n in enumerate(names)}
    return names, np.array(
        [(r, s, position[n], _float(v)) for r, s, n, v in rows], dtype=np.float64
    ).reshape(len(rows), 4)


def _float(value: Any) -> float:
    try:
        return float(value) if value is not None else float("nan")
    except (TypeError, ValueError):  # SQLite's 'NaN' text reads as a float; nothing else
        return float("nan")


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
