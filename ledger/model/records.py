"""Plain objects the API hands out. ORM rows never leave the store: these do.

Each has `to_dict()` for `--json`; times are ISO 8601 in UTC.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime
from typing import Any, TypeVar

T = TypeVar("T")


def from_row(cls: type[T], row: object, **extra: Any) -> T:
    """Build a record from an ORM row, taking each field from the attribute of the same name."""
    values = {
        f.name: extra[f.name] if f.name in extra else getattr(row, f.name)
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        if f.name in extra or hasattr(row, f.name)
    }
    return cls(**values)


def jsonable(value: Any) -> Any:
    """Turn records, datetimes and floats into what `json.dumps(allow_nan=False)` accepts."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


class Record:
    def to_dict(self) -> dict[str, Any]:
        result = jsonable(self)
        assert isinstance(result, dict)
        return result


@dataclasses.dataclass(frozen=True)
class Investigation(Record):
    id: int
    name: str
    baseline_value: float | None
    baseline_unit: str | None
    created_at: datetime


@dataclasses.dataclass(frozen=True)
class Hypothesis(Record):
    id: int
    text: str
    status: str
    parent_id: int | None
    note: str | None
    created_at: datetime
    resolved_at: datetime | None


@dataclasses.dataclass(frozen=True)
class PatchFile(Record):
    path: str
    sha256: str


@dataclasses.dataclass(frozen=True)
class Patch(Record):
    id: int
    hypothesis_id: int
    summary: str
    diff: str | None
    git_commit: str | None
    created_at: datetime
    files: list[PatchFile]


@dataclasses.dataclass(frozen=True)
class FixRecord(Record):
    """What `record_fix` wrote: the hypothesis, the patch, and the run that will test it."""

    hypothesis_id: int
    patch_id: int
    run: str | None
    files: list[PatchFile]
    hypothesis_created: bool


@dataclasses.dataclass(frozen=True)
class DeployStep(Record):
    id: int
    run: str
    name: str
    command: str
    started_at: datetime
    ended_at: datetime | None
    exit_code: int | None
    timed_out: bool
    recorded_only: bool
    output: str | None
    output_bytes: int | None
    patch_id: int | None
    artifact_path: str | None
    artifact_sha256: str | None
    expected_sha256: str | None
    drift: bool | None


@dataclasses.dataclass(frozen=True)
class LogFile(Record):
    id: int
    path: str
    size: int
    offset: int
    lines: int
    sha256: str | None
    ingested_at: datetime | None


@dataclasses.dataclass(frozen=True)
class GpuSample(Record):
    gpu_index: int
    name: str | None
    memory_used_mib: float | None
    memory_total_mib: float | None
    utilization_pct: float | None


@dataclasses.dataclass(frozen=True)
class Probe(Record):
    id: int
    command: str
    started_at: datetime
    ended_at: datetime | None
    exit_code: int | None
    timed_out: bool
    fate: str | None
    conclusion: str | None
    output: str | None
    gpus: list[GpuSample]


@dataclasses.dataclass(frozen=True)
class RunSummary(Record):
    """A line of `ledger runs`."""

    run: str
    fate: str
    steps: int
    ranks: int
    last_step: int | None
    hypothesis_id: int | None
    patch_id: int | None
    deploy_steps: int
    drift: bool | None  # True when any deploy step of the run shipped a stale file
    log_files: int
    probes: int
    created_at: datetime


@dataclasses.dataclass(frozen=True)
class RunDetail(Record):
    """Everything `ledger show RUN` knows about a run."""

    id: int
    run: str
    fate: str
    fate_reason: str | None
    command: str | None
    host: str | None
    throughput_unit: str | None
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    steps: int
    ranks: int
    last_step: int | None
    hypothesis: Hypothesis | None
    patch: Patch | None
    deploy_steps: list[DeployStep]
    log_files: list[LogFile]
    probes: list[Probe]


@dataclasses.dataclass(frozen=True)
class TimelineEntry(Record):
    """One row of the investigation in time order."""

    when: datetime
    kind: str
    id: int
    run: str | None
    summary: str


@dataclasses.dataclass(frozen=True)
class FateChange(Record):
    """A rank's word on how the run stands: applied after the rows written with it."""

    fate: str
    reason: str | None
    ended: bool  # True when this rank stopped (sets run.ended_at)
