"""What the log reader hands out: the rows and events one `feed()` found, and what a whole
log amounts to. Plain records, so that the store, `watch` and `why` use them without
importing the reader; `to_dict()` gives what `ledger parse --json` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from ledger.model.records import Record
from ledger.model.terms import STEP_COLUMNS, EventKind, Fate

# A step row as ingest stores it: (rank, step, *STEP_COLUMNS). Tuples, not records: a
# 2 GB log holds millions of them.
STEP_ROW_COLUMNS: tuple[str, ...] = ("rank", "step", *STEP_COLUMNS)
StepRow = tuple[
    int, int, float | None, float | None, float | None, int | None, float | None,
    float | None, float | None, float | None,
]  # fmt: skip
# A further scalar of a step: (rank, step, name, value).
MetricRow = tuple[int, int, str, float]

# Steps, ranks and token counts are stored in signed 64-bit integer columns.
INT64_MAX = (1 << 63) - 1


class LogContent(StrEnum):
    """What a file holds, as far as the reader can tell."""

    LOG = "log"  # output of a program: step lines, events, bars, or log-shaped lines
    EMPTY = "empty"  # nothing, or only blank lines
    BINARY = "binary"  # not text (NUL bytes, mostly invalid UTF-8)
    PROSE = "prose"  # text, but no line of it looks like a program's output


@dataclass(frozen=True)
class LogEvent(Record):
    """Something a log said that matters. `kind` is a ledger.model.terms.EventKind value;
    `step` is the last training step seen before it (None before the first)."""

    line: int
    kind: EventKind
    text: str
    rank: int | None = None
    step: int | None = None


@dataclass(frozen=True)
class ConfigItem(Record):
    """One thing the log shows of how the run was started: `torch` = `2.3.1`,
    `world_size` = `8`, `arg.lr` = `0.0003`, `gpu.name` = `NVIDIA H100 80GB HBM3`."""

    key: str
    value: str
    line: int


@dataclass(frozen=True)
class Unread(Record):
    """A line the reader could not read: its number and why (an exception's type,
    `step out of range` for a step no 64-bit column can hold, `metrics in a shape the
    reader does not know`), and the line itself when it looks like metrics. A value that
    could not be read (`value out of range: grad_norm`) is one too: its line was read."""

    line: int
    reason: str
    text: str = ""


@dataclass(frozen=True)
class Restart(Record):
    """Where in a Found a new run begins (a relaunch appended to the log, a crash and then
    a restart): the steps, metric rows and events before it are the ended run's, which
    ended with `fate` for `reason`. The store begins a new launch there."""

    steps: int
    metrics: int
    events: int
    fate: Fate
    reason: str


@dataclass
class Found(Record):
    """What one `feed()` (or `finish()`) found, in the order the log holds it."""

    steps: list[StepRow] = field(default_factory=list)
    metrics: list[MetricRow] = field(default_factory=list)
    events: list[LogEvent] = field(default_factory=list)
    config: list[ConfigItem] = field(default_factory=list)
    unread: list[Unread] = field(default_factory=list)
    has_nan: bool = False  # a step or metric row may hold NaN (SQLite needs to know)
    restarts: list[Restart] = field(default_factory=list)  # in the log's order

    def begins_again(self, fate: Fate, reason: str) -> None:
        """A new run begins after what was found so far; the one before ended so."""
        here = Restart(len(self.steps), len(self.metrics), len(self.events), fate, reason)
        self.restarts.append(here)

    def parts(self) -> list[tuple[Found, Restart | None]]:
        """The runs this holds, in order: each one's rows and events, and the Restart that
        ends it (None for the last, which goes on; the config items and unread lines go
        with it)."""
        if not self.restarts:
            return [(self, None)]
        out: list[tuple[Found, Restart | None]] = []
        s = m = e = 0
        for r in self.restarts:
            part = Found(self.steps[s : r.steps], self.metrics[m : r.metrics],
                         self.events[e : r.events], has_nan=self.has_nan)  # fmt: skip
            out.append((part, r))
            s, m, e = r.steps, r.metrics, r.events
        last = Found(self.steps[s:], self.metrics[m:], self.events[e:], self.config, self.unread,
                     self.has_nan)  # fmt: skip
        out.append((last, None))
        return out

    def extend(self, other: Found) -> None:
        self.restarts.extend(
            Restart(r.steps + len(self.steps), r.metrics + len(self.metrics),
                    r.events + len(self.events), r.fate, r.reason)
            for r in other.restarts
        )  # fmt: skip
        self.steps.extend(other.steps)
        self.metrics.extend(other.metrics)
        self.events.extend(other.events)
        self.config.extend(other.config)
        self.unread.extend(other.unread)
        self.has_nan = self.has_nan or other.has_nan

    def __len__(self) -> int:
        return len(self.steps) + len(self.metrics) + len(self.events) + len(self.config)


@dataclass(frozen=True)
class Throughput(Record):
    unit: str | None = None
    first: float | None = None
    last: float | None = None
    median: float | None = None


@dataclass(frozen=True)
class Progress(Record):
    """The last progress-bar state seen."""

    desc: str
    n: float
    total: float | None
    rate: float | None
    unit: str | None
    postfix: str | None
    line: int
    pct: float | None

    def describe(self) -> str:
        """`Loading weights 81/851 (10%)` for a person."""
        head = self.desc or "progress"
        n = _count(self.n)
        if self.total:
            return f"{head} {n}/{_count(self.total)} ({100 * self.n / self.total:.0f}%)"
        return f"{head} {n}"


def _count(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


@dataclass(frozen=True)
class Position(Record):
    """Where the run was: what two probes compare to tell a stalled run."""

    last_step: int | None = None
    bar_desc: str | None = None
    bar_n: float | None = None


@dataclass(frozen=True)
class GpuStat(Record):
    """One GPU as nvidia-smi showed it last."""

    index: int
    name: str | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    utilization_pct: float | None = None


@dataclass(frozen=True)
class Decision(Record):
    """Which rule of the fate table decided (1-based, as `ledger parse --rules` numbers
    them) and the line that decided it, when a line did (the last decisive line wins)."""

    rule: int
    line: int | None = None
    text: str = ""


@dataclass(frozen=True)
class LogSummary(Record):
    """What a log amounts to: what `ledger parse --json` prints."""

    content: str  # a LogContent value
    fate: Fate
    fate_reason: str
    steps: int  # distinct step numbers
    ranks: int
    last_step: int | None
    total_steps: int | None
    throughput: Throughput
    progress: Progress | None
    events: dict[str, int]
    last_event: LogEvent | None  # the last event of the story (OOM, NCCL, recompile…)
    gpus: list[GpuStat]
    lines: int
    unread_lines: int
    unread: list[Unread]  # the first few (values not read among them)
    position: Position
    runs: int  # runs in the log: 1 + the restarts seen
    config: dict[str, str]
    shapes: dict[str, int]  # step lines read by each line shape
    unread_values: int = 0  # values no column holds (`1e400`), dropped; their lines read
    decided_by: Decision | None = None  # the rule and the line that decided the fate
