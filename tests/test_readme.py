"""The README's runnable scenario works as written, in a real shell with the real `ledger`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def readme_scenario() -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- scenario:[^>]*-->\s*```sh\n(.*?)```", text, re.S)
    assert match, "README.md lost its runnable scenario block"
    return match.group(1)


def test_readme_starts_with_the_two_commands() -> None:
    lines = [ln.strip() for ln in (ROOT / "README.md").read_text().splitlines() if ln.strip()]
    assert lines[1].startswith("make demo") and lines[2].startswith("make test")


@pytest.mark.sqlite_only
def test_readme_scenario_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEDGER_DB")  # the scenario finds ./.ledger/ledger.db as a user would
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", readme_scenario()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "DRIFT" in done.stderr and "relaunching in container 200" in done.stdout

    stored = b"".join(p.read_bytes() for p in (tmp_path / ".ledger").glob("ledger.db*"))
    assert b"hf_ThisTokenNeverReachesTheLedger42" not in stored
    assert b"HF_TOKEN=***" in stored

    shown = subprocess.run(
        ["ledger", "show", "eager_dynamiccopy", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    steps = json.loads(shown.stdout)["deploy_steps"]
    assert [(s["name"], s["drift"]) for s in steps] == [
        ("copy", True),
        ("copy", False),
        ("relaunch", None),
    ]
    assert [s["held"] for s in steps] == [True, False, False]  # the stale copy never ran
