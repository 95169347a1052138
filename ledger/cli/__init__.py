"""The command line: a thin click layer over the Python API (see ledger.cli.app)."""

from __future__ import annotations

from ledger.blas import one_thread
from ledger.cli import (  # noqa: F401 — registers the commands
    analyze,
    demo,
    imports,
    logs,
    read,
    record,
    report,
    serve,
    watch,
    why,
)
from ledger.cli.app import cli
from ledger.collector import start_up
from ledger.heap import keep_freed
from ledger.interrupts import install as take_interrupts
from ledger.shutdown import end


def main() -> None:
    start_up()  # start-up's objects live until exit: no point scanning them
    keep_freed()  # an analysis's freed arrays serve the next ones, not the kernel's zeroing
    one_thread()  # numpy's BLAS starts no spinning worker threads (ledger.blas)
    take_interrupts()  # a Ctrl-C swallowed by a garbage-collector callback still stops
    try:
        cli.main(prog_name="ledger")
    except SystemExit as done:  # how click's main ends, every time
        code = done.code
    else:
        code = 0
    end(code)  # at once: no interpreter teardown (ledger.shutdown)


__all__ = ["cli", "main"]
