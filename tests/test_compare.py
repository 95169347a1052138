"""`ledger compare` and `ledger baseline` through the store and the command line.

Steps are written through the API (Ledger.add_steps); every test runs against SQLite and,
in the PostgreSQL pass, against a real server.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import ledger
from ledger.demo import traces as syn
from tests.helpers import run_cli, run_json

STEPS = 1500


def add_run(lg, name: str, level: float, seed: int, **kwargs) -> None:  # type: ignore[no-untyped-def]
    values, _ = syn.trace(STEPS, level=level, noise=0.02, phi=0.5, warmup=60, seed=seed, **kwargs)
    lg.add_steps(name, syn.step_rows(values), throughput_unit="tok/s")


@pytest.fixture
def runs(lg):  # type: ignore[no-untyped-def]
    """Three runs: unpadded at 10.8K, dynamiccopy at 14.1K, restored at 10.8K."""
    add_run(lg, "eager_unpadded", 10_800.0, 1)
    add_run(lg, "eager_dynamiccopy", 14_100.0, 2)
    add_run(lg, "eager_restored", 10_800.0, 3)
    lg.set_baseline(14_200.0, "tok/s")
    return lg


# -- the API ---------------------------------------------------------------------------------


def test_compare_through_the_store(runs) -> None:  # type: ignore[no-untyped-def]
    report = runs.compare(["eager_unpadded", "eager_dynamiccopy", "eager_restored"])
    assert [r.run for r in report.runs] == ["eager_unpadded", "eager_dynamiccopy", "eager_restored"]
    faster, same = report.comparisons
    assert (faster.a, faster.b, faster.verdict) == (
        "eager_unpadded",
        "eager_dynamiccopy",
        "improvement",
    )
    assert faster.delta_pct == pytest.approx(100 * (14_100 / 10_800 - 1), abs=1.0)
    assert same.verdict == "no-change"
    assert report.baseline.value == 14_200.0 and report.baseline.unit == "tok/s"
    copy = report.run("eager_dynamiccopy")
    assert copy.unit == "tok/s"
    assert copy.vs_baseline_pct == pytest.approx(100 * 14_100 / 14_200, abs=0.5)
    assert copy.recovered is True
    assert report.run("eager_unpadded").recovered is False
    assert 60 <= copy.steady_from_step <= 60 + 0.05 * STEPS


def test_throughput_from_tokens_and_step_time_survives_the_database(lg) -> None:  # type: ignore[no-untyped-def]
    values, _ = syn.trace(STEPS, level=12_000.0, noise=0.02, seed=4)
    lg.add_steps("tokens_only", syn.step_rows(values, tokens=4096))
    run = lg.analyze("tokens_only")
    assert run.source == "tokens/step_time"
    assert run.median == pytest.approx(12_000.0, rel=0.01)
    assert run.step_time_s is not None
    assert run.step_time_s.p50 == pytest.approx(4096 / 12_000.0, rel=0.01)


def test_nan_and_missing_throughput_are_left_out(lg) -> None:  # type: ignore[no-untyped-def]
    rows = [{"step": i, "throughput": 1000.0 + (i % 7)} for i in range(300)]
    rows[10]["throughput"] = math.nan
    rows[20]["throughput"] = None
    rows[30]["throughput"] = math.inf
    lg.add_steps("holes", rows)
    run = lg.analyze("holes")
    assert run.n_steps == 297
    assert math.isfinite(run.median)


def test_several_ranks_report_the_slowest(lg) -> None:  # type: ignore[no-untyped-def]
    rows = []
    for rank in range(4):
        values, _ = syn.trace(800, level=9000.0 if rank == 2 else 10_000.0, noise=0.01, seed=rank)
        rows += [{"rank": rank, "step": i, "throughput": float(v)} for i, v in enumerate(values)]
    lg.add_steps("ddp", rows)
    run = lg.analyze("ddp")
    assert run.ranks is not None
    assert run.ranks.slowest_rank == 2
    assert run.ranks.spread_pct == pytest.approx(10.0, abs=1.0)
    assert run.median == pytest.approx(9750.0, rel=0.01)  # the mean over ranks, per step


def test_a_run_that_falls_part_way_is_a_regression_since_its_fall(lg) -> None:  # type: ignore[no-untyped-def]
    add_run(lg, "steady", 14_000.0, 7)
    add_run(lg, "falls", 14_000.0, 8, change_points=[(900, 0.8)])
    (c,) = lg.compare(["steady", "falls"]).comparisons
    assert c.verdict == "regression" and c.regime_used
    assert abs(c.compared_from_b - 900) <= 30
    assert c.delta_pct == pytest.approx(-20.0, abs=2.0)
    assert re.match(r"falls fell \d+\.\d % at step 9\d\d; since then it is", c.summary)


def test_recurring_stalls_in_the_step_times_are_a_regression(lg) -> None:  # type: ignore[no-untyped-def]
    """A stall every 50 steps costing 15 % of the wall time; the median step is unchanged."""
    plain = syn.timed(STEPS, noise=0.02, warmup=60, seed=9)
    stalled = syn.timed(STEPS, noise=0.02, warmup=60, stall_every=50, stall_cost=0.15,
                        stall_in="step", seed=10)  # fmt: skip
    lg.add_steps("plain", plain.rows(wait=False), throughput_unit="tok/s")
    lg.add_steps("checkpoints", stalled.rows(wait=False), throughput_unit="tok/s")
    (c,) = lg.compare(["plain", "checkpoints"]).comparisons
    assert c.verdict == "regression"
    assert c.delta_pct == pytest.approx(-15.0, abs=2.0)
    assert abs(c.median_delta_pct) < 1.0
    assert c.stall_cost_b_pct == pytest.approx(15.0, abs=2.0)


def test_baseline_from_a_run(runs) -> None:  # type: ignore[no-untyped-def]
    b = runs.set_baseline_from_run("eager_dynamiccopy")
    assert b.value == pytest.approx(14_100.0, rel=0.01)
    assert b.unit == "tok/s"
    assert runs.baseline().value == b.value


def test_resolve_records_the_comparison_and_resolves_the_hypothesis(runs) -> None:  # type: ignore[no-untyped-def]
    h = runs.add_hypothesis("mask closures recompile")
    report = runs.compare(["eager_unpadded", "eager_dynamiccopy"], resolve=h.id)
    assert report.resolution is not None and report.resolution.status == "confirmed"
    after = runs.hypothesis(h.id)
    assert after.status == "confirmed" and after.resolved_at is not None
    assert "faster than eager_unpadded" in (after.note or "")
    stored = runs.comparisons(hypothesis=h.id)
    assert len(stored) == 1
    row = stored[0]
    assert (row.a, row.b, row.verdict) == ("eager_unpadded", "eager_dynamiccopy", "improvement")
    assert row.ci95_pct is not None and row.ci95_pct[0] < row.delta_pct < row.ci95_pct[1]
    assert row.summary == report.comparisons[0].summary
    # the same runs, no change: the interval is narrow, so the fix is refuted
    h2 = runs.add_hypothesis("the restore helps")
    again = runs.compare(["eager_unpadded", "eager_restored"], resolve=h2.id)
    assert again.resolution.status == "refuted"  # type: ignore[union-attr]
    assert [c.hypothesis_id for c in runs.comparisons()] == [h.id, h2.id]


def test_errors_leave_the_ledger_as_it_was(runs) -> None:  # type: ignore[no-untyped-def]
    from ledger.errors import LedgerError, NotFoundError, UsageError

    h = runs.add_hypothesis("x")
    with pytest.raises(NotFoundError, match="did you mean 'eager_unpadded'"):
        runs.compare(["eager_unpaded", "eager_dynamiccopy"], resolve=h.id)
    with pytest.raises(UsageError, match="exactly two"):
        runs.compare(["eager_unpadded", "eager_dynamiccopy", "eager_restored"], resolve=h.id)
    with pytest.raises(NotFoundError):
        runs.compare(["eager_unpadded", "eager_dynamiccopy"], resolve=999)
    runs.ensure_run("empty")
    with pytest.raises(LedgerError, match="'empty' has no steps"):
        runs.compare(["eager_unpadded", "empty"], resolve=h.id)
    assert runs.comparisons() == []
    assert runs.hypothesis(h.id).status == "open"


# -- the command line ------------------------------------------------------------------------


def test_compare_text_reads_in_five_seconds(runs) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("compare", "eager_unpadded", "eager_dynamiccopy")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.splitlines()[0].split()[:5] == ["RUN", "FATE", "STEADY", "FROM", "STEPS"]
    assert "eager_dynamiccopy is 3" in out and "% faster than eager_unpadded (CI " in out
    assert "p < 0.001); at 99." in out and "of the 14.2K baseline (recovered)." in out
    assert re.search(
        r"eager_unpadded is at 7\d\.\d % of the 14\.2K baseline \(not recovered\)", out
    )


def test_compare_json_shape(runs) -> None:  # type: ignore[no-untyped-def]
    data = run_json("compare", "eager_unpadded", "eager_dynamiccopy", "eager_restored")
    assert data["baseline"]["value"] == 14_200.0 and data["baseline"]["unit"] == "tok/s"
    for run in data["runs"]:
        assert {
            "run", "steady_from_step", "n_steady", "median", "ci95", "cv",
            "vs_baseline_pct", "outliers", "change_points",
        } <= set(run)  # fmt: skip
        assert len(run["ci95"]) == 2 and run["ci95"][0] < run["median"] < run["ci95"][1]
    assert [(c["a"], c["b"], c["verdict"]) for c in data["comparisons"]] == [
        ("eager_unpadded", "eager_dynamiccopy", "improvement"),
        ("eager_unpadded", "eager_restored", "no-change"),
    ]
    for c in data["comparisons"]:
        assert {"delta_pct", "ci95_pct", "p_value"} <= set(c)


def test_compare_options(runs) -> None:  # type: ignore[no-untyped-def]
    data = run_json("compare", "eager_unpadded", "eager_dynamiccopy", "--baseline", "10800")
    assert data["baseline"] == {"value": 10800.0, "unit": "tok/s", "source": "option"}
    assert data["runs"][0]["recovered"] is True
    # a 40 % threshold: the 30 % difference is real but does not count
    data = run_json("compare", "eager_unpadded", "eager_dynamiccopy", "--threshold", "40%")
    assert data["comparisons"][0]["verdict"] == "no-change"
    assert data["threshold_pct"] == 40.0


def test_compare_change_points_in_text_and_json(lg) -> None:  # type: ignore[no-untyped-def]
    add_run(lg, "steady", 14_000.0, 5)
    add_run(lg, "falls", 14_000.0, 6, change_points=[(900, 0.8)])
    result = run_cli("compare", "steady", "falls")
    assert result.exit_code == 0, result.stderr
    assert re.search(
        r"falls: throughput fell \d+\.\d % at step 9\d\d \(14K → 11\.\dK\)", result.stdout
    )
    data = run_json("compare", "steady", "falls")
    (change,) = data["runs"][1]["change_points"]
    assert abs(change["step"] - 900) <= 30
    assert change["after"] / change["before"] == pytest.approx(0.8, abs=0.02)


def test_compare_plot_writes_a_figure(runs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "cmp.png"
    result = run_cli("compare", "eager_unpadded", "eager_dynamiccopy", "--plot", str(target))
    assert result.exit_code == 0, result.stderr
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert target.stat().st_size > 10_000
    svg = tmp_path / "cmp.svg"
    assert run_cli("compare", "eager_unpadded", "--plot", str(svg)).exit_code == 0
    assert "eager_unpadded" in svg.read_text()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["compare", "eager_unpaded"], 1, "no run 'eager_unpaded'; did you mean 'eager_unpadded'"),
        (["compare", "empty"], 1, "run 'empty' has no steps"),
        (["compare", "eager_unpadded", "--threshold", "abc"], 2, "not a percentage"),
        (["compare", "eager_unpadded", "--alpha", "2"], 2, "alpha is a probability"),
        (["compare", "eager_unpadded", "--baseline", "-3"], 2, "above 0"),
        (["compare", "eager_unpadded", "--plot", "out.nope"], 2, "not supported"),
        (["compare", "eager_unpadded", "eager_restored", "--resolve", "42"], 1, "no hypothesis 42"),
        (["compare", "eager_unpadded", "--resolve", "1"], 2, "exactly two runs"),
        (["compare"], 2, "Missing argument"),
    ],
)
def test_compare_errors_are_one_line(runs, args, code, message) -> None:  # type: ignore[no-untyped-def]
    runs.ensure_run("empty")
    runs.add_hypothesis("h")
    result = run_cli(*args)
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert result.stderr.startswith("Error: ") and len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr
    assert result.stdout == ""


def test_compare_resolve_from_the_command_line(runs) -> None:  # type: ignore[no-untyped-def]
    h = runs.add_hypothesis("dynamic copies fix it")
    result = run_cli("compare", "eager_unpadded", "eager_dynamiccopy", "--resolve", str(h.id))
    assert result.exit_code == 0, result.stderr
    assert f"hypothesis #{h.id} confirmed" in result.stdout
    listed = run_json("hypothesis", "list")
    assert listed[0]["status"] == "confirmed"


def test_baseline_commands(lg) -> None:  # type: ignore[no-untyped-def]
    add_run(lg, "eager_restored", 14_150.0, 8)
    result = run_cli("baseline")
    assert result.exit_code == 0 and "no baseline yet" in result.stdout
    assert run_json("baseline") == {"value": None, "unit": None, "source": None}
    assert run_json("baseline", "set", "14200")["unit"] == "tok/s"
    assert run_cli("baseline").stdout.strip() == "baseline 14,200 tok/s (14.2K)"
    assert run_json("baseline", "set", "9.5", "--unit", "samples/s")["unit"] == "samples/s"
    from_run = run_json("baseline", "set", "--from-run", "eager_restored")
    assert from_run["value"] == pytest.approx(14_150.0, rel=0.01)
    assert from_run["unit"] == "tok/s" and from_run["source"] == "run eager_restored"
    assert run_json("baseline")["value"] == from_run["value"]
    assert run_cli("baseline", "clear").exit_code == 0
    assert run_json("baseline")["value"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["baseline", "set"], "either VALUE or --from-run"),
        (["baseline", "set", "1", "--from-run", "x"], "either VALUE or --from-run"),
        (["baseline", "set", "0"], "above 0"),
        (["baseline", "set", "--from-run", "nope"], "no run 'nope'"),
    ],
)
def test_baseline_errors(lg, args, message) -> None:  # type: ignore[no-untyped-def]
    result = run_cli(*args)
    assert result.exit_code != 0
    assert result.stderr.startswith("Error: ") and message in result.stderr


def test_help_explains_the_commands() -> None:
    for command in (["compare"], ["baseline"], ["baseline", "set"]):
        result = run_cli(*command, "--help")
        assert result.exit_code == 0
        assert len(result.stdout) > 200
    assert "--threshold" in run_cli("compare", "--help").stdout


@pytest.mark.sqlite_only
def test_a_ledger_at_revision_0001_upgrades_with_its_steps(tmp_path: Path) -> None:
    from sqlalchemy import create_engine

    from ledger.db import schema

    path = tmp_path / "old.db"
    engine = create_engine(f"sqlite:///{path}")
    schema.upgrade(engine, "0001")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO investigation (id, name, created_at) VALUES (1, 'default', '2026-01-01')"
        )
        conn.exec_driver_sql(
            "INSERT INTO run (id, investigation_id, name, fate, created_at) "
            "VALUES (1, 1, 'old', 'unknown', '2026-01-01')"
        )
        conn.exec_driver_sql(
            "INSERT INTO step (run_id, rank, step, throughput) VALUES "
            + ", ".join(f"(1, 0, {i}, {1000 + i % 5})" for i in range(100))
        )
    engine.dispose()
    result = run_cli("--db", str(path), "db", "upgrade")
    assert result.exit_code == 0, result.stderr
    with ledger.open(path, create=False) as lg:
        assert lg.analyze("old").n_steps == 100
        assert lg.comparisons() == []


def test_compare_reads_a_million_rows_without_the_orm(lg) -> None:  # type: ignore[no-untyped-def]
    """step_columns goes through the raw reader; a quick check that it keeps rows in order."""
    rows = [{"rank": r, "step": s, "throughput": 100.0 + s} for s in range(50) for r in (1, 0)]
    lg.add_steps("ordered", rows)
    columns = lg.step_columns("ordered")
    order = np.lexsort((columns.rank, columns.step))
    assert columns.step[order].tolist() == sorted(columns.step.tolist())
    frame = lg.steps_frame("ordered", ["throughput"])
    assert frame["step"].tolist() == [s for s in range(50) for _ in (0, 1)]
    assert frame["rank"].tolist() == [0, 1] * 50
    assert json.loads(frame.to_json())["throughput"]["0"] == 100.0


def test_the_command_line_loads_no_analysis_libraries() -> None:
    """`ledger --help` stays fast: compare's heavy imports happen inside the command."""
    import subprocess
    import sys

    code = (
        "import sys, ledger.cli; "
        "heavy = [m for m in ('ledger.analyze', 'scipy', 'ruptures', 'matplotlib', 'numpy', "
        "'pandas') if m in sys.modules]; print(heavy)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_wall_times_that_contradict_the_step_times_are_flagged_not_compared(lg) -> None:  # type: ignore[no-untyped-def]
    """An import whose stamps are 1 ms apart while each step takes 4.6 s: its effective
    figure (68M tok/s) is flagged, and the run is neither recovered nor not."""
    lg.set_baseline(14200, "tok/s")
    rng = np.random.default_rng(5)
    rows = [
        {"step": i, "throughput": 14200.0 * (1 + rng.normal(0, 0.01)), "tokens": 65536.0,
         "step_time_s": 4.615, "wall_time": 1.7e9 + i * 0.001}
        for i in range(1, 400)
    ]  # fmt: skip
    lg.add_steps("imported", rows, throughput_unit="tokens/s")
    add_run(lg, "reference", 14200, seed=1)
    report = lg.compare(["reference", "imported"])
    (run,) = [r for r in report.runs if r.run == "imported"]
    assert run.judged_effective > 1e6 and run.recovered is None
    assert any("contradict its step times" in n for n in report.notes), report.notes
    assert not [n for n in report.notes if "is in tokens/s" in n]  # the same unit as tok/s
