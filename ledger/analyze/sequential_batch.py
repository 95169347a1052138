"""The watch's sequential decision for many simulated runs at once, for benchmarks/.

The same rules and arithmetic as SequentialMonitor (ledger.analyze.sequential), written
on arrays (runs × steps) with cumulative sums, so that a thousand runs watched after
every step cost seconds, not hours. tests/test_sequential.py checks that both give the
same decision at the same step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ledger.analyze import confseq
from ledger.analyze.sequential import (
    BLOCK,
    DEFAULT_ALPHA,
    DEFAULT_THRESHOLD,
    GAP,
    MIN_SAME,
    MIN_STEADY,
    RISE_TOL,
    STALL_RATIO,
    WARMUP_CAP,
    WINDOW,
    Z_RISE,
)
from ledger.model.terms import Verdict

OUTCOMES = tuple(
    v.value for v in (Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.SAME, Verdict.UNDECIDED)
)


@dataclass(frozen=True)
class Watched:
    """What the monitor concluded for each run."""

    outcome: np.ndarray  # str per run: regression | improvement | same | undecided
    steady_steps: np.ndarray  # steady steps at the decision (−1: undecided)
    steady_start: np.ndarray  # index of the first steady step
    settled: np.ndarray  # bool: warm-up ended before the cap


def watch_many(
    work: np.ndarray,
    cost: np.ndarray,
    typical: np.ndarray,
    reference: float | tuple[np.ndarray | float, np.ndarray | float, np.ndarray | float],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    min_same: int | np.ndarray = MIN_SAME,
) -> Watched:
    """Watch every row of (runs × steps) arrays: work and cost per step, and the
    typical-step throughput the warm-up detector reads.

    `reference`: a number, or (value, low, high) of reference runs (their intervals at
    level 1 − alpha/2; the watched runs then get alpha/2), each a number or one per run;
    `min_same` likewise.
    """
    runs = work.shape[0]

    def per_run(x: np.ndarray | float) -> np.ndarray:
        return np.broadcast_to(np.asarray(x, dtype=np.float64), (runs,))[:, None]

    if isinstance(reference, tuple):
        value, ref_low, ref_high = (per_run(x) for x in reference)
        run_alpha = alpha / 2.0
    else:
        value = ref_low = ref_high = per_run(float(reference))
        run_alpha = alpha
    start, level, settled = _steady_start(typical)
    length = work.shape[1] - int(start.min())
    if length <= 0:
        return Watched(
            np.full(runs, Verdict.UNDECIDED.value, dtype=object), np.full(runs, -1), start, settled
        )
    w, c, valid = _align(work, start, length), _align(cost, start, length), None
    valid = np.isfinite(w)
    w, c = np.where(valid, w, 0.0), np.where(valid, c, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(valid, w / c, np.inf)
        stall = valid & (rate < STALL_RATIO * level[:, None])
        capped = np.where(stall, w / level[:, None], c)
        n = np.cumsum(valid, axis=1)
        total_w, total_c = np.cumsum(w, axis=1), np.cumsum(c, axis=1)
        total_cap = np.cumsum(capped, axis=1)
        ar = _ar1_variance(w, capped, total_w / total_cap, total_w / np.maximum(n, 1))
        ratio, behind, blocks = _dyadic(w, c, total_w / total_c, n)
        if stall.any():
            # whole cycles between stalls, once MIN_CYCLES have closed
            cycle_ratio, cycle_steps, cycles = _cycles(w, c, stall)
            ok = np.isfinite(cycles)
            ratio = np.where(ok, cycle_ratio, ratio)
            behind = np.where(ok, cycle_steps, behind)
            blocks = np.where(ok, cycles, blocks)
        half = run_alpha / 2.0  # the effective interval and the typical steps' share alpha
        h = confseq.half_width(np.sqrt(np.maximum(blocks, ar)), np.maximum(behind, 1), half)
        typical_ratio, typical_behind, typical_blocks = _dyadic(w, capped, total_w / total_cap, n)
        typical_h = confseq.half_width(
            np.sqrt(np.maximum(typical_blocks, ar)), np.maximum(typical_behind, 1), half
        )
        q = ratio / value
        lo = ratio * np.maximum(1.0 - h, 0.0) / ref_high
        hi = ratio * (1.0 + h) / ref_low
        typical_hi = typical_ratio * (1.0 + typical_h) / ref_low
    early = valid & (n >= MIN_STEADY)
    late = valid & (n >= per_run(min_same))
    regression = early & ((hi < 1.0) | (typical_hi < 1.0)) & (q < 1.0 - threshold)
    improvement = late & (lo > 1.0) & (q > 1.0 + threshold) & ~regression
    same = late & (lo > 1.0 - threshold) & (hi < 1.0 + threshold) & ~regression
    decided = regression | improvement | same
    first = np.where(decided.any(axis=1), np.argmax(decided, axis=1), -1)
    rows = np.arange(runs)
    at = np.maximum(first, 0)
    outcome = np.full(runs, Verdict.UNDECIDED.value, dtype=object)
    found = (
        (Verdict.REGRESSION, regression),
        (Verdict.IMPROVEMENT, improvement),
        (Verdict.SAME, same),
    )
    for name, mask in found:
        outcome[(first >= 0) & mask[rows, at]] = name.value
    steps = np.where(first >= 0, n[rows, at], -1)
    return Watched(outcome, steps, start, settled)


def _steady_start(typical: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Index of the first steady step, the level there, and whether warm-up ended."""
    runs, n = typical.shape
    count = n // BLOCK
    y = np.log(np.median(typical[:, : count * BLOCK].reshape(runs, count, BLOCK), axis=2))
    sums = np.concatenate([np.zeros((runs, 1)), np.cumsum(y, axis=1)], axis=1)
    k = np.arange(2 * WINDOW - 1, count)
    later = (sums[:, k + 1] - sums[:, k + 1 - WINDOW]) / WINDOW
    earlier = (sums[:, k + 1 - WINDOW] - sums[:, k + 1 - 2 * WINDOW]) / WINDOW
    jumps = np.concatenate(
        [np.zeros((runs, 1)), np.cumsum(np.abs(np.diff(y, axis=1)), axis=1)], axis=1
    )
    mean_jump = (jumps[:, k] - jumps[:, k + 1 - 2 * WINDOW]) / (2 * WINDOW - 1)
    se = mean_jump * math.sqrt(math.pi) / 2.0 * math.sqrt(2.0 / WINDOW)
    done = later - earlier <= np.maximum(Z_RISE * se, RISE_TOL)
    capped = k >= WARMUP_CAP // BLOCK
    first = np.argmax(done | capped[None, :], axis=1)
    rows = np.arange(runs)
    reached = (done | capped[None, :])[rows, first]
    settled = done[rows, first]
    start = np.where(reached, (k[first] + 1) * BLOCK + GAP, n)
    return start, np.exp(later[rows, first]), settled


def _align(x: np.ndarray, start: np.ndarray, length: int) -> np.ndarray:
    """Each row shifted to start at its steady start (NaN past its end)."""
    index = start[:, None] + np.arange(length)[None, :]
    out = np.take_along_axis(x, np.minimum(index, x.shape[1] - 1), axis=1)
    return np.where(index < x.shape[1], out, np.nan)


def _cumsum(a: np.ndarray) -> np.ndarray:
    return np.concatenate([np.zeros((a.shape[0], 1)), np.cumsum(a, axis=1)], axis=1)


def _dyadic(
    w: np.ndarray, c: np.ndarray, ratio: np.ndarray, n: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """R̂, its steps and σ² from the longest dyadic batches with MIN_BLOCKS complete, per
    step (where there are none yet: `ratio`, `n` steps, σ² 0).

    Batches of `size` steps are the longest with MIN_BLOCKS complete from step
    MIN_BLOCKS·size until twice that, so each length is computed on its own stretch only.
    """
    runs, length = w.shape
    ratio = ratio.copy()
    steps = np.array(n, dtype=np.int64)
    best = np.zeros((runs, length))
    size = 1
    while confseq.MIN_BLOCKS * size <= length:
        first = confseq.MIN_BLOCKS * size  # t from which this length is the longest usable
        last = min(2 * first - 1, length)
        count = last // size
        bw = w[:, : count * size].reshape(runs, count, size).sum(axis=2)
        bc = c[:, : count * size].reshape(runs, count, size).sum(axis=2)
        sums = [_cumsum(a) for a in (bw, bc, bw * bw, bw * bc, bc * bc)]
        done = np.arange(first, last + 1) // size
        part = slice(first - 1, last)
        here = [s[:, done] for s in sums]
        ratio[:, part] = here[0] / here[1]
        steps[:, part] = done * size
        sum_w, sum_c, sum_ww, sum_wc, sum_cc = here
        spread = confseq.batch_variance(done, sum_w, sum_c, sum_ww, sum_wc, sum_cc, ratio[:, part])
        mean_w = here[0] / (done * size)
        best[:, part] = spread / size / mean_w**2 * confseq.inflation(done)[None, :]
        size *= 2
    return ratio, steps, best


def _cycles(
    w: np.ndarray, c: np.ndarray, stall: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """R̂ over the closed cycles between stalls, their steps, and σ² from them, per step
    (σ² NaN before MIN_CYCLES have closed)."""
    runs, n = w.shape
    total_w, total_c = np.cumsum(w, axis=1), np.cumsum(c, axis=1)
    index = np.arange(n)[None, :]
    last = np.maximum.accumulate(np.where(stall, index, -1), axis=1)
    before = np.concatenate([np.full((runs, 1), -1), last[:, :-1]], axis=1)
    closes = stall & (before >= 0)
    where = np.maximum(before, 0)
    cycle_w = np.where(closes, total_w - np.take_along_axis(total_w, where, axis=1), 0.0)
    cycle_c = np.where(closes, total_c - np.take_along_axis(total_c, where, axis=1), 0.0)
    k = np.cumsum(closes, axis=1)
    sum_w, sum_c = np.cumsum(cycle_w, axis=1), np.cumsum(cycle_c, axis=1)
    sum_ww, sum_wc = np.cumsum(cycle_w**2, axis=1), np.cumsum(cycle_w * cycle_c, axis=1)
    sum_cc = np.cumsum(cycle_c**2, axis=1)
    steps = np.cumsum(np.where(closes, index - before, 0), axis=1)
    ratio = sum_w / np.where(sum_c > 0, sum_c, np.nan)
    spread = confseq.batch_variance(k, sum_w, sum_c, sum_ww, sum_wc, sum_cc, ratio)
    mean_w = sum_w / np.maximum(steps, 1)
    length = steps / np.maximum(k, 1)
    scaled = spread / np.maximum(length, 1) / mean_w**2 * confseq.inflation(k)
    return ratio, steps, np.where(k >= confseq.MIN_CYCLES, scaled, np.nan)


def _ar1_variance(
    w: np.ndarray, c: np.ndarray, ratio: np.ndarray, mean_w: np.ndarray
) -> np.ndarray:
    """σ² of the AR(1) bound from the step residuals w − ratio·c (c capped, ratio theirs)."""
    n = np.arange(1, w.shape[1] + 1)[None, :]

    def lagged(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _cumsum(a[:, 1:] * b[:, :-1])

    sum_z = (np.cumsum(w, axis=1) - ratio * np.cumsum(c, axis=1)) / mean_w
    squares = np.cumsum(w * w, axis=1) - 2 * ratio * np.cumsum(w * c, axis=1)
    sum_zz = (squares + ratio**2 * np.cumsum(c * c, axis=1)) / mean_w**2
    cross = lagged(w, c) + lagged(c, w)
    sum_lag = (lagged(w, w) - ratio * cross + ratio**2 * lagged(c, c)) / mean_w**2
    return confseq.ar1_variance(n, sum_z, sum_zz, sum_lag)
