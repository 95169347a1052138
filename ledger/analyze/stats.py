"""Statistics of a steady window that respect autocorrelation: batch medians.

(The effective throughput's interval, a ratio over the same kind of batches, is in
ledger.analyze.effective.)

Adjacent steps are not independent (a slow data-loader stretch lasts many steps), so
the usual standard error, which treats n steps as n independent draws, is far too
small. The steady window is cut into K consecutive batches, each at least six times as
long as the series' integrated autocorrelation time, so that batch medians are nearly
independent; K is at most 32. The median's uncertainty is taken from the spread of the
batch medians (on the log scale, so that ratios of runs are symmetric):
se = sd(log batch medians) / √K, and intervals use Student's t with K − 1 degrees of
freedom. Few, long batches make the interval wider, never falsely narrow. The spread
of the batch means (relative) is a floor for that standard error, so that coarsely
printed throughput ("14.2K tok/s": tied batch medians) does not look certain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ledger.analyze import special
from ledger.analyze.robust import integrated_time, median
from ledger.analyze.robust import percentiles as order_percentiles

MAX_BATCHES = 32
BATCH_TIMES = 6.0  # batch length in integrated autocorrelation times


def _exp(x: float) -> float:
    """exp that saturates instead of overflowing (absurd inputs make absurd, finite bounds)."""
    return math.exp(min(x, 700.0))


@dataclass(frozen=True)
class Estimate:
    """A positive figure (a median, an effective throughput) with the standard error of
    its logarithm, from `batches` batches."""

    value: float
    se_log: float  # NaN when there are fewer than two batches
    batches: int
    tau: float  # integrated autocorrelation time, in steps

    def interval(self, level: float = 0.95) -> tuple[float, float] | None:
        if not math.isfinite(self.se_log) or self.batches < 2:
            return None
        t = float(special.stdtrit(self.batches - 1, 0.5 + level / 2.0))
        return (self.value * _exp(-t * self.se_log), self.value * _exp(t * self.se_log))


def batch_count(n: int, tau: float) -> int:
    """How many batches of at least BATCH_TIMES × tau steps fit, at most MAX_BATCHES.

    A run too short for two such batches (a few dozen steps) gets up to five batches of
    at least two steps: its memory cannot be measured anyway, and t with few degrees of
    freedom keeps the interval wide.
    """
    if not math.isfinite(tau):
        tau = n / 2.0
    length = max(1, math.ceil(BATCH_TIMES * tau))
    count = int(min(MAX_BATCHES, n // length))
    if count < 2 and n >= 4:
        count = min(5, n // 2)
    return count


def estimate_median(values: np.ndarray) -> Estimate:
    """The median of `values` (finite, positive) with its batch-median standard error."""
    n = len(values)
    if n == 0:
        return Estimate(math.nan, math.nan, 0, math.nan)
    middle = median(values)
    tau = integrated_time(values)
    k = batch_count(n, tau)
    if k < 2:
        return Estimate(middle, math.nan, k, tau)
    batches = np.array_split(values, k)
    logs = np.log([median(batch) for batch in batches])
    se = float(np.std(logs, ddof=1) / math.sqrt(k))
    # Throughput printed with few digits ("14.2K tok/s") gives tied batch medians and a
    # standard error of zero; the batch means still vary, so their spread is a floor.
    means = np.array([batch.mean() for batch in batches])
    se_means = float(np.std(means, ddof=1) / (abs(float(means.mean())) * math.sqrt(k)))
    return Estimate(middle, max(se, se_means), k, tau)


@dataclass(frozen=True)
class Difference:
    """B relative to A: the ratio of their figures, its interval and two-sided p-value."""

    ratio: float  # b.value / a.value
    low: float  # interval on the ratio
    high: float
    p_value: float
    df: float


def difference(a: Estimate, b: Estimate, level: float = 0.95) -> Difference:
    """Welch's t-test on the logarithms of two figures with their batch standard errors.

    With a zero standard error on both sides (perfectly constant runs) any difference is
    certain (p = 0) and none is p = 1.
    """
    d = math.log(b.value) - math.log(a.value)
    if a.batches < 2 or b.batches < 2:
        return Difference(_exp(d), math.nan, math.nan, math.nan, math.nan)
    va, vb = a.se_log**2, b.se_log**2
    se = math.sqrt(va + vb)
    if se == 0.0:
        p = 1.0 if d == 0.0 else 0.0
        return Difference(_exp(d), _exp(d), _exp(d), p, math.inf)
    parts = (va**2 / (a.batches - 1) if va else 0.0) + (vb**2 / (b.batches - 1) if vb else 0.0)
    df = (va + vb) ** 2 / parts if parts > 0 else math.inf
    t_stat = d / se
    p = float(2.0 * special.stdtr(df, -abs(t_stat)))
    q = float(special.stdtrit(df, 0.5 + level / 2.0))
    return Difference(_exp(d), _exp(d - q * se), _exp(d + q * se), p, df)


@dataclass(frozen=True)
class Summary:
    """The plain descriptive statistics of a steady window."""

    mean: float
    p10: float
    p90: float
    cv: float  # standard deviation / mean


def summarize(values: np.ndarray) -> Summary:
    if len(values) == 0:
        return Summary(math.nan, math.nan, math.nan, math.nan)
    mean = float(values.mean())
    p10, p90 = order_percentiles(values, (10, 90))
    sd = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    return Summary(mean, p10, p90, sd / mean if mean else math.nan)


def percentiles(values: np.ndarray | None, qs: tuple[float, ...]) -> tuple[float, ...] | None:
    """Percentiles of the finite values, or None when there are none."""
    if values is None:
        return None
    finite = values[np.isfinite(values)]
    if len(finite) == 0:
        return None
    return order_percentiles(finite, qs)
