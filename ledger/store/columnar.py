"""Columns of numbers out of the database in bulk, never one Python row at a time.

A million-step run read through a DBAPI cursor costs a tuple and a float object per value
before numpy sees it: about as long as the analysis that follows. Here the rows go
straight into float64 arrays:

- SQLite: through ADBC's SQLite driver (`adbc-driver-sqlite`), which fills Arrow buffers in
  C. It opens the file read-only beside the session's own connection (a reader in WAL mode
  sees what was committed, as the session does). Its driver guesses each column's type
  from the first rows, so one leading row of doubles is sent first (and dropped) to make
  every column a double, and 'NaN' — the text ledger stores NaN as in SQLite — is read as
  NULL.
- PostgreSQL: `COPY (SELECT …) TO STDOUT (FORMAT BINARY)` on the session's own psycopg
  connection, every value cast to float8 with NULL as NaN, so each row has the same width
  and numpy reads the whole buffer as one structured array.

Where neither applies (an in-memory SQLite, the driver not installed, a value the driver
refuses) the cursor path reads the same rows; `fallbacks` counts the times it was taken
for a reason other than an in-memory database.

NULL and NaN both come back as NaN: the analyzer treats a missing value and a NaN alike.
"""

from __future__ import annotations

import itertools
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import quote

from sqlalchemy import Connection

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")
_PG_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
BULK_ROWS = 10_000  # below this many rows the cursor is as fast as a bulk read
fallbacks = 0  # bulk reads that had to take the cursor path (see the module's docstring)
# A read-only connection opened while others open theirs, or while a writer checkpoints,
# can find the WAL index busy for a moment: with no busy timeout SQLite answers "database is
# locked" at once, and reads made side by side fell back to the cursor one time in three.
WAIT_WHILE_LOCKED = "PRAGMA busy_timeout = 30000"
# Pages read through a mapping of the file, not a pread each: 13 % less CPU for a million
# rows out of the page cache. The bulk reader only reads, and inside its read transaction
# no writer can truncate the file (in WAL mode a checkpoint stops at the oldest reader's
# snapshot; with a rollback journal a writer waits for the reader's lock), so a mapped
# page cannot vanish under it.
MAP_THE_FILE = "PRAGMA mmap_size = 1073741824"
# The driver's batches hold 1,024 rows unless told: a million rows then make a thousand
# Arrow chunks, each handed over and converted on its own (about 15 % of the read).
BATCH = {"adbc.sqlite.query.batch_rows": "65536"}


def fetch_floats(
    conn: Connection,
    columns: Sequence[str],
    tail: str,
    params: tuple[Any, ...],
    *,
    bulk: bool = True,
) -> np.ndarray:
    """`SELECT <columns> <tail>` as a float64 array of shape (rows, len(columns)).

    `columns` are SQL expressions of numbers; `tail` is the rest of the query (FROM …
    WHERE … ORDER BY …) with the dialect's parameter markers for `params`. `bulk=False`
    (a caller that knows the rows are few, as `watch`'s reads of the newest steps are)
    takes the session's own cursor: as fast for a few thousand rows, and no second
    connection.
    """
    dialect = conn.dialect.name
    if not bulk:
        return _cursor(conn, columns, tail, params)
    if dialect == "postgresql":
        return _postgres(conn, columns, tail, params)
    if dialect == "sqlite":
        found = _with_adbc(conn, _adbc_sqlite, columns, tail, params)
        if found is not None:
            return found
    return _cursor(conn, columns, tail, params)


def fetch_floats_many(conn: Connection, reads: Sequence[Read]) -> list[np.ndarray]:
    """Several fetch_floats, each `Read` its own (columns, tail, params, bulk): on SQLite
    the bulk reads run side by side, each in a thread and on a connection of its own (the
    driver fills its buffers without the GIL: two reads of a million rows take 0.2 s on
    two cores, not 0.37). Elsewhere, one after the other."""
    path = _sqlite_file(conn) if conn.dialect.name == "sqlite" else ""
    side_by_side = [i for i, r in enumerate(reads) if r.bulk] if path else []
    if len(side_by_side) < 2:
        return [fetch_floats(conn, r.columns, r.tail, r.params, bulk=r.bulk) for r in reads]
    outcomes = _off_main_thread_all(
        [(_adbc_sqlite, (path, reads[i].columns, reads[i].tail, reads[i].params))
         for i in side_by_side]
    )  # fmt: skip
    found: dict[int, np.ndarray] = {}
    for i, (ok, value) in zip(side_by_side, outcomes, strict=True):
        if ok:
            found[i] = value
        else:
            _fall_back(value)  # counted, or raised when it is not the driver's
    return [
        found[i] if i in found else _cursor(conn, r.columns, r.tail, r.params)
        for i, r in enumerate(reads)
    ]


@dataclass(frozen=True)
class Read:
    """One fetch_floats to make (fetch_floats_many)."""

    columns: tuple[str, ...]
    tail: str
    params: tuple[Any, ...]
    bulk: bool = True


def _with_adbc(conn: Connection, read: Callable[..., T], *args: Any) -> T | None:
    """`read(path, *args)` through ADBC on the session's SQLite file; None when it cannot
    be used (an in-memory database, the driver missing or refusing a value: counted)."""
    path = _sqlite_file(conn)
    if not path:
        return None
    ((ok, value),) = _off_main_thread_all([(read, (path, *args))])
    if ok:
        return cast(T, value)
    _fall_back(value)
    return None


def _fall_back(exc: BaseException) -> None:
    """A bulk read failed with `exc`: count it when the cursor can read the rows instead
    (the driver missing, or refusing a value); raise it otherwise."""
    global fallbacks
    if isinstance(exc, ImportError):
        fallbacks += 1
        return
    if isinstance(exc, Exception) and isinstance(exc.__cause__, KeyboardInterrupt):
        # The driver turns Ctrl-C during its call into an error of its own (SQLite's
        # cannot cancel): it is still the user's Ctrl-C.
        raise KeyboardInterrupt from None
    # the driver's own errors have no common base class
    if not isinstance(exc, Exception) or not _driver_error(exc):
        raise exc
    fallbacks += 1


def _cursor(
    conn: Connection, columns: Sequence[str], tail: str, params: tuple[Any, ...]
) -> np.ndarray:
    """Through the DBAPI cursor (SQLAlchemy's Row objects cost more than the query);
    np.fromiter parses SQLite's 'NaN' text and turns None into NaN by itself."""
    import numpy as np

    driver = conn.connection.driver_connection
    assert driver is not None  # an open connection always has one
    cursor = driver.cursor()
    try:
        cursor.execute(f"SELECT {', '.join(columns)} {tail}", params)
        rows = cursor.fetchall()
    finally:
        cursor.close()
    width = len(columns)
    flat = np.fromiter(
        itertools.chain.from_iterable(rows), dtype=np.float64, count=len(rows) * width
    )
    return flat.reshape(len(rows), width)


def fetch_labelled(
    conn: Connection,
    columns: Sequence[str],
    label: str,
    tail: str,
    params: tuple[Any, ...],
    labels: Callable[[], list[str]],
) -> tuple[list[str], np.ndarray]:
    """`SELECT <columns>, <label> <tail>` as numbers: the distinct labels (sorted), and a
    float64 array whose last column is each row's label's position in that list.

    SQLite through ADBC reads the text once and encodes it in C; elsewhere `labels()` (the
    distinct labels, sorted, by one query of the caller's) turns the label into a number
    in SQL, and the rows are read with `fetch_floats`.
    """
    import numpy as np

    if conn.dialect.name == "sqlite":
        found = _with_adbc(conn, _adbc_sqlite_labelled, columns, label, tail, params)
        if found is not None:
            return found
    names = labels()
    if not names:
        return [], np.empty((0, len(columns) + 1))
    mark = "?" if conn.dialect.name == "sqlite" else "%s"
    if conn.dialect.name == "postgresql":
        code = f"array_position({mark}::text[], {label}) - 1"
        table = fetch_floats(conn, (*columns, code), tail, (names, *params))
    else:  # one CASE term per label (SQLite takes 32,766 parameters)
        code = f"CASE {label} " + " ".join(f"WHEN {mark} THEN {i}" for i in range(len(names)))
        table = fetch_floats(conn, (*columns, code + " END"), tail, (*names, *params))
    return names, table


def _adbc_sqlite_labelled(
    path: str, columns: Sequence[str], label: str, tail: str, params: tuple[Any, ...]
) -> tuple[list[str], np.ndarray]:
    import numpy as np

    table, out = _adbc_read(path, columns, tail, params, label=label)
    width = len(columns)
    encoded = table.column(width).slice(1).combine_chunks().dictionary_encode()
    found = [str(x) for x in encoded.dictionary.to_pylist()]
    order = sorted(range(len(found)), key=found.__getitem__)  # SQLite's BINARY order
    position = np.empty(len(found), dtype=np.float64)
    position[order] = np.arange(len(found))
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    labelled = np.empty((len(out), width + 1), dtype=np.float64)
    labelled[:, :width] = out
    labelled[:, width] = position[codes] if len(found) else codes
    return [found[i] for i in order], labelled


# -- SQLite through ADBC -------------------------------------------------------------------


def _sqlite_file(conn: Connection) -> str:
    """The main database's file ('' for an in-memory or temporary database)."""
    row = conn.exec_driver_sql("SELECT file FROM pragma_database_list WHERE name = 'main'").first()
    return str(row[0]) if row and row[0] else ""


def _adbc_sqlite(
    path: str, columns: Sequence[str], tail: str, params: tuple[Any, ...]
) -> np.ndarray:
    return _adbc_read(path, columns, tail, params)[1]


def _adbc_read(
    path: str,
    columns: Sequence[str],
    tail: str,
    params: tuple[Any, ...],
    *,
    label: str | None = None,
) -> tuple[Any, np.ndarray]:
    """The Arrow table of `SELECT <columns>[, <label>] <tail>`, and its numeric columns as
    a float64 array. A leading row of doubles (and '' for the label) fixes each column's
    type for the driver's guess; it is dropped from both."""
    import numpy as np

    width = len(columns)
    typed = ["0.5"] * width + ([] if label is None else ["''"])
    body = [f"nullif({c}, 'NaN')" for c in columns] + ([] if label is None else [label])
    sql = f"SELECT {', '.join(typed)} UNION ALL SELECT * FROM (SELECT {', '.join(body)} {tail})"
    table = _adbc_query(path, sql, params)
    out = np.empty((table.num_rows - 1, width), dtype=np.float64)
    for i in range(width):
        out[:, i] = _floats(table.column(i))[1:]
    return table, out


def _adbc_query(path: str, sql: str, params: tuple[Any, ...]) -> Any:
    """The Arrow table of one query on `path`, read only.

    Through adbc_driver_manager's own statement when every parameter is an integer (ids,
    step bounds: written into the SQL as numbers), not its DB-API module, which imports
    pyarrow.dataset and with it pandas — more time than reading a million rows.
    """
    uri = f"file:{quote(path)}?mode=ro"
    inline = sql.count("?") == len(params) and all(
        isinstance(p, int) and not isinstance(p, bool) for p in params
    )
    if not inline:
        import adbc_driver_sqlite.dbapi as dbapi

        with dbapi.connect(uri) as db, db.cursor() as cursor:
            cursor.execute(WAIT_WHILE_LOCKED)
            cursor.execute(MAP_THE_FILE)
            cursor.adbc_statement.set_options(**BATCH)
            cursor.execute(sql, params)
            return cursor.fetch_arrow_table()
    import adbc_driver_manager
    import adbc_driver_sqlite
    import pyarrow

    for value in params:
        sql = sql.replace("?", str(int(value)), 1)
    with (
        adbc_driver_sqlite.connect(uri) as database,
        adbc_driver_manager.AdbcConnection(database) as connection,
        adbc_driver_manager.AdbcStatement(connection) as statement,
    ):
        for pragma in (WAIT_WHILE_LOCKED, MAP_THE_FILE):
            statement.set_sql_query(pragma)
            statement.execute_update()
        statement.set_options(**BATCH)
        statement.set_sql_query(sql)
        stream, _ = statement.execute_query()
        reader = pyarrow.RecordBatchReader._import_from_c(stream.address)
        return pyarrow.Table.from_batches(list(reader), schema=reader.schema)


def _floats(column: Any) -> np.ndarray:
    """An Arrow column of doubles as float64, NULL as NaN, from its buffers (pyarrow's own
    conversion of a chunked column imports pandas)."""
    import numpy as np

    out = np.empty(len(column), dtype=np.float64)
    at = 0
    for chunk in column.chunks:
        n = len(chunk)
        if n == 0:
            continue
        if str(chunk.type) != "double":
            out[at : at + n] = chunk.to_numpy(zero_copy_only=False)
        else:
            validity, data = chunk.buffers()
            values = np.frombuffer(data, dtype=np.float64, count=n, offset=chunk.offset * 8)
            if chunk.null_count:
                bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
                values = np.where(bits[chunk.offset : chunk.offset + n] == 1, values, np.nan)
            out[at : at + n] = values
        at += n
    return out


def _off_main_thread_all(
    calls: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]],
) -> list[tuple[bool, Any]]:
    """Run each `fn(*args)` in a thread of its own, all at once, and wait for them: a list
    of (True, result) or (False, the exception it raised), in order.

    ADBC's Python layer swaps the process's SIGINT handler around every call made on the
    main thread (to cancel the query, which its SQLite driver cannot do), and a Ctrl-C that
    lands in that swap can kill the process instead of raising KeyboardInterrupt. Off the
    main thread it leaves the handler alone; the main thread's wait stays interruptible, so
    Ctrl-C raises at once (the reads finish unseen in their daemon threads).
    """
    outcomes: list[tuple[bool, Any]] = [(False, RuntimeError("the read did not end"))] * len(calls)

    def work(i: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            outcomes[i] = (True, fn(*args))
        except BaseException as exc:  # handed to the waiting thread, which raises it
            outcomes[i] = (False, exc)

    threads = [
        threading.Thread(target=work, args=(i, fn, args), name="ledger-bulk-read", daemon=True)
        for i, (fn, args) in enumerate(calls)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def _driver_error(exc: Exception) -> bool:
    """ADBC reports its failures as OSError or its own dbapi errors (a type it could not
    convert, a file it could not open); anything else is a bug to see."""
    return isinstance(exc, OSError) or type(exc).__module__.startswith("adbc_driver")


# -- PostgreSQL through binary COPY ----------------------------------------------------------


def _postgres(
    conn: Connection, columns: Sequence[str], tail: str, params: tuple[Any, ...]
) -> np.ndarray:
    import numpy as np

    width = len(columns)
    body = ", ".join(f"coalesce(({c})::float8, 'NaN'::float8)" for c in columns)
    driver = conn.connection.driver_connection
    assert driver is not None
    from psycopg import ClientCursor

    chunks: list[bytes] = []
    with ClientCursor(driver) as cursor:
        # COPY takes no bound parameters: psycopg merges them into the query client-side.
        query = cursor.mogrify(f"SELECT {body} {tail}", params)
        with cursor.copy(f"COPY ({query}) TO STDOUT (FORMAT BINARY)") as copy:
            chunks.extend(bytes(block) for block in copy)
    data = b"".join(chunks)
    if not data.startswith(_PG_SIGNATURE):
        raise ValueError("COPY returned no binary header")
    (extension,) = struct.unpack_from(">I", data, len(_PG_SIGNATURE) + 4)
    start = len(_PG_SIGNATURE) + 8 + extension
    fields = [("count", ">i2")]
    for i in range(width):
        fields += [(f"len{i}", ">i4"), (f"v{i}", ">f8")]
    row = np.dtype(fields)
    rows = (len(data) - start - 2) // row.itemsize  # the trailer is one int16 of -1
    table = np.frombuffer(data, dtype=row, count=rows, offset=start)
    out = np.empty((rows, width), dtype=np.float64)
    for i in range(width):
        out[:, i] = table[f"v{i}"]
    return out
