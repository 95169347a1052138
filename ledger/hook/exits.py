"""How a meter hears that its process is ending: interpreter exit and SIGTERM.

At exit the meter is closed; if the program is dying of an uncaught exception (the
interpreter sets `sys.last_value` before running atexit), the run's fate is crashed with
that exception's type. On SIGTERM (what torchrun, Slurm and Kubernetes send first) the
meter is closed with fate killed and then the handler that was installed before is
called, or, when there was none, the signal is re-raised so the process still dies of it.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any, Protocol

from ledger.hook.protocol import fate_of
from ledger.model.terms import Fate

log = logging.getLogger("ledger.hook")


class Closable(Protocol):
    """What these hooks need of a meter."""

    @property
    def failed(self) -> bool: ...

    def close(self, fate: Fate | str | None = None, reason: str | None = None) -> None: ...


class ExitHooks:
    """The atexit callback and SIGTERM handler of one meter, and their removal."""

    def __init__(self, meter: Closable, *, sigterm: bool) -> None:
        self._meter = meter
        self._previous: Any = None
        self._sigterm_installed = False
        atexit.register(self._at_exit)
        if sigterm:
            self._install_sigterm()

    def _install_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            log.debug("ledger.hook: not on the main thread; SIGTERM is not handled")
            return
        try:
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        except (ValueError, OSError):  # an embedded interpreter without signals
            return
        self._sigterm_installed = True

    def uninstall(self) -> None:
        atexit.unregister(self._at_exit)
        if not self._sigterm_installed:
            return
        self._sigterm_installed = False
        try:
            # Only put the old handler back if nobody installed theirs on top of ours since;
            # theirs still chains to ours, which then just passes the signal on.
            on_main = threading.current_thread() is threading.main_thread()
            if on_main and signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                signal.signal(signal.SIGTERM, self._previous)
        except (ValueError, OSError) as exc:  # an interpreter shutting down: ours stays
            log.debug("ledger.hook: the SIGTERM handler was left in place (%r)", exc)

    def _at_exit(self) -> None:
        dying_of = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        if dying_of is not None and not self._meter.failed:
            fate = fate_of(type(dying_of), dying_of)
            if fate is not None:
                self._meter.close(fate.fate, fate.reason)
                return
        self._meter.close()

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous
        try:
            self._meter.close(Fate.KILLED, "SIGTERM")
        finally:
            _chain(previous, signum, frame)


def _chain(previous: Any, signum: int, frame: FrameType | None) -> None:
    """Do what would have happened without us."""
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_IGN:
        return
    else:  # SIG_DFL (or None: a handler not installed from Python): die of the signal
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def install(meter: Closable, *, sigterm: bool) -> ExitHooks:
    return ExitHooks(meter, sigterm=sigterm)
