"""Fixtures shared by every test.

No test touches a real ledger: an autouse fixture points LEDGER_DB at a fresh one for
each test and moves the working directory into tmp_path.

Backends: by default the ledger is a real SQLite file in tmp_path. With
LEDGER_TEST_BACKEND=postgres (what `make test-pg` sets) the same tests run against the
PostgreSQL server named by LEDGER_TEST_PG_URL: one fresh database per test session and
one fresh schema per test. Tests that need PostgreSQL whatever the backend take `pg_url`,
which skips when LEDGER_TEST_PG_URL is not set.

In parallel (`pytest -n 4`, pytest-xdist) each worker is a test session of its own: its own
PostgreSQL database, named after the worker, and tmp_path folders of its own; no test
shares a fixed path, port or variable with another (docs/testing.md).
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, settings

PG_ENV = "LEDGER_TEST_PG_URL"
# The log reader runs strict in tests: an internal exception fails the test instead of
# becoming a counted unread line (ledger.logs.reader.strict_default).
os.environ.setdefault("LEDGER_LOGS_STRICT", "1")
BACKEND = os.environ.get("LEDGER_TEST_BACKEND", "sqlite")
# Property tests are judged by what they find, never by the clock: a loaded machine (or a
# worker beside three others) can take over hypothesis's 200 ms for one example, and slow
# generation is no failure either. A test's own @settings still sets the rest.
settings.register_profile("ledger", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ledger")
# Tests press Ctrl-C on commands they start (SIGINT, which Python turns into
# KeyboardInterrupt). A suite started in the background (`make test &`, a script's `cmd &`)
# has SIGINT ignored, and an ignored signal stays ignored across exec: those commands would
# never see it. Python's own handler here makes it SIG_DFL in every child again.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# pytest-xdist names each worker (gw0, gw1, …); a plain run is "main".
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")


def _pg_base_url() -> str | None:
    url = os.environ.get(PG_ENV)
    if not url:
        return None
    from ledger.config import normalize_url

    return normalize_url(url)


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    base = _pg_base_url()
    if base is None:
        pytest.skip(f"{PG_ENV} is not set")
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    # One database per session, so per xdist worker: the worker's name says whose it is.
    name = f"ledger_test_{WORKER}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _fresh_schema_url(database_url: str) -> Iterator[str]:
    from sqlalchemy import create_engine, text

    schema = f"t_{WORKER}_{uuid.uuid4().hex[:12]}"
    engine = create_engine(database_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in database_url else "?"
    try:
        yield f"{database_url}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()


@pytest.fixture
def pg_url(pg_database: str) -> Iterator[str]:
    """A ledger URL on PostgreSQL in a schema of its own (skips without LEDGER_TEST_PG_URL)."""
    yield from _fresh_schema_url(pg_database)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The test's ledger on the backend this pass runs against."""
    if BACKEND == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture(autouse=True)
def _isolated(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every test runs in tmp_path with LEDGER_DB naming its own fresh ledger."""
    monkeypatch.chdir(tmp_path)
    for name in ("LEDGER_DB", "LEDGER_INVESTIGATION", "LEDGER_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    if "db_url" in request.fixturenames:
        monkeypatch.setenv("LEDGER_DB", request.getfixturevalue("db_url"))
    else:
        monkeypatch.setenv("LEDGER_DB", str(tmp_path / ".ledger" / "ledger.db"))


@pytest.fixture
def lg(db_url: str) -> Iterator[object]:
    """An open Ledger on the test's backend."""
    import ledger

    ledger_ = ledger.open(db_url)
    try:
        yield ledger_
    finally:
        ledger_.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if BACKEND != "postgres":
        return
    skip = pytest.mark.skip(reason="SQLite-specific; this pass runs against PostgreSQL")
    for item in items:
        if "sqlite_only" in item.keywords:
            item.add_marker(skip)
