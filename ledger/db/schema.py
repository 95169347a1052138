"""The ledger's schema revision: find it, compare it with this code's, create, upgrade.

Checking the revision on every open must stay cheap (it happens on every CLI call and in
every rank's hook), so it reads `alembic_version` with one SELECT and compares it with
`HEAD`; alembic itself is imported only to create or upgrade. A test keeps `HEAD` equal
to the newest revision in migrations/versions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, inspect, text

from ledger.db.engine import WRITE_OPTION, ensure_wal
from ledger.errors import SchemaOutdatedError, StorageError

if TYPE_CHECKING:
    from alembic.config import Config

HEAD = "0008"
# Revisions in order, oldest first; a ledger at any of them can be upgraded.
REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008")


@dataclass(frozen=True)
class SchemaState:
    revision: str | None  # None: no alembic_version table, or an empty one
    has_tables: bool

    @property
    def is_empty(self) -> bool:
        return self.revision is None and not self.has_tables

    @property
    def is_current(self) -> bool:
        return self.revision == HEAD


def state(engine: Engine) -> SchemaState:
    with engine.connect() as conn:
        names = set(inspect(conn).get_table_names())
        if "alembic_version" not in names:
            return SchemaState(None, bool(names))
        row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
        conn.rollback()
    return SchemaState(row[0] if row else None, True)


def require_current(engine: Engine, where: str) -> None:
    """Refuse a ledger this code cannot safely write, saying what to do about it."""
    current = state(engine)
    if current.is_current:
        return
    if current.revision is None:
        raise SchemaOutdatedError(
            f"{where} holds tables that are not a ledger's (no schema revision); "
            "point --db at a ledger file or an empty database"
        )
    if current.revision in REVISIONS:
        raise SchemaOutdatedError(
            f"the ledger {where} is at schema revision {current.revision}, this version of "
            f"ledger needs {HEAD}: run `ledger db upgrade` (your rows are kept)"
        )
    raise SchemaOutdatedError(newer(where, current.revision))


def newer(where: str, revision: str) -> str:
    return (
        f"the ledger {where} is at schema revision {revision}, written by a newer ledger than "
        f"this one (which knows revisions up to {HEAD}); upgrade the ledger package"
    )


def prepare(engine: Engine, where: str, *, create: bool, read_only: bool = False) -> bool:
    """Check the schema is this code's, creating it in an empty database; True if created.

    Nothing is written to a database that turns out not to be a ledger, nor by a read-only
    open.
    """
    from ledger.errors import LedgerNotFoundError

    current = state(engine)
    if not current.is_empty:
        require_current(engine, where)
        if not read_only:
            ensure_wal(engine)
        return False
    if read_only:
        raise LedgerNotFoundError(f"{where} holds no ledger yet; run `ledger init --db {where}`")
    if not create:
        raise LedgerNotFoundError(f"{where} holds no ledger yet; run `ledger init --db {where}`")
    # False when another process (a rank racing this one) created it first.
    return upgrade(engine)


def migrations_dir() -> Path:
    """migrations/ ships inside the wheel as ledger/migrations; a checkout has it at the top."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "migrations", package.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise StorageError("ledger's migrations are missing from this installation; reinstall ledger")


def upgrade(engine: Engine, revision: str = "head") -> bool:
    """Bring the schema to `revision` (head by default), keeping every row.

    Returns False when there was nothing to do: the schema was already at head (or another
    process brought it there while this one waited for the lock).
    """
    from alembic import command

    ensure_wal(engine)
    with engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        if sqlite:
            # Batch migrations rebuild SQLite tables with DROP TABLE, which would fire
            # ON DELETE CASCADE into child tables; the pragma only changes outside a
            # transaction, so it goes straight to the driver before anything else runs.
            _driver(conn).execute("PRAGMA foreign_keys=OFF")
        try:
            _lock_schema(conn)
            if revision == "head" and _revision(conn) == HEAD:
                # Another process (a rank racing this one to create the ledger) got there first.
                conn.commit()
                return False
            command.upgrade(_alembic_config(conn), revision)
            conn.commit()
            if sqlite:
                broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                conn.rollback()
                if broken:
                    raise StorageError(f"the upgrade left dangling references: {broken[:5]}")
            return True
        finally:
            if sqlite:
                conn.rollback()
                _driver(conn).execute("PRAGMA foreign_keys=ON")


def _driver(conn: Connection) -> Any:
    """The DBAPI connection under `conn` (sqlite3's, for pragmas outside a transaction)."""
    driver = conn.connection.driver_connection
    assert driver is not None  # an open connection always has one
    return driver


# Any fixed 64-bit number will do: it names ledger's lock among PostgreSQL advisory locks.
_PG_SCHEMA_LOCK = 0x1ED6E2_0004


def _lock_schema(conn: Connection) -> None:
    """Open the upgrade's transaction holding a lock that every other upgrader waits for.

    Eight ranks opening a new ledger at once all see it empty; without this they would all
    create the tables and all but one fail. SQLite: BEGIN IMMEDIATE (the others wait on the
    busy timeout); PostgreSQL: a transaction-scoped advisory lock. DDL is transactional on
    both, so a waiter that gets the lock sees the finished schema and does nothing.
    """
    if conn.dialect.name == "sqlite":
        conn.execution_options(**{WRITE_OPTION: True})
        conn.exec_driver_sql("SELECT 1")  # begins the transaction: BEGIN IMMEDIATE
    elif conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_SCHEMA_LOCK})


def _revision(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    return row[0] if row else None


def _alembic_config(connection: Connection) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.attributes["connection"] = connection
    return config
