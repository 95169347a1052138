"""Where the ledger lives: --db, LEDGER_DB, the nearest .ledger/ upwards, else ./.ledger/."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.config import hide_password, locate, normalize_url


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEDGER_DB", raising=False)


def test_option_wins_over_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_DB", str(tmp_path / "env.db"))
    loc = locate(tmp_path / "flag.db")
    assert (loc.path, loc.source) == (tmp_path / "flag.db", "option")
    assert locate().path == tmp_path / "env.db" and locate().source == "env"


def test_nearest_ledger_upwards_like_git(tmp_path: Path) -> None:
    (tmp_path / ".ledger").mkdir()
    (tmp_path / ".ledger" / "ledger.db").write_bytes(b"")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    loc = locate(cwd=deep)
    assert (loc.path, loc.source) == (tmp_path / ".ledger" / "ledger.db", "found")


def test_default_is_here(tmp_path: Path) -> None:
    loc = locate(cwd=tmp_path)
    assert (loc.path, loc.source) == (tmp_path / ".ledger" / "ledger.db", "default")
    assert loc.url == f"sqlite:///{tmp_path / '.ledger' / 'ledger.db'}"


def test_a_folder_means_the_ledger_inside_it(tmp_path: Path) -> None:
    assert locate(tmp_path).path == tmp_path / "ledger.db"


def test_relative_paths_resolve_against_cwd(tmp_path: Path) -> None:
    assert locate("x/l.db", cwd=tmp_path).path == tmp_path / "x" / "l.db"


def test_urls() -> None:
    assert normalize_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    loc = locate("postgresql://u:pw@h/db")
    assert loc.path is None and not loc.is_sqlite
    assert loc.display() == "postgresql+psycopg://u:***@h/db"
    assert hide_password("sqlite:///x.db") == "sqlite:///x.db"
