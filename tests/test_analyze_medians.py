"""The analyzer's medians and percentiles (ledger.analyze.robust) are numpy's to the bit.

They take numpy's one-position partition instead of np.median's and np.percentile's
two-position one; every figure of a comparison must stay what numpy gave.
"""

from __future__ import annotations

import numpy as np
import pytest

from ledger.analyze.robust import block_medians, median, percentiles, sliding_median

SIZES = [*range(1, 40), 99, 100, 101, 1000, 1001, 10_000, 100_001]


def _samples(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        rng.lognormal(size=n),
        np.round(rng.normal(100.0, 3.0, size=n)),  # ties, as coarsely printed throughput
        np.full(n, 14_200.0),
    ]


@pytest.mark.parametrize("n", SIZES)
def test_median_and_percentiles_equal_numpy_bit_for_bit(n: int) -> None:
    for values in _samples(n, n):
        assert median(values) == float(np.median(values))
        for qs in [(10.0, 90.0), (50.0, 90.0, 99.0), (0.0, 100.0), (33.3, 66.7)]:
            assert percentiles(values, qs) == tuple(float(v) for v in np.percentile(values, qs))


def test_median_is_nan_when_a_value_is_and_of_nothing() -> None:
    values = np.arange(10.0)
    values[3] = np.nan
    assert np.isnan(median(values))
    assert np.isnan(median(np.empty(0)))


def _block_medians_by_sorting(values: np.ndarray, size: int) -> np.ndarray:
    count = -(-len(values) // size)
    padded = np.full(count * size, np.nan)
    padded[: len(values)] = values
    out = np.array([np.median(row[np.isfinite(row)]) if np.isfinite(row).any() else np.nan
                    for row in padded.reshape(count, size)])  # fmt: skip
    index = np.arange(count)
    finite = np.isfinite(out)
    return np.interp(index, index[finite], out[finite]) if not finite.all() else out


@pytest.mark.parametrize("size", [1, 2, 9, 10, 250, 2500])
def test_block_medians_equal_numpy_bit_for_bit(size: int) -> None:
    rng = np.random.default_rng(size)
    values = rng.normal(100.0, 3.0, size=20_000 + 7)
    gappy = values.copy()
    gappy[rng.choice(len(values), 300, replace=False)] = np.nan  # outliers taken out
    gappy[2 * size : 3 * size] = np.nan  # a whole block of nothing: filled from neighbours
    tied = np.round(gappy)  # many equal values about each middle
    for series in (values, values[: (len(values) // size) * size], gappy, tied):
        assert np.array_equal(block_medians(series, size), _block_medians_by_sorting(series, size))


@pytest.mark.parametrize("width", [1, 2, 3, 4, 7, 10, 51])
def test_sliding_medians_equal_numpy_bit_for_bit(width: int) -> None:
    for values in _samples(500, width):
        expected = np.median(np.lib.stride_tricks.sliding_window_view(values, width), axis=1)
        assert np.array_equal(sliding_median(values, width), expected)
        values = values.copy()
        values[[3, 250]] = np.nan  # a window holding NaN is NaN, as numpy has it
        expected = np.median(np.lib.stride_tricks.sliding_window_view(values, width), axis=1)
        assert np.array_equal(sliding_median(values, width), expected, equal_nan=True)
    assert len(sliding_median(np.ones(3), 4)) == 0
    counts = np.array([3, 1, 4, 1, 5, 9, 2, 6])  # integers: numpy's floats
    assert np.array_equal(
        sliding_median(counts, 2),
        np.median(np.lib.stride_tricks.sliding_window_view(counts, 2), axis=1),
    )
    assert sliding_median(counts, 2).dtype == np.float64
