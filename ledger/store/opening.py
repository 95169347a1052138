"""Opening a ledger: where it is, its engine, and whether its schema is this code's."""

from __future__ import annotations

import os

from sqlalchemy import Engine

from ledger.config import LEDGER_DIR, LEDGER_FILE, Location, locate
from ledger.db import schema
from ledger.db.engine import damaged, integrity_problem, make_engine, translate_errors
from ledger.errors import LedgerNotFoundError, StorageError


def connect(
    db: str | os.PathLike[str] | None,
    *,
    create: bool,
    busy_timeout: float,
    connect_timeout: float | None,
    read_only: bool,
    check: bool,
) -> tuple[Location, Engine, bool]:
    """The ledger's location, an engine on it, and whether this call created its schema."""
    location = locate(db)
    where = location.display()
    if not create and location.path is not None and not location.path.exists():
        raise LedgerNotFoundError(not_found(location))
    engine = make_engine(
        location.url,
        create_dir=create,
        busy_timeout=busy_timeout,
        connect_timeout=connect_timeout,
        read_only=read_only,
    )
    try:
        with translate_errors(location.url):
            if check and location.path is not None and location.path.exists():
                problem = integrity_problem(engine)
                if problem is not None:
                    raise StorageError(damaged(where, problem))
            created = schema.prepare(engine, where, create=create, read_only=read_only)
    except BaseException:
        engine.dispose()  # a refused ledger must not leave connections behind
        raise
    return location, engine, created


def writable(db: str | os.PathLike[str] | None) -> bool:
    """Whether this process could write the ledger at `db` (or the one discovery finds): a
    SQLite file it may write, in a folder it may write (SQLite's -wal and -shm files live
    beside it); a server's ledger is the server's to refuse."""
    path = locate(db).path
    if path is None:
        return True
    return path.exists() and os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def not_found(location: Location) -> str:
    """Where discovery looked, and what to do, when there is no ledger."""
    where = location.display()
    if location.source == "default" and location.path is not None:
        folder = location.path.parent.parent
        return (
            f"no ledger here: no {LEDGER_DIR}/{LEDGER_FILE} in {folder} or any folder above "
            "it; `ledger init` makes one here (or pass --db PATH, or set LEDGER_DB)"
        )
    given = "--db" if location.source == "option" else "LEDGER_DB"
    return f"no ledger at {where} (from {given}); `ledger init --db {where}` makes one there"
