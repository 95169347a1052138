"""Following live runs: `ledger ingest --follow` (ledger.watch.follow) and `ledger watch`.

    from ledger.watch import watch
    for update in watch(lg, "eager_dynamiccopy", log="train_eager_dynamiccopy.log"):
        print(update.phase, update.monitor and update.monitor.summary)
    update.result.outcome      # regression, same, improvement, failed, stalled, undecided

See docs/watch.md for what is decided when, and why looking after every step is sound.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from ledger.errors import UsageError
from ledger.model.records import WatchUpdate

if TYPE_CHECKING:
    from ledger.model.analysis import Reference
    from ledger.store import Ledger

# What `ledger watch` exits with, by outcome (2 is a usage error, 130 an interrupt).
EXIT_CODES = {
    "same": 0,
    "improvement": 0,
    "regression": 1,
    "failed": 3,
    "stalled": 4,
    "undecided": 5,
}

__all__ = ["EXIT_CODES", "watch"]


def watch(
    lg: Ledger,
    run: str,
    *,
    log: str | os.PathLike[str] | None = None,
    command: Sequence[str] | None = None,
    against: str | None = None,
    threshold: float | None = None,
    stall_after: float | None = None,
    timeout: float | None = None,
    interval: float = 0.25,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[WatchUpdate]:
    """Follow `run` — its log file, a command's output, or (with neither) its rows in the
    ledger — against the investigation's baseline or the run `against`; yields an update
    at every look, the last one with the result."""
    from ledger.watch.sources import CommandSource, LogSource, RowSource, Source, stream_path
    from ledger.watch.watcher import Watcher

    if log is not None and command:
        raise UsageError("follow a log or a command's output, not both")
    reference = _reference(lg, against)
    source: Source
    if command:
        source = CommandSource(lg, command, run, stream_path(lg, run))
    elif log is not None:
        source = LogSource(lg, log, run)
    else:
        source = RowSource(lg, run)
    watcher = Watcher(
        lg, run, source, reference, against=against, threshold=0.02 if threshold is None else
        threshold, stall_after=stall_after, timeout=timeout, interval=interval, clock=clock,
        sleep=sleep,
    )  # fmt: skip
    return watcher.updates()


def _reference(lg: Ledger, against: str | None) -> Reference:
    """The run `against` (its judged effective throughput and interval), else the baseline."""
    from ledger.analyze.sequential import baseline_reference, reference_from_run

    if against is not None:
        return reference_from_run(lg.analyze(against))
    value = lg.baseline().value
    if value is None:
        raise UsageError(
            "watch needs something to compare with: set a baseline (ledger baseline set 14200)"
            " or name a run with --against"
        )
    return baseline_reference(value)
