"""The recorder: where events, config items and unread lines enter the run state and the
`Found` of the current `feed()`, with the bookkeeping every one of them needs (one event
said three ways is one, the run's fate facts, a restart starting a new run)."""

from __future__ import annotations

import re

from ledger.logs import events as ev
from ledger.logs.fate import FATAL, decide, facts
from ledger.logs.runstate import (
    MAX_CONFIG,
    MAX_EFFECTS,
    MAX_KEYS,
    MAX_UNREAD,
    Effect,
    EventState,
    Pending,
    RunFacts,
    RunState,
)
from ledger.model.logs import ConfigItem, Found, LogEvent, Unread
from ledger.model.terms import EventKind, Fate, LogEffect, RunPhase
from ledger.model.terms import EventKind as K

MAX_UNREAD_TEXT = 300  # what is shown of an unread line

# The events a story is told with: what `last_event` names (warnings and bars are not).
STORY = frozenset({K.OOM, K.NCCL, K.RECOMPILE, K.GRAPH_BREAK, K.TRACEBACK, K.SIGNAL,
                   K.RESTART, K.FINISHED, K.STALL})  # fmt: skip
# After an OOM or an NCCL failure, tracebacks and signals are its consequences.
_CONSEQUENCES = frozenset({K.TRACEBACK, K.SIGNAL, K.EXIT})
_EVENT_RANK = re.compile(r"\[(?:PG[^\]]*)?Rank (\d{1,6})\]")


class Recorder:
    """Writes what a line says into the state and the current Found."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.out = Found()

    # -- events ----------------------------------------------------------------------------

    def event(self, line: int, rank: int | None, found: ev.Found) -> None:
        st = self.state
        if found.key is not None:
            if found.key in st.keys:
                return
            st.keys.append(found.key)
            if len(st.keys) > MAX_KEYS:
                del st.keys[: MAX_KEYS // 4]
        if rank is None and found.kind in (K.NCCL, K.OOM):
            m = _EVENT_RANK.search(found.text)
            if m is not None:
                rank = int(m.group(1))
        if found.follow:
            self.close_follow()
            extra = [found.kind, found.effect or "", str(found.weight)]
            st.follow = Pending(found.follow, line, rank, found.text, 8, step=st.last_step,
                                extra=extra)  # fmt: skip
            if found.effect in FATAL:  # the fate knows it now; the text grows as lines come
                self._effect(found, line, rank)
            return
        self.emit(line, found.kind, found.text, rank, st.last_step)
        effect = found.effect
        if effect in FATAL:
            self._effect(found, line, rank)
        elif effect in (LogEffect.FINISHED, LogEffect.EXIT_OK):
            self.finished(found.text, line, said=True)

    def emit(
        self, line: int, kind: EventKind, text: str, rank: int | None, step: int | None
    ) -> None:
        st = self.state
        text = ev.clip(text, ev.MAX_TEXT)
        st.counts[str(kind)] = st.counts.get(str(kind), 0) + 1
        if kind != K.PROGRESS:
            st.last_event = EventState(line, kind, text, rank, step)
            story = st.story
            if kind in STORY and not (
                kind in _CONSEQUENCES
                and story is not None
                and story.kind in (K.OOM, K.NCCL)
                and story.line >= st.run.start_line
            ):
                st.story = st.last_event
        self.out.events.append(LogEvent(line, kind, text, rank, step))
        st.content.evidence = True

    def _effect(self, found: ev.Found, line: int, rank: int | None) -> None:
        run = self.state.run
        text = ev.clip(found.text, 600)
        effect = found.effect
        assert effect is not None  # called for a fatal effect only
        run.effects.append(
            Effect(
                effect,
                text,
                line,
                run.activity,
                found.weight,
                found.kind,
                rank,
                self.state.last_step,
            )
        )
        if len(run.effects) > MAX_EFFECTS:
            del run.effects[0]
        run.since_step = "fatal"

    def finished(self, text: str, line: int, *, said: bool = False) -> None:
        """A sign of a clean end. `said`: the log says so in words (or the last step is
        the announced total), so that a step counter or bar starting over after it is a
        new run."""
        run = self.state.run
        run.finished = Effect(LogEffect.FINISHED, ev.clip(text, 200), line, run.activity)
        if said:
            run.since_step = "ended"

    def close_follow(self) -> None:
        """Emit the event whose details were awaited (a recompile, a continued NCCL line)."""
        pending, self.state.follow = self.state.follow, None
        if pending is None:
            return
        kind = EventKind(pending.extra[0]) if pending.extra else K.RECOMPILE
        self.emit(pending.line, kind, pending.text, pending.rank, pending.step)
        effect = pending.extra[1] if len(pending.extra) > 1 else ""
        if effect in FATAL:  # its text grew: let the fate's reason say it all
            for e in reversed(self.state.run.effects):
                if e.line == pending.line and e.effect == effect:
                    e.text = ev.clip(pending.text, 600)
                    break

    # -- phases and runs ---------------------------------------------------------------------

    def loading(self, line: int, text: str) -> None:
        """The run is loading (weights, data, patches…), unless it has begun training."""
        run = self.state.run
        if run.trained:
            return
        if run.phase != RunPhase.LOADING:
            run.phase = RunPhase.LOADING
            self.emit(line, K.LOADING, text, None, self.state.last_step)
        run.phase_what = ev.clip(text, 120)

    def start(self, line: int, text: str, *, strong: bool) -> bool:
        """A sign that a run starts here (a launcher banner, an argument dump, a relaunch,
        or, after a failure, weights loading again): a restart when this run had already
        trained or failed. True when it was one."""
        run = self.state.run
        failed = any(e.effect in FATAL for e in run.effects)
        if (strong and run.trained) or failed:
            self.restart(line, text)
            return True
        return False

    def restart(self, line: int, text: str) -> None:
        st = self.state
        self.close_follow()
        fate, reason = decide(facts(st))  # the ended run's fate, as it stood
        if not fate.is_final:  # it printed no end: nothing says how it ended, only that it did
            fate, reason = Fate.UNKNOWN, f"a new run began at line {line} ({reason or 'no end'})"
        self.out.begins_again(fate, reason)
        st.runs += 1
        self.emit(line, K.RESTART, f"a new run begins: {ev.clip(text, 300)}", None, st.last_step)
        st.run = RunFacts(start_line=line)
        st.main_bar = None

    # -- config and unread lines ---------------------------------------------------------------

    def config(self, key: str, value: str, line: int) -> None:
        st = self.state
        value = ev.clip(value, 200)
        if not key or not value or st.config.get(key) == value:
            return
        if key not in st.config and len(st.config) >= MAX_CONFIG:
            return
        st.config[key] = value
        st.content.evidence = True
        self.out.config.append(ConfigItem(key, value, line))

    def unread(self, line: int, reason: str, text: str = "") -> None:
        """A line not read: counted, and the first ones kept with why (and their text,
        when it is a line that looks like metrics, for a person to teach its shape)."""
        st = self.state
        st.unread += 1
        self._keep(line, reason, text)

    def unread_value(self, line: int, reason: str, text: str = "") -> None:
        """A value not read (a number no column holds): the rest of its line is."""
        self.state.unread_values += 1
        self._keep(line, reason, text)

    def _keep(self, line: int, reason: str, text: str) -> None:
        st = self.state
        text = ev.clip(text, MAX_UNREAD_TEXT) if text else ""
        self.out.unread.append(Unread(line, reason, text))
        if len(st.unread_first) < MAX_UNREAD:
            st.unread_first.append((line, reason))
            if text:
                st.unread_text[line] = text
