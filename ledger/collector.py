"""When Python's cyclic garbage collector runs in a `ledger` command.

A command's start-up makes a few hundred thousand objects that live until it exits:
modules, classes, SQLAlchemy's tables and caches, numpy's and pandas' type tables. With
Python's default thresholds (a collection every 700 new objects) the collector scans
them again and again while they are being made, and frees none of them: in a cold
`ledger compare` of two million-step runs that was 0.05-0.07 s of 1.3 s, 234 collections
(measured with gc.callbacks; benchmarks/bench_compare.py has the whole command).

`start_up` (the command line's entry point) lets 200,000 objects accumulate before a
collection, as mypy does, so a command that ends within a few seconds rarely collects at
all; cycles are still freed, in larger batches. `settle`, called where a command turns
into one that lives on (a follower between looks of its log, a server, a launcher waiting
for its child), freezes what start-up made out of the collector's sight for good
(gc.freeze) and gives Python's thresholds back.

The library's users (the training hook, notebooks) never go through `start_up`: their
process's collector is theirs.
"""

from __future__ import annotations

import gc

from ledger.heap import give_back

YOUNG_OBJECTS = 200_000
_defaults: tuple[int, int, int] | None = None


def start_up() -> None:
    """Collect rarely while the command starts (see the module's docstring)."""
    global _defaults
    if _defaults is None:
        _defaults = gc.get_threshold()
        gc.set_threshold(YOUNG_OBJECTS, *_defaults[1:])


def settle() -> None:
    """The command lives on: freeze what start-up made and collect as Python does.
    Cheap and idempotent, so the loops that wait call it each time."""
    global _defaults
    give_back()  # and the C heap as glibc has it (ledger.heap)
    if _defaults is not None:
        gc.collect()  # start-up's own garbage, once, so that freeze keeps only what lives
        gc.freeze()
        gc.set_threshold(*_defaults)
        _defaults = None
