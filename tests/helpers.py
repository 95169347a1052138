"""Small helpers for tests: run the CLI in-process and read its output; read a database's
rows with plain SQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from sqlalchemy import create_engine, text

from ledger.cli import cli


def run_cli(*args: str, input: str | None = None) -> Result:
    """Invoke `ledger ARGS…` in-process, with stdout and stderr kept apart."""
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def run_json(*args: str) -> Any:
    """Invoke a command with --json, assert it succeeded, and return the parsed value."""
    result = run_cli(*args, "--json") if "--" not in args else run_cli(*_json_before_dashdash(args))
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return json.loads(result.stdout)


def _json_before_dashdash(args: tuple[str, ...]) -> list[str]:
    i = args.index("--")
    return [*args[:i], "--json", *args[i:]]


def db_rows(db_url: str, sql: str) -> list[tuple[Any, ...]]:
    """The rows of `sql` on the database at `db_url`, as tuples (an engine of its own)."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


def two_runs(path: Path) -> Path:
    """A new SQLite ledger at `path` holding runs 'a' (about 100 a step) and 'b' (about 80),
    300 steps each: something for a command in a subprocess to compare."""
    import ledger

    lg = ledger.open(path)
    try:
        for name, level in (("a", 100.0), ("b", 80.0)):
            lg.add_steps(name, [{"step": i, "throughput": level + i % 7} for i in range(300)])
    finally:
        lg.close()
    return path
