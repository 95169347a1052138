"""How a `ledger` command ends: at once, once what it printed and kept is out.

Python's own exit tears the interpreter down. It collects and frees, one by one, every
object the command made (modules, SQLAlchemy's tables, numpy's and pandas' types, the
arrays of an analysis), only for the process to end. After a cold `ledger compare` of
two million-step runs that took 0.13-0.15 s of a 1 s command (measured from the last
atexit handler to the process's end).

`end(code)` runs what Python runs on the way out that matters to the user: atexit's
handlers (logging's flush, temporary folders). It then flushes stdout and stderr and
ends the process with os._exit: the operating system takes the memory back whole. The
command's ledger is closed before this, by the command itself.

It exits the usual way instead in two cases:
- while another non-daemon thread still runs (Python would wait for it);
- under a tracer or a profiler (coverage writes its data at exit).

Only the command line's entry point calls it; the library never ends its user's process.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

# CPython's status when it cannot flush stdout on the way out (a closed pipe, a full disk)
UNFLUSHED = 120


def end(code: object) -> NoReturn:
    """End the process with `code` as SystemExit would have it (None: 0; a number: that
    status; anything else: printed on stderr, status 1). See the module's docstring."""
    if not _alone() or sys.gettrace() is not None or sys.getprofile() is not None:
        raise SystemExit(code)
    status = _status(code)
    atexit._run_exitfuncs()
    os._exit(_flushed(status))


def _alone() -> bool:
    """No thread but this one and daemons: nothing Python would wait for at exit."""
    main = threading.main_thread()
    return threading.current_thread() is main and all(
        t is main or t.daemon for t in threading.enumerate()
    )


def _status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # as Python prints a SystemExit's message
    return 1


def _flushed(status: int) -> int:
    """Flush stdout and stderr; UNFLUSHED when stdout could not be (and the status was 0)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone, a disk full, a stream closed
            if stream is sys.stdout and status == 0:
                status = UNFLUSHED
    return status
