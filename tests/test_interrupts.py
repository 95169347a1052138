"""A Ctrl-C is never lost by the commands that wait: one that lands inside a garbage
collector's callback (where Python prints "Exception ignored" and goes on) still stops the
next pause between looks. A stress run found `ingest --follow` still following two minutes
after its Ctrl-C, with that very line on its stderr."""

from __future__ import annotations

import os
import signal
import time
import weakref
from collections.abc import Iterator

import pytest

from ledger import interrupts


@pytest.fixture
def handler() -> Iterator[None]:
    before = signal.getsignal(signal.SIGINT)
    interrupts.install()
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
        interrupts._pressed.clear()


class _Thing:
    pass


# the interpreter's report of what it swallowed, which pytest turns into a warning
SWALLOWED = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@SWALLOWED
def test_a_ctrl_c_swallowed_by_a_weakref_callback_stops_the_next_pause(handler: None) -> None:
    thing = _Thing()
    # the callback runs when `thing` goes; os.kill runs the handler inside it, and the
    # interpreter swallows the KeyboardInterrupt raised there ("Exception ignored in …")
    ref = weakref.ref(thing, lambda _: os.kill(os.getpid(), signal.SIGINT))
    del thing
    assert ref() is None  # the callback ran and the interrupt did not come out of it
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        interrupts.pause(30)
    assert time.monotonic() - started < 5  # raised before the wait, not after it


@SWALLOWED
def test_without_the_handler_that_ctrl_c_is_lost() -> None:
    # what the handler is for: Python's own leaves no trace of the swallowed interrupt
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        thing = _Thing()
        weakref.ref(thing, lambda _: os.kill(os.getpid(), signal.SIGINT))
        del thing
        interrupts.pause(0.01)  # returns: nothing knows a Ctrl-C came
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_ctrl_c_during_the_pause_raises_at_once(handler: None) -> None:
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    previous = signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
    try:
        with pytest.raises(KeyboardInterrupt):
            interrupts.pause(30)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 10


def test_a_process_started_with_ctrl_c_ignored_keeps_it_ignored() -> None:
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        interrupts.install()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
