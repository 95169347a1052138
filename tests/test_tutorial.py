"""docs/tutorial.md runs as written: its shell blocks, in order, in a fresh folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).resolve().parent.parent / "docs" / "tutorial.md"


def blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", TUTORIAL.read_text(), re.S)


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_tutorial_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEDGER_DB")  # the tutorial's ledger is found as a user's would be
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    script = "\n".join(blocks())
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "DRIFT" in done.stderr
    assert "eager_dynamiccopy is" in done.stdout and "faster than eager_unpadded" in done.stdout
    assert (tmp_path / "report.html").is_file()
    stored = b"".join(p.read_bytes() for p in (tmp_path / ".ledger").glob("ledger.db*"))
    assert b"hf_NotARealTokenButStillSecret123" not in stored


def test_tutorial_has_blocks() -> None:
    assert len(blocks()) >= 6
