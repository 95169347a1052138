"""Alembic environment for ledger.

ledger runs migrations in-process (`ledger db upgrade`) and hands over its own connection
in `config.attributes["connection"]`. Developers can also use the alembic CLI from the
repository root (alembic.ini), which opens the ledger that `LEDGER_DB` or discovery names.
"""

from __future__ import annotations

from alembic import context

from ledger.db.models import Base

config = context.config
target_metadata = Base.metadata


def _configure_and_run(connection: object) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",  # type: ignore[attr-defined]
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
        return
    from ledger.config import locate
    from ledger.db.engine import make_engine

    url = config.get_main_option("sqlalchemy.url") or locate().url
    engine = make_engine(url, create_dir=True)
    with engine.connect() as conn:
        _configure_and_run(conn)
        conn.commit()


if context.is_offline_mode():
    raise SystemExit("ledger's migrations run online only: use `ledger db upgrade`")
run_migrations_online()
