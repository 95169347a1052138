"""Following one run until the numbers, or its fate, say how it stands.

Every `interval` seconds the watcher looks at its source (ledger.watch.sources), feeds the
steps that arrived to the sequential monitor (ledger.analyze.sequential), and yields a
WatchUpdate. It stops at the first of:

- failed: the fate is oom, crashed, nccl or killed (the line that shows it is the reason);
- a decision: regression, same or improvement, as soon as the monitor may say it;
- stalled: nothing new (not a byte, not a row) for the stall limit;
- undecided: the run finished, or the command ended, before the numbers could tell, or
  `timeout` passed.

The decision is stored: a comparison row (kind 'watch') for a statistical one, the fate
and a `stall` event for a stall (a failure's fate and event are already stored by the
ingest that read it).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ledger.analyze.sequential import SequentialMonitor
from ledger.errors import NotFoundError
from ledger.interrupts import pause
from ledger.model.analysis import MonitorState, Reference
from ledger.model.records import WatchResult, WatchUpdate
from ledger.model.terms import (
    FAILED_FATES,
    WATCH_DECISIONS,
    EventKind,
    Fate,
    Verdict,
    WatchOutcome,
    WatchPhase,
)
from ledger.watch import endings
from ledger.watch.codes import EXIT_CODES

if TYPE_CHECKING:
    from ledger.analyze import StepColumns
    from ledger.usecases.ledger import Ledger
    from ledger.watch.sources import CommandSource, Look, Source

# How long silence may last before the run counts as stalled, when --stall-after is not
# given: while it waits or loads, shards can take minutes; once steps come, a multiple of
# its own pace, never less than a minute.
LOADING_STALL_S = 900.0
MIN_STALL_S = 60.0
PACE_MULTIPLE = 20.0

FAILED = WatchOutcome.FAILED
STALLED = WatchOutcome.STALLED
UNDECIDED = WatchOutcome.UNDECIDED


@dataclass
class Pace:
    """How fast steps arrive, as seen from here (logs rarely carry their own times)."""

    first: float | None = None
    last: float | None = None
    steps: int = 0

    def saw(self, now: float, new_steps: int) -> None:
        if new_steps <= 0:
            return
        if self.first is None:
            self.first = now
        else:
            self.steps += new_steps
        self.last = now

    @property
    def seconds_per_step(self) -> float | None:
        if self.first is None or self.last is None or self.steps < 5:
            return None
        return (self.last - self.first) / self.steps


class Watcher:
    """One watch of one launch of one run (see the module's docstring); iterate it (or
    `updates()`) to drive it."""

    def __init__(
        self,
        lg: Ledger,
        run: str,
        source: Source,
        reference: Reference,
        *,
        against: str | None = None,
        threshold: float = 0.02,
        stall_after: float | None = None,
        timeout: float | None = None,
        interval: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = pause,
        launch: int | None = None,
        after: int | None = None,
        stop_on: frozenset[str] = frozenset(),
    ) -> None:
        self.lg, self.run, self.source = lg, run, source
        self.against = against
        self.threshold = threshold
        self.monitor = SequentialMonitor(reference, threshold=threshold)
        self.stall_after, self.timeout, self.interval = stall_after, timeout, interval
        self.clock, self.sleep = clock, sleep
        self.fed_to: int | None = None  # the last step given to the monitor
        self.held: StepColumns | None = None  # the newest step, until it is complete
        self.pace = Pace()
        self.launch = launch  # the launch judged; None: the run's latest, once it shows
        # an ended launch whose log is followed for the relaunch appended to it: until the
        # source shows a later launch (or this one going on), nothing is judged
        self.after = after
        self.stop_on = stop_on
        self.said: str | None = None  # what watch left behind, said when it was interrupted
        self._last: Look | None = None
        self._closed = False

    def __iter__(self) -> Iterator[WatchUpdate]:
        return self.updates()

    @property
    def command(self) -> CommandSource | None:
        from ledger.watch.sources import CommandSource

        return self.source if isinstance(self.source, CommandSource) else None

    def updates(self) -> Generator[WatchUpdate, None, None]:
        start = self.clock()
        quiet_since = start
        last: Look | None = None
        decided: WatchResult | None = None
        try:
            while True:
                look = self._current(self.source.look())
                self._last = look
                now = self.clock()
                note = self._follow_launch(look)
                new = self._feed(final=look.ended or (look.fate or "") in FAILED_FATES)
                self.pace.saw(now, new)
                if look.grew or new:
                    quiet_since = now
                state = self.monitor.state() if self.monitor.rows else None
                phase = _phase(look, state)
                said = note or (look.note if look.note and (last is None or look.note != last.note)
                                else None)  # fmt: skip
                update = WatchUpdate(
                    run=self.run,
                    phase=phase if decided is None else WatchPhase.ATTACHED,
                    elapsed_s=now - start,
                    steps=self.monitor.rows,
                    last_step=state.last_step if state else None,
                    loading=_loading(look.progress) if phase == WatchPhase.LOADING else None,
                    monitor=state,
                    note=said,
                )
                last = look
                if decided is not None:  # with a trainer, after the decision: to its end
                    if look.ended or quiet_since + self._stall_limit(phase, state) < now:
                        yield self._done(self._after(update, decided, look, now - quiet_since))
                        return
                    yield update
                    self.sleep(self.interval)
                    continue
                outcome, reason = self._outcome(look, state, phase, now - start, now - quiet_since)
                if outcome is None:
                    yield update
                    self.sleep(self.interval)
                    continue
                if outcome in (FAILED, STALLED, UNDECIDED) and self._feed(final=True):
                    state = self.monitor.state()  # the steps held back count in the result
                    update = dataclasses.replace(
                        update, steps=self.monitor.rows, last_step=state.last_step, monitor=state
                    )
                if outcome == STALLED:  # said after the held-back step counted: its true last
                    reason = _stall_reason(now - quiet_since, self._stall_limit(phase, state),
                                           state)  # fmt: skip
                result = self._finish(outcome, reason, look, state, now - start)
                command = self.command
                if command is not None and command.is_trainer and command.running:
                    if outcome in self.stop_on:
                        yield dataclasses.replace(update, decision=result)
                        yield self._done(self._stopped(update, result))
                        return
                    if outcome in WATCH_DECISIONS or outcome == FAILED:
                        decided = result  # said now; watch stays until the trainer ends
                        yield dataclasses.replace(update, decision=result)
                        self.sleep(self.interval)
                        continue
                    result = self._left(result, look)
                else:
                    result = self._closed_source(result, look)
                yield self._done(dataclasses.replace(update, phase=WatchPhase.DONE, result=result))
                return
        except BaseException:  # Ctrl-C, SIGTERM (raised by the CLI), close(): say what is known
            self._abandoned()
            raise
        finally:
            self.source.close()

    # -- launches --------------------------------------------------------------------------

    def _follow_launch(self, look: Look) -> str | None:
        """Judge only the launch the source shows: when it moves on to a new one (a log
        replaced, a StepMeter started again), the monitor starts again with it."""
        if look.launch is None or look.launch == self.launch:
            return None
        earlier, self.launch = self.launch, look.launch
        if earlier is None:
            return None
        self.monitor = SequentialMonitor(self.monitor.reference, threshold=self.threshold)
        self.fed_to, self.pace = None, Pace()
        return f"{self.run}: launch {self.launch} began; it is judged on its own steps"

    def _current(self, look: Look) -> Look:
        """The look as it concerns the launch to judge. While the watch waits past an ended
        launch (`after`), a look at it is no news of the relaunch: its fate is dropped. The
        relaunch shows as a later launch (a new run begun in the log); should the ended
        launch's own run go on instead (steps again, its fate no longer final), that launch
        is the one judged."""
        if self.after is None or self.launch is not None or look.launch is None:
            return look
        if look.launch > self.after or (
            look.fate is not None and not Fate(look.fate).is_final
        ):  # fmt: skip
            self.after = None
            return look
        return dataclasses.replace(look, fate=None, reason=None, launch=None)

    # -- steps ---------------------------------------------------------------------------

    def _feed(self, *, final: bool) -> int:
        """Give the monitor the steps that arrived, each once it is complete: with several
        ranks a step is complete when a later one has come (or the run ended)."""
        if self.after is not None:
            return 0  # waiting for the relaunch: the ended launch's steps are not its
        try:
            columns = self.lg.step_columns(self.run, after=self.fed_to, launch=self.launch)
        except NotFoundError:
            return 0
        if len(columns) == 0:
            return 0
        steps = np.unique(columns.step)
        ready = columns if final else _before(columns, int(steps[-1]))
        if len(ready) == 0:
            return 0
        self.monitor.extend(ready)
        self.fed_to = int(ready.step.max())
        return len(np.unique(ready.step))

    # -- deciding ----------------------------------------------------------------------------

    def _outcome(
        self,
        look: Look,
        state: MonitorState | None,
        phase: WatchPhase,
        elapsed: float,
        quiet: float,
    ) -> tuple[WatchOutcome | None, str]:
        if look.fate in FAILED_FATES:
            return FAILED, f"{look.fate}: {look.reason or 'the log says so'}"
        if state is not None and state.decision is not None:
            return WatchOutcome(state.decision), state.summary
        if look.fate == Fate.FINISHED:
            return UNDECIDED, "the run finished before the numbers could tell"
        if look.ended:
            return UNDECIDED, (
                f"the command ended (exit {look.exit_code}) before the numbers could tell"
            )
        limit = self._stall_limit(phase, state)
        # what arrived just after the last look is only seen at the next: silence counts
        # from one interval before the last growth seen, never less than the limit
        if quiet >= limit + self.interval:
            return STALLED, _stall_reason(quiet, limit, state)
        if self.timeout is not None and elapsed >= self.timeout:
            return UNDECIDED, f"no decision within {self.timeout:,.0f} s"
        return None, ""

    def _stall_limit(self, phase: WatchPhase, state: MonitorState | None) -> float:
        if self.stall_after is not None:
            return self.stall_after
        if phase in (WatchPhase.WAITING, WatchPhase.LOADING):
            return LOADING_STALL_S
        paces = [self.pace.seconds_per_step]
        if state is not None:
            paces += [state.seconds_per_step, state.longest_step_s]
        pace = max((p for p in paces if p is not None and math.isfinite(p)), default=None)
        return MIN_STALL_S if pace is None else max(MIN_STALL_S, PACE_MULTIPLE * pace)

    def _finish(
        self,
        outcome: WatchOutcome,
        reason: str,
        look: Look,
        state: MonitorState | None,
        elapsed: float,
    ) -> WatchResult:
        """Store the decision, and say it as a WatchResult."""
        if outcome == STALLED and look.fate is not None:
            step = state.last_step if state else None
            self._set_fate(Fate.STALLED, reason)
            self.lg.add_event(self.run, EventKind.STALL, f"ledger watch: {reason}", step=step)
        elif outcome != FAILED and state is not None and state.steady_steps:
            verdict: str = outcome if outcome != UNDECIDED else Verdict.UNDECIDED
            self.lg.record_watch(self.run, state, verdict, reason, self.against, self.launch)
        ref = self.monitor.reference
        fate = look.fate or Fate.UNKNOWN
        if outcome == STALLED:
            fate = Fate.STALLED
        command = self.command
        return WatchResult(
            run=self.run,
            outcome=outcome,
            fate=fate,
            steps=self.monitor.rows,
            steady_steps=state.steady_steps if state else 0,
            effective=state.effective if state else None,
            median=state.median if state else None,
            ci=state.effective_ci if state else None,
            reference={"kind": ref.kind, "value": ref.value, "run": ref.run},
            pct_of_reference=state.pct_of_reference if state else None,
            decided_at_step=state.decided_at_step if state else None,
            elapsed_s=elapsed,
            reason=reason,
            steady_from_step=state.steady_from_step if state else None,
            launch=self.launch,
            source=_source_kind(self.source),
            role=command.role if command is not None else None,
            exit_code=look.exit_code,
            exit_status=EXIT_CODES[outcome],
            pid=command.process.pid if command is not None else None,
        )

    # -- how it ends -----------------------------------------------------------------------

    def _set_fate(self, fate: str, reason: str | None, exit_code: int | None = None) -> None:
        """The watched launch's fate (the run's too, while it is the latest)."""
        self.lg.end_launch(self.run, self._launch(), fate, reason, exit_code=exit_code)

    def _last_step(self) -> int | None:
        """The last step stored, the one held back until complete included: what a fate's
        reason says is the number `show` says."""
        self._feed(final=True)
        return self.monitor.state().last_step if self.monitor.rows else None

    def _launch(self) -> int:
        if self.launch is None:
            self.launch = self.lg.run_summary(self.run).launch
        return self.launch

    def _after(
        self, update: WatchUpdate, decided: WatchResult, look: Look, quiet: float
    ) -> WatchUpdate:
        """The trainer watch stayed with ended (or fell silent): its fate, then the result."""
        if look.ended and look.exit_code is not None:
            fate, reason = endings.from_exit(look.exit_code, look.fate, look.reason)
            self._set_fate(fate, reason, look.exit_code)
            late_failure = fate in FAILED_FATES and decided.outcome != FAILED
            result = dataclasses.replace(
                decided, fate=fate, exit_code=look.exit_code,
                reason=decided.reason if not late_failure else f"{decided.reason}; then {reason}",
                exit_status=EXIT_CODES[FAILED] if late_failure else decided.exit_status,
            )  # fmt: skip
            return dataclasses.replace(update, phase=WatchPhase.DONE, result=result)
        reason = f"the trainer printed nothing for {quiet:,.0f} s after the decision"
        self._set_fate(Fate.STALLED, reason)
        self.lg.add_event(
            self.run, EventKind.STALL, f"ledger watch: {reason}", step=update.last_step
        )
        result = dataclasses.replace(
            decided, fate=Fate.STALLED, reason=f"{decided.reason}; {reason}"
        )
        if STALLED in self.stop_on:
            return self._stopped(update, result)
        return dataclasses.replace(update, phase=WatchPhase.DONE, result=self._left(result, look))

    def _stopped(self, update: WatchUpdate, result: WatchResult) -> WatchUpdate:
        """--stop-on: the trainer is stopped (TERM, then KILL after a grace) because the
        user asked for it at this outcome."""
        command = self.command
        assert command is not None  # only a command is stopped
        command.stop()
        look = command.look()  # what it printed while it stopped
        reason = f"stopped by ledger watch --stop-on {result.outcome} ({result.reason})"
        self._set_fate(Fate.KILLED, reason, look.exit_code)
        done = dataclasses.replace(result, fate=Fate.KILLED, stopped=True, exit_code=look.exit_code)
        return dataclasses.replace(update, phase=WatchPhase.DONE, result=done)

    def _left(self, result: WatchResult, look: Look) -> WatchResult:
        """A trainer watch does not stay with (a timeout, a stall): left running, said so."""
        command = self.command
        assert command is not None
        step = self._last_step()
        if endings.needs_closing(look.fate):
            self._set_fate(Fate.UNKNOWN, _left_reason(command, step, result.outcome))
        return dataclasses.replace(result, left_running=True, fate=Fate(self.lg.launch_fate(
            self.run, self._launch())[0]) if look.fate else result.fate)  # fmt: skip

    def _closed_source(self, result: WatchResult, look: Look) -> WatchResult:
        """A command that ended, or a viewer watch stops now: the fate says what is known."""
        command = self.command
        if command is None:
            return result
        if look.ended and look.exit_code is not None and command.is_trainer:
            fate, reason = endings.from_exit(look.exit_code, look.fate, look.reason)
            self._set_fate(fate, reason, look.exit_code)
            return dataclasses.replace(result, fate=fate)
        if look.fate is not None and endings.needs_closing(look.fate):
            step = self._last_step()
            at = f" at step {step:,}" if step is not None else ""
            why = (
                "its output ended" if look.ended else f"watch stopped following ({result.outcome})"
            )
            reason = f"last seen {look.fate}{at} through {command.role} output; {why}"
            self._set_fate(Fate.UNKNOWN, reason, look.exit_code)
            return dataclasses.replace(result, fate=Fate.UNKNOWN, stopped=not look.ended)
        return dataclasses.replace(result, stopped=not look.ended)

    def _abandoned(self) -> None:
        """Interrupted (Ctrl-C, SIGTERM, SIGHUP) before the end: a viewer is stopped by
        `close`, a trainer left running; the launch's fate says what is known."""
        if self._closed:
            return
        self._closed = True
        look, command = self._last, self.command
        if look is None or look.fate is None or not endings.needs_closing(look.fate):
            return
        if command is None and not isinstance(self.source, _log_source()):
            return  # rows a StepMeter writes: the hook tells its own fate
        trainer = command is not None and command.is_trainer and command.running
        if trainer:
            assert command is not None
            self.said = _left_reason(command, None, "interrupted")
        try:
            step = self._last_step()
            if command is not None and trainer:
                reason = self.said = _left_reason(command, step, "interrupted")
            else:
                at = f" at step {step:,}" if step is not None else ""
                reason = f"ledger watch was interrupted{at}; the run was not followed after"
            self._set_fate(Fate.UNKNOWN, reason)
        except Exception as exc:  # a second Ctrl-C, a lost database: say it, do not hide it
            self.said = f"{self.said or ''} (the fate could not be stored: {exc})".strip()

    def _done(self, update: WatchUpdate) -> WatchUpdate:
        """The last update: after it, closing the watch is no interruption."""
        self._closed = True
        return update


def _stall_reason(quiet: float, limit: float, state: MonitorState | None) -> str:
    where = f" (last step {state.last_step})" if state and state.last_step else ""
    return f"nothing new for {quiet:,.0f} s{where}; the limit is {limit:,.0f} s"


def _left_reason(command: CommandSource, step: int | None, why: str) -> str:
    at = f" at step {step:,}" if step is not None else ""
    return (
        f"ledger watch stopped following{at} ({why}); the trainer (pid {command.process.pid}) "
        f"was left running, its output still going to {command.stream}"
    )


def _source_kind(source: Source) -> str:
    from ledger.watch.sources import CommandSource, LogSource

    if isinstance(source, CommandSource):
        return "command"
    return "log" if isinstance(source, LogSource) else "rows"


def _log_source() -> type:
    from ledger.watch.sources import LogSource

    return LogSource


def _before(columns: StepColumns, step: int) -> StepColumns:
    """The rows of the steps before `step`."""
    keep = columns.step < step
    values: dict[str, Any] = {}
    for field in dataclasses.fields(columns):
        array = getattr(columns, field.name)
        values[field.name] = array[keep] if array is not None else None
    return type(columns)(**values)


def _phase(look: Look, state: MonitorState | None) -> WatchPhase:
    if state is not None:
        return state.phase
    if look.progress is not None or look.fate == Fate.LOADING:
        return WatchPhase.LOADING
    return WatchPhase.WAITING


def _loading(progress: dict[str, Any] | None) -> dict[str, Any] | None:
    """The last bar, with the seconds it still needs at its rate."""
    if not progress:
        return None
    out = dict(progress)
    n, total, rate = progress.get("n"), progress.get("total"), progress.get("rate")
    eta = None
    if isinstance(n, int | float) and isinstance(total, int | float) and rate:
        unit = str(progress.get("unit") or "")
        per_second = 1.0 / rate if unit.startswith("s/") else rate
        eta = max(total - n, 0) / per_second if per_second > 0 else None
    out["eta_s"] = eta
    return out
