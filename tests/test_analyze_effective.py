"""The effective throughput and the change-point-aware verdict, on planted cases.

Effective throughput is work over wall-clock cost (ledger.analyze.effective); the
verdict judges it over the regime each run ends in. The traces come from
ledger.demo.traces with a known truth: the step of a fall, the stall pattern and what it
costs, the true effective figure.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ledger.analyze import StepColumns, analyze_run, compare_pair
from ledger.analyze.effective import (
    BASIS_STEP,
    BASIS_STEP_WAIT,
    BASIS_THROUGHPUT,
    BASIS_WALL,
    estimate_effective,
    step_costs,
)
from ledger.analyze.series import build_trace
from ledger.demo import traces as syn


def columns(t: syn.TimedTrace, *, wait: bool = True, wall: bool = False) -> StepColumns:
    n = len(t)
    return StepColumns(
        step=np.arange(n),
        throughput=t.throughput,
        tokens=t.tokens,
        step_time_s=t.step_time_s,
        wait_s=t.wait_s if wait else None,
        wall_time=t.wall_time if wall else None,
    )


# -- what a step costs, by what the data has ------------------------------------------------


def test_step_time_plus_wait_is_the_cost_when_the_wait_is_recorded() -> None:
    trace = build_trace(
        StepColumns(
            step=np.arange(4),
            tokens=np.array([100.0, 100.0, 100.0, 100.0]),
            step_time_s=np.array([1.0, 1.0, 2.0, 1.0]),
            wait_s=np.array([0.0, 3.0, np.nan, 0.0]),
        )
    )
    costs = step_costs(trace)
    assert costs.basis == BASIS_STEP_WAIT
    assert costs.cost.tolist() == [1.0, 4.0, 2.0, 1.0]  # an unknown wait counts as none
    assert costs.work.tolist() == [100.0] * 4
    estimate = estimate_effective(costs.work, costs.cost)
    assert estimate.value == pytest.approx(400.0 / 8.0)


def test_wall_time_intervals_cover_the_steps_a_log_skipped() -> None:
    """A line every 10 steps: the interval since the previous line holds 10 steps' work."""
    trace = build_trace(
        StepColumns(
            step=np.array([10, 20, 30, 40]),
            throughput=np.array([50.0, 50.0, 50.0, 50.0]),
            tokens=np.array([50.0, 50.0, 50.0, 50.0]),
            wall_time=np.array([100.0, 110.0, 125.0, 135.0]),
        )
    )
    costs = step_costs(trace)
    assert costs.basis == BASIS_WALL
    assert np.isnan(costs.cost[0])  # nothing before the first line to measure from
    assert costs.cost[1:].tolist() == [10.0, 15.0, 10.0]
    assert costs.work[1:].tolist() == [500.0, 500.0, 500.0]
    assert estimate_effective(costs.work, costs.cost).value == pytest.approx(1500.0 / 35.0)


def test_wall_time_without_tokens_uses_the_typical_tokens_per_step() -> None:
    """Throughput and timestamps only: a stretched interval is time, not work."""
    throughput = np.full(6, 100.0)
    wall = np.array([0.0, 1.0, 2.0, 3.0, 13.0, 14.0])  # a 9 s stall before the fifth line
    costs = step_costs(
        build_trace(StepColumns(step=np.arange(6), throughput=throughput, wall_time=wall))
    )
    assert costs.basis == BASIS_WALL
    assert costs.work[1:].tolist() == [100.0] * 5  # 100 tok/s × 1 s, the median interval
    assert estimate_effective(costs.work, costs.cost).value == pytest.approx(500.0 / 14.0)


def test_a_step_time_alone_shows_a_stall_as_one_long_step() -> None:
    trace = build_trace(
        StepColumns(
            step=np.arange(3),
            throughput=np.array([100.0, 10.0, 100.0]),
            step_time_s=np.array([1.0, 10.0, 1.0]),
        )
    )
    costs = step_costs(trace)
    assert costs.basis == BASIS_STEP
    assert costs.work.tolist() == [100.0, 100.0, 100.0]  # throughput × step time
    assert estimate_effective(costs.work, costs.cost).value == pytest.approx(300.0 / 12.0)


def test_a_throughput_alone_gives_the_harmonic_mean() -> None:
    values = np.array([100.0, 50.0, 100.0, 25.0])
    costs = step_costs(build_trace(StepColumns(step=np.arange(4), throughput=values)))
    assert costs.basis == BASIS_THROUGHPUT
    harmonic = len(values) / np.sum(1.0 / values)
    assert estimate_effective(costs.work, costs.cost).value == pytest.approx(harmonic)


def test_the_effective_interval_covers_the_truth_about_95_percent_of_the_time() -> None:
    """AR(1) noise and a stall every 40 steps: the blocks end after stalls."""
    hits = runs = 0
    for seed in range(60):
        phi = (0.0, 0.5, 0.9)[seed % 3]
        t = syn.timed(2000, noise=0.03, phi=phi, stall_every=40, stall_cost=0.1, seed=300 + seed)
        run = analyze_run("r", columns(t))
        assert run.stalls is not None and run.stalls.recurring >= 40
        low, high = run.effective_ci95  # type: ignore[misc]
        hits += low <= t.effective <= high
        runs += 1
    assert 0.85 <= hits / runs <= 1.0


# -- the verdict on planted cases ---------------------------------------------------------------


def test_a_run_that_falls_20_percent_part_way_is_a_regression_named_at_its_step() -> None:
    steady = analyze_run("steady", columns(syn.timed(4000, noise=0.02, phi=0.5, seed=1)))
    falling = syn.timed(4000, noise=0.02, phi=0.5, change_points=[(2500, 0.8)], seed=2)
    b = analyze_run("falls", columns(falling))
    assert b.regime is not None
    assert abs(b.regime.from_step - 2500) <= 80
    assert b.regime.shift_pct == pytest.approx(-20.0, abs=2.0)
    c = compare_pair(steady, b)
    assert c.verdict == "regression"
    assert c.regime_used and c.compared_from_b == b.regime.from_step
    assert c.delta_pct == pytest.approx(-20.0, abs=2.0)
    assert c.whole_delta_pct == pytest.approx(-100 * 0.2 * 1500 / 4000, abs=3.0)
    assert c.ci95_pct is not None and c.ci95_pct[1] < -15.0
    fall = f"falls fell {abs(b.regime.shift_pct):.1f} % at step {b.regime.from_step:,}"
    assert c.summary.startswith(f"{fall}; since then it is {abs(c.delta_pct):.1f} % slower than")
    assert f"whole steady window {c.whole_delta_pct:+.1f} %" in c.summary


def test_periodic_stalls_costing_15_percent_are_a_15_percent_regression() -> None:
    """The median step is unchanged; the wall clock is not."""
    a = analyze_run("a", columns(syn.timed(3000, noise=0.02, phi=0.5, seed=3)))
    stalled = syn.timed(3000, noise=0.02, phi=0.5, stall_every=50, stall_cost=0.15, seed=4)
    b = analyze_run("b", columns(stalled))
    assert b.effective_basis == BASIS_STEP_WAIT
    assert b.stalls is not None and b.stalls.recurring == len(stalled.stall_steps)
    assert b.stalls.cost_pct == pytest.approx(15.0, abs=1.0)
    expected = sum(stalled.wait_s)
    assert b.stalls.seconds == pytest.approx(expected, rel=0.05)
    c = compare_pair(a, b)
    assert c.verdict == "regression"
    assert c.delta_pct == pytest.approx(-15.0, abs=1.5)
    assert abs(c.median_delta_pct) < 1.0 and c.median_p_value is not None
    assert c.stall_cost_b_pct == pytest.approx(15.0, abs=1.0)
    assert "recurring stalls cost b 15" in c.summary
    assert f"typical step {c.median_delta_pct:+.1f} %" in c.summary


def test_stalls_inside_the_step_time_count_the_same() -> None:
    """A log with step times: the stall is one long step, no wait column."""
    a = analyze_run("a", columns(syn.timed(3000, noise=0.02, seed=5), wait=False))
    stalled = syn.timed(3000, noise=0.02, stall_every=50, stall_cost=0.15, stall_in="step", seed=6)
    b = analyze_run("b", columns(stalled, wait=False))
    assert b.effective_basis == BASIS_STEP
    c = compare_pair(a, b)
    assert c.verdict == "regression"
    assert c.delta_pct == pytest.approx(-15.0, abs=1.5)
    assert abs(c.median_delta_pct) < 1.0


def test_wall_time_sees_stalls_between_steps() -> None:
    a = analyze_run("a", columns(syn.timed(3000, noise=0.02, seed=7), wait=False, wall=True))
    stalled = syn.timed(3000, noise=0.02, stall_every=50, stall_cost=0.15, seed=8)
    b = analyze_run("b", columns(stalled, wait=False, wall=True))
    assert b.effective_basis == BASIS_WALL
    assert compare_pair(a, b).delta_pct == pytest.approx(-15.0, abs=1.5)


def test_a_single_one_off_stall_is_reported_and_left_out() -> None:
    a = analyze_run("a", columns(syn.timed(3000, noise=0.02, seed=9)))
    long_stall = 0.15 * 3000 * 4096 / 14_200  # as long as 15 % of the run
    once = syn.timed(3000, noise=0.02, one_off=(1700, long_stall), seed=10)
    b = analyze_run("b", columns(once))
    assert b.stalls is not None
    assert (b.stalls.one_off, b.stalls.recurring, b.stalls.steps) == (1, 0, [1700])
    assert b.stalls.one_off_seconds == pytest.approx(long_stall, rel=0.01)
    assert b.stalls.cost_pct == 0.0
    c = compare_pair(a, b)
    assert c.verdict == "no-change"
    assert b.effective == pytest.approx(once.effective, rel=0.01)


def test_twins_stay_no_change_with_noise_and_stalls() -> None:
    verdicts = []
    for seed in range(12):
        phi = (0.0, 0.5, 0.9)[seed % 3]
        pair = [
            syn.timed(
                2000,
                noise=0.03,
                phi=phi,
                warmup=100,
                stall_every=50,
                stall_cost=0.1,
                seed=2 * seed + k + 50,
            )
            for k in (0, 1)
        ]
        a, b = (analyze_run(name, columns(t)) for name, t in zip("ab", pair, strict=True))
        verdicts.append(compare_pair(a, b).verdict)
    assert verdicts == ["no-change"] * 12


def test_the_regime_of_the_reference_run_is_used_too() -> None:
    """a rose 10 % part-way, b runs at a's final level: no different since a's change."""
    a = analyze_run("a", columns(syn.timed(4000, noise=0.01, change_points=[(2000, 1.1)], seed=11)))
    b = analyze_run("b", columns(syn.timed(4000, level=14_200 * 1.1, noise=0.01, seed=12)))
    c = compare_pair(a, b)
    assert a.regime is not None and c.compared_from_a == a.regime.from_step
    assert c.verdict == "no-change"
    assert c.summary.startswith("a rose 10") and "against a since then, b is no different" in (
        c.summary
    )
    assert c.whole_delta_pct == pytest.approx(5.0, abs=1.5)


def test_new_fields_are_json_clean() -> None:
    stalled = syn.timed(
        1500, noise=0.02, stall_every=50, stall_cost=0.1, change_points=[(800, 0.8)], seed=13
    )
    run = analyze_run("r", columns(stalled))
    data = json.loads(json.dumps(run.to_dict(), allow_nan=False))
    assert {"effective", "effective_ci95", "effective_basis", "stalls", "regime"} <= set(data)
    assert set(data["stalls"]) == {
        "recurring", "one_off", "steps", "cost_pct", "seconds", "one_off_seconds",
    }  # fmt: skip
    assert set(data["regime"]) == {
        "from_step", "n_steps", "shift_pct", "median", "ci95", "effective",
        "effective_ci95", "stall_cost_pct",
    }  # fmt: skip
    c = compare_pair(run, run).to_dict()
    json.dumps(c, allow_nan=False)
    assert {"effective_a", "median_delta_pct", "whole_delta_pct", "regime_used"} <= set(c)
