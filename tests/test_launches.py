"""Launches: a run launched again under the same name keeps each launch's steps apart, and
what is judged by default is the latest launch (RUN@N names another)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers import db_rows, run_cli, run_json
from sqlalchemy import MetaData, Table, insert

import ledger
from ledger.db import schema
from ledger.db.engine import make_engine
from ledger.errors import UsageError
from ledger.watch.roles import role


def _log(path: Path, level: float, steps: int, start: int = 1, noise: int = 7) -> Path:
    lines = [
        f"step {i} | loss {2.0 - i / 1000:.4f} | tok/s {level + (i * noise) % 50 - 25:.1f}\n"
        for i in range(start, start + steps)
    ]
    path.write_text("".join(lines))
    return path


@pytest.fixture
def lg(db_url: str) -> ledger.Ledger:
    opened = ledger.open(db_url)
    opened.set_baseline(14200)
    yield opened
    opened.close()


def test_a_replaced_log_is_a_new_launch_and_the_first_keeps_its_rows(
    lg: ledger.Ledger, tmp_path: Path
) -> None:
    log = _log(tmp_path / "train_r.log", 10500, 60)
    first = lg.ingest(log)
    assert (first.launch, first.steps) == (1, 60)
    assert lg.ingest(log).steps == 0  # read twice: nothing twice
    _log(log, 14200, 40, noise=3)  # the trainer started again into its log
    again = lg.ingest(log)
    assert again.reset == "truncated" and again.launch == 2
    assert len(lg.steps_frame("r")) == 40  # the latest launch
    old = lg.steps_frame("r@1")
    assert len(old) == 60 and old["throughput"].iloc[0] < 11000  # never overwritten
    assert lg.run_summary("r").steps == 40 and lg.run_summary("r").launch == 2
    launches = lg.launches("r")
    assert [(x.number, x.steps) for x in launches] == [(1, 60), (2, 40)]
    assert launches[0].source == "log" or launches[0].source is None


def test_a_new_log_starting_again_is_a_new_launch_but_a_copy_is_not(
    lg: ledger.Ledger, tmp_path: Path
) -> None:
    a = _log(tmp_path / "a.log", 10500, 50)
    lg.ingest(a, "eager_b")
    copy = tmp_path / "tee.log"
    copy.write_bytes(a.read_bytes())
    # the same steps, tee'd to a second file: the same launch (the rows are already there)
    assert lg.ingest(copy, "eager_b").launch == 1
    assert lg.run_summary("eager_b").launch == 1
    b = _log(tmp_path / "train_eager_b_v2.log", 14200, 30, noise=3)
    result = lg.ingest(b, "eager_b")
    assert result.launch == 2 and result.steps == 30
    assert lg.run_summary("eager_b").steps == 30
    # compare judges the latest launch, and @1 names the first: no seam, no splice
    report = lg.compare(["eager_b@1", "eager_b"])
    assert [(r.run, r.n_steps) for r in report.runs] == [("eager_b@1", 50), ("eager_b", 30)]
    with pytest.raises(UsageError, match="no launch 3"):
        lg.steps_frame("eager_b@3")


def test_a_relaunch_deploy_step_starts_a_launch_that_the_next_log_fills(
    lg: ledger.Ledger, tmp_path: Path
) -> None:
    lg.ingest(_log(tmp_path / "train_eager_b.log", 10500, 50))
    lg.deploy("eager_b", "relaunch", ["true"])
    assert lg.run_summary("eager_b").launch == 2
    assert lg.run_summary("eager_b").steps == 0  # judged: the relaunch, which has none yet
    assert lg.show("eager_b").fate == "unknown"
    assert lg.launches("eager_b")[0].fate in ("running", "unknown")  # frozen as it was
    lg.deploy("eager_b", "relaunch", ["true"])  # an empty launch is reused, not piled up
    assert lg.run_summary("eager_b").launch == 2
    lg.ingest(_log(tmp_path / "train_eager_b_v2.log", 14200, 30), "eager_b")
    assert [x.steps for x in lg.launches("eager_b")] == [50, 30]
    assert [x.source for x in lg.launches("eager_b")][1] == "deploy"


def test_a_step_meter_started_after_the_run_ended_is_a_new_launch(lg: ledger.Ledger) -> None:
    started = datetime.now(UTC)
    first = lg.start_metered_run("hooked", host="h", command="train.py", launched_at=started)
    lg.write_meter_batch(first.id, [{"step": s, "throughput": 10500.0} for s in range(1, 11)])
    lg.end_launch("hooked", 1, "finished", "done")
    later = started + timedelta(hours=1)
    again = lg.start_metered_run("hooked", host="h", command="train.py", launched_at=later)
    assert again.earlier_steps
    lg.write_meter_batch(again.id, [{"step": s, "throughput": 14200.0} for s in range(1, 6)])
    assert [(x.number, x.steps, x.fate) for x in lg.launches("hooked")] == [
        (1, 10, "finished"),
        (2, 5, "running"),
    ]
    assert lg.steps_frame("hooked")["throughput"].tolist() == [14200.0] * 5


def test_show_gives_the_figures_the_verdict_and_the_launches(
    lg: ledger.Ledger, tmp_path: Path
) -> None:
    lg.ingest(_log(tmp_path / "train_s.log", 10650, 200))
    lg.deploy("s", "relaunch", ["true"])
    lg.ingest(_log(tmp_path / "train_s_v2.log", 14200, 200), "s")
    done = run_cli("compare", "s@1", "s", "--resolve", str(lg.add_hypothesis("h").id))
    assert done.exit_code == 0, done.output
    detail = run_json("show", "s")
    assert detail["launch"] == 2 and len(detail["launches"]) == 2
    assert 98 < detail["pct_of_baseline"] < 102
    assert abs(detail["effective"] - 14200) < 300
    assert detail["decision"]["verdict"] == "improvement"
    assert (detail["decision"]["launch_a"], detail["decision"]["launch_b"]) == (1, 2)
    assert detail["launches"][1]["verdict"] == "improvement"
    text = run_cli("show", "s").output
    assert "% of the baseline" in text and "s@1" in text and "s@2" in text
    assert "last verdict (compare" in text


def test_the_upgrade_puts_existing_rows_into_launch_1(db_url: str) -> None:
    engine = make_engine(db_url, create_dir=True)
    schema.upgrade(engine, "0005")
    meta = MetaData()
    meta.reflect(engine)
    now = datetime(2026, 11, 1, 12, 0)
    with engine.begin() as conn:
        conn.execute(insert(meta.tables["investigation"]).values(id=1, name="default",
                                                                 created_at=now))  # fmt: skip
        for run_id, fate in ((1, "oom"), (2, "finished")):
            conn.execute(insert(Table("run", meta)).values(
                id=run_id, investigation_id=1, name=f"r{run_id}", fate=fate, created_at=now,
                hook_dropped_steps=0))  # fmt: skip
            conn.execute(
                insert(meta.tables["step"]),
                [{"run_id": run_id, "rank": 0, "step": s, "throughput": 1.0} for s in range(5)],
            )
    schema.upgrade(engine)
    engine.dispose()
    rows = db_rows(db_url, "SELECT run_id, number, fate FROM launch ORDER BY run_id")
    assert [tuple(r) for r in rows] == [(1, 1, "oom"), (2, 1, "finished")]
    assert db_rows(db_url, "SELECT DISTINCT launch FROM step") == [(1,)]
    with ledger.open(db_url) as lg:
        assert lg.run_summary("r1").steps == 5 and lg.launches("r1")[0].fate == "oom"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["tail", "-n", "+1", "-F", "train.log"], "viewer"),
        (["tail", "-f", "train.log"], "viewer"),
        (["ssh", "box", "tail", "-n", "+1", "-F", "train.log"], "viewer"),
        (["ssh", "-p", "2222", "box", "tail -F /data/train.log"], "viewer"),
        (["ssh", "box", "pct exec 200 -- tail -F /root/train.log"], "viewer"),
        (["kubectl", "logs", "-f", "trainer-0"], "viewer"),
        (["kubectl", "exec", "pod", "-c", "main", "--", "tail", "-F", "x.log"], "viewer"),
        (["docker", "logs", "--follow", "trainer"], "viewer"),
        (["journalctl", "-u", "train", "-f"], "viewer"),
        (["bash", "-lc", "cd /w && tail -F train.log"], "viewer"),
        (["tail", "-n", "100", "train.log"], "trainer"),  # ends by itself: not following
        (["python", "train.py", "--steps", "3000"], "trainer"),
        (["torchrun", "--nproc-per-node", "8", "train.py"], "trainer"),
        (["ssh", "box", "torchrun train.py"], "trainer"),
        (["kubectl", "logs", "trainer-0"], "trainer"),
    ],
)
def test_a_trainer_is_told_from_a_viewer(argv: list[str], expected: str) -> None:
    assert role(argv) == expected


def _appended(path: Path, text: str) -> Path:
    with path.open("a") as f:
        f.write(text)
    return path


def _run_text(level: float, steps: int, ending: str, noise: int = 7) -> str:
    lines = [
        f"step {i} | loss {2.0 - i / 1000:.4f} | tok/s {level + (i * noise) % 50 - 25:.1f}\n"
        for i in range(1, steps + 1)
    ]
    return "launching: torchrun --nproc_per_node 8 train.py\n" + "".join(lines) + ending


def test_a_relaunch_appended_to_its_log_is_a_new_launch_with_its_own_steps(
    lg: ledger.Ledger, tmp_path: Path
) -> None:
    """`python train.py >> train.log` twice: the second run's steps 1, 2, … were the first
    run's keys and went nowhere (the ingest said it read them); now they are launch 2's."""
    log = _appended(tmp_path / "train_app.log", _run_text(14200, 300, "Training completed\n"))
    first = lg.ingest(log)
    assert (first.launch, first.steps, first.fate) == (1, 300, "finished")
    _appended(log, _run_text(11000, 200, "", noise=3))  # relaunched after a change: slower
    again = lg.ingest(log)
    assert (again.launch, again.steps, again.reset) == (2, 200, None)
    assert [(x.number, x.steps, x.fate) for x in lg.launches("app")] == [
        (1, 300, "finished"),
        (2, 200, again.fate),
    ]
    assert lg.steps_frame("app@1")["throughput"].median() > 14000  # never overwritten
    assert lg.steps_frame("app")["throughput"].median() < 11100
    report = lg.compare(["app@1", "app"])
    assert report.comparisons[0].verdict == "regression"
    assert lg.ingest(log).steps == 0  # read again: nothing twice


def test_a_crash_and_a_restart_in_one_log_read_at_once_are_two_launches(
    lg: ledger.Ledger, tmp_path: Path
) -> None:
    crash = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 10, in <module>\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    text = _run_text(10500, 120, crash) + _run_text(14200, 150, "Training completed\n")
    log = _appended(tmp_path / "train_twice.log", text)
    result = lg.ingest(log)
    assert (result.steps, result.launch, result.fate) == (270, 2, "finished")
    launches = lg.launches("twice")
    assert [(x.number, x.steps, x.fate) for x in launches] == [
        (1, 120, "oom"),
        (2, 150, "finished"),
    ]
    assert "out of memory" in (launches[0].fate_reason or "")
    assert len(lg.steps_frame("twice@1")) == 120 and len(lg.steps_frame("twice")) == 150
    # each launch has its own run's events: the OOM is the first's, the restart the second's
    with lg.engine.connect() as conn:
        found = conn.exec_driver_sql("SELECT kind, launch FROM log_event").all()
    assert ("oom", 1) in found and ("restart", 2) in found and ("oom", 2) not in found


def test_a_run_that_printed_no_end_before_a_new_one_began_is_not_left_running(
    lg: ledger.Ledger, tmp_path: Path
) -> None:
    """Preempted without a word, then started again into the same log: the first launch
    ended (a new run began), though nothing says how, so its fate is unknown, not running."""
    text = "".join(f"step {i} | loss 2.0 | tok/s {14000 + i % 9}\n" for i in range(1, 81))
    text += "".join(f"step {i} | loss 2.0 | tok/s {13000 + i % 9}\n" for i in range(1, 61))
    lg.ingest(_appended(tmp_path / "train_quiet.log", text))
    (first, second) = lg.launches("quiet")
    assert (first.steps, first.fate, second.steps) == (80, "unknown", 60)
    assert "a new run began at line 81" in (first.fate_reason or "")
