"""The stand-in trainer writes, at a real pace, logs whose every ending the reader names."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.logs import parse_file

FAST = ["--steps", "80", "--step-time", "0.001", "--load-time", "0.05", "--end-at", "60"]


@pytest.mark.parametrize(
    ("ending", "fate", "code"),
    [("finish", "finished", 0), ("oom", "oom", 1), ("nccl", "nccl", 134)],
)
def test_each_ending_is_the_fate_the_reader_names(
    ending: str, fate: str, code: int, tmp_path: Path
) -> None:
    log = tmp_path / "train_x.log"
    done = subprocess.run(
        [sys.executable, "-m", "ledger.demo.trainer", "--log", str(log), "--ending", ending, *FAST],
        timeout=60,
        check=False,
    )
    assert done.returncode == code
    summary = parse_file(log)
    assert summary.fate == fate
    assert summary.last_step == (80 if ending == "finish" else 59)
    assert b"\r" in log.read_bytes()  # the loading bar was redrawn in place


def test_a_stall_keeps_the_process_alive_and_silent(tmp_path: Path) -> None:
    log = tmp_path / "train_x.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.demo.trainer", "--log", str(log), "--ending", "stall", *FAST]
    )
    try:
        # Until the trainer has reached its stall (a condition: a loaded machine can take
        # seconds to start Python), then it stays alive and writes nothing more.
        deadline = time.monotonic() + 120
        while not (log.exists() and parse_file(log).last_step == 59):
            assert proc.poll() is None and time.monotonic() < deadline, "no stall at step 59"
            time.sleep(0.1)
        written = log.read_bytes()
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=2)
        assert log.read_bytes() == written and parse_file(log).last_step == 59
    finally:
        proc.kill()
        proc.wait()
