"""The fate of a run, decided by a small rule table (docs/logs.md prints it).

The parser reduces a log to `Facts`; the first rule whose test holds names the fate.
An event that training went on from (two or more further steps or bar advances, or a
final summary after it) no longer counts: a caught OOM is not the run's end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Facts:
    """What the rules look at."""

    effects: list[tuple[str, str, int]] = field(default_factory=list)  # (effect, text, line)
    finished: tuple[str, int] | None = None  # (text, line) of the last sign of a clean end
    loading: str | None = None  # what is loading, when loading is the last thing seen
    training: str | None = None  # the last step or training bar, when training was seen
    stalled: bool = False  # the caller saw the log stop growing (follow, probe)

    def first(self, effect: str) -> tuple[str, str, int] | None:
        for item in reversed(self.effects):
            if item[0] == effect:
                return item
        return None


Rule = tuple[str, str, Callable[[Facts], str | None]]


def _effect(name: str) -> Callable[[Facts], str | None]:
    def test(facts: Facts) -> str | None:
        item = facts.first(name)
        return f"{item[1]} (line {item[2]})" if item else None

    return test


def _finished(facts: Facts) -> str | None:
    return f"{facts.finished[0]} (line {facts.finished[1]})" if facts.finished else None


def _stalled(facts: Facts) -> str | None:
    if not facts.stalled:
        return None
    last = facts.loading or facts.training
    return f"the log stopped growing; last: {last}" if last else "the log stopped growing"


RULES: tuple[Rule, ...] = (
    (
        "oom",
        "a CUDA out-of-memory error, even when the launcher then reports a failed child "
        "or other ranks time out",
        _effect("oom"),
    ),
    (
        "nccl",
        "an NCCL failure: a watchdog timeout, an NCCL error, a DistBackendError "
        "(a SIGABRT or return code -6 after it is a consequence)",
        _effect("nccl"),
    ),
    (
        "crashed",
        "a worker's traceback, an uncaught exception, a crash signal (SIGSEGV, "
        "SIGABRT, core dumped); the launcher's own ChildFailedError does not count",
        _effect("crashed"),
    ),
    (
        "killed",
        "a kill: exitcode -9/-15, `Killed`, SIGKILL/SIGTERM/SIGINT received, KeyboardInterrupt",
        _effect("killed"),
    ),
    (
        "crashed",
        "the launcher reports a positive exit code and nothing says why",
        _effect("exit_error"),
    ),
    (
        "finished",
        "a final summary (train_runtime), `Training completed`, the last step equal "
        "to the announced total, the main bar at its total, exit code 0",
        _finished,
    ),
    ("stalled", "a followed or probed log stopped growing while loading or running", _stalled),
    (
        "loading",
        "a loading bar or `Loading…`/`Materializing` note is the last thing seen, "
        "with no training step after it",
        lambda f: f.loading,
    ),
    ("running", "step lines or a training bar, and no end", lambda f: f.training),
    ("unknown", "nothing above: a log in a shape the reader does not know", lambda f: ""),
)


def decide(facts: Facts) -> tuple[str, str]:
    """(fate, reason) by the first rule that holds."""
    for fate, _doc, test in RULES:
        reason = test(facts)
        if reason is not None:
            return fate, reason
    return "unknown", ""  # pragma: no cover — the last rule always holds


def rule_table() -> str:
    """The rules as a Markdown table, for docs/logs.md and `ledger parse --rules`."""
    rows = ["| # | fate | when |", "|---|---|---|"]
    rows += [f"| {i} | {fate} | {doc} |" for i, (fate, doc, _t) in enumerate(RULES, 1)]
    return "\n".join(rows)
