"""Every command `deploy` and `probe` start ends with them: SIGTERM, SIGHUP and SIGINT to
ledger (and --timeout) stop the command's whole process group, and its row is closed with
what happened. Real processes: `python -m ledger` running a shell that starts a sleeper in
the background, both in the command's process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import db_rows, run_json

ROOT = Path(__file__).resolve().parents[1]
BOUND_S = 60.0  # generous: the machine may be loaded; nothing waits this long when it works


@pytest.fixture(autouse=True)
def _made(db_url: str) -> None:
    run_json("init")


def _until(condition: Callable[[], bool], what: str, bound: float = BOUND_S) -> None:
    deadline = time.monotonic() + bound
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {bound:g} s for {what}")
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie waiting to be reaped does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _ledger(db_url: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen(
        [sys.executable, "-m", "ledger", "--db", db_url, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # the test's own process group never gets the signal
    )


def _sleeper(folder: Path, trap_term: bool = False) -> tuple[list[str], Path, Path]:
    """A shell that writes its pid and its background sleeper's, then waits on it."""
    shell, background = folder / "shell.pid", folder / "background.pid"
    trap = "trap '' TERM; " if trap_term else ""
    script = f"{trap}echo $$ > {shell}; sleep 300 & echo $! > {background}; wait"
    return ["sh", "-c", script], shell, background


def _pids(*files: Path) -> list[int]:
    _until(lambda: all(f.exists() and f.read_text().strip() for f in files), "the pid files")
    return [int(f.read_text()) for f in files]


COMMANDS = {
    "deploy": ["deploy", "--run", "r", "--step", "relaunch", "--new", "--"],
    "probe": ["probe", "--run", "r", "--new", "--"],
}
TABLES = {"deploy": "deploy_step", "probe": "probe"}


@pytest.mark.parametrize("which", ["deploy", "probe"])
@pytest.mark.parametrize(
    ("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)]
)
def test_a_signal_stops_the_group_and_closes_the_row(
    db_url: str, tmp_path: Path, which: str, sig: signal.Signals, status: int
) -> None:
    command, shell, background = _sleeper(tmp_path)
    ledger = _ledger(db_url, *COMMANDS[which], *command)
    pids = _pids(shell, background)
    ledger.send_signal(sig)
    _, err = ledger.communicate(timeout=BOUND_S)
    assert ledger.returncode == status, err
    assert err.strip().startswith("Error: ") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert not any(_alive(pid) for pid in pids)  # ledger waited for the whole group
    ((code, ended, output),) = db_rows(
        db_url, f"SELECT exit_code, ended_at, output FROM {TABLES[which]}"
    )
    assert code == status and ended is not None
    assert f"stopped by {sig.name}; process group stopped with SIGTERM" in output


def test_a_command_that_ignores_sigterm_is_killed(db_url: str, tmp_path: Path) -> None:
    command, shell, background = _sleeper(tmp_path, trap_term=True)
    ledger = _ledger(db_url, *COMMANDS["deploy"], *command)
    pids = _pids(shell, background)
    ledger.send_signal(signal.SIGTERM)
    ledger.communicate(timeout=BOUND_S)
    assert ledger.returncode == 143
    assert not any(_alive(pid) for pid in pids)
    ((code, output),) = db_rows(db_url, "SELECT exit_code, output FROM deploy_step")
    assert code == 143 and "killed (SIGKILL) after 3 s" in output


@pytest.mark.parametrize("which", ["deploy", "probe"])
def test_a_timeout_stops_the_group_and_closes_the_row(
    db_url: str, tmp_path: Path, which: str
) -> None:
    command, shell, background = _sleeper(tmp_path)
    # 5 s: the shell must write its pid files first, and a loaded machine can take seconds.
    args = [*COMMANDS[which][:-1], "--timeout", "5", "--"]
    ledger = _ledger(db_url, *args, *command)
    pids = _pids(shell, background)
    ledger.communicate(timeout=BOUND_S)
    assert ledger.returncode == 124
    assert not any(_alive(pid) for pid in pids)
    ((code, timed_out, ended),) = db_rows(
        db_url, f"SELECT exit_code, timed_out, ended_at FROM {TABLES[which]}"
    )
    assert code == 124 and timed_out and ended is not None


def test_a_signal_during_the_probe_wait_runs_nothing(db_url: str, tmp_path: Path) -> None:
    made = tmp_path / "ran"
    ledger = _ledger(db_url, "probe", "--run", "r", "--new", "--wait", "300", "--",
                     "touch", str(made))  # fmt: skip
    _until(lambda: db_rows(db_url, "SELECT id FROM probe") != [], "the probe's row")
    time.sleep(0.5)  # into the wait (the row is written just before it)
    ledger.send_signal(signal.SIGTERM)
    _, err = ledger.communicate(timeout=BOUND_S)
    assert ledger.returncode == 143, err
    assert not made.exists()
    ((code, ended, conclusion),) = db_rows(
        db_url, "SELECT exit_code, ended_at, conclusion FROM probe"
    )
    assert code == 143 and ended is not None
    assert conclusion == "stopped by SIGTERM before the command ran"
