"""Engines and sessions: SQLite pragmas, PostgreSQL URLs, and one place where driver
errors become ledger's own.

SQLite is opened so that several ranks and a CLI can share one file: WAL (readers never
block the writer), foreign keys on, a busy timeout, and write transactions that start
with BEGIN IMMEDIATE, so two writers queue on the busy timeout instead of failing with
"database is locked" when both try to upgrade a read lock.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session

from ledger.config import hide_password
from ledger.errors import StorageError, UsageError

BUSY_TIMEOUT_MS = 30_000
WRITE_OPTION = "ledger_write"
# How long (ms) a SQLite transaction of a session waits for another's lock, when not the
# engine's busy timeout: a write that may as well not happen (a kept analysis) waits briefly.
WAIT_OPTION = "ledger_wait_ms"


def make_engine(
    url: str,
    *,
    create_dir: bool = False,
    busy_timeout: float = BUSY_TIMEOUT_MS / 1000,
    connect_timeout: float | None = None,
    read_only: bool = False,
) -> Engine:
    """An engine for `url`, configured for ledger's concurrency needs.

    `busy_timeout`: how long a SQLite writer waits for another's lock; `connect_timeout`:
    how long to wait for a PostgreSQL server to answer (default: the driver's);
    `read_only`: open a SQLite file so that nothing, not even its journal mode, changes; on
    PostgreSQL every transaction of the session is READ ONLY.
    """
    if url.startswith("sqlite"):
        return _sqlite_engine(
            url, create_dir=create_dir, busy_timeout=busy_timeout, read_only=read_only
        )
    connect_args: dict[str, Any] = {}
    if connect_timeout is not None:
        # libpq counts whole seconds, and takes 1 as 2; never 0, which means "wait forever"
        connect_args["connect_timeout"] = max(1, math.ceil(connect_timeout))
    try:
        engine = create_engine(url, pool_pre_ping=True, connect_args=connect_args)
    except ModuleNotFoundError as exc:
        raise StorageError(
            f"the database driver for {hide_password(url)} is not installed ({exc.name}); "
            "for PostgreSQL: pip install 'ledger[postgres]'"
        ) from exc
    except SQLAlchemyError as exc:
        raise StorageError(f"cannot use database URL {hide_password(url)}: {exc}") from exc
    if read_only:
        event.listen(engine, "connect", _read_only_session)
    return engine


def _read_only_session(dbapi_connection: Any, _record: Any) -> None:
    """Every transaction of the session READ ONLY: the server refuses any write. (Set on the
    session, not through the URL's `options`, which the URL may already carry.)"""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    finally:
        cursor.close()
    dbapi_connection.commit()


def _sqlite_engine(url: str, *, create_dir: bool, busy_timeout: float, read_only: bool) -> Engine:
    from ledger.config import sqlite_path

    path = sqlite_path(url)
    if path is not None and create_dir:
        _make_folder(Path(path).parent)
    busy_ms = max(0, int(busy_timeout * 1000))
    if read_only and path is not None:
        url = _read_only_url(path)
    engine = create_engine(url, connect_args={"timeout": busy_ms / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # We issue BEGIN ourselves (below); pysqlite's own implicit BEGIN is always DEFERRED.
        # The journal mode is not set here: switching a file to WAL is a write, which must
        # not happen to a file that turns out not to be a ledger (see ensure_wal).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        # In WAL mode NORMAL survives a crash of the process (kill -9), which is what a
        # training job does to us; only a power cut can cost the last transactions.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        options = connection.get_execution_options()
        wait = int(options.get(WAIT_OPTION, busy_ms))
        info = connection.connection.info  # stays with the driver's connection in the pool
        if info.get("busy_ms", busy_ms) != wait:
            connection.exec_driver_sql(f"PRAGMA busy_timeout={wait}")
            info["busy_ms"] = wait
        connection.exec_driver_sql("BEGIN IMMEDIATE" if options.get(WRITE_OPTION) else "BEGIN")

    return engine


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next(
            (p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), folder
        )
        raise UsageError(
            f"cannot make a ledger in {folder}: {blocker} is a file, not a folder"
        ) from None
    except OSError as exc:
        raise StorageError(f"cannot make the folder {folder}: {exc.strerror or exc}") from exc


def _read_only_url(path: Path) -> str:
    """A URL that opens the file read-only. In a folder this process cannot write, a WAL
    file without its -shm could not be opened at all: then it is opened as immutable, which
    is right only when no -wal holds committed rows (immutable reads the main file alone)."""
    immutable = not os.access(path.parent, os.W_OK) and not Path(f"{path}-shm").exists()
    wal = Path(f"{path}-wal")
    if immutable and wal.exists() and wal.stat().st_size > 0:
        raise StorageError(
            f"{path}'s latest rows are in {wal.name}, which SQLite can read only where it may "
            f"write its {path.name}-shm beside it, and {path.parent} is read-only here: open a "
            "copy of the folder somewhere writable (or run `ledger` once where it can write)"
        )
    query = "mode=ro" + ("&immutable=1" if immutable else "")
    return f"sqlite:///file:{quote(str(path))}?{query}&uri=true"


def ensure_wal(engine: Engine) -> None:
    """Put a ledger's SQLite file in WAL mode (persistent, so this is a no-op afterwards):
    readers then never block the writer, which the hook's ranks and the CLI need."""
    if engine.dialect.name != "sqlite" or engine.url.database in (None, "", ":memory:"):
        return
    with engine.connect() as conn:
        # Straight to the driver: the journal mode cannot change inside a transaction, and
        # SQLAlchemy would begin one for a statement of its own.
        driver = conn.connection.driver_connection
        assert driver is not None  # an open connection always has one
        mode = driver.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":
            driver.execute("PRAGMA journal_mode=WAL")


def integrity_problem(engine: Engine) -> str | None:
    """What `PRAGMA quick_check` finds wrong with a SQLite file (None: nothing, or not SQLite)."""
    if engine.dialect.name != "sqlite":
        return None
    with engine.connect() as conn:
        found = [str(row[0]) for row in conn.exec_driver_sql("PRAGMA quick_check(3)")]
    return None if found == ["ok"] else "; ".join(found)


@contextmanager
def session_scope(engine: Engine, *, write: bool, wait_ms: int | None = None) -> Iterator[Session]:
    """A session that commits on success, rolls back on error, and speaks ledger's errors;
    `wait_ms`: how long it waits for another's lock (SQLite's busy timeout, PostgreSQL's
    lock_timeout; default: the engine's)."""
    options: dict[str, Any] = {WRITE_OPTION: True} if write else {}
    if wait_ms is not None:
        options[WAIT_OPTION] = wait_ms
    bind = engine.execution_options(**options) if options else engine
    session = Session(bind=bind, expire_on_commit=False)
    try:
        if wait_ms is not None and engine.dialect.name == "postgresql":
            session.execute(text(f"SET LOCAL lock_timeout = {int(wait_ms)}"))
        yield session
        if write:
            session.commit()
        # A read session just closes: its connection goes back to the pool (which rolls the
        # transaction back) and the rows it loaded stay readable, unlike after rollback().
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


@contextmanager
def translate_errors(url: str) -> Iterator[None]:
    """Turn driver errors into StorageError with a message a person can act on."""
    try:
        yield
    except OperationalError as exc:
        raise StorageError(_describe(exc, url)) from exc
    except DBAPIError as exc:
        raise StorageError(_describe(exc, url)) from exc


def _describe(exc: DBAPIError, url: str) -> str:
    original = str(getattr(exc, "orig", exc)).strip().splitlines()
    reason = original[0] if original else type(exc).__name__
    where = hide_password(url)
    if "database is locked" in reason:
        return (
            f"the ledger {where} stayed locked for {BUSY_TIMEOUT_MS // 1000} s by another "
            "process; try again"
        )
    if "unable to open database file" in reason:
        return f"cannot open the ledger {where}: the folder is missing or not writable"
    if "malformed" in reason or "file is not a database" in reason:
        return damaged(where, reason)
    if "readonly database" in reason:
        return f"cannot write to the ledger {where}: the file or its folder is read-only"
    return f"database error on {where}: {reason}"


def damaged(where: str, problem: str) -> str:
    return (
        f"the ledger {where} is damaged ({problem}); nothing was written. Restore it from a "
        f"copy, or rescue its rows with `sqlite3 {where} .recover | sqlite3 rescued.db`"
    )
