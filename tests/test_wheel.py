"""migrations/ ships inside the wheel: an installed `ledger db upgrade` works.

The wheel is built from this checkout and installed into a fresh virtualenv without its
dependencies; a .pth file lends it this environment's site-packages (SQLAlchemy, click…)
but not this checkout, so `ledger` there can only be the installed wheel.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    [built] = out.glob("ledger-*.whl")
    return built


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_the_wheel_carries_the_migrations(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "ledger/migrations/env.py" in names
    versions = {
        n for n in names if n.startswith("ledger/migrations/versions/") and n.endswith(".py")
    }
    assert len(versions) == len(list((ROOT / "migrations" / "versions").glob("0*.py")))


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_installed_ledger_creates_and_upgrades(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "borrowed_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    def ledger(db: Path, *args: str) -> dict:
        done = subprocess.run(
            [str(venv / "bin" / "ledger"), "--db", str(db), *args, "--json"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    where = subprocess.run(
        [str(python), "-c", "import ledger.db.schema as s; print(s.migrations_dir())"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout.strip()
    assert where.startswith(str(venv)), where  # the wheel's copy, not this checkout's

    from ledger.db import schema
    from ledger.db.engine import make_engine

    assert ledger(tmp_path / "new.db", "init")["created"] is True
    assert ledger(tmp_path / "new.db", "db", "current")["revision"] == schema.HEAD

    # A ledger left at the oldest revision, upgraded by the installed copy.
    old = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    schema.upgrade(old, schema.REVISIONS[0])
    old.dispose()
    upgraded = ledger(tmp_path / "old.db", "db", "upgrade")
    assert (upgraded["from"], upgraded["to"]) == (schema.REVISIONS[0], schema.HEAD)
