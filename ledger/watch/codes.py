"""What `ledger watch` exits with. 1 means a regression and nothing else: an error that
stops watch exits ERROR (6), a usage mistake 2, an interrupt 128 + the signal (130 for
Ctrl-C, 143 for SIGTERM, 129 for SIGHUP)."""

from __future__ import annotations

EXIT_CODES = {
    "same": 0,
    "improvement": 0,
    "regression": 1,
    "failed": 3,
    "stalled": 4,
    "undecided": 5,
}
ERROR = 6  # watch could not go on (an unknown --against run, an unreadable log, the database)
OUTCOMES = tuple(EXIT_CODES)
