"""The fate of a run, decided by a small rule table (docs/logs.md prints it).

`facts(state)` reduces what the reader saw of the log's last run to `Facts`; the first rule
whose test holds names the fate. A pure function of the state: deciding never changes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ledger.logs.runstate import Effect, RunState
from ledger.model.terms import FATAL_EFFECTS, Fate, LogEffect, RunPhase

RECOVERY = 2  # advances of training after an event that make it a survived one
_FATAL = FATAL_EFFECTS


@dataclass
class Facts:
    """What the rules look at."""

    effects: list[Effect] = field(default_factory=list)
    finished: Effect | None = None  # the last sign of a clean end
    loading: str | None = None  # what is loading, when loading is the last thing seen
    training: str | None = None  # the last step or training bar, when training was seen
    stalled: bool = False  # the caller saw the log stop growing (follow, probe)

    def cause(self, *effects: LogEffect) -> Effect | None:
        """The event that says it best: the most telling text, the earliest of those."""
        found = [e for e in self.effects if e.effect in effects]
        if not found:
            return None
        best = max(e.weight for e in found)
        return next(e for e in found if e.weight == best)


def facts(state: RunState, *, stalled: bool = False) -> Facts:
    """The facts of the log's last run (an earlier run's traceback is not among them)."""
    run = state.run
    done_at = run.finished.mark if run.finished else -1
    effects = []
    cancelled = next((e for e in run.effects if e.effect == LogEffect.CANCELLED), None)
    for e in run.effects:
        if run.activity - e.mark >= RECOVERY or e.mark < done_at:
            continue  # training went on after it, or it came before a clean end
        if run.finished and e.line < run.finished.line and e.mark <= done_at:
            continue
        if cancelled is not None and e.line > cancelled.line and e.effect != LogEffect.OOM:
            continue  # a traceback after the scheduler's cancellation is its consequence
        effects.append(e)
    finished = None
    if run.finished and run.activity - run.finished.mark < RECOVERY:
        finished = run.finished
    what = run.phase_what
    if not what and state.last_step is not None:
        what = f"step {state.last_step}" + (f"/{state.total}" if state.total else "")
    return Facts(
        effects=effects,
        finished=finished,
        loading=what if run.phase == RunPhase.LOADING else None,
        training=what if run.phase == RunPhase.TRAINING or run.trained else None,
        stalled=stalled,
    )


Rule = tuple[Fate, str, Callable[[Facts], str | None]]


def _cause(*names: LogEffect) -> Callable[[Facts], str | None]:
    def test(f: Facts) -> str | None:
        e = f.cause(*names)
        return f"{e.text} (line {e.line})" if e else None

    return test


def _finished(f: Facts) -> str | None:
    return f"{f.finished.text} (line {f.finished.line})" if f.finished else None


def _stalled(f: Facts) -> str | None:
    if not f.stalled:
        return None
    last = f.loading or f.training
    return f"the log stopped growing; last: {last}" if last else "the log stopped growing"


RULES: tuple[Rule, ...] = (
    (
        Fate.OOM,
        "a CUDA out-of-memory error, even when the launcher then reports a failed child "
        "or other ranks time out",
        _cause(LogEffect.OOM),
    ),
    (
        Fate.NCCL,
        "an NCCL failure: the watchdog's timeout (its operation and timeout are the "
        "reason), an NCCL error, a DistBackendError (a SIGABRT or return code -6 after it "
        "is a consequence)",
        _cause(LogEffect.NCCL),
    ),
    (
        Fate.CRASHED,
        "a worker's traceback, an uncaught exception (`Exception in thread …`, `Uncaught "
        "exception`), a C++ abort (`terminate called after throwing`, `c10::Error`, a CUDA "
        "error such as an illegal memory access or a device-side assert), a crash signal "
        "(SIGSEGV, SIGABRT, core dumped); the launcher's own ChildFailedError does not "
        "count, nor a traceback after a Slurm cancellation",
        _cause(LogEffect.CRASHED),
    ),
    (
        Fate.KILLED,
        "a kill: Slurm's `CANCELLED` (time limit, user, preemption) and `srun: … task 0: "
        "Terminated`, exitcode -9/-15, `Killed`, a launcher's signal line (`received "
        "signal 15`, torchrun's `Received Signals.SIGTERM death signal`, `got signal: 15`, "
        "mpirun's `exited on signal 9`), SIGKILL/SIGTERM/SIGINT received, KeyboardInterrupt",
        _cause(LogEffect.CANCELLED, LogEffect.KILLED),
    ),
    (
        Fate.CRASHED,
        "the launcher reports a positive exit code and nothing says why",
        _cause(LogEffect.EXIT_ERROR),
    ),
    (
        Fate.FINISHED,
        "a final summary (`train_runtime`, a `Total time: 0:12:34` line, `10 epochs "
        "completed in …`, `Training complete in …`), `Training completed`, `End of "
        "training`, early stopping (`Epoch 12: early stopping`, `Signaling Trainer to "
        "stop`), `saving final checkpoint`, a test summary after the last epoch, the last "
        "step equal to the announced total, the main bar at its total, the last epoch's bar "
        "at 100 %, exit code 0",
        _finished,
    ),
    (Fate.STALLED, "a followed or probed log stopped growing while loading or running", _stalled),
    (
        Fate.LOADING,
        "no training step yet, and the run is loading: a loading bar, `Loading…`, library "
        "patches, model summaries, parameter counts, config dumps, datasets being built",
        lambda f: f.loading,
    ),
    (
        Fate.RUNNING,
        "step lines or a training bar, and no end (a log that stops is running, never "
        "finished; noise between step lines ends nothing)",
        lambda f: f.training,
    ),
    (Fate.UNKNOWN, "nothing above: a log in a shape the reader does not know", lambda f: ""),
)


def decide(f: Facts) -> tuple[Fate, str]:
    """(fate, reason) by the first rule that holds."""
    _rule, fate, reason = decide_rule(f)
    return fate, reason


def decide_rule(f: Facts) -> tuple[int, Fate, str]:
    """(rule number from 1, fate, reason) of the first rule that holds."""
    for i, (fate, _doc, test) in enumerate(RULES, 1):
        reason = test(f)
        if reason is not None:
            return i, fate, reason
    return len(RULES), Fate.UNKNOWN, ""  # pragma: no cover — the last rule holds


def rule_table() -> str:
    """The rules as a Markdown table, for docs/logs.md and `ledger parse --rules`."""
    rows = ["| # | fate | when |", "|---|---|---|"]
    rows += [f"| {i} | {fate.value} | {doc} |" for i, (fate, doc, _t) in enumerate(RULES, 1)]
    return "\n".join(rows)


FATAL = _FATAL
