"""The analyzer's parts on small inputs whose answer is known by hand."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.analyze import (
    Baseline,
    NotEnoughStepsError,
    StepColumns,
    analyze_run,
    compare_pair,
    compare_runs,
    resolution_status,
    verdict,
)
from ledger.analyze.robust import block_medians, integrated_time, long_run_sd, mad_sd
from ledger.analyze.series import SOURCE_MIXED, SOURCE_STEP_RATE, SOURCE_TOKENS, build_trace
from ledger.analyze.stats import Estimate, difference, estimate_median
from ledger.analyze.wording import ComparedStretch, comparison_sentence, p_text, short_value
from ledger.errors import UsageError

# -- series ----------------------------------------------------------------------------------


def test_throughput_comes_from_tokens_and_step_time_when_missing() -> None:
    columns = StepColumns(
        step=np.array([3, 1, 2]),
        throughput=np.array([np.nan, 100.0, np.nan]),
        tokens=np.array([400.0, 4.0, 300.0]),
        step_time_s=np.array([2.0, 1.0, 1.5]),
    )
    trace = build_trace(columns)
    assert trace.steps.tolist() == [1, 2, 3]
    assert trace.values.tolist() == [100.0, 200.0, 200.0]
    assert trace.step_time_s.tolist() == [1.0, 1.5, 2.0]  # type: ignore[union-attr]
    assert trace.source == SOURCE_MIXED
    only_tokens = StepColumns(
        step=np.arange(2), tokens=np.array([10.0, 20.0]), step_time_s=np.array([1.0, 2.0])
    )
    assert build_trace(only_tokens).source == SOURCE_TOKENS


def test_steps_per_second_when_there_are_no_tokens() -> None:
    trace = build_trace(StepColumns(step=np.arange(3), step_time_s=np.array([0.5, 0.25, 0.0])))
    assert trace.source == SOURCE_STEP_RATE
    assert trace.values.tolist() == [2.0, 4.0]  # a zero step time has no rate
    assert trace.dropped == 1


def test_several_ranks_average_per_step_and_the_slowest_rank_sets_step_time() -> None:
    columns = StepColumns(
        step=np.array([0, 0, 1, 1, 2]),
        rank=np.array([0, 1, 0, 1, 0]),
        throughput=np.array([100.0, 80.0, 110.0, np.nan, 90.0]),
        step_time_s=np.array([1.0, 1.25, 0.9, 2.0, 1.1]),
    )
    trace = build_trace(columns)
    assert trace.values.tolist() == [90.0, 110.0, 90.0]
    assert trace.step_time_s.tolist() == [1.25, 2.0, 1.1]  # type: ignore[union-attr]
    assert trace.ranks is not None


def test_rank_spread_names_the_slowest_rank() -> None:
    rng = np.random.default_rng(0)
    steps = np.repeat(np.arange(400), 4)
    ranks = np.tile(np.arange(4), 400)
    speed = np.array([1.0, 1.0, 0.9, 1.0])[ranks] * 1000 * (1 + 0.01 * rng.normal(size=1600))
    run = analyze_run("r", StepColumns(step=steps, rank=ranks, throughput=speed))
    assert run.ranks is not None
    assert run.ranks.ranks == 4
    assert run.ranks.slowest_rank == 2
    assert run.ranks.slowest_median == pytest.approx(900, rel=0.01)
    assert run.ranks.spread_pct == pytest.approx(100 * 100 / 1000, abs=1.0)
    assert [r.rank for r in run.ranks.per_rank] == [0, 1, 2, 3]


# -- robust pieces ---------------------------------------------------------------------------


def test_block_medians_ignore_nan_like_nanmedian() -> None:
    rng = np.random.default_rng(1)
    values = rng.normal(size=1003)
    values[rng.choice(1003, 300, replace=False)] = np.nan
    values[10:20] = np.nan
    for size in (1, 2, 7, 10, 50):
        padded = np.full(-(-1003 // size) * size, np.nan)
        padded[:1003] = values
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = np.nanmedian(padded.reshape(-1, size), axis=1)
        got = block_medians(values, size)
        known = np.isfinite(expected)
        assert np.allclose(got[known], expected[known])
        assert np.isfinite(got).all()  # empty blocks are filled from their neighbours


def test_mad_sd_ignores_wild_values_and_nan() -> None:
    rng = np.random.default_rng(2)
    values = rng.normal(0, 2.0, 20_000)
    values[:200] = 1e6
    values[200:300] = np.nan
    assert mad_sd(values) == pytest.approx(2.0, rel=0.05)
    assert mad_sd(values, max_points=5000) == pytest.approx(2.0, rel=0.1)


def test_integrated_time_of_ar1_noise() -> None:
    from ledger.demo.traces import ar1

    rng = np.random.default_rng(3)
    assert integrated_time(rng.normal(size=20_000)) < 1.5
    phi = 0.8
    tau = integrated_time(ar1(50_000, phi, 1.0, rng))
    assert tau == pytest.approx((1 + phi) / (1 - phi), rel=0.25)


def test_long_run_sd_is_not_inflated_by_a_level_shift() -> None:
    rng = np.random.default_rng(4)
    noise = rng.normal(0, 1.0, 400)
    shifted = noise + np.where(np.arange(400) < 200, 0.0, 10.0)
    assert long_run_sd(shifted) == pytest.approx(long_run_sd(noise), rel=0.4)
    assert long_run_sd(shifted, cuts=[200]) == pytest.approx(long_run_sd(noise), rel=0.05)


# -- statistics and verdicts -----------------------------------------------------------------


def test_constant_runs_are_certain() -> None:
    a = estimate_median(np.full(100, 1000.0))
    b = estimate_median(np.full(100, 1100.0))
    assert a.interval() == (1000.0, 1000.0)
    assert difference(a, b).p_value == 0.0
    assert difference(a, a).p_value == 1.0


def test_difference_is_symmetric_in_ratio() -> None:
    a = Estimate(1000.0, 0.01, 20, 1.0)
    b = Estimate(1250.0, 0.01, 20, 1.0)
    forward, backward = difference(a, b), difference(b, a)
    assert forward.ratio == pytest.approx(1.25)
    assert backward.ratio == pytest.approx(0.8)
    assert forward.p_value == pytest.approx(backward.p_value)
    assert forward.low * backward.high == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("delta", "p", "expected"),
    [
        (0.10, 0.001, "improvement"),
        (-0.10, 0.001, "regression"),
        (0.01, 1e-9, "no-change"),  # significant but below the threshold
        (0.10, 0.2, "no-change"),  # large but not significant
        (0.10, None, "no-change"),
    ],
)
def test_verdict_needs_significance_and_size(delta: float, p: float | None, expected: str) -> None:
    assert verdict(delta, p, threshold=0.02, alpha=0.01) == expected


def test_resolution_follows_the_verdict_and_the_interval() -> None:
    def comparison(verdict: str, ci: tuple[float, float] | None):  # type: ignore[no-untyped-def]
        from ledger.model.analysis import RunComparison

        return RunComparison("a", "b", 1.0, 1.0, 0.0, ci, 0.5, verdict, 2.0, 0.01, "")

    assert resolution_status(comparison("improvement", (5.0, 7.0))) == "confirmed"
    assert resolution_status(comparison("regression", (-7.0, -5.0))) == "refuted"
    assert resolution_status(comparison("no-change", (-1.0, 1.5))) == "refuted"
    assert resolution_status(comparison("no-change", (-1.0, 6.0))) == "inconclusive"
    assert resolution_status(comparison("no-change", None)) == "inconclusive"


def test_wording() -> None:
    assert short_value(14200) == "14.2K"
    assert short_value(1_250_000) == "1.25M"
    assert short_value(0.82) == "0.82"
    assert p_text(0.0002) == "p < 0.001"
    assert p_text(0.0123) == "p = 0.012"
    sentence = comparison_sentence(
        "eager_unpadded", "eager_dynamiccopy", 31.2, (29.8, 32.5), 1e-5, "improvement", 2.0
    )
    assert sentence == (
        "eager_dynamiccopy is 31.2 % faster than eager_unpadded (CI 29.8–32.5 %, p < 0.001)"
    )
    slower = comparison_sentence("a", "b", -4.0, (-5.0, -3.0), 0.0001, "regression", 2.0)
    assert slower.startswith("b is 4.0 % slower than a (CI -5.0 to -3.0 %")
    same = comparison_sentence("a", "b", 0.4, (-0.8, 1.6), 0.41, "no-change", 2.0)
    assert same == "b is no different from a: +0.4 % (CI -0.8 to 1.6 %, p = 0.41), within noise"


def test_wording_of_regimes_stalls_and_the_typical_step() -> None:
    fell = ComparedStretch(2400, -20.1)
    rose = ComparedStretch(900, 10.0)
    b_fell = comparison_sentence(
        "a", "b", -19.8, (-21.0, -18.6), 1e-6, "regression", 2.0,
        stretch_b=fell, whole_delta_pct=-9.6, median_delta_pct=-19.9,
    )  # fmt: skip
    assert b_fell == (
        "b fell 20.1 % at step 2,400; since then it is 19.8 % slower than a "
        "(CI -21.0 to -18.6 %, p < 0.001); whole steady window -9.6 %"
    )
    a_rose = comparison_sentence(
        "a", "b", 0.3, (-1.0, 1.6), 0.6, "no-change", 2.0, stretch_a=rose, whole_delta_pct=5.0
    )
    assert a_rose.startswith("a rose 10.0 % at step 900; against a since then, b is no different")
    both = comparison_sentence(
        "a", "b", -5.0, (-6.0, -4.0), 1e-4, "regression", 2.0, stretch_a=rose, stretch_b=fell
    )
    assert both.startswith(
        "a rose 10.0 % at step 900 and b fell 20.1 % at step 2,400; since then b"
    )
    stalls = comparison_sentence(
        "a", "b", -15.0, (-16.0, -14.0), 1e-6, "regression", 2.0,
        median_delta_pct=0.2, stall_cost_pct=(0.0, 15.1),
    )  # fmt: skip
    assert stalls.endswith(
        "; recurring stalls cost b 15.1 % of its time, a 0.0 %; typical step +0.2 %"
    )


# -- a whole run -----------------------------------------------------------------------------


def test_too_few_steps_is_an_error_that_names_the_run() -> None:
    with pytest.raises(NotEnoughStepsError, match="'tiny'"):
        analyze_run("tiny", StepColumns(step=np.arange(2), throughput=np.array([1.0, 2.0])))
    with pytest.raises(NotEnoughStepsError, match="no steps"):
        analyze_run("empty", StepColumns(step=np.arange(0), throughput=np.array([])))


def test_a_short_run_still_gets_a_median_and_an_interval() -> None:
    values = np.array([100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 100.1, 99.9, 100.3, 99.7])
    run = analyze_run("short", StepColumns(step=np.arange(10), throughput=values))
    assert run.median == pytest.approx(100.05)
    assert run.ci95 is not None and run.ci95[0] < 100.05 < run.ci95[1]


def test_report_json_has_the_documented_shape() -> None:
    rng = np.random.default_rng(5)
    a = 1000 * (1 + 0.01 * rng.normal(size=500))
    b = 1100 * (1 + 0.01 * rng.normal(size=500))
    report = compare_runs(
        [
            ("a", StepColumns(step=np.arange(500), throughput=a), "tok/s"),
            ("b", StepColumns(step=np.arange(500), throughput=b), "tok/s"),
        ],
        baseline=Baseline(1150.0, "tok/s", "option"),
    )
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert data["baseline"] == {"value": 1150.0, "unit": "tok/s", "source": "option"}
    run_keys = {
        "run", "steady_from_step", "n_steady", "median", "ci95", "cv",
        "vs_baseline_pct", "outliers", "change_points",
    }  # fmt: skip
    run_keys |= {"effective", "effective_ci95", "effective_basis", "stalls", "regime"}
    assert run_keys <= set(data["runs"][0])
    assert data["runs"][0]["effective_basis"] == "throughput"  # the harmonic mean
    assert data["runs"][0]["regime"] is None
    assert "values" not in data["runs"][0]  # the arrays behind --plot stay out
    assert set(data["comparisons"][0]) >= {
        "a", "b", "delta_pct", "ci95_pct", "p_value", "verdict", "effective_a", "effective_b",
        "median_delta_pct", "median_ci95_pct", "whole_delta_pct", "regime_used",
        "stall_cost_a_pct", "stall_cost_b_pct",
    }  # fmt: skip
    assert data["comparisons"][0]["verdict"] == "improvement"
    assert data["runs"][1]["vs_baseline_pct"] == pytest.approx(100 * 1100 / 1150, abs=0.5)
    assert data["runs"][1]["recovered"] is False
    assert data["runs"][0]["step_time_s"] is None


def test_settings_are_checked() -> None:
    columns = StepColumns(step=np.arange(10), throughput=np.linspace(1, 2, 10))
    with pytest.raises(UsageError):
        compare_runs([("a", columns, None)], threshold=1.5)
    with pytest.raises(UsageError):
        compare_runs([("a", columns, None)], alpha=0.0)


def test_comparison_of_identical_runs_is_no_change() -> None:
    values = 1000 + np.sin(np.arange(300))
    a = analyze_run("a", StepColumns(step=np.arange(300), throughput=values))
    c = compare_pair(a, a)
    assert c.verdict == "no-change"
    assert c.delta_pct == 0.0
    assert math.isclose(c.p_value, 1.0)  # type: ignore[arg-type]


# -- never a crash ---------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.floats(min_value=-10.0, max_value=1e7),
            st.sampled_from([math.nan, math.inf, 0.0, 1.0, 14_200.0, 14_200.0, 14_200.0]),
        ),
        max_size=400,
    ),
    ranks=st.integers(min_value=1, max_value=3),
)
def test_any_series_is_analysed_or_refused_cleanly(values: list[float], ranks: int) -> None:
    """Whatever the numbers, a result or NotEnoughStepsError; warnings are errors here."""
    n = len(values)
    columns = StepColumns(
        step=np.arange(n) // ranks,
        rank=np.arange(n) % ranks,
        throughput=np.array(values, dtype=np.float64),
    )
    try:
        run = analyze_run("fuzz", columns)
    except NotEnoughStepsError:
        return
    assert run.n_steps >= 3
    assert run.first_step <= run.steady_from_step <= run.last_step
    assert math.isfinite(run.median) and run.median > 0
    json.dumps(run.to_dict(), allow_nan=False)
    compare_pair(run, run)


@pytest.mark.parametrize("n", [5, 8, 13, 30, 64, 100, 250])
def test_short_runs_with_a_warmup(n: int) -> None:
    rng = np.random.default_rng(n)
    values = 1000 * (1 + 0.02 * rng.normal(size=n))
    values[: max(1, n // 10)] *= 0.2
    run = analyze_run("short", StepColumns(step=np.arange(n), throughput=values))
    assert run.median == pytest.approx(1000, rel=0.05)
    assert run.steady_from_step >= max(1, n // 10)


# -- units: one unit, however spelled -------------------------------------------------------


@pytest.mark.parametrize(
    ("spelled", "canonical_form"),
    [
        ("tok/s", "tok/s"), ("tokens/s", "tok/s"), ("tokens/sec", "tok/s"),
        ("tok/sec", "tok/s"), ("Tokens per second", "tok/s"), ("tokens_per_sec", "tok/s"),
        ("samples/sec", "samples/s"), ("sample/s", "samples/s"), ("it/s", "it/s"),
        ("iters/sec", "it/s"), ("words/s", "words/s"), ("wps", "words/s"),
        ("MB/s", "mb/s"),
    ],
)  # fmt: skip
def test_one_unit_spelled_several_ways_is_one_unit(spelled: str, canonical_form: str) -> None:
    from ledger.model.units import canonical

    assert canonical(spelled) == canonical_form


def test_different_units_stay_different() -> None:
    from ledger.model.units import same_unit, spelled_as

    assert same_unit("tokens/s", "tok/s") and same_unit("samples/sec", "samples/s")
    assert not same_unit("tok/s", "samples/s") and not same_unit("tok/s", "it/s")
    assert spelled_as("tokens/sec", "tok/s") == "tok/s"  # the investigation's spelling
    assert spelled_as("samples/s", "tok/s") == "samples/s"  # another unit keeps its own


def test_an_ingested_run_takes_the_investigations_spelling(lg, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "train_spelled.log"
    log.write_text(
        "\n".join(f"step {i} | loss 2.0 | tokens/s {14200 + i % 7}" for i in range(1, 200)) + "\n"
    )
    lg.set_baseline(14200, "tok/s")
    lg.ingest(log)
    assert lg.show("spelled").throughput_unit == "tok/s"
    lg.add_steps("other", [{"step": i, "throughput": 14200.0} for i in range(1, 200)],
                 throughput_unit="tokens/sec")  # fmt: skip
    report = lg.compare(["spelled", "other"])
    assert not [n for n in report.notes if " is in " in n], report.notes  # no unit warning


def test_counts_agree_with_their_noun() -> None:
    from ledger.analyze.wording import counted

    assert counted(1, "step") == "1 step" and counted(2, "step") == "2 steps"
    assert counted(1500, "steady step") == "1,500 steady steps"
