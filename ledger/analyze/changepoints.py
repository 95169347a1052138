"""Change points inside a steady window: where the throughput level moves and stays.

1. Candidates: the steady window (outliers taken out) is cut into about 400 blocks and
   an exact penalised least-squares segmentation (piecewise constant levels, penalised per
   change: what ruptures' KernelCPD does with a linear kernel) proposes where the level of
   the block medians moves. Its penalty is generous on purpose: every candidate must pass step 2.
2. Each candidate is tested between its neighbours with the CUSUM statistic
   T = |S_k − (k/N) S_N| / (σ_lr √N), whose largest value over k follows the
   Kolmogorov distribution when there is no change; σ_lr is the long-run standard
   deviation of the block medians (autocorrelation included). A change point stays only
   when its p-value is below 0.001 and the level moves by at least the practical
   threshold (2 % by default). The weakest failing candidate is dropped and the rest
   re-tested until all pass.
3. Each surviving change point is placed to the step by a least-squares split within a
   few blocks of it; the levels before and after are the medians between neighbours.

Isolated stalls are outliers (ledger.analyze.steady), so they can neither propose nor
pass a change point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ledger.analyze import special
from ledger.analyze.robust import block_medians, block_size, long_run_sd, median

BLOCKS = 400
ALPHA = 0.001
MIN_SEGMENT_FRACTION = 0.01
MIN_SEGMENT_BLOCKS = 3
CANDIDATE_PENALTY = 2.0  # × σ² × log(blocks): generous, candidates are tested afterwards


@dataclass(frozen=True)
class Shift:
    index: int  # index in the analysed window of the first value at the new level
    before: float
    after: float
    p_value: float

    @property
    def relative(self) -> float:
        return self.after / self.before - 1.0


def find_change_points(values: np.ndarray, threshold: float, alpha: float = ALPHA) -> list[Shift]:
    """Level shifts of at least `threshold` (relative) in `values` (NaN = left out)."""
    n = len(values)
    size = block_size(n, BLOCKS)
    medians = block_medians(values, size)
    count = len(medians)
    min_segment = max(MIN_SEGMENT_BLOCKS, math.ceil(count * MIN_SEGMENT_FRACTION))
    if count < 2 * min_segment or not np.isfinite(medians).all():
        return []
    level = median(medians)
    signal = medians / level  # relative units: a shift of 0.05 is 5 %
    sigma = long_run_sd(signal)
    if not math.isfinite(sigma) or sigma == 0.0:
        sigma = float(np.std(np.diff(signal))) or 1e-12
    cuts = _candidates(signal, min_segment, sigma)
    # judge the candidates against the noise within the stretches they delimit
    within = long_run_sd(signal, cuts=cuts)
    if math.isfinite(within) and within > 0.0:
        sigma = within
    kept = _keep_significant(signal, cuts, sigma, threshold, alpha)
    return _place(values, kept, size)


def _candidates(signal: np.ndarray, min_segment: int, sigma: float) -> list[int]:
    count = len(signal)
    penalty = CANDIDATE_PENALTY * sigma**2 * math.log(count)
    ends = optimal_partition(signal, min_segment, penalty)
    return [e for e in ends if 0 < e < count]


def optimal_partition(signal: np.ndarray, min_size: int, penalty: float) -> list[int]:
    """The ends of the segments of `signal` that minimise the sum of their squared errors
    around their means plus `penalty` per change, each segment `min_size` long or more.

    Exact optimal partitioning, O(n²) on the few hundred block medians it is given: the
    same segmentation as ruptures' KernelCPD with a linear kernel (a test holds them
    equal), without importing ruptures, whose other detectors import scipy.signal — more
    time than the whole search. Ties go to the earliest start, as there.
    """
    n = len(signal)
    if n < 2 * min_size:
        return [n]
    total = np.concatenate([[0.0], np.cumsum(signal)])
    squares = np.concatenate([[0.0], np.cumsum(signal * signal)])
    best = np.full(n + 1, np.inf)
    best[0] = -penalty  # the first segment pays no change
    start = np.zeros(n + 1, dtype=np.int64)
    for end in range(min_size, n + 1):
        s = np.arange(0, end - min_size + 1)
        length = end - s
        cost = (squares[end] - squares[s]) - (total[end] - total[s]) ** 2 / length
        candidate = best[s] + cost + penalty
        i = int(np.argmin(candidate))
        best[end], start[end] = candidate[i], s[i]
    ends = [n]
    while (begin := int(start[ends[-1]])) > 0:
        ends.append(begin)
    return ends[::-1]


def _cusum_p(segment: np.ndarray, k: int, sigma: float) -> float:
    """p-value of the CUSUM statistic at split k of `segment` (Kolmogorov null)."""
    n = len(segment)
    if sigma <= 0.0:
        return 0.0
    left, right = segment[:k].mean(), segment[k:].mean()
    statistic = abs(left - right) * k * (n - k) / n / (sigma * math.sqrt(n))
    return float(special.kolmogorov(statistic))  # the Kolmogorov distribution's tail


def _test(signal: np.ndarray, cuts: list[int], sigma: float, threshold: float) -> list[float]:
    """For each cut, its p-value, or NaN when its shift is below the threshold."""
    bounds = [0, *cuts, len(signal)]
    result = []
    for i, cut in enumerate(cuts):
        lo, hi = bounds[i], bounds[i + 2]
        before = median(signal[lo:cut])
        after = median(signal[cut:hi])
        if not before > 0 or abs(after / before - 1.0) < threshold:
            result.append(math.nan)
        else:
            result.append(_cusum_p(signal[lo:hi], cut - lo, sigma))
    return result


def _keep_significant(
    signal: np.ndarray, cuts: list[int], sigma: float, threshold: float, alpha: float
) -> list[tuple[int, float]]:
    """Drop the weakest failing cut (too small a shift first, then the largest p) until
    every cut left passes; returns (cut, p-value) pairs."""
    cuts = sorted(cuts)
    while cuts:
        p_values = _test(signal, cuts, sigma, threshold)
        failing = [
            (math.isfinite(p), -p if math.isfinite(p) else 0.0, i)
            for i, p in enumerate(p_values)
            if not p < alpha
        ]
        if not failing:
            return list(zip(cuts, p_values, strict=True))
        del cuts[min(failing)[2]]
    return []


def _place(values: np.ndarray, cuts: list[tuple[int, float]], size: int) -> list[Shift]:
    """Place each block-level cut to the step and measure the levels around it."""
    n = len(values)
    index = [c * size for c, _ in cuts]
    if size > 1:
        # refine within two blocks, never past the midpoint to a neighbour, so the
        # order of the change points cannot change
        bounds = [0, *index, n]
        index = [
            _best_split(
                values,
                max(at - 2 * size, (bounds[i] + at) // 2),
                min(at + 2 * size, (at + bounds[i + 2]) // 2 + 1),
                at,
            )
            for i, at in enumerate(index)
        ]
    bounds = [0, *index, n]
    return [
        Shift(
            index=at,
            before=_median(values[bounds[i] : at]),
            after=_median(values[at : bounds[i + 2]]),
            p_value=p,
        )
        for i, (at, (_, p)) in enumerate(zip(index, cuts, strict=True))
    ]


def _median(values: np.ndarray, max_points: int = 200_000) -> float:
    """Median of the finite values; of an evenly thinned sample for very long stretches."""
    if len(values) > max_points:
        values = values[:: math.ceil(len(values) / max_points)]
    finite = values[np.isfinite(values)]
    return median(finite) if len(finite) else math.nan


def _best_split(values: np.ndarray, lo: int, hi: int, fallback: int) -> int:
    """The split of values[lo:hi] into two constant levels with the least squared error."""
    window = values[lo:hi]
    keep = np.isfinite(window)
    if keep.sum() < 4:
        return fallback
    x = window[keep]
    positions = np.flatnonzero(keep)
    total, total_sq, m = x.sum(), (x**2).sum(), len(x)
    left_sum = np.cumsum(x)[:-1]
    left_sq = np.cumsum(x**2)[:-1]
    left_n = np.arange(1, m)
    right_n = m - left_n
    sse = (left_sq - left_sum**2 / left_n) + (
        (total_sq - left_sq) - (total - left_sum) ** 2 / right_n
    )
    best = int(np.argmin(sse))
    return lo + int(positions[best + 1])
