"""What the store read of a run for `ledger why` and the report, as plain data: its steps,
memory per step, counters, log events, GPU samples and configuration, and what was
recorded between two runs. The findings (ledger.analyze.diagnose) reason over it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ledger.model.terms import EventKind, Fate
from ledger.model.why import Evidence
from ledger.readings.steps import StepColumns


@dataclass(frozen=True)
class EventRow:
    """A log event (log_event row)."""

    id: int
    kind: EventKind
    text: str
    step: int | None
    line: int | None
    rank: int | None = None
    probe: bool = False  # read from a probe's output: `line` counts in that output

    def evidence(self) -> Evidence:
        where = "probe output line" if self.probe else "line"
        at = f" (step {self.step:,})" if self.step is not None else ""
        said = f"{where} {self.line}{at}: " if self.line is not None else f"step {self.step}: "
        text = self.text if len(self.text) <= 300 else self.text[:299] + "…"
        return Evidence("log_event", said + text, id=self.id, line=self.line)


@dataclass(frozen=True)
class GpuRow:
    """A GPU sample (gpu_sample row): a probe's nvidia-smi, or the hook's NVML."""

    id: int
    gpu_index: int
    probe_id: int | None = None
    rank: int | None = None
    step: int | None = None
    utilization_pct: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    throttle: str | None = None


@dataclass(frozen=True)
class ConfigRow:
    """One thing a run ran with (run_config row)."""

    key: str
    value: str | None
    source: str


@dataclass(frozen=True)
class ChangeRow:
    """A patch, a patch's file or a hypothesis recorded between the reference and the run."""

    table: str  # patch | patch_file | hypothesis
    id: int
    text: str


@dataclass(frozen=True)
class Memory:
    """Memory per step (the largest over ranks), MiB; NaN where unknown."""

    step: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray


@dataclass(frozen=True)
class RunEvidence:
    """Everything the store read about one run for `why`."""

    name: str
    id: int
    fate: Fate = Fate.UNKNOWN
    fate_reason: str | None = None
    unit: str | None = None
    columns: StepColumns | None = None
    memory: Memory | None = None
    # cumulative or per-step scalars by name (dynamo_recompiles, data_time…): (steps, values)
    metrics: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    events: tuple[EventRow, ...] = ()
    event_counts: dict[str, int] = field(default_factory=dict)  # every event, by kind
    gpu: tuple[GpuRow, ...] = ()
    config: tuple[ConfigRow, ...] = ()

    def events_of(self, *kinds: str) -> list[EventRow]:
        return [e for e in self.events if e.kind in kinds]

    def count(self, kind: str) -> int:
        return self.event_counts.get(kind, len(self.events_of(kind)))
