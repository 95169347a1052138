"""The scenario's core on whichever backend this pass runs against."""

from __future__ import annotations

import math

import ledger


def test_round_trip_on_backend(db_url: str, tmp_path) -> None:
    train = tmp_path / "train.py"
    train.write_text("x = 1\n")
    with ledger.open(db_url) as lg:
        h = lg.add_hypothesis("the cache is stale")
        fix = lg.record_fix(h.id, "gate the cache", files=[train], run="eager_a")
        lg.add_steps(
            "eager_a",
            [{"step": 1, "throughput": 14000.0, "loss": math.nan}, {"step": 2, "loss": math.inf}],
        )
        frame = lg.steps_frame("eager_a")
    assert fix.run == "eager_a"
    assert frame["step"].tolist() == [1, 2]
    assert math.isnan(frame["loss"][0]) and math.isinf(frame["loss"][1])
    assert math.isnan(frame["throughput"][1])  # a missing value stays missing
