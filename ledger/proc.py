"""Run a command the way `deploy` and `probe` need: no shell, output streamed to the
person as it comes, the last bytes kept for the ledger, a timeout that kills the whole
process group, and a result even when the command cannot start or is interrupted.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

OUTPUT_TAIL_BYTES = 64 * 1024
KILL_GRACE_S = 3.0
EXIT_TIMEOUT = 124  # what coreutils' `timeout` reports; a timed-out step is also flagged
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126
EXIT_INTERRUPTED = 130


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class CommandResult:
    exit_code: int
    timed_out: bool
    interrupted: bool
    output: str  # the last OUTPUT_TAIL_BYTES of stdout and stderr together, decoded
    output_bytes: int  # how much the command printed in all
    started_at: datetime
    ended_at: datetime


class _Tail:
    """Keeps the last `limit` bytes of a stream without holding the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: deque[bytes] = deque()
        self.kept = 0
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.kept += len(chunk)
        self.total += len(chunk)
        while self.kept - len(self.chunks[0]) >= self.limit:
            self.kept -= len(self.chunks.popleft())

    def text(self) -> str:
        data = b"".join(self.chunks)[-self.limit :]
        return data.decode("utf-8", errors="replace")


def run_command(
    argv: Sequence[str],
    *,
    timeout: float | None = None,
    echo: Callable[[bytes], None] | None = None,
    tail_bytes: int = OUTPUT_TAIL_BYTES,
) -> CommandResult:
    """Run `argv` without a shell; never raises for the command's own failure."""
    started = utcnow()
    tail = _Tail(tail_bytes)
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so a timeout can kill everything it started
        )
    except FileNotFoundError:
        return _not_started(argv, tail, started, EXIT_NOT_FOUND, "command not found")
    except PermissionError:
        return _not_started(argv, tail, started, EXIT_NOT_EXECUTABLE, "permission denied")
    except OSError as exc:
        return _not_started(argv, tail, started, EXIT_NOT_EXECUTABLE, exc.strerror or str(exc))

    def pump() -> None:
        stream = process.stdout
        assert isinstance(stream, io.BufferedReader)  # stdout=PIPE in binary mode
        while chunk := stream.read1(65536):
            tail.add(chunk)
            if echo is not None:
                echo(chunk)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    timed_out = interrupted = False
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(process)
    except KeyboardInterrupt:
        # Record what happened before giving the interrupt back to the caller.
        interrupted = True
        _kill_group(process)
    reader.join(timeout=KILL_GRACE_S)
    if process.stdout is not None:
        process.stdout.close()
    code = process.returncode if process.returncode is not None else -signal.SIGKILL
    if timed_out:
        code = EXIT_TIMEOUT
        tail.add(f"\n[ledger: timed out after {timeout:g} s; process group killed]\n".encode())
    elif interrupted:
        code = EXIT_INTERRUPTED
        tail.add(b"\n[ledger: interrupted; process group killed]\n")
    elif code < 0:
        code = 128 - code  # a signal, as a shell reports it (SIGKILL → 137)
    return CommandResult(code, timed_out, interrupted, tail.text(), tail.total, started, utcnow())


def _not_started(
    argv: Sequence[str], tail: _Tail, started: datetime, code: int, why: str
) -> CommandResult:
    tail.add(f"ledger: cannot run {argv[0] if argv else '(empty command)'}: {why}\n".encode())
    return CommandResult(code, False, False, tail.text(), 0, started, utcnow())


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return
            time.sleep(0.05)
    process.wait()
