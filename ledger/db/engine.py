"""Engines and sessions: SQLite pragmas, PostgreSQL URLs, and one place where driver
errors become ledger's own.

SQLite is opened so that several ranks and a CLI can share one file: WAL (readers never
block the writer), foreign keys on, a busy timeout, and write transactions that start
with BEGIN IMMEDIATE, so two writers queue on the busy timeout instead of failing with
"database is locked" when both try to upgrade a read lock.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session

from ledger.config import hide_password
from ledger.errors import StorageError

BUSY_TIMEOUT_MS = 30_000
WRITE_OPTION = "ledger_write"


def make_engine(
    url: str,
    *,
    create_dir: bool = False,
    busy_timeout: float = BUSY_TIMEOUT_MS / 1000,
    connect_timeout: float | None = None,
) -> Engine:
    """An engine for `url`, configured for ledger's concurrency needs.

    `busy_timeout`: how long a SQLite writer waits for another's lock; `connect_timeout`:
    how long to wait for a PostgreSQL server to answer (default: the driver's).
    """
    if url.startswith("sqlite"):
        return _sqlite_engine(url, create_dir=create_dir, busy_timeout=busy_timeout)
    connect_args: dict[str, Any] = {}
    if connect_timeout is not None:
        # libpq counts whole seconds, and takes 1 as 2; never 0, which means "wait forever"
        connect_args["connect_timeout"] = max(1, math.ceil(connect_timeout))
    try:
        return create_engine(url, pool_pre_ping=True, connect_args=connect_args)
    except ModuleNotFoundError as exc:
        raise StorageError(
            f"the database driver for {hide_password(url)} is not installed ({exc.name}); "
            "for PostgreSQL: pip install 'ledger[postgres]'"
        ) from exc
    except SQLAlchemyError as exc:
        raise StorageError(f"cannot use database URL {hide_password(url)}: {exc}") from exc


def _sqlite_engine(url: str, *, create_dir: bool, busy_timeout: float) -> Engine:
    from ledger.config import sqlite_path

    path = sqlite_path(url)
    if path is not None and create_dir:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    busy_ms = max(0, int(busy_timeout * 1000))
    engine = create_engine(url, connect_args={"timeout": busy_ms / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # We issue BEGIN ourselves (below); pysqlite's own implicit BEGIN is always DEFERRED.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if path is not None:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        # In WAL mode NORMAL survives a crash of the process (kill -9), which is what a
        # training job does to us; only a power cut can cost the last transactions.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        write = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


@contextmanager
def session_scope(engine: Engine, *, write: bool) -> Iterator[Session]:
    """A session that commits on success, rolls back on error, and speaks ledger's errors."""
    bind = engine.execution_options(**{WRITE_OPTION: True}) if write else engine
    session = Session(bind=bind, expire_on_commit=False)
    try:
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
    return f"database error on {where}: {reason}"
