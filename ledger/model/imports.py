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

# (step, value, wall time in seconds since the epoch or None)
Point = tuple[int, float, float | None]


@dataclasses.dataclass
class TrackedRun:
    """One run as another tracker recorded it."""

    name: str  # the run's name there (a folder, MLflow's run name, W&B's display name)
    source: str  # "tensorboard", "mlflow", "trackio", "wandb"
    origin: str  # what identifies it there: a folder, "store#run id": one ledger log_file row
    scalars: dict[str, list[Point]] = dataclasses.field(default_factory=dict)
    config: dict[str, str] = dataclasses.field(default_factory=dict)
    fate: str | None = None  # a ledger fate when the tracker says how the run ended
    fate_reason: str | None = None
    named: bool = False  # the caller chose the name (not the tracker)
    size: int = 0  # bytes of the files it was read from

    def add(self, name: str, step: int, value: float, wall: float | None = None) -> None:
        self.scalars.setdefault(name, []).append((step, value, wall))


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
    metrics: int  # metric rows added
    config: int  # configuration items told (run_config, source 'import')
    columns: dict[str, str]  # the tracker's names that became step columns
    last_step: int | None
    fate: str
    run_created: bool
    bad_values: int = 0
    problems: tuple[str, ...] = ()


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

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "steps": self.steps, "metrics": self.metrics}
