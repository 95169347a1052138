"""Revision 0004 (the hook's run columns) upgrades a ledger with data in it."""

from __future__ import annotations

import subprocess
import sys

from sqlalchemy import text

import ledger
from ledger.db import schema
from ledger.db.engine import make_engine


def test_upgrade_from_0001_keeps_runs_and_adds_the_hook_columns(db_url: str) -> None:
    engine = make_engine(db_url, create_dir=True)
    try:
        schema.upgrade(engine, "0001")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO investigation (name, created_at) VALUES ('default', '2026-01-01')"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO run (investigation_id, name, fate, created_at) "
                    "VALUES (1, 'old_run', 'finished', '2026-01-01')"
                )
            )
        assert schema.state(engine).revision == "0001"
        assert schema.upgrade(engine) is True
        assert schema.upgrade(engine) is False  # already at head: nothing to do
    finally:
        engine.dispose()
    with ledger.open(db_url) as lg:
        summary = lg.meter_summary("old_run")
    assert (summary.fate, summary.dropped_steps, summary.hook_cost_us) == ("finished", 0, None)


def test_models_and_migrations_agree_on_the_run_table(db_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from ledger.db.models import Base

    with ledger.open(db_url) as lg, lg.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": False})
        diffs = compare_metadata(context, Base.metadata)
    assert [d for d in diffs if "run" in repr(d)] == []


def test_the_callback_without_transformers_says_how_to_install() -> None:
    code = (
        "import sys; sys.modules['transformers'] = None\n"
        "try:\n"
        "    from ledger.hook import LedgerCallback\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "pip install transformers" in out.stdout
