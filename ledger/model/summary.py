"""What an ingest says a log amounts to, as the JSON-able values `--json` prints.

`IngestResult.summary` is a log summary (ledger.model.logs.LogSummary) turned into plain
values, its step and rank counts those the ledger holds for the launch. It stays a dict at
run time (what `--json` prints, byte for byte); these declarations say what it holds.
"""

# No `from __future__ import annotations`: TypedDict reads `Required` from the evaluated
# annotations (its required keys are lost when they are strings).
from typing import Required, TypedDict


class ThroughputValues(TypedDict):
    unit: str | None
    first: float | None
    last: float | None
    median: float | None


class ProgressValues(TypedDict):
    desc: str
    n: float
    total: float | None
    rate: float | None
    unit: str | None
    postfix: str | None
    line: int
    pct: float | None


class EventValues(TypedDict):
    line: int
    kind: str
    text: str
    rank: int | None
    step: int | None


class GpuValues(TypedDict):
    index: int
    name: str | None
    memory_used_mib: float | None
    memory_total_mib: float | None
    utilization_pct: float | None


class UnreadValues(TypedDict):
    line: int
    reason: str
    text: str


class PositionValues(TypedDict):
    last_step: int | None
    bar_desc: str | None
    bar_n: float | None


class DecisionValues(TypedDict):
    rule: int
    line: int | None
    text: str


class IngestSummary(TypedDict, total=False):
    """A log's: `LogSummary.to_dict()`, in its order, with `steps` and `ranks` counted in
    the ledger. A Hugging Face trainer_state.json's says only `fate`, `steps`, `ranks`."""

    content: str
    fate: Required[str]
    fate_reason: str
    steps: Required[int]
    ranks: Required[int]
    last_step: int | None
    total_steps: int | None
    throughput: ThroughputValues
    progress: ProgressValues | None
    events: dict[str, int]
    last_event: EventValues | None
    gpus: list[GpuValues]
    lines: int
    unread_lines: int
    unread: list[UnreadValues]
    position: PositionValues
    runs: int
    config: dict[str, str]
    shapes: dict[str, int]
    unread_values: int
    decided_by: DecisionValues | None
