"""Run a command the way `deploy` and `probe` need: no shell, output streamed to the
person as it comes, the last bytes kept for the ledger, a timeout that kills the whole
process group, and a result even when the command cannot start or is interrupted.

The command runs in a session of its own (so a timeout can stop all it started), which
also means a terminal's Ctrl-C or a hang-up never reaches it. Inside `stoppable()`,
ledger itself takes SIGTERM, SIGHUP and SIGINT: the command's process group is sent
SIGTERM, then SIGKILL after KILL_GRACE_S (at once on a second signal), the result says
which signal stopped it (exit 128 + its number, as a shell reports it), and the caller
closes its row before `Stop.raise_if_stopped` gives the signal back as an exception.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType

from ledger.collector import settle

OUTPUT_TAIL_BYTES = 64 * 1024
KILL_GRACE_S = 3.0
EXIT_TIMEOUT = 124  # what coreutils' `timeout` reports; a timed-out step is also flagged
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126
EXIT_INTERRUPTED = 130
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


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
    stopped_by: int | None = None  # the signal that stopped ledger (and so the command)


class _Interrupted(BaseException):
    """Raised by Stop's handler inside `Stop.interruptible()` only, to end a wait early."""


class Stop:
    """The first of SIGTERM, SIGHUP or SIGINT that reached ledger while it ran a command."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0
        self._raise = False

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        self.signum = self.signum or signum
        self.count += 1
        if self._raise:
            raise _Interrupted

    def interruptible(self, wait: Callable[[], object]) -> None:
        """Call `wait` (a sleep, process.wait) so that a stopping signal ends it at once;
        elsewhere the signal is only noted, so no row is left half-written."""
        settle()  # a command that waits lives on: the collector as Python has it
        self._raise = True
        try:
            if self.signum is None:  # checked once armed: a signal just before still counts
                wait()
        except _Interrupted:
            pass
        finally:
            self._raise = False

    def sleep(self, seconds: float, sleep: Callable[[float], None] = time.sleep) -> bool:
        """Wait `seconds`; False when a signal cut the wait short (or came before it)."""
        self.interruptible(lambda: sleep(seconds))
        return self.signum is None

    def describe(self) -> str:
        return signal.Signals(self.signum).name if self.signum else "nothing"

    def raise_if_stopped(self) -> None:
        """Give the signal back to the caller: KeyboardInterrupt for SIGINT, StoppedError
        (exit 128 + the signal's number) for SIGTERM and SIGHUP."""
        if self.signum is None:
            return
        if self.signum == signal.SIGINT:
            raise KeyboardInterrupt
        from ledger.errors import StoppedError

        raise StoppedError(self.signum)


@contextmanager
def stoppable() -> Iterator[Stop | None]:
    """Take SIGTERM, SIGHUP and SIGINT for the block (main thread only: elsewhere None, and
    signals keep their handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    stop = Stop()
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        signal.signal(sig, stop.handle)
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


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
    stop: Stop | None = None,
) -> CommandResult:
    """Run `argv` without a shell; never raises for the command's own failure. With `stop`
    (from `stoppable()`), a stopping signal stops the command's whole process group."""
    started = utcnow()
    tail = _Tail(tail_bytes)
    if stop is not None and stop.signum is not None:
        tail.add(f"[ledger: stopped by {stop.describe()} before the command started]\n".encode())
        code = 128 + stop.signum
        return CommandResult(code, False, True, tail.text(), 0, started, utcnow(), stop.signum)
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
    how = ""
    try:
        if stop is not None:
            stop.interruptible(lambda: process.wait(timeout=timeout))
            interrupted = stop.signum is not None
        else:
            process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        how = _kill_group(process, stop)
    except KeyboardInterrupt:
        # Record what happened before giving the interrupt back to the caller.
        interrupted = True
    if interrupted:
        how = _kill_group(process, stop)
    reader.join(timeout=KILL_GRACE_S)
    if process.stdout is not None:
        process.stdout.close()
    code = process.returncode if process.returncode is not None else -signal.SIGKILL
    signum = stop.signum if stop is not None and interrupted else None
    if timed_out:
        code = EXIT_TIMEOUT
        tail.add(f"\n[ledger: timed out after {timeout:g} s; process group {how}]\n".encode())
    elif interrupted and signum is not None:
        code = 128 + signum
        name = signal.Signals(signum).name
        tail.add(f"\n[ledger: stopped by {name}; process group {how}]\n".encode())
    elif interrupted:
        code = EXIT_INTERRUPTED
        tail.add(f"\n[ledger: interrupted; process group {how}]\n".encode())
    elif code < 0:
        code = 128 - code  # a signal, as a shell reports it (SIGKILL → 137)
    ended = utcnow()
    return CommandResult(
        code, timed_out, interrupted, tail.text(), tail.total, started, ended, signum
    )


def _not_started(
    argv: Sequence[str], tail: _Tail, started: datetime, code: int, why: str
) -> CommandResult:
    tail.add(f"ledger: cannot run {argv[0] if argv else '(empty command)'}: {why}\n".encode())
    return CommandResult(code, False, False, tail.text(), 0, started, utcnow())


def _kill_group(process: subprocess.Popen[bytes], stop: Stop | None = None) -> str:
    """SIGTERM to the command's process group, SIGKILL after KILL_GRACE_S (or at a second
    stopping signal); says how it ended. The group is signalled even when its leader has
    already exited, so what it started in the background is stopped too."""
    said = "stopped with SIGTERM"
    seen = stop.count if stop is not None else 0
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if process.poll() is not None and not _group_alive(process.pid):
                return said
            if stop is not None and stop.count > seen and sig == signal.SIGTERM:
                said = "killed (SIGKILL) at a second signal"  # asked twice: no grace
                break
            time.sleep(0.05)
        else:
            said = f"killed (SIGKILL) after {KILL_GRACE_S:g} s"
    process.wait()
    return said


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (zombies waiting to be reaped do not)."""
    try:
        names = os.listdir("/proc")
    except OSError:  # no procfs: ask the kernel, which counts zombies too
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended while we looked
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def give_back(stop: Stop | None, result: CommandResult | None) -> None:
    """Once the row is closed, raise what stopped ledger (nothing when nothing did);
    `result` None: the wait before the command was cut short."""
    if stop is not None and stop.signum is not None:
        stop.raise_if_stopped()
    if result is None or result.interrupted:
        raise KeyboardInterrupt
