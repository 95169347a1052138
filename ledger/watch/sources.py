"""Where a watched run's output comes from: a log file, a command's standard output, or
the ledger's own rows (a StepMeter writing from another process or host).

Each source answers `look()`: whether anything new arrived, the run's fate and last bar
as far as it shows, and whether it can say no more. What a log or a command prints is
stored exactly as `ledger ingest` stores it (the command's output goes to a file first),
so a later ingest of the same file adds nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from ledger.errors import CommandError, NotFoundError
from ledger.model.terms import Fate
from ledger.store.ingest import PrefixCache
from ledger.watch.follow import look as ingest_look

if TYPE_CHECKING:
    from ledger.usecases.ledger import Ledger

log = logging.getLogger("ledger.watch")
PUMP_DRAIN_S = 10.0


@dataclass(frozen=True)
class Look:
    """What one look at a source found."""

    grew: bool  # anything new arrived (bytes, even a bar's redraw, or rows)
    fate: Fate | None  # the run's fate as far as it shows; None: no run yet
    reason: str | None
    progress: dict[str, Any] | None  # the last bar: desc, n, total, rate, unit…
    note: str | None = None  # worth saying once: the run was made, the log was replaced
    ended: bool = False  # the source will say no more (the command exited)
    exit_code: int | None = None
    launch: int | None = None  # the launch what it read went into; None: not known yet


class Source(Protocol):
    def look(self) -> Look: ...

    def close(self) -> None: ...


# How long a stopped command has after SIGTERM before SIGKILL.
GRACE_S = 5.0


class LogSource:
    """A log file, followed as it grows (waited for until it appears; a truncated or
    replaced file is noticed and read again)."""

    def __init__(
        self, lg: Ledger, path: str | os.PathLike[str], run: str, *, fresh: bool = False
    ) -> None:
        self.lg, self.path, self.run, self.fresh = lg, Path(path), run, fresh
        self.cache = PrefixCache()
        self._seen: tuple[int, int] | None = None  # (size, mtime) at the last look

    def look(self) -> Look:
        try:
            info = self.path.stat()
            now = (info.st_size, info.st_mtime_ns)
        except FileNotFoundError:
            now = None
        grew = now is not None and now != self._seen
        self._seen = now
        result = ingest_look(self.lg, self.path, self.run, self.cache, fresh=self.fresh)
        if result is None:
            return Look(grew, None, None, None)
        note = None
        if result.run_created:
            note = f"new run {result.run!r}, from {self.path}"
        elif result.reset:
            note = (
                f"{self.path} was {result.reset}: read again from the start, as launch "
                f"{result.launch} of {result.run}"
            )
        bar = result.summary.get("progress")
        progress = dict(bar) if bar is not None else None
        fate = result.launch_fate or result.fate
        return Look(grew, fate, result.fate_reason, progress, note, launch=result.launch)

    def close(self) -> None:
        """A file needs no closing."""


class CommandSource:
    """A command whose standard output is the log (`ssh host tail -n +1 -F train.log`, or
    the training command itself): written to `stream` as it comes, and read from there."""

    def __init__(self, lg: Ledger, argv: Sequence[str], run: str, stream: Path) -> None:
        from ledger.watch.roles import role

        stream.parent.mkdir(parents=True, exist_ok=True)
        self.stream = stream
        self.role = role(argv)
        self.stopped = False  # watch stopped it (a viewer at the end, --stop-on)
        stream.touch()
        # The command writes into a pipe; ledger.watch.pump writes the file: redacted,
        # bounded, sampled under a flood. The pump outlives watch with a trainer left
        # running (its output is still read and kept), and ends with the command's output.
        read_end, write_end = os.pipe()
        try:
            try:
                self.process = subprocess.Popen(
                    list(argv),
                    stdin=subprocess.DEVNULL,
                    stdout=write_end,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # so that closing can stop everything it started
                )
            except OSError as exc:
                raise CommandError(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from exc
            self.pump = subprocess.Popen(
                [sys.executable, "-m", "ledger.watch.pump", str(stream)],
                stdin=read_end,
                # nothing of watch's own: a pump that outlives watch (a trainer left
                # running) must not hold its caller's output open; it says what went
                # wrong in the stream file itself
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C for watch is not one for the pump
            )
        finally:
            os.close(read_end)
            os.close(write_end)
        self.logs = LogSource(lg, stream, run, fresh=True)

    @property
    def is_trainer(self) -> bool:
        return self.role == "trainer"

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def look(self) -> Look:
        code = self.process.poll()  # first: output written before it exited is then read
        if code is not None:
            self._drained()
        seen = self.logs.look()
        if code is None:
            return seen
        return dataclasses.replace(seen, ended=True, exit_code=code)

    def stop(self, grace: float = GRACE_S) -> None:
        """Stop the command and everything it started: its process group gets SIGTERM,
        then SIGKILL after `grace` seconds."""
        if self.process.poll() is not None:
            return
        self.stopped = True
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=grace)
        except ProcessLookupError:
            log.debug("watch: the command had ended before it was stopped")
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                log.debug("watch: the command ended before SIGKILL")
            self.process.wait()

    def close(self) -> None:
        """A viewer is stopped; a trainer still running is left running (watch never ends a
        training command on its own: see ledger.watch.roles), its output still going to
        the stream file through the pump."""
        if not self.is_trainer:
            self.stop()
        if self.process.poll() is not None:
            self._drained()

    def _drained(self) -> None:
        """Wait for the pump to write the last of an ended command's output (bounded: a
        child of the command may hold the pipe open)."""
        try:
            self.pump.wait(timeout=PUMP_DRAIN_S)
        except subprocess.TimeoutExpired:  # a child of the command holds its output open
            log.info(
                "watch: the stream file may lack the command's last output (%s s)", PUMP_DRAIN_S
            )


class RowSource:
    """The run's rows in the ledger, as a StepMeter writes them from another process."""

    def __init__(self, lg: Ledger, run: str) -> None:
        self.lg, self.run = lg, run
        self._seen: tuple[int, int, int | None] | None = None

    def look(self) -> Look:
        try:
            summary = self.lg.run_summary(self.run)
        except NotFoundError:
            return Look(False, None, None, None)
        now = (summary.launch, summary.steps, summary.last_step)
        grew = now != self._seen and summary.steps > 0
        self._seen = now
        reason = None
        if grew or summary.fate not in (Fate.RUNNING, Fate.UNKNOWN, Fate.LOADING):
            reason = self.lg.launch_fate(self.run, summary.launch)[1]
        return Look(grew, summary.fate, reason, None, launch=summary.launch)

    def close(self) -> None:
        """The rows stay in the ledger."""


def stream_path(lg: Ledger, run: str) -> Path:
    """Where a command's output is kept: beside a SQLite ledger, else ./.ledger/streams."""
    folder = lg.location.path.parent if lg.location.path is not None else Path(".ledger")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run)[:100]
    return folder / "streams" / f"{safe}-{stamp}.log"


def save_stream(lg: Ledger, run: str, stream: IO[bytes]) -> Path:
    """Keep a stream (standard input) as a log file beside the ledger, read to its end:
    redacted and bounded as a watched command's output is (ledger.watch.pump)."""
    from ledger.watch.pump import cap_bytes, pump

    path = stream_path(lg, run)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        pump(stream, out, cap_bytes())
    return path
