"""How a command ends (ledger.shutdown): at once, with what it printed flushed, atexit's
handlers run and the status SystemExit would give; the usual way where Python would wait
for a thread or a tracer wants its exit. Each case is a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import two_runs

# An object whose finalizer says so: Python's teardown runs it, os._exit does not.
SCRIPT = """
import atexit, os, sys, threading, time
from ledger.shutdown import end

class Torn:
    def __del__(self):  # os.write: sys.stderr may be gone this late in a teardown
        os.write(2, b"torn down\\n")

kept = Torn()
atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
sys.stdout.write("printed, no newline")  # still in the buffer: end flushes it
if "thread" in sys.argv:
    def late():
        time.sleep(0.3)
        sys.stderr.write("thread finished\\n")
    threading.Thread(target=late).start()
if "traced" in sys.argv:
    sys.settrace(lambda *a: None)
code = sys.argv[1]
try:
    end(None if code == "none" else int(code) if code.isdigit() else code)
except SystemExit:  # the usual way out
    sys.stderr.write("usual exit\\n")
    raise
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(("code", "status"), [("none", 0), ("0", 0), ("3", 3), ("130", 130)])
def test_ends_at_once_with_the_status_and_what_was_printed(code: str, status: int) -> None:
    done = run(code)
    assert done.returncode == status
    assert done.stdout == "printed, no newline"
    assert "atexit ran" in done.stderr
    assert "torn down" not in done.stderr  # no interpreter teardown
    assert "usual exit" not in done.stderr


def test_a_message_is_printed_with_status_1_as_python_does() -> None:
    done = run("no such run")
    assert done.returncode == 1 and done.stderr.startswith("no such run\n")
    assert "torn down" not in done.stderr


def test_a_running_thread_is_waited_for() -> None:
    done = run("4", "thread")
    assert done.returncode == 4 and "usual exit" in done.stderr
    assert "thread finished" in done.stderr and "atexit ran" in done.stderr


def test_a_tracer_gets_the_usual_exit() -> None:
    done = run("5", "traced")
    assert done.returncode == 5 and "usual exit" in done.stderr


def test_a_reader_gone_before_the_flush_is_status_120() -> None:
    code = (
        "import sys, time\n"
        "from ledger.shutdown import end\n"
        "sys.stdout = open(1, 'w', buffering=8192, closefd=False)\n"  # even unbuffered
        "time.sleep(0.5)\n"  # the reader closes its end meanwhile
        "sys.stdout.write('x' * 10)\n"
        "end(0)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert child.stdout is not None
    child.stdout.close()
    assert child.wait(timeout=60) == 120


def test_a_command_leaves_its_ledger_closed(tmp_path: Path) -> None:
    """The command closes its ledger before it ends: SQLite's write-ahead log is folded
    back and removed, as after a normal exit, and what it wrote is there."""
    db = two_runs(tmp_path / "ledger.db")
    # commands that write (compare keeps its analyses): a read-only one cannot fold the
    # log back, ended at once or not
    for argv in (["compare", "a", "b"], ["baseline", "set", "100"]):
        done = subprocess.run(
            [sys.executable, "-m", "ledger", "--db", str(db), *argv],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip(), argv
        assert not list(tmp_path.glob("*-wal")) and not list(tmp_path.glob("*-shm")), argv
    shown = subprocess.run(
        [sys.executable, "-m", "ledger", "--db", str(db), "baseline", "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert json.loads(shown.stdout)["value"] == 100.0
    failed = subprocess.run(
        [sys.executable, "-m", "ledger", "--db", str(db), "compare", "a", "nosuch"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert failed.returncode != 0 and failed.stderr.startswith("Error:")
