"""`ledger demo`: the example investigation builds, shows drift, and stores no secret."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli

import ledger
from ledger.demo import FAKE_TOKEN


@pytest.mark.sqlite_only
def test_demo_builds_the_investigation(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = run_cli("demo", "--out", str(out))
    assert result.exit_code == 0, result.stderr
    db = out / ".ledger" / "ledger.db"
    assert str(db) in result.stdout and "DRIFT" in result.stdout
    with ledger.open(db, create=False) as lg:
        steps = lg.deploy_steps("eager_dynamiccopy")
        assert [s.drift for s in steps if s.name == "copy"] == [True, False]
        assert lg.investigation().baseline_value == 14200
    stored = b"".join(p.read_bytes() for p in db.parent.glob("ledger.db*"))
    assert FAKE_TOKEN.encode() not in stored


@pytest.mark.sqlite_only
def test_demo_twice_in_one_folder_starts_fresh(tmp_path: Path) -> None:
    for _ in range(2):
        assert run_cli("demo", "--out", str(tmp_path)).exit_code == 0
    with ledger.open(tmp_path / ".ledger" / "ledger.db", create=False) as lg:
        assert len(lg.hypotheses()) == 1
