"""Small robust building blocks: block medians, MAD scale, dependence estimates.

Everything here works on plain float arrays and is vectorised, so a million steps cost
milliseconds. NaN marks a value to ignore (an outlier taken out).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

MAD_TO_SD = 1.4826  # the MAD of a normal distribution times this is its standard deviation


def _kth_and_next(values: np.ndarray, k: int) -> tuple[float, float]:
    """The k-th and (k+1)-th smallest of `values` (0-based; the k-th twice when k is the
    last), NaN counted as the largest, as numpy sorts it.

    One partition at one position takes numpy's vectorised selection; at two positions
    (what np.median does for an even count, np.percentile for each of its values) it
    takes the generic one, several times slower. The next value is the smallest after k.
    """
    part = np.partition(values, k)
    kth = float(part[k])
    return kth, float(part[k + 1 :].min()) if k + 1 < len(part) else kth


def median(values: np.ndarray) -> float:
    """np.median of a 1-D array of floats, to the same bits (NaN when one is NaN), at the
    cost of one single-position partition (see _kth_and_next)."""
    n = len(values)
    if n == 0:
        return math.nan
    half = n // 2
    if n % 2:
        middle, after = _kth_and_next(values, half)
        return math.nan if math.isnan(after) else middle
    low, high = _kth_and_next(values, half - 1)
    return math.nan if math.isnan(high) else (low + high) / 2.0


def percentiles(values: np.ndarray, qs: tuple[float, ...]) -> tuple[float, ...]:
    """np.percentile(values, qs) of finite values (at least one), to the same bits: the
    two order statistics around each virtual index, one partition each, and numpy's
    linear interpolation from the nearer one (a test holds them equal)."""
    n = len(values)
    found = []
    for q in qs:
        virtual = (n - 1) * (q / 100.0)
        below = math.floor(virtual)
        if virtual >= n - 1:
            low = high = _kth_and_next(values, n - 1)[0]
        else:
            low, high = _kth_and_next(values, max(below, 0))
        gamma = virtual - below
        diff = high - low
        found.append(high - diff * (1 - gamma) if gamma >= 0.5 else low + diff * gamma)
    return tuple(found)


def mad_sd(values: np.ndarray, max_points: int | None = None) -> float:
    """A standard deviation that a few wild values cannot move (1.4826 × MAD).

    With `max_points`, a long series is thinned to about that many evenly spaced values
    first: the scale of a million residuals does not need all of them.
    """
    if max_points is not None and len(values) > max_points:
        values = values[:: math.ceil(len(values) / max_points)]
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return math.nan
    center = median(values)
    return float(MAD_TO_SD * median(np.abs(values - center)))


def block_size(n: int, blocks: int) -> int:
    """The block length that cuts n values into about `blocks` blocks (at least 1)."""
    return max(1, math.ceil(n / blocks))


def block_medians(values: np.ndarray, size: int) -> np.ndarray:
    """Medians of consecutive blocks of `size` values (the last block may be shorter).

    NaN values are ignored; a block holding nothing else is NaN and then filled from its
    neighbours, so the result has no NaN as long as `values` has one finite value.
    """
    n = len(values)
    if n == 0:
        return np.empty(0)
    count = math.ceil(n / size)
    padded = np.full(count * size, np.nan)
    padded[:n] = values
    table = padded.reshape(count, size)
    missing = np.isnan(table)
    gaps = missing.any(axis=1)
    if not gaps.any():
        return _row_medians(table)
    medians = np.empty(count)
    medians[~gaps] = _row_medians(table[~gaps])
    medians[gaps] = _gap_row_medians(table[gaps], size - missing[gaps].sum(axis=1))
    return fill_gaps(medians)


def _gap_row_medians(table: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The median of each row's `valid` finite entries (the rest NaN), as np.nanmedian
    has it, to the same bits.

    np.nanmedian loops over rows in Python, and sorting every row costs four times a
    partition. Rows with as many values are partitioned together at the one position
    their median needs, NaN read as +inf so that it falls beyond it; the other middle
    value of an even count is the smallest after it (see _kth_and_next). Outliers
    taken out leave a handful of distinct counts.
    """
    medians = np.full(len(table), np.nan)
    # the counts there are, ascending: np.unique would import numpy.ma (12 ms) to say so
    for v in np.flatnonzero(np.bincount(valid)):
        if v == 0:
            continue  # a row of NaN only: NaN, filled from its neighbours by the caller
        rows = np.flatnonzero(valid == v)
        k = (int(v) - 1) // 2
        part = np.partition(np.where(np.isnan(table[rows]), np.inf, table[rows]), k, axis=1)
        low = part[:, k]
        high = low if v % 2 else part[:, k + 1 : int(v)].min(axis=1)
        medians[rows] = (low + high) / 2.0
    return medians


def _row_medians(table: np.ndarray) -> np.ndarray:
    """np.median(table, axis=1) of rows without NaN, to the same bits, by one partition at
    one position (see _kth_and_next): the other middle value of an even row is the
    largest before it."""
    width = table.shape[1]
    if width == 0 or len(table) == 0:
        return np.full(len(table), np.nan)
    half = width // 2
    if width % 2:
        return np.asarray(np.partition(table, half, axis=1)[:, half])
    part = np.partition(table, half, axis=1)
    return np.asarray((part[:, :half].max(axis=1) + part[:, half]) / 2.0)


def fill_gaps(values: np.ndarray) -> np.ndarray:
    """Replace NaN by linear interpolation between finite neighbours (ends: nearest)."""
    finite = np.isfinite(values)
    if finite.all() or not finite.any():
        return values
    index = np.arange(len(values))
    return np.asarray(np.interp(index, index[finite], values[finite]))


def sliding_median(values: np.ndarray, width: int) -> np.ndarray:
    """Medians of every window of `width` consecutive values (len(values) - width + 1 of them)."""
    if width > len(values):
        return np.empty(0)
    windows = np.lib.stride_tricks.sliding_window_view(values, width)
    if values.dtype.kind != "f" or np.isnan(values).any():
        # np.median's own: a float of integers, NaN for a window holding one
        return np.asarray(np.median(windows, axis=1))
    return _row_medians(windows)


def integrated_time(values: np.ndarray) -> float:
    """How many consecutive values carry the information of one independent value.

    Two estimates, the larger kept (it errs towards wider intervals): the variance of
    means of ever longer batches (Var(mean of m) × m / Var(x) grows with m until
    batches outlast the memory of the series, then levels off at the integrated
    autocorrelation time), and (1 + ρ) / (1 − ρ) from the lag-1 autocorrelation ρ,
    which is exact for AR(1) noise and sees memory longer than the batches can. 1 for
    independent values.
    """
    x = values[np.isfinite(values)]  # a copy: what follows works on it in place
    n = len(x)
    if n < 8:
        return 1.0
    # The time is scale-free: dividing by a typical magnitude only keeps squares of huge
    # values finite, so that magnitude may come from a thinned sample (a full median of a
    # million values costs more than the rest of this function).
    scale = median(np.abs(x[:: max(1, n // 10_000)])) or 1.0
    x /= scale
    x -= x.mean()
    base = float(x.var())
    if not base > 0.0 or not math.isfinite(base):
        return 1.0
    # numpy's own pairwise sum, not np.dot: BLAS sums in an order of its CPU's kernel, so
    # the last digits of the time (printed by compare --json) moved from machine to machine
    lagged = float(np.add.reduce(x[:-1] * x[1:]))
    rho = min(max(lagged / (base * n), 0.0), 0.995)
    tau = (1.0 + rho) / (1.0 - rho)
    batch, y = 1, x
    while len(y) >= 32:  # keep at least 16 batch means at the next level
        even = len(y) // 2 * 2
        y = (y[0:even:2] + y[1:even:2]) / 2.0
        batch *= 2
        tau = max(tau, batch * float(y.var()) / base)
    return tau


def long_run_sd(values: np.ndarray, lag: int | None = None, cuts: list[int] | None = None) -> float:
    """The long-run standard deviation of a series that may hold a few level shifts.

    σ_lr² = γ0 (1 + ρ) / (1 − ρ), an AR(1) approximation with γ0 and ρ taken from the
    MAD of differences at lag 1 and at a longer lag. Differences barely see a level
    shift (only the pairs that straddle it), and none straddle the `cuts` (indices
    where a shift may be), so a change point does not inflate the noise it is judged
    against.
    """
    n = len(values)
    if np.isfinite(values).sum() < 4:
        return math.nan
    lag = lag or max(2, min(20, n // 10))
    lag = min(lag, n - 1)
    bounds = [0, *sorted(c for c in (cuts or []) if 0 < c < n), n]

    def differences(step: int) -> np.ndarray:
        parts = [
            values[lo + step : hi] - values[lo : hi - step]
            for lo, hi in itertools.pairwise(bounds)
            if hi - lo > step
        ]
        return np.concatenate(parts) if parts else np.empty(0)

    s1 = mad_sd(differences(1)) ** 2 / 2.0  # γ0 − γ1
    s_lag = mad_sd(differences(lag)) ** 2 / 2.0  # ≈ γ0 once the memory is shorter than lag
    if not math.isfinite(s1):
        return math.nan
    if not s_lag > 0:
        return float(math.sqrt(max(s1, 0.0)))
    rho = min(max(1.0 - s1 / s_lag, 0.0), 0.98)
    return float(math.sqrt(s_lag * (1.0 + rho) / (1.0 - rho)))
