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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ledger.analyze.sequential import SequentialMonitor
from ledger.errors import NotFoundError
from ledger.model.analysis import MonitorState, Reference
from ledger.model.records import WatchResult, WatchUpdate
from ledger.model.terms import FAILED_FATES, Fate, Verdict

if TYPE_CHECKING:
    from ledger.analyze import StepColumns
    from ledger.store import Ledger
    from ledger.watch.sources import Look, Source

# How long silence may last before the run counts as stalled, when --stall-after is not
# given: while it waits or loads, shards can take minutes; once steps come, a multiple of
# its own pace, never less than a minute.
LOADING_STALL_S = 900.0
MIN_STALL_S = 60.0
PACE_MULTIPLE = 20.0

FAILED = "failed"
STALLED = "stalled"
UNDECIDED = "undecided"


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
    """One watch of one run (see the module's docstring); `updates()` drives it."""

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
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.lg, self.run, self.source = lg, run, source
        self.against = against
        self.monitor = SequentialMonitor(reference, threshold=threshold)
        self.stall_after, self.timeout, self.interval = stall_after, timeout, interval
        self.clock, self.sleep = clock, sleep
        self.fed_to: int | None = None  # the last step given to the monitor
        self.held: StepColumns | None = None  # the newest step, until it is complete
        self.pace = Pace()

    def updates(self) -> Iterator[WatchUpdate]:
        start = self.clock()
        quiet_since = start
        last: Look | None = None
        try:
            while True:
                look = self.source.look()
                now = self.clock()
                new = self._feed(final=look.ended or (look.fate or "") in FAILED_FATES)
                self.pace.saw(now, new)
                if look.grew or new:
                    quiet_since = now
                state = self.monitor.state() if self.monitor.rows else None
                phase = _phase(look, state)
                outcome, reason = self._outcome(look, state, phase, now - start, now - quiet_since)
                update = WatchUpdate(
                    run=self.run,
                    phase=phase if outcome is None else "done",
                    elapsed_s=now - start,
                    steps=self.monitor.rows,
                    last_step=state.last_step if state else None,
                    loading=_loading(look.progress) if phase == "loading" else None,
                    monitor=state,
                    note=look.note
                    if look.note and (last is None or look.note != last.note)
                    else None,
                )
                last = look
                if outcome is None:
                    yield update
                    self.sleep(self.interval)
                    continue
                if outcome in (FAILED, STALLED, UNDECIDED) and self._feed(final=True):
                    state = self.monitor.state()  # the steps held back count in the result
                    update = dataclasses.replace(
                        update, steps=self.monitor.rows, last_step=state.last_step, monitor=state
                    )
                result = self._finish(outcome, reason, look, state, now - start)
                yield dataclasses.replace(update, result=result)
                return
        finally:
            self.source.close()

    # -- steps ---------------------------------------------------------------------------

    def _feed(self, *, final: bool) -> int:
        """Give the monitor the steps that arrived, each once it is complete: with several
        ranks a step is complete when a later one has come (or the run ended)."""
        try:
            columns = self.lg.step_columns(self.run, after=self.fed_to)
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
        self, look: Look, state: MonitorState | None, phase: str, elapsed: float, quiet: float
    ) -> tuple[str | None, str]:
        if look.fate in FAILED_FATES:
            return FAILED, f"{look.fate}: {look.reason or 'the log says so'}"
        if state is not None and state.decision is not None:
            return state.decision, state.summary
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
            where = f" (last step {state.last_step})" if state and state.last_step else ""
            return STALLED, f"nothing new for {quiet:,.0f} s{where}; the limit is {limit:,.0f} s"
        if self.timeout is not None and elapsed >= self.timeout:
            return UNDECIDED, f"no decision within {self.timeout:,.0f} s"
        return None, ""

    def _stall_limit(self, phase: str, state: MonitorState | None) -> float:
        if self.stall_after is not None:
            return self.stall_after
        if phase in ("waiting", "loading"):
            return LOADING_STALL_S
        paces = [self.pace.seconds_per_step]
        if state is not None:
            paces += [state.seconds_per_step, state.longest_step_s]
        pace = max((p for p in paces if p is not None and math.isfinite(p)), default=None)
        return MIN_STALL_S if pace is None else max(MIN_STALL_S, PACE_MULTIPLE * pace)

    def _finish(
        self, outcome: str, reason: str, look: Look, state: MonitorState | None, elapsed: float
    ) -> WatchResult:
        """Store the decision, and say it as a WatchResult."""
        if outcome == STALLED and look.fate is not None:
            step = state.last_step if state else None
            self.lg.set_fate(self.run, Fate.STALLED, reason)
            self.lg.add_event(self.run, "stall", f"ledger watch: {reason}", step=step)
        elif outcome != FAILED and state is not None and state.steady_steps:
            verdict = outcome if outcome != UNDECIDED else Verdict.UNDECIDED
            self.lg.record_watch(self.run, state, verdict, reason, self.against)
        ref = self.monitor.reference
        fate = look.fate or Fate.UNKNOWN
        if outcome == STALLED:
            fate = Fate.STALLED
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
        )


def _before(columns: StepColumns, step: int) -> StepColumns:
    """The rows of the steps before `step`."""
    keep = columns.step < step
    values: dict[str, Any] = {}
    for field in dataclasses.fields(columns):
        array = getattr(columns, field.name)
        values[field.name] = array[keep] if array is not None else None
    return type(columns)(**values)


def _phase(look: Look, state: MonitorState | None) -> str:
    if state is not None:
        return state.phase
    if look.progress is not None or look.fate == Fate.LOADING:
        return "loading"
    return "waiting"


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
