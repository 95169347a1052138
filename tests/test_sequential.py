"""The watch's sequential decision: SequentialMonitor, fed one step at a time.

Runs come from ledger.demo.traces with a planted truth (effect, noise, AR(1) memory,
warm-up, stalls). The false-verdict rate and the decision times over thousands of runs
are benchmarks/bench_watch.py's; here each claim is checked on a few runs, and the
vectorised twin used by the benchmark is checked to decide exactly as the monitor does.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ledger.analyze import StepColumns, analyze_run, confseq
from ledger.analyze.sequential import (
    GAP,
    MIN_SAME,
    MIN_STEADY,
    SequentialMonitor,
    baseline_reference,
    reference_from_run,
)
from ledger.analyze.sequential_batch import watch_many
from ledger.analyze.wording import short_value
from ledger.demo import traces as syn
from ledger.model.analysis import Reference


def feed(
    monitor: SequentialMonitor,
    work: np.ndarray,
    cost: np.ndarray,
    typical: np.ndarray,
    *,
    first_step: int = 0,
    until_decided: bool = True,
) -> None:
    """Hook-like rows: one token per step, its step time, and the stall in the wait."""
    for i in range(len(work)):
        step_time = 1.0 / typical[i]
        monitor.add(
            first_step + i,
            throughput=typical[i],
            tokens=work[i],
            step_time_s=step_time,
            wait_s=cost[i] - step_time,
        )
        if until_decided and monitor.decision is not None:
            return


def simulated(runs: int, n: int, **kwargs: float) -> tuple[np.ndarray, ...]:
    defaults = {"warmup": 100, "compile_steps": 5}
    return syn.many_costs(runs, n, **{**defaults, **kwargs})  # type: ignore[arg-type]


# -- one engine, two implementations ---------------------------------------------------------


@pytest.mark.parametrize(
    ("noise", "phi", "effect", "stall_every"),
    [
        (0.04, 0.5, 0.75, 0),
        (0.04, 0.9, 0.95, 0),
        (0.02, 0.5, 1.0, 50),
        (0.08, 0.9, 1.05, 50),
        (0.01, 0.0, 1.0, 0),
    ],
)
def test_the_vectorised_twin_decides_exactly_as_the_monitor(
    noise: float, phi: float, effect: float, stall_every: int
) -> None:
    work, cost, typical, reference = simulated(
        8,
        2500,
        noise=noise,
        phi=phi,
        effect=effect,
        stall_every=stall_every,
        stall_cost=0.1 if stall_every else 0.0,
        seed=3,
    )
    batch = watch_many(work, cost, typical, reference)
    for run in range(8):
        monitor = SequentialMonitor(reference)
        feed(monitor, work[run], cost[run], typical[run])
        state = monitor.state()
        assert state.steady_from_step == batch.steady_start[run]
        assert (state.decision or "undecided") == batch.outcome[run]
        if state.decision is not None:
            assert state.steady_steps == batch.steady_steps[run]
            assert state.decided_at_step == batch.steady_start[run] + state.steady_steps - 1


# -- decisions on planted truths ---------------------------------------------------------------


def test_a_25_percent_regression_at_4_percent_noise_decides_within_150_steady_steps() -> None:
    for phi in (0.0, 0.5, 0.9):
        work, cost, typical, reference = simulated(
            30, 1500, noise=0.04, phi=phi, effect=0.75, seed=20
        )
        got = watch_many(work, cost, typical, reference)
        assert (got.outcome == "regression").all()
        assert np.percentile(got.steady_steps, 90) <= 150, phi


def test_no_true_difference_ends_same_and_never_in_a_false_verdict() -> None:
    cases = ((0.01, 0.0, 0), (0.04, 0.5, 0), (0.04, 0.9, 50), (0.08, 0.5, 50))
    for noise, phi, stall_every in cases:
        work, cost, typical, reference = simulated(
            200,
            8192,
            noise=noise,
            phi=phi,
            stall_every=stall_every,
            stall_cost=0.1 if stall_every else 0.0,
            seed=21,
        )
        got = watch_many(work, cost, typical, reference)
        assert not np.isin(got.outcome, ("regression", "improvement")).any(), (noise, phi)
        assert (got.outcome == "same").mean() >= 0.95
        assert (got.steady_steps[got.outcome == "same"] >= MIN_SAME).all()


def test_an_improvement_is_said_no_earlier_than_min_same_steps() -> None:
    work, cost, typical, reference = simulated(20, 2000, noise=0.01, phi=0.0, effect=1.2, seed=22)
    got = watch_many(work, cost, typical, reference)
    assert (got.outcome == "improvement").all()
    assert (got.steady_steps == MIN_SAME).all()  # clear at once, held back until then


def test_a_regression_needs_min_steady_steps_even_when_it_is_obvious() -> None:
    work, cost, typical, reference = simulated(5, 500, noise=0.01, phi=0.0, effect=0.5, seed=23)
    got = watch_many(work, cost, typical, reference)
    assert (got.outcome == "regression").all() and (got.steady_steps == MIN_STEADY).all()


def test_stalls_that_have_not_come_yet_cannot_make_a_run_look_faster() -> None:
    """A stall every 200 steps costing 20 %: before the first few, the run looks faster
    than a reference run that pays for them; `same` and `improvement` wait for three of
    the reference's stall intervals."""
    work, cost, typical, reference = simulated(
        100, 6000, noise=0.02, phi=0.5, stall_every=200, stall_cost=0.2, seed=24
    )
    bounds = (reference, reference * 0.999, reference * 1.001)
    got = watch_many(work, cost, typical, bounds, min_same=600)
    assert not np.isin(got.outcome, ("regression", "improvement")).any()
    assert (got.steady_steps[got.outcome == "same"] >= 600).all()
    ref = reference_from_run(
        analyze_run(
            "ref",
            StepColumns(
                step=np.arange(6000),
                tokens=work[0],
                step_time_s=1.0 / typical[0],
                wait_s=cost[0] - 1.0 / typical[0],
            ),
        )
    )
    assert ref.stall_every == pytest.approx(200, rel=0.05)
    assert SequentialMonitor(ref).min_same == math.ceil(3 * ref.stall_every)


def test_periodic_stalls_costing_15_percent_are_a_regression_with_equal_medians() -> None:
    """Against a baseline measured without stalls: the medians agree, the wall clock not."""
    work, cost, typical, _ = simulated(
        10, 3000, noise=0.02, phi=0.5, stall_every=50, stall_cost=0.15, seed=25
    )
    baseline = 1.0 / syn.mean_inverse(0.02)
    for run in range(10):
        monitor = SequentialMonitor(baseline)
        feed(monitor, work[run], cost[run], typical[run], until_decided=False)
        state = monitor.state()
        assert state.decision == "regression"
        assert state.pct_of_reference == pytest.approx(85.0, abs=3.0)
        assert state.median == pytest.approx(baseline, rel=0.02)
        assert state.stall_cost_pct == pytest.approx(15.0, abs=3.0)


# -- warm-up, found online ---------------------------------------------------------------------


def test_the_steady_window_starts_after_the_warmup_and_its_gap() -> None:
    for noise, phi in ((0.01, 0.0), (0.04, 0.5), (0.08, 0.9)):
        work, cost, typical, reference = simulated(50, 1200, noise=noise, phi=phi, seed=26)
        got = watch_many(work, cost, typical, reference)
        assert (got.steady_start >= 100 + GAP).all(), (noise, phi)
        assert np.median(got.steady_start) <= 100 + GAP + 100
        assert got.settled.all()


def test_a_run_that_never_stops_climbing_is_declared_steady_at_the_cap() -> None:
    monitor = SequentialMonitor(1000.0)
    for i in range(3000):
        monitor.add(i, throughput=100.0 * (1.0 + i / 100.0))
    state = monitor.state()
    assert state.phase == "steady" and not state.settled
    assert state.steady_from_step is not None and state.steady_from_step > 2000


def test_the_phase_is_warmup_until_the_steady_window_opens() -> None:
    monitor = SequentialMonitor(100.0)
    assert monitor.state().phase == "warmup"
    for i in range(60):
        monitor.add(i, throughput=100.0 + (i % 3))
    state = monitor.state()
    assert state.phase == "warmup" and state.effective is None
    assert state.summary == "warm-up: 60 steps, not steady yet"


# -- the reference -------------------------------------------------------------------------


def test_a_reference_run_carries_its_own_uncertainty() -> None:
    t = syn.timed(1500, noise=0.04, phi=0.5, warmup=100, seed=27)
    analysis = analyze_run(
        "ref", StepColumns(step=np.arange(1500), tokens=t.tokens, step_time_s=t.step_time_s)
    )
    ref = reference_from_run(analysis)
    assert ref.kind == "run" and ref.low < ref.value < ref.high  # type: ignore[operator]
    watched = syn.timed(2000, noise=0.04, phi=0.5, warmup=100, seed=28)
    by_run, by_number = SequentialMonitor(ref), SequentialMonitor(ref.value)
    for monitor in (by_run, by_number):
        for i in range(400):
            monitor.add(i, tokens=4096.0, step_time_s=float(watched.step_time_s[i]))
    run_ci, number_ci = by_run.state().pct_ci, by_number.state().pct_ci
    assert run_ci is not None and number_ci is not None
    assert run_ci[1] - run_ci[0] > number_ci[1] - number_ci[0]


def test_a_reference_too_uncertain_to_resolve_the_threshold_is_said_so() -> None:
    wobbly = 1000 + 300 * np.sin(np.arange(12))
    ref = reference_from_run(
        analyze_run("short", StepColumns(step=np.arange(12), throughput=wobbly))
    )
    monitor = SequentialMonitor(ref)
    for i in range(600):
        monitor.add(i, throughput=1000.0 + (i % 5))
    state = monitor.state()
    assert state.decision is None and state.remaining_steps is None
    assert "undecided: cannot resolve ±2 %" in state.summary


def test_the_baseline_must_be_a_positive_number() -> None:
    with pytest.raises(ValueError):
        baseline_reference(0.0)
    with pytest.raises(ValueError):
        SequentialMonitor(math.nan)
    with pytest.raises(ValueError):
        SequentialMonitor(100.0, threshold=1.5)


# -- the remaining-steps estimate --------------------------------------------------------------


def test_the_remaining_steps_estimate_is_about_right_for_steady_noise() -> None:
    """Predicted at 200 steady steps, against the steps the decision then took."""
    ratios = []
    for seed in range(6):
        work, cost, typical, reference = simulated(1, 8000, noise=0.05, phi=0.5, seed=30 + seed)
        monitor = SequentialMonitor(reference)
        predicted = None
        for i in range(8000):
            feed(
                monitor, work[0, i : i + 1], cost[0, i : i + 1], typical[0, i : i + 1], first_step=i
            )
            if predicted is None and monitor.state().steady_steps == 200:
                predicted = monitor.state().remaining_steps
            if monitor.decision is not None:
                break
        assert predicted is not None and monitor.decision == "same"
        ratios.append((monitor.state().steady_steps - 200) / predicted)
    assert 0.4 <= float(np.median(ratios)) <= 2.5, ratios


def test_the_remaining_steps_shrink_as_steps_come() -> None:
    work, cost, typical, reference = simulated(1, 4000, noise=0.05, phi=0.5, seed=40)
    monitor = SequentialMonitor(reference)
    seen = []
    for i in range(4000):
        feed(monitor, work[0, i : i + 1], cost[0, i : i + 1], typical[0, i : i + 1], first_step=i)
        state = monitor.state()
        if state.phase == "steady" and state.steady_steps % 100 == 0 and state.decision is None:
            seen.append((state.steady_steps, state.remaining_steps))
        if state.decision is not None:
            break
    assert len(seen) >= 3
    remaining = [r for _, r in seen if r is not None]
    assert remaining[-1] < remaining[0]


# -- the state and odd input -------------------------------------------------------------------


def test_the_state_is_json_clean_and_says_where_the_run_stands() -> None:
    work, cost, typical, reference = simulated(1, 3000, noise=0.02, phi=0.5, effect=0.8, seed=41)
    monitor = SequentialMonitor(reference)
    feed(monitor, work[0], cost[0], typical[0])
    state = monitor.state()
    data = json.loads(json.dumps(state.to_dict(), allow_nan=False))
    assert data["decision"] == "regression" and data["phase"] == "steady"
    assert data["reference"] == {
        "kind": "baseline", "value": reference, "run": None, "low": None, "high": None,
        "stall_every": None,
    }  # fmt: skip
    assert data["pct_ci"][0] < data["pct_of_reference"] < data["pct_ci"][1] < 100.0
    assert data["remaining_steps"] == 0
    assert state.summary.startswith("regression: ")
    assert f"slower than the {short_value(reference)} baseline" in state.summary
    assert state.summary.endswith(f"after {state.steady_steps:,} steady steps")


def test_an_undecided_state_estimates_the_remaining_steps() -> None:
    work, cost, typical, reference = simulated(1, 600, noise=0.08, phi=0.5, seed=42)
    monitor = SequentialMonitor(reference)
    feed(monitor, work[0], cost[0], typical[0])
    state = monitor.state()
    assert state.decision is None and state.remaining_steps is not None
    assert state.remaining_steps > 0
    assert f"about {state.remaining_steps:,} more steps to resolve ±2 %" in state.summary


def test_rows_without_a_throughput_or_out_of_order_are_counted_not_used() -> None:
    monitor = SequentialMonitor(100.0)
    monitor.add(0, throughput=100.0)
    monitor.add(0, throughput=100.0)  # the same step again
    monitor.add(1, throughput=math.nan)
    monitor.add(2, throughput=-5.0, step_time_s=0.0)
    monitor.add(3, tokens=400.0, step_time_s=4.0)
    assert (monitor.rows, monitor.ignored) == (2, 3)


def test_wall_time_and_throughput_only_rows_are_judged_too() -> None:
    """A timestamped log with tok/s only: the wall clock gives each interval its cost."""
    t = syn.timed(1200, noise=0.01, phi=0.0, stall_every=40, stall_cost=0.2, seed=43)
    monitor = SequentialMonitor(14_200.0)
    for i in range(1200):
        monitor.add(i, throughput=float(t.throughput[i]), wall_time=float(t.wall_time[i]))
    state = monitor.state()
    assert state.basis == "wall_time"
    assert state.decision == "regression"
    assert state.effective == pytest.approx(t.effective, rel=0.03)


def test_extend_reduces_ranks_per_step() -> None:
    steps = np.repeat(np.arange(600), 2)
    ranks = np.tile(np.arange(2), 600)
    rng = np.random.default_rng(44)
    throughput = 1000.0 * (1.0 + 0.01 * rng.normal(size=1200))
    monitor = SequentialMonitor(1000.0)
    monitor.extend(StepColumns(step=steps, rank=ranks, throughput=throughput))
    assert monitor.rows == 600
    assert monitor.state().effective == pytest.approx(1000.0, rel=0.01)


def test_the_block_sums_stay_logarithmic() -> None:
    monitor = SequentialMonitor(100.0)
    rng = np.random.default_rng(45)
    for i in range(20_000):
        monitor.add(i, throughput=100.0 * (1.0 + 0.02 * rng.normal()))
    levels = monitor._sums.batches.levels  # the binary counter behind the batches
    assert len(levels) <= math.ceil(math.log2(20_000)) + 2


def test_steps_to_finds_the_fewest_steps_that_narrow_the_interval_enough() -> None:
    rng = np.random.default_rng(46)
    for _ in range(200):
        sigma, n, target = (
            rng.uniform(0.001, 2.0),
            int(rng.integers(1, 5000)),
            rng.uniform(5e-4, 0.5),
        )
        got = confseq.steps_to(target, sigma, n, 0.005)
        if got is None:
            assert float(confseq.half_width(sigma, 10_000_000, 0.005)) > target
            continue
        assert float(confseq.half_width(sigma, got, 0.005)) <= target
        assert got == n or float(confseq.half_width(sigma, got - 1, 0.005)) > target


def test_the_pace_of_the_run_is_there_for_a_stall_timer() -> None:
    t = syn.timed(800, noise=0.02, phi=0.0, stall_every=100, stall_cost=0.1, seed=47)
    monitor = SequentialMonitor(14_200.0)
    for i in range(800):
        monitor.add(
            i,
            tokens=4096.0,
            step_time_s=float(t.step_time_s[i]),
            wait_s=float(t.wait_s[i]),
        )
    state = monitor.state()
    steady = slice(800 - state.steady_steps, 800)
    costs = t.step_time_s[steady] + t.wait_s[steady]
    assert state.seconds_per_step == pytest.approx(costs.mean())
    assert state.longest_step_s == pytest.approx(costs.max())


def test_a_reference_run_that_leaves_no_room_at_the_estimate_is_said_so() -> None:
    """1.2 % above a reference known within ±1.5 %: ±2 % can never be resolved."""
    ref = Reference("run", 1000.0, "ref", low=985.0, high=1015.0)
    monitor = SequentialMonitor(ref)
    rng = np.random.default_rng(48)
    for i in range(3000):
        monitor.add(i, throughput=1012.0 * (1.0 + 0.002 * rng.normal()))
    state = monitor.state()
    assert state.decision is None and state.remaining_steps is None
    assert state.pct_of_reference == pytest.approx(101.2, abs=0.1)
    assert "undecided: cannot resolve ±2 % against ref" in state.summary
