"""A log's wall clock made fit to measure with: unwrapped, its resolution known, and — where
its ticks are a large share of a step — used over blocks of steps rather than step by step.

Log timestamps are often to the second (`2026-11-29 13:19:57`) while a step takes 3.7 s:
every interval then reads 3 or 4 s, and any per-step figure read from them (the tokens a
step does, which steps stalled) is off by up to a quarter. Sums of intervals are not:
they telescope to the span between the first and last stamp, whose error is one tick. So
on such a clock (`coarse`) the cost of a step is taken from what the trainer printed (its
step time, or its throughput for a constant number of tokens per step), scaled so that
the steps between clock ticks fill exactly the time the clock says passed; a tick that
says far more time passed than the printed cost of its steps (more than STALL_TICKS ticks
and STALL_SHARE of that cost more) is a stall, and the excess is its cost.

Stamps that are the time of day only wrap at midnight: a fall of more than half a day is
read as the next day. A clock that steps back (NTP, a restarted logger) gives an interval
that is not trusted: the steps there cost what the trainer printed. Duplicated stamps are
steps between two ticks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ledger.analyze.robust import median

DAY = 86_400.0
RESOLUTIONS = (60.0, 1.0, 0.1, 0.01, 0.001)  # the ticks a log clock is checked against
MIN_STAMPS = 8  # fewer stamps than this say nothing about the clock's resolution
COARSE_SHARE = 0.05  # a tick this large a share of a typical interval makes a clock coarse
BLOCK_TICKS = 50  # a block spans this many ticks at least: its own error is ≤ 2 %
STALL_TICKS = 1.5  # an interval this many ticks beyond the printed cost may be a stall ...
STALL_SHARE = 0.25  # ... when it also exceeds that cost by this share


def unwrap(wall: np.ndarray) -> np.ndarray:
    """`wall` with midnight crossings of time-of-day stamps undone (NaN stays NaN)."""
    out = np.array(wall, dtype=np.float64)
    finite = np.isfinite(out)
    if finite.sum() < 2:
        return out
    values = out[finite]
    if values.min() < 0 or values.max() >= DAY:
        return out  # not a time of day: a fall is a clock stepping back, left as it is
    falls = np.diff(values) < -DAY / 2
    if falls.any():
        values = values + DAY * np.concatenate([[0.0], np.cumsum(falls)])
        out[finite] = values
    return out


def resolution(wall: np.ndarray) -> float:
    """The clock's tick in seconds: the largest of RESOLUTIONS every stamp is a multiple
    of; 0 when the stamps are finer or too few distinct ones to tell."""
    values = np.unique(wall[np.isfinite(wall)])
    if len(values) < MIN_STAMPS:
        return 0.0
    values = values - values[0]
    for tick in RESOLUTIONS:
        off = np.abs(values / tick - np.round(values / tick))
        if float(off.max()) < 1e-3:
            return tick
    return 0.0


def coarse(wall: np.ndarray, steps: np.ndarray) -> bool:
    """True when the clock's tick is a large share of a typical interval, or stamps repeat
    or go back (see the module's docstring)."""
    values = wall[np.isfinite(wall)]
    if len(values) < MIN_STAMPS:
        return False
    gaps = np.diff(values)
    if (gaps <= 0).mean() > 0.01:
        return True
    tick = resolution(wall)
    typical = median(gaps[gaps > 0]) if (gaps > 0).any() else math.inf
    return tick > COARSE_SHARE * typical


@dataclass(frozen=True)
class ClockCosts:
    """What each row cost by the clock over blocks, and how much of it was stall."""

    cost: np.ndarray  # seconds per row
    scale: float  # seconds of wall clock per unit of printed cost, between stalls
    stall_s: np.ndarray  # the stall's seconds per row (0 where none)


def clock_costs(wall: np.ndarray, printed: np.ndarray, start: int = 0) -> ClockCosts:
    """Each row's cost in seconds from `printed` (its cost in any unit: seconds, or
    1 / throughput) scaled to the wall clock, plus the stall time the clock saw.

    `wall` is unwrapped; rows whose printed cost is unknown cost nothing. The scale is
    fitted on the rows from `start` on (the steady window).
    """
    n = len(wall)
    printed = np.where(np.isfinite(printed) & (printed > 0), printed, 0.0)
    tick = resolution(wall)
    # groups: the rows that end between one tick of the clock and the next
    order = np.flatnonzero(np.isfinite(wall))
    group_end: list[int] = []  # the row at which the clock moved on
    group_gap: list[float] = []  # how far it moved (NaN: back, not trusted)
    group_cost: list[float] = []  # the printed cost of the rows it covers
    first_of: list[int] = []
    if len(order):
        last_row, last_wall = order[0], wall[order[0]]
        for row in order[1:]:
            if wall[row] == last_wall:
                continue
            gap = wall[row] - last_wall
            group_end.append(int(row))
            first_of.append(int(last_row) + 1)
            group_gap.append(float(gap) if gap > 0 else math.nan)
            group_cost.append(float(printed[last_row + 1 : row + 1].sum()))
            last_row, last_wall = row, wall[row]
    gaps, costs = np.array(group_gap), np.array(group_cost)
    steady = np.array(group_end, dtype=np.int64) >= start if group_end else np.zeros(0, bool)
    scale0 = _block_scale(gaps[steady], costs[steady], tick)
    usable = np.isfinite(gaps) & (costs > 0)
    stall = np.zeros(len(gaps), dtype=bool)
    if math.isfinite(scale0):
        expected = costs * scale0
        stall = (
            usable & (gaps > expected + STALL_TICKS * tick) & (gaps > expected * (1 + STALL_SHARE))
        )
    clean = usable & ~stall & steady
    if clean.any() and float(costs[clean].sum()) > 0 and float(gaps[clean].sum()) > 0:
        scale = float(gaps[clean].sum() / costs[clean].sum())
    else:
        scale = scale0 if math.isfinite(scale0) else 1.0
    cost = printed * scale
    stall_s = np.zeros(n)
    for g in np.flatnonzero(stall):
        excess = gaps[g] - costs[g] * scale
        if excess > 0:
            stall_s[group_end[g]] = excess
    return ClockCosts(cost + stall_s, scale, stall_s)


def _block_scale(gaps: np.ndarray, costs: np.ndarray, tick: float) -> float:
    """A first scale, robust to stalls: the median over blocks that span BLOCK_TICKS ticks."""
    usable = np.isfinite(gaps) & (costs > 0)
    gaps, costs = gaps[usable], costs[usable]
    if not len(gaps) or costs.sum() <= 0:
        return math.nan
    span = max(BLOCK_TICKS * tick, 1e-9)
    ratios: list[float] = []
    g = c = 0.0
    for gap, cost in zip(gaps, costs, strict=True):
        g, c = g + gap, c + cost
        if g >= span:
            ratios.append(g / c)
            g = c = 0.0
    if len(ratios) < 3:
        return float(gaps.sum() / costs.sum())
    # stalls only lengthen a block: the lower half of the blocks holds the clean ones
    ratios.sort()
    return median(np.asarray(ratios[: max(1, (len(ratios) + 1) // 2)]))
