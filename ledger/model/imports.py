"""What `ledger import` reads from another tracker, and what it stored.

An importer (ledger.importers) turns a TensorBoard log, an MLflow store, a trackio project
or a W&B run into `TrackedRun`s: plain scalars by name and step, the run's configuration
and how it ended. The store (ledger.store.imports) maps the names onto step columns and
writes them; `ImportResult.to_dict()` is what `ledger import --json` prints.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ledger.model.records import Record
from ledger.model.terms import Fate

# (rank, step, value, wall time in seconds since the epoch or None)
Point = tuple[int, int, float, float | None]
SKIP_EXAMPLES = 3  # named examples kept per kind of skip


@dataclasses.dataclass
class TrackedRun:
    """One run as another tracker recorded it."""

    name: str  # the run's name there (a folder, MLflow's run name, W&B's display name)
    source: str  # "tensorboard", "mlflow", "trackio", "wandb"
    origin: str  # what identifies it there: a folder, "store#run id": one ledger log_file row
    scalars: dict[str, list[Point]] = dataclasses.field(default_factory=dict)
    config: dict[str, str] = dataclasses.field(default_factory=dict)
    fate: Fate | None = None  # a ledger fate when the tracker says how the run ended
    fate_reason: str | None = None
    named: bool = False  # the caller chose the name (not the tracker)
    size: int = 0  # bytes of the files it was read from
    rank: int = 0  # the rank whose run this is (trackers keep one run per rank, or one)
    group: str | None = None  # the tracker's group of runs (a run per rank: the group's name)
    # what could not be read: kind of skip → (count, a few named examples)
    skipped: dict[str, tuple[int, list[str]]] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)  # whole-file reports

    def add(self, name: str, step: int, value: float, wall: float | None = None) -> None:
        self.scalars.setdefault(name, []).append((self.rank, step, value, wall))

    def skip(self, kind: str, example: str) -> None:
        """Count one value that could not be read, by kind, naming the first few."""
        count, examples = self.skipped.get(kind, (0, []))
        if len(examples) < SKIP_EXAMPLES:
            examples.append(example)
        self.skipped[kind] = (count + 1, examples)

    @property
    def skips(self) -> int:
        return sum(count for count, _ in self.skipped.values())

    def skip_lines(self) -> list[str]:
        """Each kind of skip in words: `3 text values in mlflow.db metrics (loss@4 'abc', …)`."""
        return [
            f"{count:,} {kind} ({'; '.join(examples)}{', …' if count > len(examples) else ''})"
            for kind, (count, examples) in self.skipped.items()
        ]


@dataclasses.dataclass(frozen=True)
class ColumnMap:
    """Which tracker scalar fills which step column (the rest are metrics)."""

    columns: dict[str, str]  # scalar name → step column
    units: dict[str, str]  # scalar name → throughput unit, for names that say one

    def column(self, name: str) -> str | None:
        return self.columns.get(name) or self.columns.get(name.lower())

    def unit(self, name: str) -> str | None:
        return self.units.get(name) or self.units.get(name.lower())


@dataclasses.dataclass(frozen=True)
class ImportedRun(Record):
    """What one import did to one run."""

    run: str
    source: str
    origin: str
    steps: int  # step rows added by this import (rows already there are not added again)
    filled: int  # step rows already there given a value they lacked (logged there since)
    metrics: int  # metric rows added
    config: int  # configuration items told (run_config, source 'import')
    columns: dict[str, str]  # the tracker's names that became step columns
    last_step: int | None
    fate: Fate
    run_created: bool
    bad_values: int = 0
    problems: tuple[str, ...] = ()
    skipped: int = 0  # values the importer could not read (each kind named in problems)
    ranks: tuple[int, ...] = (0,)  # the ranks its rows landed as


@dataclasses.dataclass(frozen=True)
class ImportResult(Record):
    """What `ledger import` did: a run each."""

    runs: list[ImportedRun]

    @property
    def steps(self) -> int:
        return sum(r.steps for r in self.runs)

    @property
    def metrics(self) -> int:
        return sum(r.metrics for r in self.runs)

    @property
    def filled(self) -> int:
        return sum(r.filled for r in self.runs)

    @property
    def skipped(self) -> int:
        return sum(r.skipped for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        totals = {"steps": self.steps, "filled": self.filled, "metrics": self.metrics}
        return {**super().to_dict(), **totals, "skipped": self.skipped}
