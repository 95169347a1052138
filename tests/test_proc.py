"""Running deploy and probe commands: exit codes, tails, timeouts, process groups."""

from __future__ import annotations

import os
import sys
import time

from ledger.proc import run_command


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
    result = run_command(["sh", "-c", script], timeout=0.5)
    assert result.timed_out and result.exit_code == 124
    assert time.monotonic() - start < 10
    grandchild = int(marker.read_text())
    time.sleep(0.2)
    assert not _alive(grandchild)


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
