"""Importing other trackers' runs (`ledger import`, `Ledger.import_runs`): the files are
read by ledger.importers with no transaction open, then stored in one
(ledger.store.imports)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import ledger.importers as importers
from ledger.errors import BadContentError, UsageError
from ledger.importers.names import column_map
from ledger.model.imports import ColumnMap, ImportResult, TrackedRun
from ledger.model.terms import FAILED_FATES, IN_PROGRESS_FATES

if TYPE_CHECKING:
    from ledger.store import Store


def import_runs(
    store: Store,
    paths: Sequence[str | os.PathLike[str]],
    run: str | None = None,
    *,
    names: Sequence[str] = (),
) -> ImportResult:
    """Runs other trackers recorded (docs/import.md), new steps only; `names`: SRC=COLUMN."""
    found, cmap = read_all([Path(p) for p in paths], run, names)  # no transaction yet
    return store.store_imports(found, cmap)


def read_all(
    paths: Sequence[str | Path], run: str | None, names: Iterable[str]
) -> tuple[list[TrackedRun], ColumnMap]:
    """Every run the paths hold (read now, before a transaction opens) and the column map;
    `run` renames the one run found (UsageError when there are several)."""
    cmap = column_map(names)
    found: list[TrackedRun] = []
    for path in paths:
        found.extend(importers.read(Path(path)))
    if found and not any(t.scalars or t.config for t in found):
        unread = [line for t in found for line in (*t.problems, *t.skip_lines())]
        if unread:
            raise BadContentError(f"nothing could be read: {unread[0]}")
    if run is not None:
        names = {t.name for t in found}  # a run per rank is one run
        if len(names) != 1:
            raise UsageError(
                f"a run name was given, but the paths hold {len(names)} runs; "
                "import them under their own names, or one path at a time"
            )
        for tracked in found:
            tracked.name = run
            tracked.named = True
    seen: dict[tuple[str, int], int] = {}
    for tracked in found:  # two MLflow runs of one name: the second gets its id after it
        key = (tracked.name, tracked.rank)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            tracked.name = f"{tracked.name}-{tracked.origin.rsplit('#', 1)[-1][-8:]}"
    _one_fate_per_run(found)
    return found, cmap


def _one_fate_per_run(found: list[TrackedRun]) -> None:
    """The runs of one name (a run per rank) end as their worst rank did: a failure over a
    rank still running, that over one whose end is not known, that over finished."""

    def weight(t: TrackedRun) -> int:
        if t.fate in FAILED_FATES:
            return 3
        if t.fate in IN_PROGRESS_FATES:
            return 2
        return 1 if t.fate is None else 0

    groups: dict[str, list[TrackedRun]] = {}
    for tracked in found:
        groups.setdefault(tracked.name, []).append(tracked)
    for members in groups.values():
        if len(members) > 1:
            worst = max(members, key=weight)
            for tracked in members:
                tracked.fate, tracked.fate_reason = worst.fate, worst.fate_reason
