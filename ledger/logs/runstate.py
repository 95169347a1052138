"""The run state: everything the reader knows about a log so far, as one serialisable
dataclass (ledger.logs.state.Serial). `LogReader.save()` is `RunState.to_dict()`; a reader
resumed from it reads on as if it had never stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.logs.lines import LineState
from ledger.logs.nvsmi import Gpu
from ledger.logs.progress import Bar
from ledger.logs.state import STATE_VERSION, Rate, Serial, StepSet
from ledger.model.terms import EventKind, LogEffect, OpenRecord, RunPhase

MAX_BARS = 64
MAX_KEYS = 512
MAX_EFFECTS = 64
MAX_CONFIG = 512
MAX_UNREAD = 20
MAX_RANKS = 4096


@dataclass
class Effect(Serial):
    """An event's meaning for the fate (a LogEffect), when it happened (`mark`: the run's
    activity count then) and how telling its text is (`weight`: the watchdog's own line
    beats `terminate called…`)."""

    effect: LogEffect
    text: str
    line: int
    mark: int
    weight: int = 0
    kind: str = ""  # the event's kind
    rank: int | None = None
    step: int | None = None


@dataclass
class Pending(Serial):
    """A record that spans lines and is still open: a traceback, a warning whose details
    follow (recompile, graph break, a continued NCCL message), a step header with its
    values on the lines below, an argument dump."""

    kind: OpenRecord
    line: int
    rank: int | None
    text: str = ""
    left: int = 8  # lines it may still take
    frame: str = ""  # a traceback's last `File …` line
    step: int | None = None  # the last step when it began
    extra: list[str] = field(default_factory=list)


@dataclass
class EventState(Serial):
    line: int
    kind: EventKind
    text: str
    rank: int | None = None
    step: int | None = None


@dataclass
class ContentState(Serial):
    """What kind of text this is, from counts over its first lines."""

    chars: int = 0
    bad: int = 0  # NUL, other control characters, U+FFFD from invalid UTF-8
    lines: int = 0  # non-blank lines looked at
    loglike: int = 0  # of which look like a program's output
    evidence: bool = False  # a step, bar, event, GPU row or config item was read


@dataclass
class RunFacts(Serial):
    """What decides the fate of the current run in the log; a restart starts anew."""

    start_line: int = 1
    effects: list[Effect] = field(default_factory=list)
    finished: Effect | None = None
    activity: int = 0  # steps and bar advances so far: what "training went on" counts
    phase: RunPhase | None = None
    phase_what: str = ""
    max_step: int | None = None
    trained: bool = False
    since_step: str = ""  # "fatal" or "ended": what came since the last step line


@dataclass
class RunState(Serial):
    version: int = STATE_VERSION
    line: int = 1  # the number of the physical line being read
    lines: LineState = field(default_factory=LineState)
    content: ContentState = field(default_factory=ContentState)
    unit: str | None = None  # the log's throughput unit, fixed by its first step line
    tokens_per_step: float | None = None
    steps: StepSet = field(default_factory=StepSet)
    ranks: list[int] = field(default_factory=list)
    last_by_rank: dict[int, int] = field(default_factory=dict)
    last_step: int | None = None
    max_step: int | None = None
    total: int | None = None
    epoch_base: int | None = None
    epoch: int | None = None  # from `Epoch 3/10` lines
    epochs: int | None = None  # the number of epochs, when the log says it
    epoch_zero: bool = False  # epochs are counted from 0 (an `Epoch 0` was seen)
    epoch_len: int | None = None  # steps in an epoch, as `n/total` positions showed it
    rate: Rate = field(default_factory=Rate)
    bar_rate: Rate = field(default_factory=Rate)
    counts: dict[str, int] = field(default_factory=dict)
    last_event: EventState | None = None
    story: EventState | None = None
    keys: list[str] = field(default_factory=list)
    config: dict[str, str] = field(default_factory=dict)
    gpus: dict[int, Gpu] = field(default_factory=dict)
    csv_fields: list[str] | None = None
    table_columns: list[str] | None = None  # a metrics CSV's header (`step,loss,…`)
    table_header: list[str] | None = None  # an aligned table's column names (tables.py)
    table_spans: list[tuple[int, int]] = field(default_factory=list)
    table_eval: bool = False  # the table is an evaluation's (its rows are not steps)
    csv_next: int = 0
    table_gpu: Gpu | None = None
    tracebacks: dict[int | None, Pending] = field(default_factory=dict)
    follow: Pending | None = None
    block: Pending | None = None
    bar: Bar | None = None
    bars: list[Bar] = field(default_factory=list)
    main_bar: tuple[str, float] | None = None
    pend: str | None = None  # a bar state that redraws may still replace
    pend_key: str = ""
    pend_line: int = 0
    unread: int = 0
    unread_first: list[tuple[int, str]] = field(default_factory=list)
    unread_text: dict[int, str] = field(default_factory=dict)  # the first ones' text, by line
    unread_values: int = 0  # values no column holds (`1e400`): dropped, their line kept
    header_width: int = 0  # the columns of the last table header no stage read
    runs: int = 1
    shapes: dict[str, int] = field(default_factory=dict)
    run: RunFacts = field(default_factory=RunFacts)
