"""The arithmetic of the watch's always-valid interval, shared by the monitor of one run
(ledger.analyze.sequential) and its vectorised twin for many runs (sequential_batch).
Both build two intervals from it, each at half the run's alpha: one for the effective
throughput, one for the typical-step rate.

The effective throughput R = Σ work / Σ cost after n steady steps has the residual sum
S(R) = Σ (work_i − R·cost_i) / w̄, a sum of n dependent terms with long-run variance
n·σ² per step (σ relative). Robbins' normal mixture bounds such a sum at every n at
once: |S| ≤ √((nσ² + ρ) · log((nσ² + ρ) / (ρ α²))) with probability 1 − α, for all n
together (Howard, Ramdas, McAuliffe & Sekhon 2021, eq. 14; ρ = n₀σ² puts the tightest
part of the boundary near n₀ steps). Solving for R gives R̂·(1 ± h) with

    h = σ · √((n + n₀) · log((n + n₀) / (n₀ α²))) / n.

σ² is not known: it is estimated conservatively, as the larger of
- batch means: the spread of batch residuals W_b − R̂·C_b over the longest dyadic
  batches (1, 2, 4, … steps from the steady start) of which at least MIN_BLOCKS are
  complete, or over the cycles between stalls once MIN_CYCLES have closed (so a regular
  checkpoint counts as what it is, not as noise); each raised by (K−1)/χ²_{K−1}(0.10),
  an upper confidence bound on a variance from K batches;
- AR(1): γ₀·(1 + ρ⁺)/(1 − ρ⁺) from the step residuals (stall steps capped), with ρ⁺ an
  upper confidence bound on the lag-1 autocorrelation (Kendall's bias correction plus
  RHO_Z standard errors), for the first hundred steps, when no batch is yet long enough
  to see memory as long as φ = 0.9's.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ledger.analyze import special

ALPHA = 0.01  # two-sided: the interval misses the truth at any step with at most this chance
TUNED_AT = 100  # n₀: steady steps where the boundary is tightest
MIN_BLOCKS = 8  # complete dyadic batches a level needs to count
MIN_CYCLES = 3  # closed cycles between stalls before they are the batches
UPPER_Q = 0.10  # lower χ² quantile of the variance's upper confidence bound
RHO_Z = 3.0  # standard errors added to the lag-1 autocorrelation
RHO_MAX = 0.98
INFLATION_TABLE = 4096


@functools.cache
def _inflation_table() -> np.ndarray:
    # scipy.special here only (not at the top: compare, which never reaches this table,
    # would pay 0.15 s for its import); not scipy.stats, which costs more again
    from scipy.special import chdtri

    df = np.arange(1, INFLATION_TABLE + 1, dtype=np.float64)
    # chdtri(df, 1 − q) is the χ² quantile at q (what scipy.stats' chi2.ppf computes)
    return np.concatenate([[np.inf], df / chdtri(df, 1.0 - UPPER_Q)])


def inflation(batches: np.ndarray | int) -> np.ndarray:
    """(K−1)/χ²_{K−1}(UPPER_Q): how much a variance from K batches is raised (K ≥ 2)."""
    k = np.maximum(np.asarray(batches, dtype=np.int64), 2) - 1
    inside = np.minimum(k, INFLATION_TABLE)
    # past the table, the normal approximation of χ²: 1 + z·√(2/df)
    beyond = 1.0 + 1.2816 * np.sqrt(2.0 / np.maximum(k, 1))
    return np.asarray(np.where(k <= INFLATION_TABLE, _inflation_table()[inside], beyond))


def half_width(sigma: np.ndarray | float, n: np.ndarray | float, alpha: float) -> np.ndarray:
    """h: the relative half-width of the interval after n steps (see the module's docstring)."""
    n = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    spread = (n + TUNED_AT) * np.log((n + TUNED_AT) / (TUNED_AT * alpha**2))
    return np.asarray(np.asarray(sigma) * np.sqrt(spread) / n)


def batch_variance(
    count: np.ndarray | int,
    sum_w: np.ndarray | float,
    sum_c: np.ndarray | float,
    sum_ww: np.ndarray | float,
    sum_wc: np.ndarray | float,
    sum_cc: np.ndarray | float,
    ratio: np.ndarray | float,
) -> np.ndarray:
    """Sample variance of the batch residuals W_b − ratio·C_b, from their sums."""
    k = np.asarray(count, dtype=np.float64)
    squares = np.asarray(sum_ww) - 2.0 * ratio * np.asarray(sum_wc) + ratio**2 * np.asarray(sum_cc)
    mean = (np.asarray(sum_w) - ratio * np.asarray(sum_c)) / np.maximum(k, 1.0)
    return np.asarray(np.maximum(squares - k * mean**2, 0.0) / np.maximum(k - 1.0, 1.0))


def ar1_variance(
    n: np.ndarray | float,
    sum_z: np.ndarray | float,
    sum_zz: np.ndarray | float,
    sum_lag: np.ndarray | float,
) -> np.ndarray:
    """γ₀(1 + ρ⁺)/(1 − ρ⁺) per step from Σz, Σz² and Σ z_t z_(t−1) of n residuals."""
    n = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    mean = np.asarray(sum_z) / n
    g0 = np.asarray(sum_zz) / n - mean**2
    g1 = np.asarray(sum_lag) / np.maximum(n - 1.0, 1.0) - mean**2
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.clip(np.where(g0 > 0, g1 / g0, 0.0), -0.99, 0.99)
    upper = rho + (1.0 + 3.0 * np.maximum(rho, 0.0)) / n + RHO_Z * np.sqrt((1.0 - rho**2) / n)
    upper = np.clip(upper, 0.0, RHO_MAX)
    tau = (1.0 + upper) / (1.0 - upper)
    # the sample variance of a short, persistent series misses the part its mean absorbed
    g0 = np.maximum(g0, 0.0) * n / np.maximum(n - tau, n / 2.0)
    return np.asarray(g0 * tau)


def steps_to(
    target: float, sigma: float, n: int, alpha: float, limit: int = 10_000_000
) -> int | None:
    """Fewest steps n' ≥ n with half_width(σ, n') ≤ target (None: beyond `limit`).

    A few vectorised passes (a geometric grid, then ever finer grids inside the bracket
    found), so a status line can ask after every step.
    """
    if not (target > 0 and math.isfinite(sigma)):
        return None
    low = max(int(n), 1)
    if sigma <= 0.0 or float(half_width(sigma, low, alpha)) <= target:
        return low
    if float(half_width(sigma, limit, alpha)) > target:
        return None
    grid = np.unique(np.geomspace(low, limit, 256).astype(np.int64))
    high = limit
    while True:
        fits = np.flatnonzero(half_width(sigma, grid, alpha) <= target)
        high = int(grid[fits[0]]) if len(fits) else high
        low = int(grid[fits[0] - 1]) + 1 if len(fits) and fits[0] > 0 else low
        if high - low <= 256:  # the last grid holds every step of the bracket
            inside = np.arange(low, high + 1)
            return int(inside[np.flatnonzero(half_width(sigma, inside, alpha) <= target)[0]])
        grid = np.unique(np.linspace(low, high, 256).astype(np.int64))


def interval_t(level: float, batches: int) -> float:
    """Student's t quantile for a two-sided interval at `level` from `batches` batches."""
    return float(special.stdtrit(max(batches - 1, 1), 0.5 + level / 2.0))
