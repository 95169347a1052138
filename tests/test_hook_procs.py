"""StepMeter across real processes: SIGTERM, kill -9, dying of an exception, and eight
ranks writing into one ledger at once (SQLite and PostgreSQL)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import ledger
from ledger.config import sqlite_path

WORKER = Path(__file__).with_name("hook_worker.py")


def _worker(db: str, run: str, *args: str) -> list[str]:
    return [sys.executable, str(WORKER), "--db", db, "--run", run, *args]


def _summary(db: str, run: str):
    with ledger.open(db) as lg:
        return lg.meter_summary(run), lg.steps_frame(run)


class _StepWatcher:
    """Reads a worker's printed step numbers as they come, with when each arrived."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.arrived: dict[int, float] = {}
        self._proc = proc
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self.arrived[int(line)] = time.monotonic()

    def finish(self, timeout: float = 60) -> int:
        """Wait for the worker to end and its output to be read; returns its exit status."""
        status = self._proc.wait(timeout)
        self._thread.join(timeout)
        assert self._proc.stdout is not None
        self._proc.stdout.close()
        return status

    def wait_for(self, step: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while step not in self.arrived:
            assert self._proc.poll() is None, "the worker ended early"
            assert time.monotonic() < deadline, f"step {step} never came"
            time.sleep(0.01)


def test_sigterm_flushes_marks_killed_and_dies_of_the_signal(db_url: str) -> None:
    proc = subprocess.Popen(
        _worker(db_url, "term", "--torch", "--steps", "100000", "--step-sleep", "0.002", "--print"),
        stdout=subprocess.PIPE,
    )
    watcher = _StepWatcher(proc)
    watcher.wait_for(50)
    proc.send_signal(signal.SIGTERM)
    assert watcher.finish() == -signal.SIGTERM  # no handler before ours: it still dies of it
    printed = max(watcher.arrived)
    summary, steps = _summary(db_url, "term")
    assert (summary.fate, summary.fate_reason) == ("killed", "SIGTERM")
    # Every step it finished is in the ledger, with no hole.
    assert steps["step"].tolist() == list(range(len(steps)))
    assert len(steps) >= printed + 1
    assert steps["loss"].notna().all()


def test_sigterm_chains_to_the_previous_handler(db_url: str, tmp_path: Path) -> None:
    marker = tmp_path / "previous.txt"
    args = ["--steps", "100000", "--step-sleep", "0.002", "--print"]
    proc = subprocess.Popen(
        _worker(db_url, "chain", *args, "--previous-handler", str(marker)), stdout=subprocess.PIPE
    )
    watcher = _StepWatcher(proc)
    watcher.wait_for(20)
    proc.send_signal(signal.SIGTERM)
    assert watcher.finish() == 3  # the previous handler's sys.exit(3)
    assert marker.read_text() == f"previous handler got {int(signal.SIGTERM)}\n"
    summary, steps = _summary(db_url, "chain")
    assert summary.fate == "killed"
    assert len(steps) >= 21


def test_dying_of_an_uncaught_exception_after_the_loop_is_a_crash(db_url: str) -> None:
    result = subprocess.run(
        _worker(db_url, "after", "--steps", "30", "--raise-after", "--no-close"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and "ValueError: failed after the loop" in result.stderr
    summary, steps = _summary(db_url, "after")
    assert (summary.fate, summary.fate_reason) == ("crashed", "ValueError: failed after the loop")
    assert len(steps) == 30


def test_exception_in_a_step_of_a_real_process(db_url: str) -> None:
    result = subprocess.run(
        _worker(db_url, "inside", "--torch", "--steps", "30", "--raise-at", "12"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    summary, steps = _summary(db_url, "inside")
    assert (summary.fate, summary.fate_reason) == ("crashed", "RuntimeError: boom at step 12")
    assert steps["step"].tolist() == list(range(13))


def test_leaving_without_close_is_finished_at_exit(db_url: str) -> None:
    result = subprocess.run(
        _worker(db_url, "atexit", "--steps", "40", "--no-close"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    summary, steps = _summary(db_url, "atexit")
    assert (summary.fate, len(steps)) == ("finished", 40)


def _eight_ranks(db: str, run: str, steps: int = 5000, ranks: int = 8) -> None:
    """Eight processes start at the same instant on a ledger none of them has seen, and
    each writes `steps` steps; returns when all have exited, asserting they all succeeded."""
    start_at = time.time() + 2.0  # after every interpreter has started and imported
    procs = [
        subprocess.Popen(
            _worker(
                db,
                run,
                "--steps",
                str(steps),
                "--rank",
                str(rank),
                "--step-sleep",
                "0.0001",
                "--flush-interval",
                "0.5",
                "--start-at",
                str(start_at),
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(ranks)
    ]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    for rank, (proc, err) in enumerate(zip(procs, errors, strict=True)):
        assert proc.returncode == 0, f"rank {rank}: {err}"
        assert "locked" not in err and "ledger.hook" not in err, f"rank {rank}: {err}"


def _assert_every_row(db: str, run: str, steps: int = 5000, ranks: int = 8) -> None:
    summary, frame = _summary(db, run)
    assert len(frame) == steps * ranks
    counts = frame.groupby("rank")["step"].agg(["count", "min", "max"])
    assert counts.values.tolist() == [[steps, 0, steps - 1]] * ranks
    assert summary.dropped_steps == 0
    assert summary.fate == "finished" and summary.ranks == ranks


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_eight_ranks_into_one_new_sqlite_file(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'shared' / 'ledger.db'}"
    _eight_ranks(db, "ddp")
    _assert_every_row(db, "ddp")
    with sqlite3.connect(sqlite_path(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


@pytest.mark.slow
def test_eight_ranks_into_one_postgresql_ledger(pg_url: str) -> None:
    _eight_ranks(pg_url, "ddp")
    _assert_every_row(pg_url, "ddp")


def test_ranks_racing_to_create_a_ledger_all_open_it(db_url: str, tmp_path: Path) -> None:
    """The first open of an empty ledger creates the schema: eight at once must all work."""
    code = (
        "import sys, time, ledger\n"
        "time.sleep(max(0, float(sys.argv[2]) - time.time()))\n"
        "lg = ledger.open(sys.argv[1])\n"
        "assert lg.run_names() == []\n"
        "print(lg.created)\n"
    )
    if db_url.startswith("sqlite"):  # a file that does not exist yet, in a folder neither
        db_url = f"sqlite:///{tmp_path / 'new' / 'ledger.db'}"
    start_at = str(time.time() + 1.5)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, db_url, start_at],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (_out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    # Exactly one of them made the schema; the others found it made.
    assert sorted(out.strip() for out, _ in outputs) == ["False"] * 7 + ["True"]


def test_no_writer_thread_outlives_a_closed_meter(db_url: str) -> None:
    code = (
        "import sys, threading\n"
        "from ledger.hook import StepMeter\n"
        "m = StepMeter('t', db=sys.argv[1])\n"
        "m.close()\n"
        "print([t.name for t in threading.enumerate() if t.name.startswith('ledger')])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, db_url], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
