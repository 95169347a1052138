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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import UsageError
from ledger.interrupts import pause
from ledger.model.terms import Fate, LaunchSource
from ledger.watch.codes import ERROR, EXIT_CODES, OUTCOMES

if TYPE_CHECKING:
    from ledger.model.analysis import Reference
    from ledger.usecases.ledger import Ledger
    from ledger.watch.watcher import Watcher

__all__ = ["ERROR", "EXIT_CODES", "OUTCOMES", "watch"]


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
    sleep: Callable[[float], None] = pause,
    stop_on: Iterable[str] = (),
) -> Watcher:
    """Follow `run` — its log file, a command's output, or (with neither) its rows in the
    ledger — against the investigation's baseline or the run `against`; iterating the
    watcher yields an update at every look, the last one with the result.

    A command or a log the run's latest launch has not read yet is a new launch of the run
    (RUN@N; the run is made when its first output arrives): only what it produces is
    judged. A command that is a trainer (not a viewer such as `ssh host tail -F log`) is
    never stopped because watch decided, unless its outcome is in `stop_on`."""
    from ledger.watch.sources import CommandSource, LogSource, RowSource, Source, stream_path
    from ledger.watch.watcher import Watcher

    if log is not None and command:
        raise UsageError("follow a log or a command's output, not both")
    stops = frozenset(stop_on)
    unknown = sorted(stops - set(OUTCOMES))
    if unknown:
        raise UsageError(f"--stop-on takes {', '.join(OUTCOMES)}, not {unknown[0]!r}")
    from ledger.store.launches import split_name

    name, number = split_name(run)
    if number is not None and run not in lg.run_names():
        raise UsageError(
            f"watch follows a run by its name ({name}): each source it follows is a launch of "
            f"it of its own; RUN@N names an earlier launch for --against, compare and why"
        )
    if against is not None and against == run:
        raise UsageError(f"a run cannot be watched against itself ({run!r}); name another")
    reference = _reference(lg, against)
    launch, after = _launch(lg, run, log, command)
    source: Source
    if command:
        source = CommandSource(lg, command, run, stream_path(lg, run))
    elif log is not None:
        source = LogSource(lg, log, run)
    else:
        source = RowSource(lg, run)
    return Watcher(
        lg, run, source, reference, against=against, threshold=0.02 if threshold is None else
        threshold, stall_after=stall_after, timeout=timeout, interval=interval, clock=clock,
        sleep=sleep, launch=launch, after=after, stop_on=stops,
    )  # fmt: skip


def _launch(
    lg: Ledger, run: str, log: str | os.PathLike[str] | None, command: Sequence[str] | None
) -> tuple[int | None, int | None]:
    """The launch this watch judges, and the one it must move past.

    A new launch for a command, or for a log the run's latest launch has not read (None:
    the run does not exist yet; its first launch comes with its first output); the latest
    for a log it is reading, or for the run's rows. A log the latest launch read to its end
    (that run finished or failed) is followed for what comes next in it, a relaunch appended
    to it, which ingest reads into a launch of its own: judged is the first launch after
    that one (or that one again, should its run go on in the log; ledger.watch.watcher)."""
    import shlex

    if run not in lg.run_names():
        return None, None
    if command:
        return lg.begin_launch(run, LaunchSource.WATCH, shlex.join(command)).number, None
    if log is not None:
        latest = lg.run_summary(run)
        known = {f.path for f in lg.show(run).log_files if f.launch == latest.launch}
        if str(Path(log).resolve()) not in known:
            return lg.begin_launch(run, LaunchSource.WATCH).number, None
        if Fate(latest.fate).is_final:
            return None, latest.launch
    return None, None


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
