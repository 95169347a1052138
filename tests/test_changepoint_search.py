"""The change-point search (ledger.analyze.changepoints.optimal_partition) is the exact
penalised least-squares segmentation: at the penalty compare uses it finds what ruptures'
KernelCPD (linear kernel) finds, and at any penalty its total cost is never higher."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ledger.analyze.changepoints import CANDIDATE_PENALTY, optimal_partition


def _signal(rng: np.random.Generator, quantised: bool) -> np.ndarray:
    n = int(rng.integers(20, 420))
    x = rng.normal(1.0, 0.02, n)
    for _ in range(int(rng.integers(0, 4))):
        x[int(rng.integers(1, n)) :] *= rng.choice([0.9, 1.05, 0.97])
    return np.round(x, 2) if quantised else x  # printed figures tie


def _cost(x: np.ndarray, ends: list[int], penalty: float) -> float:
    starts = [0, *ends[:-1]]
    sse = sum(
        float(((x[s:e] - x[s:e].mean()) ** 2).sum()) for s, e in zip(starts, ends, strict=True)
    )
    return sse + penalty * (len(ends) - 1)


@pytest.mark.parametrize("factor", [0.1, 1.0, 10.0])
def test_same_segmentation_as_ruptures_and_never_costlier(factor: float) -> None:
    ruptures = pytest.importorskip("ruptures")
    rng = np.random.default_rng(7)
    same = 0
    for trial in range(120):
        x = _signal(rng, quantised=trial % 3 == 0)
        n = len(x)
        min_size = max(3, math.ceil(n * 0.01))
        penalty = CANDIDATE_PENALTY * 0.02**2 * math.log(n) * factor
        algo = ruptures.KernelCPD(kernel="linear", min_size=min_size, jump=1)
        theirs = [int(e) for e in algo.fit(x.reshape(-1, 1)).predict(pen=penalty)]
        ours = optimal_partition(x, min_size, penalty)
        assert all(b - a >= min_size for a, b in zip([0, *ours[:-1]], ours, strict=True))
        assert _cost(x, ours, penalty) <= _cost(x, theirs, penalty) + 1e-12
        same += ours == theirs
    if factor >= 1.0:  # the penalty compare uses and above: the same cuts every time
        assert same == 120
    else:  # far below it ruptures' pruning is approximate; ours is the optimum
        assert same >= 100


def test_a_clear_shift_is_cut_where_it_is() -> None:
    x = np.r_[np.full(100, 1.0), np.full(100, 0.9)] + np.random.default_rng(0).normal(0, 0.005, 200)
    assert optimal_partition(x, 3, 0.01) == [100, 200]
    assert optimal_partition(x[:5], 3, 0.01) == [5]  # too short to cut
