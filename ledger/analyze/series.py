"""From step rows to one throughput value per step: what every other analysis reads.

A step's throughput is the `throughput` column where it was recorded; where it was not,
tokens / step_time_s; a run that has neither falls back to steps per second
(1 / step_time_s). With several ranks, a step's throughput is the mean over the ranks
that reported it (so it stays comparable when some ranks log fewer steps), and its step
time the slowest rank's (synchronous training waits for that one); so are its wait and
wall time, while its tokens are the mean over ranks (per-rank work, like the throughput).
Values that are not finite and positive, or a million times off the run's median, are
dropped (`dropped`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ledger.analyze.robust import median
from ledger.readings.steps import StepColumns as StepColumns  # the store fills them

SOURCE_THROUGHPUT = "throughput"
SOURCE_TOKENS = "tokens/step_time"
SOURCE_MIXED = "throughput, else tokens/step_time"
SOURCE_STEP_RATE = "1/step_time"
PLAUSIBLE_RANGE = 1e6  # values further than this factor from the run's median are dropped


@dataclass(frozen=True)
class RankValues:
    """Per-(rank, step) throughput, kept for the per-rank spread."""

    rank: np.ndarray
    step: np.ndarray
    value: np.ndarray


@dataclass(frozen=True)
class Trace:
    """One throughput value per step, in step order, with only finite positive values."""

    steps: np.ndarray  # int64, increasing
    values: np.ndarray  # float64
    step_time_s: np.ndarray | None  # float64 per step (NaN where unknown), or None
    source: str
    ranks: RankValues | None  # set when the run has more than one rank
    dropped: int  # steps without a usable throughput
    tokens: np.ndarray | None = None  # per step (mean over ranks), NaN where unknown
    wall_time: np.ndarray | None = None  # per step (latest rank), NaN where unknown
    wait_s: np.ndarray | None = None  # per step (longest rank), NaN where unknown

    def __len__(self) -> int:
        return len(self.values)


def _usable(values: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.asarray(np.isfinite(values) & (values > 0))


def row_throughput(columns: StepColumns) -> tuple[np.ndarray, str]:
    """Throughput per row and where it came from (see the module's docstring)."""
    n = len(columns)
    values = (
        np.array(columns.throughput, dtype=np.float64)
        if columns.throughput is not None
        else np.full(n, np.nan)
    )
    recorded = _usable(values)
    values[~recorded] = np.nan
    source = SOURCE_THROUGHPUT
    have_time = columns.step_time_s is not None
    if not recorded.all() and columns.tokens is not None and have_time:
        with np.errstate(divide="ignore", invalid="ignore"):
            derived = np.asarray(columns.tokens, dtype=np.float64) / np.asarray(
                columns.step_time_s, dtype=np.float64
            )
        fill = ~recorded & _usable(derived)
        if fill.any():
            values[fill] = derived[fill]
            source = SOURCE_MIXED if recorded.any() else SOURCE_TOKENS
    if not _usable(values).any() and have_time:
        with np.errstate(divide="ignore", invalid="ignore"):
            values = 1.0 / np.asarray(columns.step_time_s, dtype=np.float64)
        values[~_usable(values)] = np.nan
        source = SOURCE_STEP_RATE
    return values, source


def _floats(values: np.ndarray | None) -> np.ndarray | None:
    return None if values is None else np.asarray(values, dtype=np.float64)


def build_trace(columns: StepColumns) -> Trace:
    """Reduce step rows to one throughput per step (mean over ranks), in step order."""
    values, source = row_throughput(columns)
    step = np.asarray(columns.step, dtype=np.int64)
    extra = {
        "step_time_s": _floats(columns.step_time_s),
        "tokens": _floats(columns.tokens),
        "wall_time": _floats(columns.wall_time),
        "wait_s": _floats(columns.wait_s),
    }
    rank = columns.rank
    several = rank is not None and len(rank) > 0 and rank.min() != rank.max()
    per_step_extra: dict[str, np.ndarray | None]
    if not several:
        if len(step) > 1 and np.any(np.diff(step) < 0):
            order = np.argsort(step, kind="stable")
            step, values = step[order], values[order]
            extra = {k: v[order] if v is not None else None for k, v in extra.items()}
        uniq, per_step, per_step_extra = step, values, extra
        ranks = None
    else:
        assert rank is not None
        uniq, inverse = np.unique(step, return_inverse=True)
        per_step = _mean_by(inverse, values, len(uniq))
        order = np.argsort(inverse, kind="stable")
        starts = np.searchsorted(inverse[order], np.arange(len(uniq)))
        per_step_extra = {}
        for name, column in extra.items():
            if column is None:
                per_step_extra[name] = None
            elif name == "tokens":
                per_step_extra[name] = _mean_by(inverse, column, len(uniq))
            else:
                # fmax ignores NaN: the slowest (or latest) rank that reported a value
                per_step_extra[name] = np.fmax.reduceat(column[order], starts)
        ranks = RankValues(rank=np.asarray(rank, dtype=np.int64), step=step, value=values)
    keep = _usable(per_step)
    if keep.any():
        # a value a million times off the run's median is a unit or parsing accident, not
        # a slow step; leaving it in would only overflow the arithmetic
        usable = per_step[keep]
        low, high = float(usable.min()), float(usable.max())
        # the median lies between the extremes, so when they are within the range of each
        # other every value is within it of the median: a median of a million steps saved
        if not high < low * PLAUSIBLE_RANGE:
            middle = median(usable)
            keep &= (per_step > middle / PLAUSIBLE_RANGE) & (per_step < middle * PLAUSIBLE_RANGE)

    def kept(name: str) -> np.ndarray | None:
        column = per_step_extra[name]
        return column[keep] if column is not None else None

    return Trace(
        steps=uniq[keep],
        values=per_step[keep],
        step_time_s=kept("step_time_s"),
        source=source,
        ranks=ranks,
        dropped=int((~keep).sum()),
        tokens=kept("tokens"),
        wall_time=kept("wall_time"),
        wait_s=kept("wait_s"),
    )


def _mean_by(inverse: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    """Mean of the finite values per group (NaN for a group without one)."""
    finite = np.isfinite(values)
    counts = np.bincount(inverse, weights=finite.astype(np.float64), minlength=count)
    sums = np.bincount(inverse, weights=np.where(finite, values, 0.0), minlength=count)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
