"""Per-step rows: the hot path of ingestion and of the hook.

Steps arrive by the million, so they bypass the ORM: one executemany of plain tuples per
batch, inside one transaction, with ON CONFLICT DO NOTHING so that writing the same step
twice (a re-read log, a retried batch) adds nothing twice.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from ledger.db.types import NAN_TEXT, sqlite_float
from ledger.store.base import LedgerBase

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

STEP_COLUMNS = (
    "wall_time",
    "step_time_s",
    "gpu_time_s",
    "tokens",
    "throughput",
    "loss",
    "memory_allocated_mib",
    "memory_reserved_mib",
)
_KEY = ("rank", "step")


def _quote(name: str) -> str:
    return f'"{name}"'


def _mark(conn: Connection) -> str:
    """The driver's parameter placeholder: sqlite3 takes ?, psycopg takes %s."""
    return "?" if conn.dialect.name == "sqlite" else "%s"


def insert_statement(dialect: str, table: str, columns: tuple[str, ...]) -> str:
    """An INSERT … ON CONFLICT DO NOTHING in the driver's own parameter style."""
    mark = "?" if dialect == "sqlite" else "%s"
    quoted = ", ".join(_quote(c) for c in columns)
    marks = ", ".join(mark for _ in columns)
    return f'INSERT INTO "{table}" ({quoted}) VALUES ({marks}) ON CONFLICT DO NOTHING'


def write_steps(
    conn: Connection, run_id: int, rows: Iterable[Mapping[str, Any]]
) -> tuple[int, int]:
    """Insert steps (and their extra scalars as metric rows) on an open connection.

    Keys of a row that are not step columns become metrics. Returns (steps, metrics) sent.
    """
    dialect = conn.dialect.name
    fix = sqlite_float if dialect == "sqlite" else _identity
    step_rows: list[tuple[Any, ...]] = []
    metric_rows: list[tuple[Any, ...]] = []
    known = set(STEP_COLUMNS) | set(_KEY)
    for row in rows:
        rank = int(row.get("rank") or 0)
        step = int(row["step"])
        step_rows.append((run_id, rank, step, *(fix(_number(row.get(c))) for c in STEP_COLUMNS)))
        for name, value in row.items():
            if name not in known and value is not None:
                metric_rows.append((run_id, rank, step, str(name), fix(_number(value))))
    if step_rows:
        conn.exec_driver_sql(
            insert_statement(dialect, "step", ("run_id", *_KEY, *STEP_COLUMNS)), step_rows
        )
    if metric_rows:
        conn.exec_driver_sql(
            insert_statement(dialect, "metric", ("run_id", *_KEY, "name", "value")), metric_rows
        )
    return len(step_rows), len(metric_rows)


def _identity(value: Any) -> Any:
    return value


def _number(value: Any) -> Any:
    """Store what is given; tensors and numpy scalars become plain Python numbers."""
    if value is None or isinstance(value, int | float):
        return value
    item = getattr(value, "item", None)
    return item() if callable(item) else float(value)


class StepsMixin(LedgerBase):
    def add_steps(
        self,
        run: str,
        rows: Iterable[Mapping[str, Any]],
        *,
        throughput_unit: str | None = None,
    ) -> int:
        """Add per-step rows to a run (created if new); returns how many rows were sent.

        A row is a mapping with `step` (required), `rank` (default 0), any of STEP_COLUMNS,
        and any further named scalars, which are stored in `metric`.
        """
        with self._write() as session:
            run_row = self._ensure_run(session, run)
            if throughput_unit is not None and run_row.throughput_unit != throughput_unit:
                run_row.throughput_unit = throughput_unit
            session.flush()
            sent, _ = write_steps(session.connection(), run_row.id, rows)
            return sent

    def steps_frame(self, run: str, columns: Iterable[str] | None = None) -> pd.DataFrame:
        """A run's steps as a DataFrame (rank, step, then the step columns), ordered by step.

        Read with the driver's own cursor straight into numpy, about as fast as sqlite3
        can hand rows to Python; missing values and NaN both come back as NaN.
        """
        import numpy as np
        import pandas as pd

        wanted = tuple(columns) if columns is not None else STEP_COLUMNS
        unknown = [c for c in wanted if c not in STEP_COLUMNS]
        if unknown:
            from ledger.errors import UsageError

            raise UsageError(f"no step column {unknown[0]!r}; columns: {', '.join(STEP_COLUMNS)}")
        names = ("rank", "step", *wanted)
        with self._read() as session:
            run_id = self._run_row(session, run).id
            conn = session.connection()
            # (rank, step) is the primary key's order: no sort in the database
            table = _fetch_floats(
                conn,
                f"SELECT {', '.join(_quote(n) for n in names)} FROM step "
                f"WHERE run_id = {_mark(conn)} ORDER BY rank, step",
                (run_id,),
                len(names),
            )
        rank = table[:, 0].astype(np.int64)
        step = table[:, 1].astype(np.int64)
        if len(rank) and rank[0] != rank[-1]:  # several ranks: order by step, then rank
            order = np.lexsort((rank, step))
            table, rank, step = table[order], rank[order], step[order]
        data = {"rank": rank, "step": step}
        data.update({name: table[:, i + 2] for i, name in enumerate(wanted)})
        return pd.DataFrame(data, columns=list(names))

    def metrics_frame(self, run: str) -> pd.DataFrame:
        """A run's further scalars in long form: rank, step, name, value."""
        import pandas as pd

        with self._read() as session:
            run_id = self._run_row(session, run).id
            conn = session.connection()
            data = conn.exec_driver_sql(
                f"SELECT rank, step, name, value FROM metric WHERE run_id = {_mark(conn)} "
                "ORDER BY step, rank, name",
                (run_id,),
            ).fetchall()
        frame = pd.DataFrame.from_records(data, columns=["rank", "step", "name", "value"])
        frame["value"] = _float_column(frame["value"])
        return frame


def _fetch_floats(conn: Connection, sql: str, params: tuple[Any, ...], width: int) -> np.ndarray:
    """Rows of numbers as a float64 array of shape (rows, width), NULL and 'NaN' as NaN.

    Goes through the DBAPI cursor: SQLAlchemy's Row objects cost more than the query.
    np.fromiter parses SQLite's 'NaN' text and turns None into NaN by itself.
    """
    import numpy as np

    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    finally:
        cursor.close()
    flat = np.fromiter(
        itertools.chain.from_iterable(rows), dtype=np.float64, count=len(rows) * width
    )
    return flat.reshape(len(rows), width)


def _float_column(series: pd.Series) -> pd.Series:
    """SQLite hands NaN back as the text 'NaN' (see ledger.db.types.Real)."""
    # pandas 3 reads a column of only 'NaN' and None as its str dtype, not object: kind "O".
    if series.dtype.kind == "O":
        series = series.map(lambda v: math.nan if v == NAN_TEXT else v).astype("float64")
    return series
