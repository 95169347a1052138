"""What `ledger watch` exits with. 1 means a regression and nothing else: an error that
stops watch exits ERROR (6), a usage mistake 2, an interrupt 128 + the signal (130 for
Ctrl-C, 143 for SIGTERM, 129 for SIGHUP)."""

from __future__ import annotations

from ledger.model.terms import WatchOutcome

EXIT_CODES: dict[WatchOutcome, int] = {
    WatchOutcome.SAME: 0,
    WatchOutcome.IMPROVEMENT: 0,
    WatchOutcome.REGRESSION: 1,
    WatchOutcome.FAILED: 3,
    WatchOutcome.STALLED: 4,
    WatchOutcome.UNDECIDED: 5,
}
ERROR = 6  # watch could not go on (an unknown --against run, an unreadable log, the database)
OUTCOMES: tuple[str, ...] = tuple(o.value for o in EXIT_CODES)
