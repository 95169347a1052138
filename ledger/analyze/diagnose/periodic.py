"""Stalls in logs that print the mean of every N steps: a regular rise every k lines.

A log line that reports the mean step time (or throughput) of the N steps since the
previous line hides a stall inside that mean: a 250 ms checkpoint every 50 steps of a
30 ms step, logged every 10 steps, lifts every fifth line by 25 ms, not one line by 250.
A fifth of the lines is too many for an outlier rule (it reads them as the noise), and a
change-point search sees a level that wobbles. What does show is the phase: the lines at
one position modulo k rise above the others, cycle after cycle. The stall's period in
steps is k × N (N from the spacing of the logged step numbers).

The test, for each period k from 2 to MAX_PERIOD lines and each phase: at least ABOVE of
the phase's lines (and MIN_CYCLES of them) cost more per unit of work than the 90th
percentile of the other lines, and their median at least RISE more than the others'
median. The smallest k that passes is the period. On lines of independent noise the
chance that some phase passes is far below one in a million.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_PERIOD = 20  # lines
MIN_CYCLES = 5
ABOVE = 0.8
RISE = 0.03
MAX_LINES = 4_000  # the test reads the latest lines only (hundreds of cycles of 20)


@dataclass(frozen=True)
class Periodic:
    """A phase of the lines that rises: its lines that rose (in the window's index), and
    the period k."""

    every: int  # lines
    mask: np.ndarray


def find_periodic(work: np.ndarray, cost: np.ndarray) -> Periodic | None:
    """The smallest period (in lines) at which one phase of the lines costs more per unit
    of work than the rest, as the module's docstring says; None when none does."""
    n = len(cost)
    offset = max(0, n - MAX_LINES)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_work = cost[offset:] / work[offset:]
    usable = np.isfinite(per_work) & (per_work > 0)
    m = len(per_work)
    if usable.sum() < 2 * MIN_CYCLES:
        return None
    overall = float(np.median(per_work[usable]))
    for k in range(2, min(MAX_PERIOD, m // MIN_CYCLES) + 1):
        for phase in range(k):
            at = np.zeros(m, dtype=bool)
            at[phase::k] = True
            mine = per_work[at & usable]
            # a phase whose median is above the rest's is above the median of all: the
            # cheap test first, the quantiles of the rest only for the phases it passes
            if len(mine) < MIN_CYCLES or np.median(mine) < overall:
                continue
            rest = per_work[~at & usable]
            if len(rest) < MIN_CYCLES:
                continue
            high = float(np.quantile(rest, 0.9))
            middle = float(np.median(rest))
            if np.mean(mine > high) >= ABOVE and np.median(mine) >= middle * (1 + RISE):
                # the lines of that phase over the whole window that rose
                with np.errstate(divide="ignore", invalid="ignore"):
                    every = cost / work
                mask = np.zeros(n, dtype=bool)
                mask[(offset + phase) % k :: k] = True
                mask &= np.isfinite(every) & (every > middle * (1 + RISE))
                return Periodic(k, mask)
    return None
