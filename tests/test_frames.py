"""A run as DataFrames: steps, metrics in long form, and both pivoted into one wide frame.

Each is checked against a frame built by hand from the rows written (pandas' own pivot),
with several ranks, NaN, a missing value, a step that has only metrics and a metric
named like a step column.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

import ledger


def _write(lg: ledger.Ledger) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for step in range(1, 201):
        for rank in (0, 1):
            row: dict[str, object] = {
                "step": step,
                "rank": rank,
                "loss": math.nan if step == 7 else 3.0 - step / 100 + rank / 1000,
                "throughput": 12_000.0 + step + rank,
                "grad_norm": 1.0 + step / 1000,
                "lr": 3e-4 if step > 10 else None,  # missing for the first steps
                "mfu": 0.41 + rank / 100,
            }
            rows.append(row)
    lg.add_steps("wide", rows)
    # step 201 holds only a metric, no step column
    lg.add_steps("wide", [{"step": 201, "rank": 0, "grad_norm": 9.0}])
    return rows


def test_wide_frame_is_the_pivot_of_what_was_written(lg: ledger.Ledger) -> None:
    rows = _write(lg)
    wide = lg.wide_frame("wide")
    metrics = lg.metrics_frame("wide")
    expected = metrics.pivot_table(
        index=["step", "rank"], columns="name", values="value", dropna=False
    ).reset_index()
    assert list(wide.columns[:2]) == ["rank", "step"]
    assert {"loss", "throughput", "grad_norm", "lr", "mfu"} <= set(wide.columns)
    assert "tokens" not in wide.columns  # a step column that holds nothing is left out
    assert len(wide) == 401
    assert wide["step"].is_monotonic_increasing
    merged = wide.merge(expected, on=["step", "rank"], suffixes=("", "_pivot"))
    for name in ("grad_norm", "mfu"):
        assert np.allclose(merged[name], merged[f"{name}_pivot"], equal_nan=True)
    by_key = wide.set_index(["step", "rank"])
    for row in rows[::37]:
        key = (row["step"], row["rank"])
        got = by_key.loc[key]
        assert got["throughput"] == row["throughput"]
        if row["lr"] is None:
            assert math.isnan(got["lr"])
        else:
            assert got["lr"] == row["lr"]
    assert math.isnan(by_key.loc[(7, 0), "loss"])
    assert by_key.loc[(201, 0), "grad_norm"] == 9.0
    assert math.isnan(by_key.loc[(201, 0), "throughput"])


def test_metrics_frame_long_form_in_order(lg: ledger.Ledger) -> None:
    _write(lg)
    frame = lg.metrics_frame("wide")
    assert list(frame.columns) == ["rank", "step", "name", "value"]
    assert len(frame) == 200 * 2 * 3 - 10 * 2 + 1  # lr is missing for 10 steps, 2 ranks
    ordered = frame.sort_values(["step", "rank", "name"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(frame, ordered)
    assert set(frame["name"]) == {"grad_norm", "lr", "mfu"}


def test_frames_of_a_run_without_metrics_or_steps(lg: ledger.Ledger) -> None:
    lg.add_steps("plain", [{"step": s, "throughput": 1.0 * s} for s in range(1, 6)])
    wide = lg.wide_frame("plain")
    assert list(wide.columns) == ["rank", "step", "throughput"]
    assert lg.metrics_frame("plain").empty
    lg.add_steps("only_metrics", [{"step": 1, "grad_norm": 2.0}])
    assert lg.wide_frame("only_metrics")["grad_norm"].tolist() == [2.0]


def test_an_unknown_run_is_named_with_the_closest(lg: ledger.Ledger) -> None:
    import pytest

    from ledger.errors import NotFoundError

    lg.add_steps("eager_unpadded", [{"step": 1, "throughput": 1.0}])
    for read in (lg.wide_frame, lg.metrics_frame, lg.steps_frame):
        with pytest.raises(NotFoundError, match="eager_unpadded"):
            read("eager_unpaded")


def test_steps_frame_of_one_rank_is_the_same_with_consecutive_steps_or_not(
    lg: ledger.Ledger,
) -> None:
    # consecutive steps of one rank are not read row by row (rank and step are known
    # from the key's ends); a run with a gap is read whole: both frames must agree
    def rows(steps: list[int]) -> list[dict[str, object]]:
        return [
            {
                "step": s,
                "rank": 2,
                "throughput": 1000.0 + s % 13,
                "loss": math.nan if s % 5 else 1.0,
            }
            for s in steps
        ]

    lg.add_steps("dense", rows(list(range(10, 15_010))))
    lg.add_steps("gappy", rows([*range(10, 7_000), *range(7_001, 15_011)]))
    dense = lg.steps_frame("dense", ["throughput", "loss"])
    gappy = lg.steps_frame("gappy", ["throughput", "loss"])
    assert list(dense.columns) == list(gappy.columns) == ["rank", "step", "throughput", "loss"]
    assert dense.dtypes.to_dict() == gappy.dtypes.to_dict()
    assert dense["step"].tolist() == list(range(10, 15_010))
    assert (dense["rank"] == 2).all()
    assert dense["throughput"].tolist() == [1000.0 + s % 13 for s in range(10, 15_010)]
    assert int(dense["loss"].isna().sum()) == sum(1 for s in range(10, 15_010) if s % 5)
    assert gappy["step"].iloc[6_990] == 7_001
    assert gappy["throughput"].iloc[6_990] == 1000.0 + 7_001 % 13
    # a log printed every 10th step: the seeks between its ends miss, so it is read whole
    lg.add_steps("strided", rows(list(range(0, 150_000, 10))))
    strided = lg.steps_frame("strided", ["throughput", "loss"])
    assert strided["step"].tolist() == list(range(0, 150_000, 10))
    assert strided["throughput"].tolist() == [1000.0 + s % 13 for s in range(0, 150_000, 10)]


def test_a_steps_frame_is_its_own_to_change(lg: ledger.Ledger) -> None:
    """The frame holds the read's arrays without a copy: changing it changes nothing
    else, not the next frame read, nor its own other columns."""
    lg.add_steps("r", [{"step": s, "throughput": 10.0 + s, "loss": 2.0} for s in range(20_000)])
    lg.add_steps("g", [{"step": 2 * s, "throughput": 5.0, "rank": s % 2} for s in range(20_000)])
    for run in ("r", "g"):  # consecutive steps of one rank, and the read of every column
        frame = lg.steps_frame(run, ["throughput", "loss"])
        frame.loc[:, "throughput"] = -1.0
        frame.loc[0, "loss"] = 99.0
        again = lg.steps_frame(run, ["throughput", "loss"])
        assert (again["throughput"] > 0).all() and again["loss"].iloc[0] != 99.0
        assert (frame["throughput"] == -1.0).all() and frame["loss"].iloc[1] != 99.0
        assert frame["step"].iloc[1] == again["step"].iloc[1]
