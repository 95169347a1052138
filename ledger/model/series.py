"""What the live views read: a run's steps downsampled for a chart of a given width, the
GPU samples the hook took during a run, and a run's configuration.

Plain records with `to_dict()`, as everything the API hands out (ledger.model.records).
"""

from __future__ import annotations

import dataclasses

from ledger.model.records import Record


@dataclasses.dataclass(frozen=True)
class Envelope(Record):
    """One step column over the buckets of a `Downsampled`: each bucket's lowest and highest
    value over every step and rank in it (None where the bucket held no value)."""

    low: list[float | None]
    high: list[float | None]


@dataclasses.dataclass(frozen=True)
class Downsampled(Record):
    """A run's steps in at most `width` buckets of consecutive steps, one per pixel of a
    chart. Minima and maxima are kept, not means, so a one-step stall still shows.

    `steps[i]` is the first step of bucket i (empty buckets are left out); with no more
    steps than `width` in the range, every step is its own bucket and low == high.
    """

    run: str
    width: int
    first_step: int | None  # of the whole run (a zoomed range lies inside)
    last_step: int | None
    rows: int  # step rows the buckets were made from
    ranks: int
    steps: list[int]
    columns: dict[str, Envelope]
    # The mean throughput of each rank per bucket (only when the run has several ranks).
    per_rank: dict[int, list[float | None]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class GpuReading(Record):
    """One GPU sample the hook took during a run (not a probe's)."""

    gpu_index: int
    rank: int | None
    step: int | None
    sampled_at: str | None  # ISO 8601, UTC
    utilization_pct: float | None
    memory_used_mib: float | None
    memory_total_mib: float | None
    power_w: float | None
    power_limit_w: float | None
    sm_clock_mhz: float | None
    max_sm_clock_mhz: float | None
    temperature_c: float | None
    throttle: str | None  # active throttle reasons by name, comma-separated


@dataclasses.dataclass(frozen=True)
class ConfigItem(Record):
    """One value a run ran with, beside the reference run's value for the same key."""

    source: str  # hook, log, deploy, import, api
    key: str
    value: str | None
    reference: str | None  # the reference run's value (None: it has no such key)
    differs: bool


@dataclasses.dataclass(frozen=True)
class RunConfiguration(Record):
    """What a run ran with and how that differs from a reference run (None: no reference)."""

    run: str
    reference: str | None
    items: list[ConfigItem]
    only_in_reference: list[ConfigItem]
