"""Where a run settles: isolated outliers (stalls) and the end of warm-up.

Outliers: a step is an outlier when its throughput is further from the local level (the
median of its block of steps, and of the blocks either side) than 5 robust standard
deviations of the step-to-step noise, and at least 1 %. A checkpoint save or an eval
shows up as one such step; it is counted, left out of the statistics, and never taken for
a change of regime.

Warm-up is a slow start, found in three passes; the steady window starts at the latest
of their answers (docs/analysis.md, "The steady window", says the same for users):

1. By change points: a first stretch slower than the next (ending in the first 30 % of
   the run, or the first half when far slower), and a staircase of ever faster stretches
   after it, are warm-up; a stretch that still climbs is extrapolated to the level.
2. By block medians (about 400 blocks): a short window (2 % of the run) compared with
   the horizon that follows it (10 %); the steady window starts after the last window
   clearly below what follows (4 robust standard deviations of that comparison, and
   0.5 %), plus one window and the pace of the approach, so the tail of a ramp hidden in
   the noise is not counted as steady.
3. Step by step: a dense stretch of much slower first steps (compilation) too short to
   move a block median.

Only a slow start counts as warm-up: a fall in throughput is a change point, never a
warm-up, and the steady window starts in the first half of the run at the latest (a
run that never settles is analysed from its middle and reported as not settled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ledger.analyze.robust import (
    block_medians,
    block_size,
    integrated_time,
    long_run_sd,
    mad_sd,
    median,
    sliding_median,
)

BLOCKS = 400
OUTLIER_SIGMAS = 5.0
OUTLIER_MIN = 0.01  # relative: a step within 1 % of its neighbours is never an outlier
OUTLIER_MIN_BLOCK = 9  # so that one stall cannot move the level it is judged against
SCALE_POINTS = 100_000  # the noise scale is measured on at most this many steps
WINDOW_FRACTION = 0.02  # the short window, as a fraction of the run
HORIZON_FRACTION = 0.10  # what it is compared with
BAND_SIGMAS = 4.0  # "clearly below": robust standard deviations of that comparison
BAND_MIN = 0.005  # ... and at least 0.5 %
WARMUP_LIMIT = 0.5  # the steady window starts in the first half at the latest
FIRST_STRETCH_LIMIT = 0.3  # a slower first stretch ending this early is warm-up
DEEP_START = 0.8  # ... and up to WARMUP_LIMIT when it ran below 80 % of what followed
SHORT_STRETCH = 0.05  # a ramp's staircase: stretches shorter than this or than twice all before
PACE_FACTOR = 1.0  # paces of the approach added after the crossing (at most a window)
RAMP_MARGIN = 0.05  # an extrapolated ramp end is pushed this much later
FIRST_STEPS_MARGIN = 0.25  # a slow start found step by step is extended by a quarter
FIRST_STEPS_DENSITY = 0.8  # share of slow steps in that stretch


@dataclass(frozen=True)
class Outliers:
    mask: np.ndarray  # True for an outlier step
    noise: float  # robust relative standard deviation of a step around its local level
    threshold: float  # relative distance from the local level beyond which a step is one

    @property
    def count(self) -> int:
        return int(self.mask.sum())


@dataclass(frozen=True)
class SteadyWindow:
    start: int  # index of the first steady step
    settled: bool  # False: no steady stretch in the first half; the window is the second half
    warmup_found: bool  # a slow start was seen (by blocks or step by step)


def find_outliers(values: np.ndarray) -> Outliers:
    """Flag isolated steps far from their local level (see the module's docstring)."""
    n = len(values)
    if n < 5:
        return Outliers(np.zeros(n, dtype=bool), math.nan, math.inf)
    size = max(block_size(n, BLOCKS), min(OUTLIER_MIN_BLOCK, n))
    medians = block_medians(values, size)
    count = len(medians)
    centers = np.minimum(np.arange(count) * size + (size - 1) / 2.0, n - 1)
    level = np.interp(np.arange(n), centers, medians)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = values / level - 1.0
    noise = mad_sd(relative, max_points=SCALE_POINTS)
    threshold = max(OUTLIER_SIGMAS * noise, OUTLIER_MIN) if np.isfinite(noise) else math.inf
    mask = np.abs(relative) > threshold
    candidates = np.flatnonzero(mask)
    if len(candidates):
        # far from the interpolated level and from the medians of its own and both
        # neighbouring blocks: a step next to a level shift is not an outlier
        block = candidates // size
        near = np.stack(
            [
                medians[block],
                medians[np.maximum(block - 1, 0)],
                medians[np.minimum(block + 1, count - 1)],
            ]
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            distance = np.abs(values[candidates] / near - 1.0).min(axis=0)
        mask[candidates[distance <= threshold]] = False
    return Outliers(mask, float(noise), float(threshold))


def find_steady_start(values: np.ndarray, outliers: Outliers, threshold: float) -> SteadyWindow:
    """The index where the steady window starts (see the module's docstring)."""
    n = len(values)
    clean = np.where(outliers.mask, np.nan, values)
    size = block_size(n, BLOCKS)
    blocks = math.ceil(n / size)
    window = max(3, round(blocks * WINDOW_FRACTION))
    horizon = max(2 * window, round(blocks * HORIZON_FRACTION))
    (before, regime), scan_to, by_segments, ramp_end = _stretch_after_slow_start(clean, threshold)
    # look at the approach too: from a window and a horizon before the regime's start
    scan_from = max(before, regime - (window + horizon) * size)
    offset, settled, by_blocks = _start_by_blocks(clean[scan_from:scan_to], size, window, horizon)
    block_start = max(scan_from + offset, regime, ramp_end)
    by_steps = _start_by_first_steps(values, clean, block_start, outliers.threshold)
    start = min(max(block_start, by_steps), max(n - 2, 0))
    found = by_segments or by_blocks or by_steps > 0
    return SteadyWindow(start=start, settled=settled, warmup_found=found)


def _stretch_after_slow_start(
    clean: np.ndarray, threshold: float
) -> tuple[tuple[int, int], int, bool, int]:
    """((start of the stretch before, start), end, slow start seen, ramp end) of the
    first regime.

    The run is segmented by change points; a slower first stretch is warm-up, and so is
    a staircase of faster and faster stretches after it (a ramp). When the last stretch
    before the regime still climbs, its climb is extrapolated to the regime's level: the
    ramp end (else the regime's start).
    """
    from ledger.analyze.changepoints import find_change_points

    n = len(clean)
    shifts = find_change_points(clean, threshold)
    if not shifts:
        return (0, 0), n, False, 0
    bounds = [0, *(s.index for s in shifts), n]
    levels = [shifts[0].before, *(s.after for s in shifts)]
    first_end, rise = bounds[1], levels[1] / levels[0]
    slow_start = rise > 1.0 and (
        first_end <= FIRST_STRETCH_LIMIT * n
        or (first_end <= WARMUP_LIMIT * n and rise >= 1.0 / DEEP_START)
    )
    if not slow_start:
        return (0, 0), bounds[1], False, 0
    i = 1
    # A ramp shows as a staircase of stretches, each faster than the one before. A
    # stretch that is flat and at least twice as long as everything before it (and
    # 5 % of the run) is a regime of its own, and a rise after it is a change point.
    while (
        i + 1 < len(levels)
        and levels[i + 1] > levels[i]
        and bounds[i + 1] <= WARMUP_LIMIT * n
        and (
            bounds[i + 1] - bounds[i] < max(SHORT_STRETCH * n, 2 * bounds[i])
            or _rising(clean[bounds[i] : bounds[i + 1]], block_size(n, BLOCKS), threshold)
        )
    ):
        i += 1
    ramp_end = _ramp_end(clean[bounds[i - 1] : bounds[i]], levels[i])
    return (bounds[i - 1], bounds[i]), bounds[i + 1], True, bounds[i - 1] + ramp_end


def _ramp_end(stretch: np.ndarray, level: float) -> int:
    """Where a stretch that climbs would reach `level`, counted from its start.

    The climb is the difference of the medians of its halves; it counts only when it
    stands three standard errors above the noise (autocorrelation included), so a flat
    stretch ends where it ends. The extrapolation stops at three times the stretch's
    length and is pushed 5 % later, to err past the ramp rather than into it.
    """
    n = len(stretch)
    positions = np.flatnonzero(np.isfinite(stretch))
    if len(positions) < 8:
        return n
    values = stretch[positions]
    half = len(values) // 2
    first, second = median(values[:half]), median(values[half:])
    where_first = median(positions[:half])
    where_second = median(positions[half:])
    trend = np.polyval(np.polyfit(positions, values, 1), positions)
    residual = values - trend
    noise = mad_sd(residual) * math.sqrt(integrated_time(residual))
    standard_error = 1.2533 * noise * math.sqrt(2.0 / half)  # of a difference of medians
    climb = second - first
    if climb <= 3.0 * standard_error or where_second <= where_first:
        return n
    slope = climb / (where_second - where_first)
    end = where_second + (level - second) / slope
    return int(min(max(end * (1.0 + RAMP_MARGIN), n), 3 * n))


def _rising(clean: np.ndarray, size: int, threshold: float) -> bool:
    """Whether a stretch still climbs: its last third clearly above its first third."""
    medians = block_medians(clean, size)
    third = len(medians) // 3
    if third < 2:
        return True
    relative = medians / median(medians)
    first, last = median(relative[:third]), median(relative[-third:])
    noise = long_run_sd(relative)
    margin = 3.0 * noise * math.sqrt(2.0 / third) if math.isfinite(noise) else 0.0
    return bool(last - first > max(threshold / 2.0, margin))


def _start_by_blocks(
    clean: np.ndarray, size: int, window: int, horizon: int
) -> tuple[int, bool, bool]:
    """(start index, settled, warm-up seen) of a slow approach, from block medians.

    `window` and `horizon` are in blocks of `size` steps.
    """
    n = len(clean)
    medians = block_medians(clean, size)
    count = len(medians)
    positions = count - window - horizon + 1
    if positions < 2:  # a short stretch: look as far ahead as it allows
        horizon = max(window, count - 2 * window)
        positions = count - window - horizon + 1
    if positions < 2 or not np.isfinite(medians).all():
        return 0, True, False
    local = sliding_median(medians, window)[:positions]
    ahead = sliding_median(medians, horizon)[window : window + positions]
    deficit = 1.0 - local / ahead  # > 0: the window sits below what follows it
    noise = mad_sd(deficit)
    band = max(BAND_SIGMAS * noise, BAND_MIN) if np.isfinite(noise) else BAND_MIN
    below = deficit > band
    # settled at j: no window in [j, j + horizon) is clearly below what follows it
    seen = np.concatenate([[0], np.cumsum(below)])
    index = np.arange(positions)
    bad = seen[np.minimum(index + horizon, positions)] - seen[index]
    limit = min(positions, int(count * WARMUP_LIMIT) + 1)
    candidates = np.flatnonzero(bad[:limit] == 0)
    if len(candidates) == 0:
        return min(n // 2, n - 1), False, True
    j = int(candidates[0])
    if j == 0:
        return 0, True, False
    # Extrapolate the approach: it took `pace` blocks to come from 2 bands below to the
    # band (or, for a shallow approach, to cross the band); a linear ramp needs about
    # as long again to reach the level (at most one more window: noise makes paces long).
    deep = np.flatnonzero(deficit[:j] > 2 * band)
    origin = int(deep[-1]) if len(deep) else int(np.flatnonzero(below[:j])[0])
    pace = PACE_FACTOR * (j - origin)
    start_block = j + window + min(math.ceil(pace), window)
    return min(start_block * size, n - 1), True, True


def _start_by_first_steps(
    values: np.ndarray, clean: np.ndarray, block_start: int, threshold: float
) -> int:
    """End of a dense stretch of much slower steps at the very start, plus a margin.

    Only steps up to one window past the start found from blocks are looked at, so the
    stalls of a long run cannot chain into a warm-up.
    """
    n = len(values)
    if not math.isfinite(threshold) or n < 5:
        return 0
    window = max(3, math.ceil(n * WINDOW_FRACTION))
    reference = clean[block_start : block_start + max(50, n // 10)]
    reference = reference[np.isfinite(reference)]
    if len(reference) == 0:
        return 0
    level = median(reference)
    look = min(n // 2, block_start + window)
    slow = np.flatnonzero(values[:look] < level * (1.0 - threshold))
    # the slow steps must start at once and come densely: a gap of ordinary steps longer
    # than a quarter of the stretch so far (the slow step before it ends that stretch)
    # ends it
    before = np.concatenate([[-1], slow[:-1]])
    gap = np.flatnonzero(slow - before - 1 > np.maximum(2, (before + 1) // 4))
    if len(gap):
        slow = slow[: gap[0]]
    if len(slow) == 0:
        return 0
    # ... and make up most of it (stalls spaced out after a warm-up do not extend it)
    dense = np.flatnonzero(np.arange(1, len(slow) + 1) >= FIRST_STEPS_DENSITY * (slow + 1))
    if len(dense) == 0:
        return 0
    end = int(slow[dense[-1]])
    margin = min(math.ceil((end + 1) * FIRST_STEPS_MARGIN), window)
    return min(end + 1 + margin, n - 1)
