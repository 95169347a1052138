"""The effective figure on every clock: runs played on a real clock (tests/clocklogs.py),
logged with stamps to the millisecond or to the second, as dates or as the time of day
across midnight, printing a throughput, a step time or both, with and without stalls.

Every time, the effective figure is within 2 % of tokens (or steps) over wall-clock
seconds, and the watch monitor on a run at the baseline calls it neither a regression
nor an improvement.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import clocklogs as cl
import numpy as np
import pytest

from ledger.analyze import StepColumns, analyze_run
from ledger.analyze.clock import clock_costs, coarse, resolution, unwrap
from ledger.analyze.effective import BASIS_CLOCK, BASIS_WALL
from ledger.analyze.sequential import SequentialMonitor
from ledger.model.terms import Verdict

STEPS_S = (0.01, 0.35, 2.0, 3.7, 10.0)
TICKS = (0.001, 1.0)
PRINTED = ("tok/s", "step_time", "both")
CASES = list(itertools.product(STEPS_S, TICKS, PRINTED, (False, True), (False, True)))


def _per(printed: str) -> str:
    return "steps" if printed == "step_time" else "tokens"  # no tokens: steps per second


@pytest.mark.parametrize(("step_s", "tick", "printed", "stalls", "time_of_day"), CASES)
def test_the_effective_figure_is_tokens_over_wall_time_on_every_clock(
    step_s: float, tick: float, printed: str, stalls: bool, time_of_day: bool
) -> None:
    run = cl.play(step_s, tick, stalls=stalls)
    analysis = analyze_run("r", cl.columns(run, printed, time_of_day=time_of_day), unit="tok/s")
    judged_from = analysis.regime.from_step if analysis.regime else analysis.steady_from_step
    truth = run.truth(judged_from, per=_per(printed))
    assert analysis.judged_effective == pytest.approx(truth, rel=0.02)
    if tick >= 1.0 and step_s < 20 * tick:
        assert analysis.effective_basis == BASIS_CLOCK  # and it says so
    if stalls and step_s >= 0.35:
        assert analysis.stalls is not None and analysis.stalls.recurring >= 5


@pytest.mark.parametrize(
    ("step_s", "tick", "printed", "stalls", "time_of_day"),
    # a stall more than MIN_SAME steps away cannot be foreseen against a bare number
    [c for c in CASES if not c[3] or c[0] >= 0.35],
)
def test_watch_on_a_run_at_the_baseline_is_never_a_regression_or_an_improvement(
    step_s: float, tick: float, printed: str, stalls: bool, time_of_day: bool
) -> None:
    run = cl.play(step_s, tick, stalls=stalls, seed=1)
    baseline = run.truth(1, per=_per(printed))
    monitor = SequentialMonitor(baseline)
    monitor.extend(cl.columns(run, printed, time_of_day=time_of_day))
    state = monitor.state()
    assert state.decision in (None, Verdict.SAME.value), state.summary
    assert state.effective == pytest.approx(baseline, rel=0.02)


def test_a_run_six_percent_slower_on_a_coarse_clock_is_a_regression() -> None:
    """The case that was 98.1 % (recovered) and SAME: 3.7 s a step, stamps to the second."""
    run = cl.play(3.7, 1.0, stalls=False)
    columns = cl.columns(run, "tok/s")
    baseline = run.truth(1) / 0.94
    analysis = analyze_run("r", columns, unit="tok/s", baseline=baseline)
    assert analysis.vs_baseline_pct == pytest.approx(94.0, abs=1.0)
    assert analysis.recovered is False
    monitor = SequentialMonitor(baseline)
    monitor.extend(columns)
    assert monitor.state().decision == Verdict.REGRESSION.value


def test_time_of_day_stamps_are_unwrapped_at_midnight() -> None:
    wall = np.array([86_390.0, 86_395.0, np.nan, 3.0, 8.0])
    assert unwrap(wall).tolist()[:2] == [86_390.0, 86_395.0]
    assert unwrap(wall)[3:].tolist() == [86_403.0, 86_408.0]
    epoch = np.array([1.7e9, 1.7e9 + 5, 1.7e9 - 100])  # not a time of day: left alone
    assert unwrap(epoch).tolist() == epoch.tolist()


def test_the_resolution_is_the_largest_tick_all_stamps_sit_on() -> None:
    seconds = 1.7e9 + np.arange(20) * 3.0
    assert resolution(seconds) == 1.0
    assert resolution(seconds + np.arange(20) * 0.123) == 0.001
    assert resolution(np.full(20, 5.0)) == 0.0  # one stamp repeated says nothing
    assert coarse(np.floor(1.7e9 + np.arange(40) * 3.7), np.arange(40))
    assert not coarse(1.7e9 + np.arange(40) * 3.7001, np.arange(40))


def test_a_clock_that_steps_back_is_not_trusted() -> None:
    """An interval across a backward step costs what the trainer printed, no more."""
    wall = np.floor(1.7e9 + np.cumsum(np.full(200, 3.7)))
    wall[100:] -= 3600.0  # the clock was set back an hour
    printed = np.full(200, 3.7)
    costs = clock_costs(wall, printed)
    assert costs.scale == pytest.approx(1.0, rel=0.01)
    assert float(costs.stall_s.sum()) == 0.0
    assert costs.cost.sum() == pytest.approx(200 * 3.7, rel=0.01)


def test_duplicated_stamps_are_steps_between_two_ticks() -> None:
    """Four steps a second stamped to the second: the steps share each tick."""
    n = 400
    ends = 1.7e9 + np.cumsum(np.full(n, 0.25))
    columns = StepColumns(
        step=np.arange(1, n + 1), throughput=np.full(n, 4000.0), wall_time=np.floor(ends)
    )
    analysis = analyze_run("r", columns, unit="tok/s")
    assert analysis.effective_basis == BASIS_CLOCK
    assert analysis.effective == pytest.approx(4000.0, rel=0.01)


def test_a_fine_clock_keeps_the_wall_basis() -> None:
    run = cl.play(3.7, 0.001, stalls=True)
    analysis = analyze_run("r", cl.columns(run, "tok/s"), unit="tok/s")
    assert analysis.effective_basis == BASIS_WALL


# -- through the log reader, the ledger and watch ---------------------------------------------


@pytest.mark.parametrize("tick", [1.0, 0.001])
def test_an_hf_style_log_to_the_second_is_judged_right_by_ingest_and_watch(
    tmp_path: Path, tick: float
) -> None:
    """tokens_per_sec with stamps to the second at 3.7 s a step, a checkpoint every 50
    steps: the ingested run's effective figure is tokens over wall time, and watch on its
    rows at the baseline says neither regression nor improvement."""
    import ledger
    from ledger.watch import watch

    run = cl.play(3.7, tick, stalls=True, seed=3)
    log = tmp_path / "train_hf.log"
    log.write_text("\n".join(cl.log_lines(run, "tok/s")) + "\n")
    truth = run.truth(1)
    with ledger.open() as lg:
        lg.set_baseline(truth, "tok/s")
        lg.ingest(log)
        analysis = lg.analyze("hf")
        assert analysis.effective_basis == (BASIS_CLOCK if tick >= 1 else BASIS_WALL)
        judged_from = analysis.regime.from_step if analysis.regime else analysis.steady_from_step
        assert analysis.judged_effective == pytest.approx(run.truth(judged_from), rel=0.02)
        now = [0.0]

        def clock() -> float:
            now[0] += 1.0
            return now[0]

        updates = list(watch(lg, "hf", timeout=20, clock=clock, sleep=lambda _: None))
    result = updates[-1].result
    assert result is not None
    assert result.outcome not in (Verdict.REGRESSION.value, Verdict.IMPROVEMENT.value)
