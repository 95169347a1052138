"""`import ledger` and `ledger --help` stay light: heavy libraries load where they are used."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pandas", "matplotlib", "torch", "alembic", "scipy", "numpy")


def _modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_ledger_is_light() -> None:
    loaded = _modules_after("import ledger")
    assert not {m for m in loaded if m.split(".")[0] in (*HEAVY, "sqlalchemy", "click")}


def test_help_does_not_load_the_database_stack() -> None:
    code = (
        "import sys\nfrom ledger.cli import cli\n"
        "try:\n    cli.main(['--help'], prog_name='ledger')\nexcept SystemExit:\n    pass"
    )
    loaded = _modules_after(code)
    assert not {m for m in loaded if m.split(".")[0] in (*HEAVY, "sqlalchemy")}


def test_import_ledger_hook_is_light() -> None:
    """A training script pays for `from ledger.hook import StepMeter` before its first step:
    no database stack, no dataframes, no plotting, no CLI (the meter loads SQLAlchemy when
    it is constructed, not when imported)."""
    loaded = _modules_after("from ledger.hook import StepMeter")
    heavy = {"sqlalchemy", "pandas", "matplotlib", "scipy", "alembic", "click", "torch"}
    assert not {m for m in loaded if m.split(".")[0] in heavy}
    assert not {m for m in loaded if m.startswith(("ledger.store", "ledger.cli", "ledger.db"))}
