"""The command line's garbage-collector policy (ledger.collector): rare collections while a
command starts, Python's own once it lives on. Each case runs in a fresh interpreter, so
that pytest's own collector is left as it is."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> str:
    """The last line `code` prints to stderr (stdout is the command's own)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stderr.strip().splitlines()[-1]


def test_start_up_collects_rarely_and_settle_gives_pythons_collector_back() -> None:
    out = _run(
        "import gc, sys\n"
        "from ledger import collector\n"
        "default = gc.get_threshold()\n"
        "collector.start_up()\n"
        "assert gc.get_threshold() == (collector.YOUNG_OBJECTS, *default[1:]), gc.get_threshold()\n"
        "collections = []\n"
        "gc.callbacks.append(lambda phase, info: collections.append(phase))\n"
        "kept = [[i] for i in range(100_000)]  # start-up's lasting objects\n"
        "assert collections == [], len(collections)\n"
        "collector.settle()\n"
        "assert gc.get_threshold() == default, gc.get_threshold()\n"
        "assert gc.get_freeze_count() >= 100_000, gc.get_freeze_count()\n"
        "collector.settle()  # idempotent\n"
        "assert gc.get_threshold() == default\n"
        "# cycles made after start-up are still freed\n"
        "import weakref\n"
        "class Node: pass\n"
        "a, b = Node(), Node(); a.other, b.other = b, a\n"
        "gone = weakref.ref(a); del a, b\n"
        "gc.collect()\n"
        "print(gone() is None, file=sys.stderr)\n"
    )
    assert out == "True"


def test_the_command_line_starts_up_so_and_a_wait_settles() -> None:
    out = _run(
        "import atexit, gc, sys\n"
        "from ledger import cli, interrupts\n"
        "default = gc.get_threshold()\n"
        "def after():  # the command ends the process (ledger.shutdown) after atexit's handlers\n"
        "    raised = gc.get_threshold()[0]\n"
        "    interrupts.pause(0)  # what a follower does between looks\n"
        "    print(raised, gc.get_threshold() == default, file=sys.stderr)\n"
        "atexit.register(after)\n"
        "sys.argv = ['ledger', '--help']\n"
        "cli.main()\n"
    )
    assert out == "200000 True"


def test_a_library_user_keeps_pythons_collector() -> None:
    out = _run(
        "import gc, sys\n"
        "default = gc.get_threshold()\n"
        "import ledger, ledger.hook, ledger.cli\n"
        "print(gc.get_threshold() == default, file=sys.stderr)\n"
    )
    assert out == "True"
