"""How a watched launch ended, in the ledger's words: the fate a command's exit status
tells, and what is known when watch stops following a run that has no fate of its own yet
(a run is never left `running` by a watch that went away)."""

from __future__ import annotations

import signal

from ledger.model.terms import FAILED_FATES, FINAL_FATES, IN_PROGRESS_FATES, Fate


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def from_exit(code: int, log_fate: Fate | None, log_reason: str | None) -> tuple[Fate, str]:
    """The fate of a command that exited with `code`, beside what its output showed: a
    failure the output showed (an OOM's line) stands; else the exit status tells."""
    if log_fate is not None and log_fate in FAILED_FATES:
        return log_fate, log_reason or f"{log_fate}; the command exited {code}"
    if code < 0:
        return Fate.KILLED, f"the command was killed by {signal_name(-code)}"
    if code > 128 and code - 128 < 65:
        return Fate.KILLED, f"the command exited {code} ({signal_name(code - 128)})"
    if code == 0:
        if log_fate is not None and log_fate in FINAL_FATES:
            return log_fate, log_reason or "the command exited 0"
        return Fate.FINISHED, "the command exited 0"
    return Fate.CRASHED, f"the command exited {code}"


def needs_closing(fate: Fate | None) -> bool:
    """A fate that says the run is still going (or nothing yet): what watch must not leave
    behind when it stops following."""
    return fate is None or (fate in IN_PROGRESS_FATES and fate != Fate.STALLED)
