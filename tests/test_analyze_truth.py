"""The analyzer against planted truth: warm-up, medians, change points, stalls, verdicts.

Every trace is generated here with a known truth (ledger.demo.traces: level ×
warm-up × regime × (1 + AR(1) noise), plus isolated stalls), over several noise levels
and autocorrelations, and the analysis must find that truth. These are the correctness
claims of docs/analysis.md; the false-alarm test is the slowest (a few seconds).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ledger.analyze import StepColumns, analyze_run, compare_pair
from ledger.demo import traces as syn

NOISE_LEVELS = (0.01, 0.03, 0.05)  # marginal relative standard deviation of a step
PHIS = (0.0, 0.5, 0.9)  # AR(1) coefficient: independent, short memory, long memory


def analyse(values: np.ndarray, name: str = "run", threshold: float = 0.02):
    return analyze_run(
        name, StepColumns(step=np.arange(len(values)), throughput=values), threshold=threshold
    )


# -- the steady window --------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["linear", "plateau", "compile"])
@pytest.mark.parametrize("n", [2000, 20000])
def test_steady_window_starts_after_warmup_and_soon_after(shape: str, n: int) -> None:
    """Never inside the warm-up, never more than 5 % of the run after it."""
    failures = []
    lengths = (0, 0.02, 0.08, 0.2) if shape != "compile" else (0, 5e-4, 1e-3)
    for (noise, phi, fraction), seed in itertools.product(
        itertools.product(NOISE_LEVELS, PHIS, lengths), range(2)
    ):
        warmup = int(fraction * n)
        values, truth = syn.trace(
            n, noise=noise, phi=phi, warmup=warmup, warmup_shape=shape, stalls=5, seed=seed
        )
        start = analyse(values).steady_from_step
        if not truth.warmup <= start <= truth.warmup + 0.05 * n:
            failures.append((noise, phi, warmup, seed, start))
    assert failures == []


def test_steady_window_of_a_stationary_run_starts_at_once() -> None:
    for noise, phi in itertools.product(NOISE_LEVELS, PHIS):
        values, _ = syn.trace(3000, noise=noise, phi=phi, seed=7)
        assert analyse(values).steady_from_step <= 0.05 * 3000


def test_a_fall_early_in_the_run_is_a_change_point_not_warmup() -> None:
    values, _ = syn.trace(4000, noise=0.02, phi=0.5, change_points=[(600, 0.8)], seed=3)
    run = analyse(values)
    assert run.steady_from_step <= 0.05 * 4000
    assert [abs(c.step - 600) <= 80 for c in run.change_points] == [True]


# -- the median -----------------------------------------------------------------------------


def test_median_within_one_percent_of_truth() -> None:
    errors = []
    for (noise, phi, shape), seed in itertools.product(
        itertools.product(NOISE_LEVELS, PHIS, ["linear", "plateau"]), range(3)
    ):
        level = 9000.0 + 1000.0 * seed
        values, _ = syn.trace(
            5000,
            level=level,
            noise=noise,
            phi=phi,
            warmup=400,
            warmup_shape=shape,
            stalls=20,
            seed=seed,
        )
        run = analyse(values)
        errors.append(abs(run.median / level - 1.0))
        assert run.ci95 is not None and run.ci95[0] < run.median < run.ci95[1]
    assert max(errors) < 0.01


def test_median_interval_covers_the_truth_about_95_percent_of_the_time() -> None:
    hits = 0
    seeds = 120
    for seed in range(seeds):
        phi = PHIS[seed % 3]
        values, truth = syn.trace(2000, noise=0.03, phi=phi, seed=1000 + seed)
        low, high = analyse(values).ci95  # type: ignore[misc]
        hits += low <= truth.level <= high
    assert 0.88 <= hits / seeds <= 0.995


# -- stalls and change points --------------------------------------------------------------


def test_isolated_stalls_are_counted_as_outliers_not_change_points() -> None:
    for noise, phi in itertools.product(NOISE_LEVELS, PHIS):
        values, truth = syn.trace(
            6000, noise=noise, phi=phi, warmup=200, stalls=12, stall_depth=0.3, seed=11
        )
        run = analyse(values)
        assert run.change_points == []
        assert run.outliers == len(truth.stalls)
        assert run.outlier_steps == truth.stalls


@pytest.mark.parametrize("factor", [0.8, 0.9, 0.95, 1.05, 1.1, 1.25])
def test_planted_change_point_is_found_within_two_percent(factor: float) -> None:
    n = 5000
    for (noise, phi), seed in itertools.product(
        [(0.01, 0.0), (0.01, 0.9), (0.03, 0.5), (0.02, 0.9)], range(3)
    ):
        at = int(np.random.default_rng(seed).uniform(0.25, 0.8) * n)
        values, _ = syn.trace(
            n,
            noise=noise,
            phi=phi,
            warmup=150,
            change_points=[(at, factor)],
            stalls=10,
            seed=seed,
        )
        run = analyse(values)
        found = [c.step for c in run.change_points]
        assert len(found) == 1 and abs(found[0] - at) <= 0.02 * n, (noise, phi, seed, at, found)
        change = run.change_points[0]
        assert abs(change.after / change.before - factor) < 0.02
        assert change.shift_pct == pytest.approx(100 * (change.after / change.before - 1))


def test_two_change_points_are_both_found() -> None:
    values, _ = syn.trace(
        8000, noise=0.02, phi=0.5, warmup=300, change_points=[(3000, 0.8), (6000, 1.15)], seed=5
    )
    found = [c.step for c in analyse(values).change_points]
    assert len(found) == 2
    assert abs(found[0] - 3000) <= 160 and abs(found[1] - 6000) <= 160


def test_no_change_points_invented_in_stationary_runs() -> None:
    invented = []
    for (noise, phi, n), seed in itertools.product(
        itertools.product(NOISE_LEVELS, (*PHIS, 0.97), (1000, 5000)), range(4)
    ):
        values, _ = syn.trace(n, noise=noise, phi=phi, warmup=n // 20, stalls=8, seed=seed)
        found = analyse(values).change_points
        if found:
            invented.append((noise, phi, n, seed, [c.step for c in found]))
    assert invented == []


def test_a_shift_below_the_threshold_is_not_a_change_point() -> None:
    values, _ = syn.trace(6000, noise=0.005, phi=0.0, change_points=[(3000, 0.99)], seed=2)
    assert analyse(values, threshold=0.02).change_points == []
    assert len(analyse(values, threshold=0.005).change_points) == 1


# -- verdicts --------------------------------------------------------------------------------


def test_verdict_is_right_in_every_clear_case() -> None:
    """|true effect| ≥ 5 %: improvement or regression every time; the CI holds the truth."""
    wrong, covered, cases = [], 0, 0
    for case, ((noise, phi, effect), repeat) in enumerate(
        itertools.product(
            itertools.product(NOISE_LEVELS, PHIS, (0.95, 1.05, 0.9, 1.1, 0.7, 1.3)), range(2)
        )
    ):
        seed = 200 * case + repeat  # every case its own noise, so the CI checks are independent
        a_values, _ = syn.trace(3000, noise=noise, phi=phi, warmup=150, stalls=5, seed=seed)
        b_values, _ = syn.trace(
            3000,
            level=14_200.0 * effect,
            noise=noise,
            phi=phi,
            warmup=250,
            stalls=5,
            seed=seed + 100_000,
        )
        c = compare_pair(analyse(a_values, "a"), analyse(b_values, "b"))
        expected = "improvement" if effect > 1 else "regression"
        if c.verdict != expected or c.p_value >= 0.01:  # type: ignore[operator]
            wrong.append((noise, phi, effect, seed, c.verdict, c.delta_pct, c.p_value))
        low, high = c.ci95_pct  # type: ignore[misc]
        covered += low <= 100 * (effect - 1) <= high
        cases += 1
    assert wrong == []
    assert covered / cases >= 0.85


@pytest.mark.slow
def test_false_alarm_rate_without_a_true_effect_is_at_most_one_percent() -> None:
    """300 pairs of runs with the same truth, noise 1-5 %, AR(1) φ 0-0.9, warm-up, stalls."""
    seeds = 300
    alarms = []
    for seed in range(seeds):
        noise = NOISE_LEVELS[seed % 3]
        phi = PHIS[(seed // 3) % 3]
        a_values, _ = syn.trace(2000, noise=noise, phi=phi, warmup=100, stalls=4, seed=2 * seed)
        b_values, _ = syn.trace(2000, noise=noise, phi=phi, warmup=100, stalls=4, seed=2 * seed + 1)
        c = compare_pair(analyse(a_values, "a"), analyse(b_values, "b"))
        if c.verdict != "no-change":
            alarms.append((seed, noise, phi, c.delta_pct, c.p_value))
    assert len(alarms) / seeds <= 0.01, alarms


def test_p_values_are_calibrated_on_noise_alone() -> None:
    """Without the practical threshold, p < 0.05 should happen about 5 % of the time."""
    p_values = []
    for seed in range(200):
        phi = PHIS[seed % 3]
        a_values, _ = syn.trace(1500, noise=0.03, phi=phi, seed=5000 + 2 * seed)
        b_values, _ = syn.trace(1500, noise=0.03, phi=phi, seed=5000 + 2 * seed + 1)
        p_values.append(compare_pair(analyse(a_values, "a"), analyse(b_values, "b")).p_value)
    rate = np.mean(np.array(p_values) < 0.05)
    assert 0.01 <= rate <= 0.10
