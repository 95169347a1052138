"""The hook's messages, one type each: what the training thread queues, what its forwarder
pipes to the writer process, and what the writer says back.

Every message is a NamedTuple, so a field has a name (`record.end_event`, never
`item[7]`) and a message costs what a tuple costs. On the pipe (ledger.hook.wire) a
message travels as a plain tuple led by its tag, `(Tag.STEP, step, t0, …)`: marshal takes
only exact built-in types, so enum members travel as their values and come back as members
in `unpack`. Nothing here imports anything but the standard library and the vocabulary.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, NamedTuple, cast

from ledger.model.terms import Fate

REASON_CHARS = 500


class Tag(IntEnum):
    """What a message is, as the first item of its tuple on the pipe."""

    HELLO = 1
    STEP = 2
    LOG = 3
    FATE = 4
    FLUSH = 5
    META = 6
    CONFIG = 7
    CLOSE = 8
    # the writer's replies
    STATS = 20
    FLUSHED = 21
    CLOSED = 22
    SAY = 23


class StepRecord(NamedTuple):
    """One step as the training thread queues it (never leaves the training process).

    t0 and t1 are `time.perf_counter_ns()` at the block's entry and exit; tokens, loss
    and the scalars may be tensors; the events are CUDA events (None when the step was not
    timed); memory is (allocated, max allocated, reserved) MiB when this step sampled it.
    """

    step: Any  # an int, perhaps past 64 bits (the writer counts those)
    t0: int
    t1: int
    tokens: Any
    loss: Any
    scalars: dict[str, Any] | None
    start_event: Any
    end_event: Any
    memory: tuple[float, float, float] | None


class Step(NamedTuple):
    """A step with plain numbers only: what the forwarder pipes to the writer."""

    step: Any
    t0: int
    t1: int
    tokens: float | int | None
    loss: float | int | None
    scalars: dict[str, float | int | None] | None
    gpu_s: float | None
    memory: tuple[float, float, float] | None


class Log(NamedTuple):
    """Scalars for a step outside a `with meter.step()` (meter.log)."""

    step: Any
    values: dict[str, Any]


class SetFate(NamedTuple):
    """How this rank stands: `ended` when it stopped."""

    fate: Fate
    reason: str | None
    ended: bool


class Flush(NamedTuple):
    """Write everything before this now, then answer with Flushed(token)."""

    token: int


class Close(NamedTuple):
    """The last message: write everything and end."""


class Meta(NamedTuple):
    """The forwarder's counters, first in every frame (the writer knows them before it
    writes the steps after them). `now_ns` and `now_wall` are one reading of the trainer's
    perf_counter_ns and time.time(): the writer turns step clocks into wall times with it."""

    dropped: int
    costs: list[int]  # sampled caller-side ns per step since the last frame
    dynamo: dict[str, int] | None
    device: int | None
    failures: int  # values the trainer could not read as numbers, so far
    rank: int | None
    now_ns: int
    now_wall: float


class Config(NamedTuple):
    """What only the training process knows of the run's configuration (its torch)."""

    values: dict[str, str]


class Hello(NamedTuple):
    """The first message: where and what to write."""

    db: str
    run: str
    investigation: str | None
    created_at: float
    argv: list[str]
    flush_interval: float
    close_timeout: float
    max_pending: int
    gpu_every: float
    cwd: str


class Stats(NamedTuple):
    """The writer's counts: rows stored, steps lost, values stored other than as given."""

    rows_written: int
    lost: int
    bad_values: int


class Flushed(NamedTuple):
    rows_written: int
    lost: int
    bad_values: int
    token: int


class Closed(NamedTuple):
    rows_written: int
    lost: int
    bad_values: int


class Say(NamedTuple):
    """A line for the trainer's `ledger.hook` logger."""

    warning: bool  # else INFO
    text: str


ToWriter = Hello | Step | Log | SetFate | Flush | Close | Meta | Config
ToTrainer = Stats | Flushed | Closed | Say
Message = ToWriter | ToTrainer

TAG_OF: dict[type[Any], int] = {
    Hello: Tag.HELLO.value,
    Step: Tag.STEP.value,
    Log: Tag.LOG.value,
    SetFate: Tag.FATE.value,
    Flush: Tag.FLUSH.value,
    Close: Tag.CLOSE.value,
    Meta: Tag.META.value,
    Config: Tag.CONFIG.value,
    Stats: Tag.STATS.value,
    Flushed: Tag.FLUSHED.value,
    Closed: Tag.CLOSED.value,
    Say: Tag.SAY.value,
}
TYPE_OF: dict[int, type[Any]] = {tag: kind for kind, tag in TAG_OF.items()}
STEP_TAG = Tag.STEP.value
_new = tuple.__new__


def pack(message: Message) -> tuple[Any, ...]:
    """The message as marshal takes it: its tag, then its fields as plain values."""
    if type(message) is SetFate:
        return (Tag.FATE.value, str(message.fate.value), message.reason, message.ended)
    return (TAG_OF[type(message)], *message)


def pack_step(step: Step) -> tuple[Any, ...]:
    """pack() for the message sent most, without the lookup."""
    return (STEP_TAG, *step)


def pack_step_of(
    step: Any,
    t0: int,
    t1: int,
    tokens: float | int | None,
    loss: float | int | None,
    scalars: dict[str, float | int | None] | None,
    gpu_s: float | None,
    memory: tuple[float, float, float] | None,
) -> tuple[Any, ...]:
    """pack(Step(...)) without building the Step: the forwarder's path, once per step."""
    return (STEP_TAG, step, t0, t1, tokens, loss, scalars, gpu_s, memory)


def unpack(item: Any) -> Message:
    """A message back from its tuple; ValueError for anything else."""
    if type(item) is not tuple or not item:
        raise ValueError(f"not a hook message: {item!r:.80}")
    kind = TYPE_OF.get(item[0])
    if kind is None:
        raise ValueError(f"unknown hook message tag {item[0]!r}")
    if kind is SetFate:
        _, fate, reason, ended = item
        return SetFate(Fate(fate), reason, bool(ended))
    fields = item[1:]
    if len(fields) != len(kind._fields):
        raise ValueError(f"{kind.__name__} has {len(kind._fields)} fields, got {len(fields)}")
    return cast("Message", _new(kind, fields))


def fate_of(exc_type: type[BaseException], exc: BaseException | None) -> SetFate | None:
    """The fate an exception that ended a step gives the run (None: not a failure)."""
    if issubclass(exc_type, SystemExit) and getattr(exc, "code", None) in (None, 0):
        return None
    if issubclass(exc_type, GeneratorExit):
        return None
    name = exc_type.__name__
    message = str(exc).strip().splitlines()[0] if exc is not None and str(exc).strip() else ""
    reason = f"{name}: {message}" if message else name
    if name == "OutOfMemoryError":
        fate = Fate.OOM
    elif issubclass(exc_type, KeyboardInterrupt):
        fate = Fate.KILLED
    else:
        fate = Fate.CRASHED
    return SetFate(fate, reason[:REASON_CHARS], True)
