"""Drift stops before the damage: a drifted artifact holds its step (the command does not
run, exit 3) unless --allow-drift, and a run's DRIFT mark is its current state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import db_rows, run_cli


@pytest.fixture
def patched(lg: Any, tmp_path: Path) -> tuple[Path, Path]:
    """A run `r` whose patch recorded train.py; build/train.py is yesterday's file."""
    train = tmp_path / "train.py"
    train.write_text("cache = GpuBufferCache(persistent=False)\n")
    lg.record_fix("the cache leaks", "gate the cache", files=[train], run="r")
    stale = tmp_path / "build" / "train.py"
    stale.parent.mkdir()
    stale.write_text("cache = GpuBufferCache(persistent=True)\n")
    return train, stale


def test_a_drifted_step_does_not_run_its_command(
    lg: Any, tmp_path: Path, patched: tuple[Path, Path]
) -> None:
    train, stale = patched
    shipped = tmp_path / "box_train.py"
    held = lg.deploy("r", "copy", ["cp", str(stale), str(shipped)], artifact=stale)
    assert not shipped.exists()  # the stale file never reached the box
    assert held.drift is True and held.held and held.exit_code is None
    assert held.ended_at is not None and (held.output or "").startswith("ledger: not run")
    assert lg.run_summary("r").drift is True and lg.show("r").drift is True

    forced = lg.deploy(
        "r", "copy", ["cp", str(stale), str(shipped)], artifact=stale, allow_drift=True
    )
    assert shipped.read_text() == stale.read_text()  # --allow-drift runs it
    assert forced.drift is True and not forced.held and forced.exit_code == 0

    stale.write_bytes(train.read_bytes())  # rebuilt: now the patch's file
    fixed = lg.deploy("r", "copy", ["cp", str(stale), str(shipped)], artifact=stale)
    assert fixed.drift is False and fixed.exit_code == 0
    assert shipped.read_text() == train.read_text()
    assert lg.run_summary("r").drift is False and lg.show("r").drift is False  # cleared
    # the timeline keeps every step, the held one as not run
    deploys = [e.summary for e in lg.timeline() if e.kind == "deploy"]
    assert len(deploys) == 3
    assert "not run" in deploys[0] and "DRIFT" in deploys[0]
    assert "DRIFT" in deploys[1] and "matches the patch" in deploys[2]


def test_the_mark_is_per_artifact(lg: Any, tmp_path: Path, patched: tuple[Path, Path]) -> None:
    """A matching model.py does not clear a train.py that is still stale."""
    train, stale = patched
    model = tmp_path / "model.py"
    model.write_text("layers = 12\n")
    lg.record_fix("and the model", "fewer layers", files=[model], run="m")
    lg.ensure_run("m")
    # run m's patch has model.py only; run r's patch has train.py only
    assert lg.deploy("r", "copy", ["true"], artifact=stale).drift is True
    other = tmp_path / "build" / "extra.py"
    other.write_text("x = 1\n")
    assert lg.deploy("r", "copy", ["true"], artifact=other).drift is None  # not checked
    assert lg.run_summary("r").drift is True  # an unchecked file changes nothing
    assert lg.deploy("m", "copy", ["true"], artifact=model).drift is False
    assert lg.run_summary("r").drift is True and lg.run_summary("m").drift is False
    assert lg.deploy("r", "copy", ["true"], artifact=train).drift is False
    assert lg.run_summary("r").drift is False


def test_a_held_relaunch_stores_no_flags(lg: Any, db_url: str, patched: tuple[Path, Path]) -> None:
    _, stale = patched
    step = lg.deploy("r", "relaunch", ["true", "--token-budget", "4096"], artifact=stale)
    assert step.held
    assert db_rows(db_url, "SELECT key FROM run_config WHERE source = 'deploy'") == []


def test_the_command_line_exits_3_before_anything_runs(
    lg: Any, tmp_path: Path, patched: tuple[Path, Path]
) -> None:
    _, stale = patched
    made = tmp_path / "made"
    result = run_cli(
        "deploy", "--run", "r", "--step", "copy", "--artifact", str(stale), "--json",
        "--", "touch", str(made),
    )  # fmt: skip
    assert result.exit_code == 3 and not made.exists()
    out = json.loads(result.stdout)
    assert out["held"] is True and out["drift"] is True and out["exit_code"] is None
    assert "DRIFT" in result.stderr and "NOT RUN: nothing was shipped" in result.stderr
    text = run_cli(
        "deploy", "--run", "r", "--step", "copy", "--artifact", str(stale),
        "--", "touch", str(made),
    )  # fmt: skip
    assert text.exit_code == 3 and not made.exists() and ": not run, artifact" in text.stdout
    allowed = run_cli(
        "deploy", "--run", "r", "--step", "copy", "--artifact", str(stale), "--allow-drift",
        "--", "touch", str(made),
    )  # fmt: skip
    assert allowed.exit_code == 0 and made.exists()
    assert "Shipped anyway (--allow-drift)" in allowed.stderr
    runs = json.loads(run_cli("runs", "--json").stdout)
    assert [r["drift"] for r in runs] == [True]
    show = run_cli("show", "r")
    assert show.stdout.count("→ not run") == 2, show.stdout


def test_the_report_marks_only_a_current_drift(
    lg: Any, tmp_path: Path, patched: tuple[Path, Path]
) -> None:
    train, stale = patched
    lg.deploy("r", "copy", ["true"], artifact=stale)
    badge = "DRIFT</span> · "  # the attempts table's deploy cell
    assert badge in lg.write_report(tmp_path / "a.html").read_text()
    lg.deploy("r", "copy", ["true"], artifact=train)
    page = lg.write_report(tmp_path / "b.html").read_text()
    assert badge not in page
    assert '→ not run <span class="drift">DRIFT</span> held' in page  # the held step shows
