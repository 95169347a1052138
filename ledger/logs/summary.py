"""What a log amounts to, from the reader's state: a pure function (ledger.logs.reader
calls it on a copy that has read the unfinished tail and closed what was open)."""

from __future__ import annotations

from ledger.logs.fate import Facts, decide_rule, facts
from ledger.logs.runstate import EventState, RunState
from ledger.model.logs import (
    Decision,
    GpuStat,
    LogContent,
    LogEvent,
    LogSummary,
    Position,
    Progress,
    Throughput,
    Unread,
)
from ledger.model.terms import EventKind, Fate, LogEffect

_BINARY = 0.1  # a share of NUL, control characters and U+FFFD that is not text
_LOGLIKE = 0.3  # a share of lines shaped like a program's output that is a log


def content(state: RunState) -> LogContent:
    c = state.content
    if c.chars and c.bad > _BINARY * c.chars:
        return LogContent.BINARY
    if not c.lines:
        return LogContent.EMPTY
    if c.evidence or c.loglike >= _LOGLIKE * c.lines:
        return LogContent.LOG
    return LogContent.PROSE


def build(state: RunState, *, stalled: bool = False) -> LogSummary:
    kind = content(state)
    last_event = _event(state.story or state.last_event)
    decided = None
    if kind is LogContent.LOG:
        known = facts(state, stalled=stalled)
        rule, fate, reason = decide_rule(known)
        cause = _cause(known, fate)
        decided = Decision(rule)
        if cause is not None:  # the event that decided the fate is the end of the story
            last_event = cause
            decided = Decision(rule, cause.line, cause.text)
        elif fate == Fate.FINISHED and known.finished is not None:
            decided = Decision(rule, known.finished.line, known.finished.text)
    else:
        fate, reason = Fate.UNKNOWN, f"the file is {_WHAT[kind]}"
    rate = state.rate if state.rate.first is not None else state.bar_rate
    unit = state.unit if state.rate.first is not None else state.bar_rate.unit
    bar = state.bar
    progress = None
    if bar is not None:
        progress = Progress(
            bar.desc, _count(bar.n), _whole(bar.total), bar.rate, bar.unit, bar.postfix or None,
            bar.line, bar.pct,
        )  # fmt: skip
    last_step = state.run.max_step if state.run.max_step is not None else state.max_step
    return LogSummary(
        content=kind.value,
        fate=fate,
        fate_reason=reason,
        steps=state.steps.count,
        ranks=len(state.ranks),
        last_step=last_step,
        total_steps=state.total,
        throughput=Throughput(unit, rate.first, rate.last, rate.sample.median()),
        progress=progress,
        events=dict(sorted(state.counts.items())),
        last_event=last_event,
        gpus=[
            GpuStat(g.index, g.name, g.memory_used_mib, g.memory_total_mib, g.utilization_pct)
            for g in sorted(state.gpus.values(), key=lambda g: g.index)
        ],
        lines=state.line - 1,
        unread_lines=state.unread,
        unread=[
            Unread(line, reason, state.unread_text.get(line, ""))
            for line, reason in state.unread_first
        ],
        position=Position(
            state.last_step, bar.desc if bar else None, _whole(bar.n) if bar else None
        ),
        runs=state.runs,
        config=dict(state.config),
        shapes=dict(state.shapes),
        unread_values=state.unread_values,
        decided_by=decided,
    )


_WHAT = {
    LogContent.EMPTY: "empty",
    LogContent.BINARY: "binary: not text",
    LogContent.PROSE: "prose: text, but no line of it looks like a program's output",
}


_CAUSES = {
    Fate.OOM: (LogEffect.OOM,),
    Fate.NCCL: (LogEffect.NCCL,),
    Fate.CRASHED: (LogEffect.CRASHED, LogEffect.EXIT_ERROR),
    Fate.KILLED: (LogEffect.CANCELLED, LogEffect.KILLED),
}


def _cause(known: Facts, fate: Fate) -> LogEvent | None:
    effects = _CAUSES.get(fate)
    e = known.cause(*effects) if effects else None
    if e is None or not e.kind:
        return None
    return LogEvent(e.line, EventKind(e.kind), e.text, e.rank, e.step)


def _event(e: EventState | None) -> LogEvent | None:
    return LogEvent(e.line, e.kind, e.text, e.rank, e.step) if e is not None else None


def _whole(x: float | None) -> float | None:
    return None if x is None else _count(x)


def _count(x: float) -> float:
    """A count as a person writes it: 81, not 81.0 (an int is a float to the records)."""
    return int(x) if float(x).is_integer() else x
