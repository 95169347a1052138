"""Schema revisions: the models and the migrations agree, every earlier revision upgrades
with its rows intact, and a ledger this code cannot write is refused with what to do."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy import Engine, MetaData, Table, create_engine, insert, inspect, select, text

import ledger
from ledger.db import schema
from ledger.db.engine import make_engine
from ledger.db.models import Base
from ledger.errors import SchemaOutdatedError


@pytest.fixture
def engine(db_url: str) -> Engine:
    eng = make_engine(db_url, create_dir=True)
    yield eng
    eng.dispose()


def test_head_constant_matches_the_scripts() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(schema.migrations_dir()))
    scripts = ScriptDirectory.from_config(config)
    assert scripts.get_current_head() == schema.HEAD
    chain = [rev.revision for rev in scripts.walk_revisions()][::-1]
    assert tuple(chain) == schema.REVISIONS


def test_models_and_migrations_agree(engine: Engine) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    schema.upgrade(engine)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    assert diff == []


# Values that satisfy the CHECK constraints of enum-like columns.
VALID = {"status": "open", "fate": "unknown", "kind": "oom", "verdict": "no-change"}
VALID_IN = {
    ("comparison", "kind"): "watch",
    ("run_config", "source"): "log",
    ("launch", "source"): "log",
}


def _value(column: Any, n: int) -> Any:
    if (column.table.name, column.name) in VALID_IN:
        return VALID_IN[(column.table.name, column.name)]
    if column.name in VALID:
        return VALID[column.name]
    python = column.type.python_type
    if python is bool:
        return False
    if python is int:
        return n
    if python is float:
        return 1.5
    if python is dt.datetime:
        return dt.datetime(2026, 11, 1, 12, 0, 0)
    return f"{column.name}-{n}"


def _fill_every_table(engine: Engine) -> dict[str, dict[str, Any]]:
    """One row in every table that exists at this revision, parents first, id 1 everywhere."""
    meta = MetaData()
    meta.reflect(engine)
    rows: dict[str, dict[str, Any]] = {}
    with engine.begin() as conn:
        for table in meta.sorted_tables:
            if table.name == "alembic_version":
                continue
            row = {}
            for column in table.columns:
                integer_key = column.primary_key and column.type.python_type is int
                if column.foreign_keys or integer_key:
                    row[column.name] = 1
                else:
                    row[column.name] = _value(column, 1)
            conn.execute(insert(table).values(**row))
            rows[table.name] = row
    return rows


@pytest.mark.parametrize("revision", schema.REVISIONS[:-1])
def test_rows_survive_the_upgrade_from(revision: str, engine: Engine) -> None:
    schema.upgrade(engine, revision)
    before = _fill_every_table(engine)
    schema.upgrade(engine)
    assert schema.state(engine).is_current
    with engine.connect() as conn:
        for name, row in before.items():
            table = Table(name, MetaData(), autoload_with=conn)
            found = conn.execute(select(*[table.c[c] for c in row])).mappings().all()
            assert len(found) == 1, name
            for column, value in row.items():
                got = found[0][column]
                if isinstance(value, dt.datetime) and isinstance(got, str):
                    got = dt.datetime.fromisoformat(got)
                assert got == value, (name, column)


def _set_revision(engine: Engine, revision: str) -> None:
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})


def test_an_older_ledger_is_refused_until_upgraded(
    db_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    if len(schema.REVISIONS) >= 2:
        older = schema.REVISIONS[-2]
        schema.upgrade(engine, older)
    else:  # only one revision so far: pretend this code is one revision ahead
        older = schema.HEAD
        schema.upgrade(engine)
        monkeypatch.setattr(schema, "REVISIONS", (*schema.REVISIONS, "9000"))
        monkeypatch.setattr(schema, "HEAD", "9000")
    with pytest.raises(SchemaOutdatedError, match=rf"revision {older}.*run `ledger db upgrade`"):
        ledger.open(db_url)
    if older == schema.REVISIONS[-2] and schema.HEAD != "9000":
        from ledger.store.admin import upgrade

        done = upgrade(db_url)
        assert (done.from_revision, done.to_revision) == (older, schema.HEAD)
        ledger.open(db_url).close()


def test_a_newer_ledger_is_refused(db_url: str, engine: Engine) -> None:
    schema.upgrade(engine)
    _set_revision(engine, "ffff")
    with pytest.raises(SchemaOutdatedError, match="newer ledger"):
        ledger.open(db_url)


@pytest.mark.sqlite_only
def test_a_database_that_is_not_a_ledger_is_refused(tmp_path) -> None:
    path = tmp_path / "other.db"
    foreign = create_engine(f"sqlite:///{path}")
    with foreign.begin() as conn:
        conn.execute(text("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"))
        conn.execute(text("INSERT INTO notes (body) VALUES ('keep me')"))
    foreign.dispose()
    with pytest.raises(SchemaOutdatedError, match="not a ledger"):
        ledger.open(path)
    with create_engine(f"sqlite:///{path}").connect() as conn:
        assert conn.execute(text("SELECT body FROM notes")).scalar() == "keep me"
        assert "run" not in inspect(conn).get_table_names()


@pytest.mark.sqlite_only
def test_upgrade_leaves_foreign_keys_on(tmp_path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'l.db'}", create_dir=True)
    schema.upgrade(engine)
    for _ in range(3):  # every pooled connection
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    engine.dispose()


def test_db_commands(db_url: str) -> None:
    from helpers import run_cli, run_json

    missing = run_cli("db", "current")
    if db_url.startswith("sqlite"):
        assert missing.exit_code == 1 and "ledger init" in missing.stderr
    run_json("init")
    current = run_json("db", "current")
    assert current["revision"] == current["head"] == schema.HEAD and current["up_to_date"]
    upgraded = run_json("db", "upgrade")
    assert upgraded["from"] == upgraded["to"] == schema.HEAD
