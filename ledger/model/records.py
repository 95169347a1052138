"""Plain objects the API hands out. ORM rows never leave the store: these do.

Each has `to_dict()` for `--json`; times are ISO 8601 in UTC.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from ledger.model.summary import IngestSummary
from ledger.model.terms import (
    ComparisonKind,
    EventKind,
    Fate,
    HypothesisStatus,
    LaunchSource,
    Verdict,
    WatchOutcome,
    WatchPhase,
)

R = TypeVar("R", bound="Record")


def from_row(cls: type[R], row: object, **extra: Any) -> R:
    """Build a record from an ORM row, taking each field from the attribute of the same name."""
    values = {
        f.name: extra[f.name] if f.name in extra else getattr(row, f.name)
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]  # R is always a dataclass
        if f.name in extra or hasattr(row, f.name)
    }
    return cls(**values)


def jsonable(value: Any) -> Any:
    """Turn records, datetimes and floats into what `json.dumps(allow_nan=False)` accepts."""
    if isinstance(value, Record):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.StrEnum):  # a fate, a verdict…: printed as the word it stands for
        return str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def _fields(value: Any) -> dict[str, Any]:
    return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}


class Record:
    """A plain record the API returns; `to_dict()` is what `--json` prints.

    `json_names` renames fields whose JSON name cannot be a Python name (`from`).
    """

    json_names: ClassVar[dict[str, str]] = {}

    def to_dict(self) -> dict[str, Any]:
        result = _fields(self)
        if self.json_names:
            result = {self.json_names.get(k, k): v for k, v in result.items()}
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
    status: HypothesisStatus
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
    drift_reason: str | None = None  # why drift is True, False or not checked, in words
    held: bool = False  # not run: its artifact drifted, so its command was never started
    launch_note: str | None = None  # a launch step's flags that could not be read, and why


@dataclasses.dataclass(frozen=True)
class LogFile(Record):
    id: int
    path: str
    size: int
    offset: int
    lines: int
    sha256: str | None
    ingested_at: datetime | None
    unread_lines: int = 0
    launch: int = 1  # the launch of the run it was read into


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
    fate: Fate | None
    conclusion: str | None
    output: str | None
    gpus: list[GpuSample]


@dataclasses.dataclass(frozen=True)
class RunSummary(Record):
    """A line of `ledger runs`."""

    run: str
    fate: Fate
    steps: int
    ranks: int
    last_step: int | None
    hypothesis_id: int | None
    patch_id: int | None
    deploy_steps: int
    drift: bool | None  # now: the latest check of some artifact found a stale file
    log_files: int
    probes: int
    created_at: datetime
    launch: int = 1  # the latest launch (how many there were): `fate`, `steps`… are its


@dataclasses.dataclass(frozen=True)
class Launch(Record):
    """One launch of a run (`RUN@number`): who started it, its fate, and — in `show` —
    its steps and the last verdict on it."""

    number: int
    source: LaunchSource | None  # log, watch, deploy, hook, api, import; None: before launches
    command: str | None
    fate: Fate
    fate_reason: str | None
    exit_code: int | None
    started_at: datetime | None
    ended_at: datetime | None
    steps: int = 0
    last_step: int | None = None
    verdict: Verdict | None = None  # the last watch or compare decision on this launch
    effective: float | None = None  # that decision's effective throughput


@dataclasses.dataclass(frozen=True)
class RunDetail(Record):
    """Everything `ledger show RUN` knows about a run."""

    id: int
    run: str
    fate: Fate
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
    events: list[Event] = dataclasses.field(default_factory=list)  # the notable ones, in order
    event_counts: dict[str, int] = dataclasses.field(default_factory=dict)  # every kind
    # Since launches (schema 0006): `steps`, `ranks`, `last_step` and `fate` are the latest
    # launch's; `launches` lists every launch with its fate, steps and last verdict.
    launch: int = 1
    launches: list[Launch] = dataclasses.field(default_factory=list)
    decision: StoredComparison | None = None  # the last watch or compare verdict on the run
    # The judged effective throughput of the latest launch and its % of the baseline
    # (`Ledger.show(run, figures=True)`, what `ledger show` prints; None otherwise).
    effective: float | None = None
    pct_of_baseline: float | None = None
    drift: bool | None = None  # now, as RunSummary.drift (each deploy step keeps its own)


@dataclasses.dataclass(frozen=True)
class Event(Record):
    """Something a log or a probe's output said that matters (an OOM, a recompile…).

    `line` is a line of the log file (`log_file_id`) or of the probe's output (`probe_id`):
    `where` says which, in words.
    """

    id: int
    kind: EventKind
    text: str
    line: int | None
    step: int | None
    rank: int | None
    log_file_id: int | None
    probe_id: int | None
    where: str


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

    fate: Fate
    reason: str | None
    ended: bool  # True when this rank stopped (sets run.ended_at)


@dataclasses.dataclass(frozen=True)
class DriftCheck(Record):
    """A file about to be shipped against the run's patch; `drift` None: nothing to compare."""

    artifact_path: str
    artifact_sha256: str
    expected_path: str | None
    expected_sha256: str | None
    drift: bool | None
    reason: str


@dataclasses.dataclass(frozen=True)
class StepWrite(Record):
    """What one call of the step writer stored, and what it could not."""

    steps: int = 0  # step rows sent (a row already there is not added twice)
    metrics: int = 0  # metric rows sent
    bad_values: int = 0  # values stored as NULL (or as a float) because the column cannot hold them
    bad_rows: int = 0  # rows not stored: a key that cannot be stored, or a row the database refused
    problems: tuple[str, ...] = ()  # the first few, in words

    def __add__(self, other: StepWrite) -> StepWrite:
        return StepWrite(
            self.steps + other.steps,
            self.metrics + other.metrics,
            self.bad_values + other.bad_values,
            self.bad_rows + other.bad_rows,
            (self.problems + other.problems)[:5],
        )


@dataclasses.dataclass(frozen=True)
class IngestResult(Record):
    """What one ingestion of one file did."""

    run: str
    path: str
    log_file_id: int
    read_bytes: int
    offset: int
    lines: int
    steps: int  # step rows sent (rows already there are not added twice)
    metrics: int
    events: int
    reset: str | None  # "truncated", "replaced" or "reread" when the file was read again from 0
    fate: Fate
    fate_reason: str
    summary: IngestSummary  # a dict: what the log amounts to (ledger.model.summary)
    run_created: bool = False  # this ingest made the run
    unread_lines: int = 0  # lines of the log the reader could not read (summary["unread"])
    config: int = 0  # config items the log showed (run_config, source 'log')
    launch: int = 1  # the launch of the run the file was read into
    launch_fate: Fate | None = None  # that launch's fate (`fate` is the run's: its latest's)


@dataclasses.dataclass(frozen=True)
class ProbeResult(Record):
    """What `ledger probe` saw and concluded."""

    probe_id: int
    run: str
    exit_code: int | None
    timed_out: bool
    fate: Fate
    fate_reason: str
    progress: dict[str, Any] | None
    last_step: int | None
    gpus: list[dict[str, Any]]
    conclusion: str


@dataclasses.dataclass(frozen=True)
class StoredComparison(Record):
    """A row of the `comparison` table, with the runs and the hypothesis by name and id."""

    id: int
    a: str | None  # None: compared with the baseline
    b: str
    hypothesis_id: int | None
    created_at: datetime
    kind: ComparisonKind
    unit: str | None
    steady_from_a: int | None
    steady_from_b: int | None
    median_a: float | None
    median_b: float | None
    effective_a: float | None
    effective_b: float | None
    reference_value: float | None
    delta_pct: float | None
    ci95_pct: tuple[float, float] | None
    p_value: float | None
    threshold_pct: float
    alpha: float
    verdict: Verdict
    decided_at_step: int | None
    summary: str
    launch_a: int | None = None  # the launches compared (schema 0006)
    launch_b: int | None = None


@dataclasses.dataclass(frozen=True)
class MeterSummary(Record):
    """A run as the hook left it: its fate and the hook's own figures."""

    run: str
    fate: Fate
    fate_reason: str | None
    steps: int
    ranks: int
    dropped_steps: int
    hook_cost_us: float | None
    started_at: datetime | None
    ended_at: datetime | None


@dataclasses.dataclass(frozen=True)
class MeteredRun(Record):
    """The run a meter writes into, as it found it."""

    id: int
    run: str
    fate: Fate  # after the start: running, or the failure a peer rank already recorded
    earlier_steps: bool  # True when an earlier launch under this name left steps behind


@dataclasses.dataclass(frozen=True)
class SchemaStatus(Record):
    db: str
    revision: str | None
    head: str
    up_to_date: bool
    # current, older (run `ledger db upgrade`), newer (written by a newer ledger), empty,
    # or foreign (tables that are not a ledger's)
    state: str = "current"


@dataclasses.dataclass(frozen=True)
class SchemaUpgrade(Record):
    """What `ledger db upgrade` did: from one revision (None: an empty database) to another."""

    json_names: ClassVar[dict[str, str]] = {"from_revision": "from", "to_revision": "to"}

    db: str
    from_revision: str | None
    to_revision: str | None


@dataclasses.dataclass(frozen=True)
class InitResult(Record):
    db: str
    created: bool
    investigation: Investigation


@dataclasses.dataclass(frozen=True)
class ReportWritten(Record):
    """A report written to disk."""

    out: str
    format: str  # html, png or pdf
    attempts: int


@dataclasses.dataclass(frozen=True)
class WatchResult(Record):
    """How `ledger watch` ended: what `--json` prints and `--notify` receives."""

    run: str
    outcome: WatchOutcome  # regression, same, improvement, failed, stalled, undecided
    fate: Fate
    steps: int
    steady_steps: int
    effective: float | None
    median: float | None
    ci: tuple[float, float] | None  # the always-valid interval of `effective`
    reference: dict[str, Any]  # {"kind": "baseline"|"run", "value", "run"}
    pct_of_reference: float | None
    decided_at_step: int | None
    elapsed_s: float
    reason: str
    steady_from_step: int | None = None  # where the steady window began
    launch: int | None = None  # the launch judged (RUN@launch)
    source: str = "log"  # log, command (a trainer or a viewer), rows
    role: str | None = None  # trainer or viewer, for a command
    exit_code: int | None = None  # how the command ended, when it did
    left_running: bool = False  # a trainer watch launched, still running as watch ended
    stopped: bool = False  # watch stopped the command (a viewer, or --stop-on)
    exit_status: int | None = None  # what `ledger watch` exits with
    pid: int | None = None  # the command's process id (its process group's)


@dataclasses.dataclass(frozen=True)
class WatchUpdate(Record):
    """Where a watched run stands at one look: its phase, and what the numbers say so far.

    `note` is a line worth saying once (the run was made, the log was replaced); `result`
    is set on the last update only.
    """

    run: str
    phase: WatchPhase  # waiting, loading, warmup, steady, or done
    elapsed_s: float
    steps: int
    last_step: int | None
    loading: dict[str, Any] | None  # the last bar: desc, n, total, rate, unit, eta_s
    monitor: Any  # ledger.model.analysis.MonitorState, once steps have come
    note: str | None = None
    result: WatchResult | None = None
    # The decision, said at once, while watch stays with a trainer until its own end (the
    # last update's `result` then tells how it ended).
    decision: WatchResult | None = None
