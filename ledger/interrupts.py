"""A Ctrl-C that is never lost by the commands that wait (`ingest --follow`, `watch`).

Python's own SIGINT handler raises KeyboardInterrupt wherever the main thread happens to
be. When that is inside a weakref callback or a `__del__` run by the garbage collector,
the interpreter prints "Exception ignored in …" and goes on: the interrupt is gone, and a
follower sleeping between looks of its log runs on as if nothing was pressed. The command
line's handler (`install`) also notes the signal, and `pause` — the wait between looks —
raises it again if it was swallowed, at most one look late.
"""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType

from ledger.collector import settle

_pressed = threading.Event()


def on_sigint(_signum: int, _frame: FrameType | None) -> None:
    """Note the interrupt, then raise it where the main thread is (as Python's does)."""
    _pressed.set()
    raise KeyboardInterrupt


def install() -> None:
    """Take SIGINT in this process (the command line's entry point calls it). A process
    that was started with SIGINT ignored (`cmd &` in a script) keeps it ignored."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return
    _pressed.clear()
    signal.signal(signal.SIGINT, on_sigint)


def pause(seconds: float) -> None:
    """Sleep between looks; raise KeyboardInterrupt if one was pressed and swallowed."""
    settle()  # a command that waits lives on: the collector as Python has it
    if _pressed.is_set():
        raise KeyboardInterrupt
    time.sleep(seconds)
    if _pressed.is_set():
        raise KeyboardInterrupt
