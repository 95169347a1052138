"""Per-step rows in and out: the one step writer (ingest, the API and the hook all use it)
and the column readers behind steps_frame, metrics_frame and the analyzer.

Steps arrive by the million, so they bypass the ORM: one executemany of bound parameters
per batch, with ON CONFLICT DO NOTHING, so that writing the same step twice (a re-read log,
a retried batch) adds nothing twice. What the columns cannot hold costs only itself: a
value becomes NULL (or a float) and is counted, a row whose key cannot be stored is
counted and skipped, and a batch the database refuses is retried row by row so that one
bad row never takes the others with it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError, StatementError

from ledger.db.types import NAN_TEXT
from ledger.errors import UsageError
from ledger.model.records import StepWrite
from ledger.model.terms import STEP_COLUMNS
from ledger.store import gate

if TYPE_CHECKING:
    import pandas as pd

INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1
INTEGER_COLUMNS = frozenset({"tokens"})
KEY = ("rank", "step")
PROBLEMS_KEPT = 5

StepTuple = tuple[Any, ...]  # (rank, step, *values in the writer's column order)
MetricTuple = tuple[Any, Any, Any, Any]  # (rank, step, name, value), checked by the writer

# launch.held_columns (revision 0008): bit i is set once a step row of the launch was written
# with a value in HELD_ORDER[i], so that a reader knows which columns to read without
# counting them over every row. The order is stored in ledgers: append, never reorder.
HELD_ORDER: tuple[str, ...] = (
    "wall_time", "step_time_s", "gpu_time_s", "tokens", "throughput", "loss",
    "memory_allocated_mib", "memory_reserved_mib", "wait_s",
)  # fmt: skip
HELD_BIT = {name: 1 << i for i, name in enumerate(HELD_ORDER)}


def placeholder(dialect: str) -> str:
    """The driver's parameter marker: sqlite3 takes ?, psycopg takes %s."""
    return "?" if dialect == "sqlite" else "%s"


def insert_statement(
    dialect: str, table: str, columns: Sequence[str], *, constants: Sequence[str] = ()
) -> str:
    """INSERT … ON CONFLICT DO NOTHING with one bound parameter per column, after the
    first columns' `constants` (SQL literals the caller made from numbers it owns)."""
    mark = placeholder(dialect)
    names = ", ".join(f'"{c}"' for c in columns)
    marks = ", ".join([*constants, *(mark for _ in columns[len(constants) :])])
    return f'INSERT INTO "{table}" ({names}) VALUES ({marks}) ON CONFLICT DO NOTHING'


class StepWriter:
    """Writes one run's step and metric rows on an open connection (inside its transaction).

    `columns` names the values that follow (rank, step) in each step tuple; `log_file_id`
    marks the rows as read from that log (NULL: the hook or the API); `launch` is the
    launch of the run they belong to (ledger.store.launches; default: the latest).
    """

    def __init__(
        self,
        conn: Connection,
        run_id: int,
        *,
        log_file_id: int | None = None,
        columns: Sequence[str] = STEP_COLUMNS,
        launch: int | None = None,
    ) -> None:
        unknown = [c for c in columns if c not in STEP_COLUMNS]
        if unknown:
            raise ValueError(f"not step columns: {unknown}")
        self.conn = conn
        self.sqlite = conn.dialect.name == "sqlite"
        # The run and the log are the same for every row: written into the statement as
        # numbers (they are ints from the database), so each row binds only its own values.
        if launch is None:
            launch = latest_launch(conn, run_id)
        self.constants = (
            str(int(run_id)),
            str(int(launch)),
            "NULL" if log_file_id is None else str(int(log_file_id)),
        )
        self.columns = tuple(columns)
        self.integer = tuple(c in INTEGER_COLUMNS for c in self.columns)
        self._statements: dict[tuple[str, ...], str] = {}
        self._targets: dict[str, tuple[str, tuple[str, ...]]] = {}  # statement → table, columns
        self._metric_sql = self._statement("metric", ("name", "value"))

    def _statement(self, table: str, columns: tuple[str, ...]) -> str:
        key = (table, *columns)
        sql = self._statements.get(key)
        if sql is None:
            names = ("run_id", "launch", "log_file_id", *KEY, *columns)
            sql = self._statements[key] = insert_statement(
                self.conn.dialect.name, table, names, constants=self.constants
            )
            self._targets[sql] = (table, names)
        return sql

    def write(
        self,
        rows: Sequence[StepTuple],
        metrics: Sequence[MetricTuple] = (),
        *,
        trusted: bool = False,
        nan: bool = True,
    ) -> StepWrite:
        """Send step and metric tuples; returns what was stored and what was not.

        `trusted`: the rows come from ledger's own log reader, whose keys are int64 and
        whose values are numbers or None; only NaN needs converting on SQLite (and only
        when `nan` says a batch may hold one). Otherwise every value is checked.
        """
        metrics, report = _without_secret_metrics(metrics)
        if trusted:
            step_sql, step_params = self._trusted(rows, nan)
            metric_params = self._trusted_metrics(metrics, nan)
        else:
            step_sql = self._statement("step", self.columns)
            step_params, step_report = self._checked(rows)
            metric_params, metric_report = self._checked_metrics(metrics)
            report += step_report + metric_report
        sent, refused, problem = self._send(step_sql, step_params, trusted)
        if sent:
            self._hold(self._targets[step_sql][1][5:], step_params)
        report += StepWrite(steps=sent, bad_rows=refused, problems=problem)
        sent, refused, problem = self._send(self._metric_sql, metric_params, trusted)
        return report + StepWrite(metrics=sent, bad_rows=refused, problems=problem)

    def fill(self, rows: Sequence[StepTuple]) -> tuple[int, StepWrite]:
        """Give this log's stored rows the values they lack (`ledger import` re-reading a
        tracker that has since logged another value at an old step): each column gets the
        value given only where it is NULL, a stored value is never changed. Returns (rows
        updated, what could not be stored as given)."""
        params, report = self._checked(rows)
        if not params:
            return 0, report
        mark = placeholder(self.conn.dialect.name)
        sets = ", ".join(f'"{c}" = COALESCE("{c}", {mark})' for c in self.columns)
        run_id, launch, log_file = self.constants
        log = "IS NULL" if log_file == "NULL" else f"= {log_file}"
        sql = (
            f'UPDATE "step" SET {sets} WHERE run_id = {run_id} AND launch = {launch} '
            f"AND log_file_id {log} AND rank = {mark} AND step = {mark}"
        )
        self.conn.exec_driver_sql(sql, [(*r[2:], r[0], r[1]) for r in params])
        steps_rewritten(self.conn, int(run_id), int(launch))
        self._hold(self.columns, params)
        return len(params), report

    def write_mappings(self, rows: Iterable[Mapping[str, Any]]) -> StepWrite:
        """Rows as mappings (`step`, `rank`, step columns; other keys become metrics)."""
        step_rows, metric_rows = split_mappings(rows, self.columns)
        return self.write(step_rows, metric_rows)

    def _hold(self, columns: Sequence[str], params: Sequence[tuple[Any, ...]]) -> None:
        """Set the launch's held_columns bits of the columns some row of `params` (rank,
        step, then `columns`) gives a value: one UPDATE a batch, which changes the row only
        when a bit is new (so writers of one launch do not queue on its row). A bit set for
        a row ON CONFLICT skipped only makes a reader read an empty column; a bit missed
        would hide one, so every step writer comes through here."""
        bits = 0
        for i, name in enumerate(columns):
            if not all(map(_is_none, map(itemgetter(2 + i), params))):
                bits |= HELD_BIT[name]
        if not bits:
            return
        run_id, launch, _ = self.constants
        self.conn.exec_driver_sql(
            f"UPDATE launch SET held_columns = held_columns | {bits} WHERE run_id = {run_id} "
            f"AND number = {launch} AND (held_columns & {bits}) <> {bits}"
        )

    # -- turning rows into parameters ----------------------------------------------------

    def _trusted(
        self, rows: Sequence[StepTuple], nan: bool
    ) -> tuple[str, Sequence[tuple[Any, ...]]]:
        """The statement and parameters for rows from ledger's own reader: only the columns
        that hold a value somewhere in the batch are bound (a log fills three or four of
        the eight; binding the rest as NULL would double the cost of the insert)."""
        width = len(self.columns)
        held = [i for i in range(width) if not all(map(_is_none, map(itemgetter(2 + i), rows)))]
        sql = self._statement("step", tuple(self.columns[i] for i in held))
        params: Sequence[tuple[Any, ...]] = rows
        if len(held) < width or any(len(r) != 2 + width for r in rows[:1]):
            params = list(map(itemgetter(0, 1, *(2 + i for i in held)), rows))
        if self.sqlite and nan:
            params = [tuple(map(_nan_text, r)) for r in params]
        return sql, params

    def _trusted_metrics(self, rows: Sequence[MetricTuple], nan: bool) -> Sequence[tuple[Any, ...]]:
        if self.sqlite and nan:
            return [(r, s, n, _nan_text(v)) for r, s, n, v in rows]
        return rows

    def _checked(self, rows: Sequence[StepTuple]) -> tuple[list[tuple[Any, ...]], StepWrite]:
        out: list[tuple[Any, ...]] = []
        bad_values = bad_rows = 0
        problems: list[str] = []
        width = len(self.columns)
        for row in rows:
            rank, step = key(row[0] if row[0] is not None else 0), key(row[1])
            if rank is None or step is None:
                bad_rows += 1
                _note(problems, f"step {row[1]!r} of rank {row[0]!r} is not a 64-bit integer")
                continue
            values = []
            for i, integer in enumerate(self.integer):
                raw = row[2 + i] if 2 + i < len(row) else None
                value, bad = integer_value(raw) if integer else float_value(raw, self.sqlite)
                if bad:
                    bad_values += 1
                    _note(problems, f"{self.columns[i]}={_short(raw)} cannot be stored")
                values.append(value)
            if len(row) > 2 + width:
                raise ValueError(f"a step row has {len(row) - 2} values for {width} columns")
            out.append((rank, step, *values))
        return out, StepWrite(bad_values=bad_values, bad_rows=bad_rows, problems=tuple(problems))

    def _checked_metrics(
        self, rows: Sequence[MetricTuple]
    ) -> tuple[list[tuple[Any, ...]], StepWrite]:
        out: list[tuple[Any, ...]] = []
        bad_values = bad_rows = 0
        problems: list[str] = []
        for rank_, step_, name_, raw in rows:
            rank, step = key(rank_ if rank_ is not None else 0), key(step_)
            if rank is None or step is None:
                bad_rows += 1
                _note(problems, f"step {step_!r} of rank {rank_!r} is not a 64-bit integer")
                continue
            name, renamed = metric_name(name_)
            value, bad = float_value(raw, self.sqlite)
            if renamed or bad:
                bad_values += 1
                _note(problems, f"metric {_short(name_)}={_short(raw)} cannot be stored as given")
            out.append((rank, step, name, value))
        return out, StepWrite(bad_values=bad_values, bad_rows=bad_rows, problems=tuple(problems))

    # -- sending -------------------------------------------------------------------------

    def _send(
        self, sql: str, params: Sequence[tuple[Any, ...]], trusted: bool = False
    ) -> tuple[int, int, tuple[str, ...]]:
        """executemany in a savepoint; if the database refuses the batch, row by row.
        Trusted rows go to PostgreSQL by COPY first (see `_copy`).

        Returns (rows sent, rows refused, the first refusal in words). A locked or lost
        database (OperationalError) is not the rows' fault: it propagates, for the caller
        to retry the whole transaction.
        """
        if not params:
            return 0, 0, ()
        if trusted and not self.sqlite and self._copy(sql, params):
            return len(params), 0, ()
        try:
            with self.conn.begin_nested():
                self.conn.exec_driver_sql(sql, params)
            return len(params), 0, ()
        except OperationalError:
            raise
        except (StatementError, OverflowError, ValueError):
            pass  # some row is bad: find it below, keep the others
        refused = 0
        problem: tuple[str, ...] = ()
        for one in params:
            try:
                with self.conn.begin_nested():
                    self.conn.exec_driver_sql(sql, [one])
            except OperationalError:
                raise
            except (StatementError, OverflowError, ValueError) as exc:
                refused += 1
                if not problem:
                    reason = str(getattr(exc, "orig", exc)).strip().splitlines()
                    problem = (f"a row was refused: {reason[0] if reason else type(exc).__name__}",)
        return len(params) - refused, refused, problem

    def _copy(self, sql: str, params: Sequence[tuple[Any, ...]]) -> bool:
        """COPY the rows in, PostgreSQL's fastest way, in a savepoint; False when the
        database refuses them (a step already stored, which COPY cannot skip the way ON
        CONFLICT DO NOTHING does, or a value it will not take): `_send` then inserts them."""
        import psycopg

        table, columns = self._targets[sql]
        driver = self.conn.connection.driver_connection
        assert driver is not None  # an open connection always has one
        ids = (
            int(self.constants[0]),
            int(self.constants[1]),
            None if self.constants[2] == "NULL" else int(self.constants[2]),
        )
        names = ", ".join(f'"{c}"' for c in columns)
        try:
            with (
                self.conn.begin_nested(),
                driver.cursor() as cursor,
                cursor.copy(f'COPY "{table}" ({names}) FROM STDIN') as copy,
            ):
                write = copy.write_row
                for row in params:
                    write((*ids, *row))
        except psycopg.OperationalError:
            raise
        except psycopg.Error:
            return False
        return True


def _without_secret_metrics(
    metrics: Sequence[MetricTuple],
) -> tuple[Sequence[MetricTuple], StepWrite]:
    """A key=value whose key names a secret is not a metric: such values are counted as
    not stored as given (bad_values: not bad_rows, which the hook reports as dropped steps),
    never stored. ledger.store.gate decides; most batches hold a handful of distinct names."""
    if not metrics:
        return metrics, StepWrite()
    names = {row[2] for row in metrics}  # the 1M-row path: one set, no call per row
    refused = gate.secret_metrics(str(name) for name in names)
    if not refused:
        return metrics, StepWrite()
    kept = [row for row in metrics if str(row[2]) not in refused]
    shown = ", ".join(sorted(gate.text(name) for name in refused)[:3])
    problem = f"metrics named like secrets were not stored ({shown})"
    return kept, StepWrite(bad_values=len(metrics) - len(kept), problems=(problem,))


def split_mappings(
    rows: Iterable[Mapping[str, Any]], columns: Sequence[str] = STEP_COLUMNS
) -> tuple[list[StepTuple], list[MetricTuple]]:
    """Mappings → step tuples in `columns` order, and metric tuples for every other key."""
    known = set(columns) | set(KEY)
    step_rows: list[StepTuple] = []
    metric_rows: list[MetricTuple] = []
    for row in rows:
        rank, step = row.get("rank") or 0, row.get("step")
        step_rows.append((rank, step, *(row.get(c) for c in columns)))
        for name, value in row.items():
            if name not in known and value is not None:
                metric_rows.append((rank, step, name, value))
    return step_rows, metric_rows


# -- values ------------------------------------------------------------------------------


def key(value: Any) -> int | None:
    """A step or rank as a 64-bit int, or None when it cannot be one."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if INT_MIN <= value <= INT_MAX else None
    number = _plain(value)
    if isinstance(number, int):
        return number if INT_MIN <= number <= INT_MAX else None
    if isinstance(number, float) and number.is_integer() and INT_MIN <= number <= INT_MAX:
        return int(number)
    return None


def integer_value(value: Any) -> tuple[int | None, bool]:
    """(what to store in an integer column, whether the value had to be dropped)."""
    if value is None:
        return None, False
    number = _plain(value)
    if isinstance(number, bool):
        return int(number), False
    if isinstance(number, int):
        return (number, False) if INT_MIN <= number <= INT_MAX else (None, True)
    if isinstance(number, float) and math.isfinite(number) and INT_MIN <= number <= INT_MAX:
        return round(number), False
    return None, True


def float_value(value: Any, sqlite: bool) -> tuple[Any, bool]:
    """(what to store in a float column, whether the value had to be dropped).

    NaN is data (a diverged loss) and goes to SQLite as the text 'NaN' (ledger.db.types);
    an int too large for 64 bits is stored as the nearest float.
    """
    if value is None:
        return None, False
    number = _plain(value)
    if isinstance(number, bool):
        return float(number), False
    if isinstance(number, int):
        if INT_MIN <= number <= INT_MAX:
            return number, False
        try:
            return float(number), False
        except OverflowError:  # past 1.8e308: no float holds it
            return None, True
    if isinstance(number, float):
        return (NAN_TEXT if sqlite and math.isnan(number) else number), False
    return None, True


def metric_name(name: Any) -> tuple[str, bool]:
    """A metric's name as text both databases accept: NUL and lone surrogates escaped."""
    text = name if isinstance(name, str) else str(name)
    if "\x00" not in text:
        try:
            text.encode("utf-8")
            return text, False
        except UnicodeEncodeError:
            pass
    fixed = text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
    return fixed, True


def _plain(value: Any) -> Any:
    """numpy scalars, 0-d tensors, Decimals and numeric strings as plain Python numbers."""
    if isinstance(value, int | float):
        return value
    item = getattr(value, "item", None)
    if callable(item):
        try:
            value = item()
        except (TypeError, ValueError, RuntimeError):  # not a scalar (a tensor of many)
            return None
        if isinstance(value, int | float):
            return value
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _is_none(value: Any) -> bool:
    return value is None


def _nan_text(value: Any) -> Any:
    if value.__class__ is float and value != value:  # NaN; the cheapest test on the hot path
        return NAN_TEXT
    return value


def _note(problems: list[str], text: str) -> None:
    if len(problems) < PROBLEMS_KEPT:
        problems.append(text)


def _short(value: Any, width: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def forget_log_rows(conn: Connection, run_id: int, log_file_id: int) -> None:
    """Delete the step and metric rows read from one log (a rewritten log is read again);
    the run's held_columns are counted again over the rows left."""
    mark = placeholder(conn.dialect.name)
    for table in ("metric", "step"):
        conn.exec_driver_sql(
            f"DELETE FROM {table} WHERE run_id = {mark} AND log_file_id = {mark}",
            (run_id, log_file_id),
        )
    steps_rewritten(conn, run_id)
    count_held(conn, run_id)


def held_sql(dialect: str) -> str:
    """The held_columns of each launch of a run (its one parameter), counted over its rows:
    the UPDATE revision 0008 ran over every launch, for one run."""
    mark = placeholder(dialect)
    bits = " + ".join(
        f"CASE WHEN count({name}) > 0 THEN {HELD_BIT[name]} ELSE 0 END" for name in HELD_ORDER
    )
    return (
        f"UPDATE launch SET held_columns = (SELECT {bits} FROM step "
        f"WHERE step.run_id = launch.run_id AND step.launch = launch.number) "
        f"WHERE run_id = {mark}"
    )


def count_held(conn: Connection, run_id: int) -> None:
    """Count the run's held_columns again over its rows (after some were removed)."""
    conn.exec_driver_sql(held_sql(conn.dialect.name), (run_id,))


def held_columns(conn: Connection, run_id: int, launch: int) -> frozenset[str] | None:
    """The step columns some row of the launch holds a value in (launch.held_columns),
    or None when the ledger does not know (read the rows to find out)."""
    mark = placeholder(conn.dialect.name)
    bits = conn.exec_driver_sql(
        f"SELECT held_columns FROM launch WHERE run_id = {mark} AND number = {mark}",
        (run_id, launch),
    ).scalar()
    if bits is None:
        return None
    return frozenset(name for name in HELD_ORDER if int(bits) & HELD_BIT[name])


def steps_rewritten(conn: Connection, run_id: int, launch: int | None = None) -> None:
    """Note that stored steps of the run (of one launch, when given) changed other than by
    adding rows, so that no analysis kept of them is used again (ledger.store.kept)."""
    mark = placeholder(conn.dialect.name)
    sql = f"UPDATE launch SET steps_rewritten = steps_rewritten + 1 WHERE run_id = {mark}"
    params: tuple[int, ...] = (run_id,)
    if launch is not None:
        sql += f" AND number = {mark}"
        params = (run_id, launch)
    conn.exec_driver_sql(sql, params)


# -- reading -------------------------------------------------------------------------------


def check_columns(columns: Iterable[str] | None) -> tuple[str, ...]:
    wanted = tuple(columns) if columns is not None else STEP_COLUMNS
    unknown = [c for c in wanted if c not in STEP_COLUMNS]
    if unknown:
        raise UsageError(f"no step column {unknown[0]!r}; columns: {', '.join(STEP_COLUMNS)}")
    return wanted


def column_counts(
    conn: Connection, where: str, params: tuple[Any, ...], columns: Sequence[str]
) -> tuple[tuple[str, ...], int, int | None, int | None]:
    """In one scan of the steps `where` selects: which of `columns` hold a value, how many
    steps there are, the first and the last."""
    *counts, rows, first, last = conn.exec_driver_sql(
        f"SELECT {', '.join(f'count({c})' for c in columns)}, count(*), min(step), max(step) "
        f"{where}",
        params,
    ).one()
    held = tuple(c for c, n in zip(columns, counts, strict=True) if n)
    return held, int(rows), first, last


def rank_bounds(conn: Connection, run_id: int, launch: int) -> tuple[int | None, int | None]:
    mark = placeholder(conn.dialect.name)
    where = f"FROM step WHERE run_id = {mark} AND launch = {mark}"
    # one aggregate per subquery: SQLite then reads each end of the key, not the range
    low, high = conn.exec_driver_sql(
        f"SELECT (SELECT min(rank) {where}), (SELECT max(rank) {where})",
        (run_id, launch, run_id, launch),
    ).one()
    return low, high


def latest_launch(conn: Connection, run_id: int) -> int:
    """The run's latest launch number (1 when it has no launch row): see store.launches."""
    mark = placeholder(conn.dialect.name)
    top = conn.exec_driver_sql(
        f"SELECT max(number) FROM launch WHERE run_id = {mark}", (run_id,)
    ).scalar()
    return int(top) if top is not None else 1


def float_column(series: pd.Series) -> pd.Series:
    """SQLite hands NaN back as the text 'NaN' (see ledger.db.types.Real)."""
    # pandas 3 reads a column of only 'NaN' and None as its str dtype, not object: kind "O".
    if series.dtype.kind == "O":
        series = series.map(lambda v: math.nan if v == NAN_TEXT else v).astype("float64")
    return series
