"""Running deploy and probe commands: exit codes, tails, timeouts, process groups."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from ledger.errors import StoppedError
from ledger.proc import give_back, run_command, stoppable


def test_exit_code_and_output_interleaved() -> None:
    code = (
        "import sys; print('out'); sys.stdout.flush(); print('err', file=sys.stderr); sys.exit(5)"
    )
    result = run_command([sys.executable, "-c", code])
    assert result.exit_code == 5 and result.output == "out\nerr\n"


def test_echo_sees_everything_tail_keeps_the_end() -> None:
    seen: list[bytes] = []
    code = "import sys; [print(i) for i in range(20000)]"
    result = run_command([sys.executable, "-c", code], echo=seen.append, tail_bytes=100)
    assert b"".join(seen).decode().splitlines()[-1] == "19999"
    assert len(result.output) == 100 and result.output.endswith("19999\n")
    assert result.output_bytes == len(b"".join(seen))


def test_timeout_kills_the_whole_group(tmp_path) -> None:
    marker = tmp_path / "child.pid"
    # The shell starts a grandchild that would outlive a plain kill of the shell.
    script = f"sleep 60 & echo $! > {marker}; wait"
    start = time.monotonic()
    # 5 s: time enough for the shell to start its grandchild on a loaded machine (at 0.5 s
    # the timeout could come first, and no pid was written).
    result = run_command(["sh", "-c", script], timeout=5)
    assert result.timed_out and result.exit_code == 124
    assert time.monotonic() - start < 5 + 20
    grandchild = int(marker.read_text())
    # Gone well before its own 60 s: the group was stopped (a signal takes a moment to land).
    deadline = time.monotonic() + 20
    while _alive(grandchild):
        assert time.monotonic() < deadline, "the grandchild outlived the timeout"
        time.sleep(0.05)


def test_signals_read_as_a_shell_reports_them() -> None:
    result = run_command(
        [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    )
    assert result.exit_code == 137 and not result.timed_out


def test_commands_that_cannot_start(tmp_path) -> None:
    assert run_command(["no-such-command-xyz"]).exit_code == 127
    script = tmp_path / "x.sh"
    script.write_text("echo hi\n")  # not executable
    result = run_command([str(script)])
    assert result.exit_code == 126 and "permission denied" in result.output


def test_invalid_utf8_is_replaced() -> None:
    result = run_command(
        [sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'ok\\xff\\xfe')"]
    )
    assert result.output == "ok\ufffd\ufffd"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill 0; it is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _signal_when(path, signals: list[int]) -> threading.Thread:
    """Send ledger's own process each of `signals` once `path` exists (the command is up)."""

    def send() -> None:
        deadline = time.monotonic() + 60
        while not (path.exists() and path.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.02)
        for sig in signals:
            os.kill(os.getpid(), sig)
            time.sleep(0.2)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def test_a_stopping_signal_stops_the_group_and_is_given_back(tmp_path) -> None:
    marker = tmp_path / "child.pid"
    script = f"sleep 60 & echo $! > {marker}; wait"
    before = signal.getsignal(signal.SIGTERM)
    with stoppable() as stop:
        assert stop is not None
        sender = _signal_when(marker, [signal.SIGTERM])
        result = run_command(["sh", "-c", script], stop=stop)
        with pytest.raises(StoppedError) as raised:
            give_back(stop, result)
    sender.join()
    assert raised.value.exit_code == 143 and "SIGTERM" in str(raised.value)
    assert result.exit_code == 143 and result.stopped_by == signal.SIGTERM
    assert result.interrupted and not result.timed_out
    assert "stopped by SIGTERM; process group stopped with SIGTERM" in result.output
    assert not _alive(int(marker.read_text()))
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is put back


def test_a_second_signal_kills_at_once(tmp_path) -> None:
    marker = tmp_path / "child.pid"
    script = f"trap '' TERM; sleep 60 & echo $! > {marker}; wait"  # deaf to SIGTERM
    with stoppable() as stop:
        assert stop is not None
        sender = _signal_when(marker, [signal.SIGHUP, signal.SIGHUP])
        result = run_command(["sh", "-c", script], stop=stop)
    sender.join()
    assert result.exit_code == 129 and "killed (SIGKILL) at a second signal" in result.output
    assert not _alive(int(marker.read_text()))


def test_a_signal_before_the_command_starts_nothing(tmp_path) -> None:
    made = tmp_path / "made"
    with stoppable() as stop:
        assert stop is not None
        stop.handle(signal.SIGINT, None)  # as if Ctrl-C came while the row was written
        result = run_command(["touch", str(made)], stop=stop)
        with pytest.raises(KeyboardInterrupt):
            give_back(stop, result)
    assert result.exit_code == 130 and not made.exists()
    assert "before the command started" in result.output


def test_outside_the_main_thread_signals_are_left_alone() -> None:
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(stoppable().__enter__()))
    thread.start()
    thread.join()
    assert seen == [None]
