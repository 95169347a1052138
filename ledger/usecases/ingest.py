"""Ingest as one call: log files, standard input, or one log followed as it grows.

    outcome = ingest(lg, IngestRequest(("train_a.log", "train_b.log")))
    outcome = ingest(lg, IngestRequest((), run="a", stdin=sys.stdin.buffer))
    outcome = ingest(lg, IngestRequest(("train_a.log",), follow=True), on_look=say)

Standard input is kept as a file beside the ledger first (ledger.watch.sources), then
ingested as one. Following looks at the log every `interval` seconds until a final fate
(ledger.watch.follow); each look is one ingest, one transaction. Several files are read
one by one; one that holds no training output among several is skipped and said, not fatal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Protocol

from ledger.errors import BadContentError, UsageError
from ledger.model import records
from ledger.store.ingest import STALL_AFTER_S

if TYPE_CHECKING:
    from ledger.usecases.ledger import Ledger


class Meter(Protocol):
    """A progress meter of one file: told the bytes read of its size, then closed."""

    def __call__(self, done: int, size: int) -> None: ...

    def close(self) -> None: ...


@dataclasses.dataclass(frozen=True)
class IngestRequest:
    """What to ingest and how. `stdin`: a stream read to its end into `run` (then `logs` is
    empty); `follow`: the one log of `logs`, looked at again until a final fate."""

    logs: tuple[str, ...]
    run: str | None = None
    stdin: IO[bytes] | None = None
    follow: bool = False
    interval: float = 2.0  # seconds between looks when following
    stall_after: float = STALL_AFTER_S
    patterns: tuple[str, ...] = ()
    tokens_per_step: float | None = None


@dataclasses.dataclass(frozen=True)
class IngestOutcome:
    """Each file's result (following: the last look's), and the files skipped."""

    results: list[records.IngestResult]
    skipped: list[BadContentError]


def ingest(
    lg: Ledger,
    request: IngestRequest,
    *,
    meter: Callable[[str], Meter | None] | None = None,
    on_look: Callable[[records.IngestResult], None] | None = None,
    on_skip: Callable[[BadContentError], None] | None = None,
) -> IngestOutcome:
    """Ingest what `request` names. `meter(path)` may give a progress meter for a file;
    `on_look` hears each look that changed something while following; `on_skip` each file
    skipped among several. A single file without training output raises, as does a call
    where every file was skipped."""
    logs = _logs(lg, request)
    if request.follow:
        return IngestOutcome([_follow(lg, logs[0], request, on_look)], [])
    results: list[records.IngestResult] = []
    skipped: list[BadContentError] = []
    for log in logs:
        bar = meter(log) if meter is not None else None
        try:
            result = lg.ingest(
                log, request.run, patterns=request.patterns,
                tokens_per_step=request.tokens_per_step, progress=bar,
                stall_after=request.stall_after,
            )  # fmt: skip
            results.append(result)
        except BadContentError as exc:  # one junk file among many: say so, read the rest
            if len(logs) == 1:
                raise
            if on_skip is not None:
                on_skip(exc)
            skipped.append(exc)
        finally:
            if bar is not None:
                bar.close()
    if not results:
        raise skipped[0]
    return IngestOutcome(results, skipped)


def _logs(lg: Ledger, request: IngestRequest) -> tuple[str, ...]:
    """The files to read: standard input kept as one first."""
    if request.stdin is None:
        if request.follow and len(request.logs) != 1:
            raise UsageError("one log is followed at a time")
        return request.logs
    if request.logs or request.follow or request.run is None:
        raise UsageError("standard input is ingested alone, into a named run")
    from ledger.watch.sources import save_stream

    return (str(save_stream(lg, request.run, request.stdin)),)


def _follow(
    lg: Ledger,
    log: str,
    request: IngestRequest,
    on_look: Callable[[records.IngestResult], None] | None,
) -> records.IngestResult:
    """Follow `log` to a final fate; the last look's result."""
    from ledger.watch.follow import follow

    last = None
    for result in follow(
        lg, log, request.run, interval=request.interval, patterns=request.patterns,
        tokens_per_step=request.tokens_per_step, stall_after=request.stall_after,
    ):  # fmt: skip
        if on_look is not None:
            on_look(result)
        last = result
    if last is None:  # the follower yields at least the look that ended it
        raise AssertionError(f"following {log} ended without a look")
    return last
