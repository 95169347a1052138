"""The step writer's fast paths keep every value where it belongs.

Ingest binds only the columns a batch holds (SQLite) or COPYs the rows (PostgreSQL), and
falls back to INSERT … ON CONFLICT DO NOTHING when COPY meets a step already stored.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ledger

LINE = "step {step:05d}/{total:05d} | loss: {loss:.6f} | dt: {dt:.2f}ms | tok/sec: {tps:,}\n"


def _log(path: Path, steps: range, total: int = 500) -> Path:
    with path.open("a") as out:
        for step in steps:
            out.write(
                LINE.format(step=step, total=total, loss=2 + 1 / step, dt=400 + step % 7,
                            tps=12_000 + step % 97)
            )  # fmt: skip
    return path


def test_ingest_stores_each_value_in_its_column(lg: ledger.Ledger, tmp_path: Path) -> None:
    log = _log(tmp_path / "train_fast.log", range(1, 301))
    lg.ingest(log)
    frame = lg.steps_frame("fast", ["throughput", "loss", "step_time_s", "tokens", "wall_time"])
    assert list(frame["step"]) == list(range(1, 301))
    assert frame["throughput"].tolist() == [12_000 + s % 97 for s in range(1, 301)]
    assert frame["loss"].tolist() == pytest.approx([2 + 1 / s for s in range(1, 301)], rel=1e-6)
    assert frame["step_time_s"].tolist() == pytest.approx(
        [(400 + s % 7) / 1000 for s in range(1, 301)]
    )
    assert frame["tokens"].isna().all() and frame["wall_time"].isna().all()


def test_a_step_told_twice_is_stored_once(lg: ledger.Ledger, tmp_path: Path) -> None:
    log = tmp_path / "train_twice.log"
    _log(log, range(1, 101))
    _log(log, range(90, 201))  # steps 90-100 again, in the same batch
    result = lg.ingest(log)
    assert lg.run_summary("twice").steps == 200
    assert result.steps <= 211
    frame = lg.steps_frame("twice", ["throughput"])
    assert list(frame["step"]) == list(range(1, 201))


def test_log_rows_beside_rows_already_there(lg: ledger.Ledger, tmp_path: Path) -> None:
    # The API stored steps 1-50 first; the log holds 1-120: the log adds 51-120 and the
    # rows that were there are kept as they were.
    lg.add_steps("both", [{"step": s, "throughput": 1.0} for s in range(1, 51)])
    log = _log(tmp_path / "train_both.log", range(1, 121))
    lg.ingest(log, run="both")
    frame = lg.steps_frame("both", ["throughput"])
    assert list(frame["step"]) == list(range(1, 121))
    assert frame["throughput"].tolist()[:50] == [1.0] * 50
    assert frame["throughput"].tolist()[50:] == [12_000 + s % 97 for s in range(51, 121)]
    again = lg.ingest(log, run="both")
    assert again.steps == 0
