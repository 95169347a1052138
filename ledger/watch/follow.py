"""Following a growing log: ingest it again every few seconds, until it ends.

What the ingest use case drives when told to follow (`ledger ingest --follow`), and the
file source under `ledger watch`. Each look is one ingest (one transaction): an interrupt
loses nothing that an earlier look stored.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import InputFileError
from ledger.interrupts import pause
from ledger.model import records
from ledger.model.terms import FINAL_FATES
from ledger.store.cursor import PrefixCache
from ledger.store.ingest import STALL_AFTER_S, NoTrainingOutput

if TYPE_CHECKING:
    from ledger.usecases.ledger import Ledger


def look(
    lg: Ledger,
    path: str | os.PathLike[str],
    run: str | None,
    cache: PrefixCache,
    *,
    patterns: Sequence[str] = (),
    tokens_per_step: float | None = None,
    stall_after: float = STALL_AFTER_S,
    fresh: bool = False,
) -> records.IngestResult | None:
    """One look at the log: what it added, or None while there is no training output to
    read yet (the file does not exist, or holds nothing a trainer printed). `fresh`: the
    output of a command watch runs (never taken for a copy of another run's log)."""
    try:
        return lg.ingest(
            path, run, patterns=patterns, tokens_per_step=tokens_per_step,
            stall_after=stall_after, cache=cache, fresh=fresh,
        )  # fmt: skip
    except (NoTrainingOutput, InputFileError) as exc:
        if isinstance(exc, InputFileError) and Path(path).exists():
            raise  # a folder, a pipe, no permission: waiting will not help
        return None


def follow(
    lg: Ledger,
    path: str | os.PathLike[str],
    run: str | None = None,
    *,
    interval: float = 2.0,
    patterns: Sequence[str] = (),
    tokens_per_step: float | None = None,
    stall_after: float = STALL_AFTER_S,
    sleep: Callable[[float], None] = pause,
) -> Iterator[records.IngestResult]:
    """Ingest a growing log every `interval` seconds, yielding the first look that found
    training output and then each that read something or changed the fate; stops after a
    final fate (finished, oom, crashed, nccl, killed). A new run is made only once the log
    shows training output."""
    cache = PrefixCache()
    last: records.IngestResult | None = None
    while True:
        result = look(
            lg, path, run, cache, patterns=patterns, tokens_per_step=tokens_per_step,
            stall_after=stall_after,
        )  # fmt: skip
        if result is not None:
            if last is None or result.read_bytes or result.reset or result.fate != last.fate:
                yield result
            last = result
            if result.fate in FINAL_FATES:
                return
        sleep(interval)
