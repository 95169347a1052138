"""Ingest is incremental and idempotent, on SQLite and (make test-pg) PostgreSQL."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from helpers import run_cli, run_json

from ledger.store.ingest import run_name_for

FIXTURES = Path(__file__).parent / "fixtures" / "logs"


def _counts(lg, run: str) -> tuple[int, int, int]:
    steps = lg.steps_frame(run)
    metrics = lg.metrics_frame(run)
    return len(steps), len(metrics), len(lg.log_events(run))


def test_run_names() -> None:
    assert run_name_for("logs/train_eager_unpadded.log") == "eager_unpadded"
    assert run_name_for("train-x.log.txt") == "x"
    assert run_name_for("out/my_run/checkpoint-500/trainer_state.json") == "my_run"
    assert run_name_for("plain.out") == "plain"


def test_same_file_twice_adds_nothing(lg, tmp_path: Path) -> None:
    log = tmp_path / "train_titan.log"
    shutil.copy(FIXTURES / "torchtitan_running.log", log)
    first = lg.ingest(log)
    assert (first.run, first.steps, first.fate) == ("titan", 40, "running")
    before = _counts(lg, "titan")
    again = lg.ingest(log)
    assert (again.read_bytes, again.steps, again.metrics, again.events) == (0, 0, 0, 0)
    assert _counts(lg, "titan") == before == (40, 160, 0)
    detail = lg.show("titan")  # (run_summary fails on PostgreSQL: max(boolean), not ours)
    assert (detail.steps, detail.ranks) == (20, 2)


def test_appended_lines_only_are_read(lg, tmp_path: Path) -> None:
    log = tmp_path / "train_oom.log"
    text = (FIXTURES / "torchrun_oom.log").read_text()
    cut = text.index("[rank1]: Traceback")
    log.write_text(text[:cut])
    first = lg.ingest(log)
    assert (first.steps, first.fate) == (5, "running")
    log.write_text(text)
    second = lg.ingest(log)
    assert second.read_bytes == len(text.encode()) - len(text[:cut].encode())
    assert (second.steps, second.fate) == (0, "oom")
    kinds = [e["kind"] for e in lg.log_events("oom")]
    assert kinds.count("oom") == 1 and kinds.count("traceback") == 2
    assert lg.show("oom").fate == "oom"
    assert lg.ingest(log).events == 0


def test_resume_keeps_auto_numbering_and_open_tracebacks(lg, tmp_path: Path) -> None:
    log = tmp_path / "train_hf.log"
    lines = [f"{{'loss': {2 - i / 10}, 'epoch': {i / 10}}}\n" for i in range(1, 7)]
    log.write_text(
        "".join(lines[:3]) + 'Traceback (most recent call last):\n  File "t.py", line 1\n'
    )
    lg.ingest(log)
    with log.open("a") as f:
        f.write("ValueError: boom\n" + "".join(lines[3:]))
    result = lg.ingest(log)
    assert lg.steps_frame("hf")["step"].tolist() == [1, 2, 3, 4, 5, 6]
    assert [e["kind"] for e in lg.log_events("hf")] == ["traceback"]
    assert result.fate == "running"  # training went on after the exception


def test_truncated_and_replaced_files_are_read_again_without_duplicates(lg, tmp_path: Path) -> None:
    log = tmp_path / "train_r.log"
    log.write_text("".join(f"step {i} | loss 1.0 | tok/s {1000 + i}\n" for i in range(1, 11)))
    lg.ingest(log)
    log.write_text("".join(f"step {i} | loss 2.0 | tok/s {2000 + i}\n" for i in range(1, 4)))
    truncated = lg.ingest(log)
    assert truncated.reset == "truncated"
    frame = lg.steps_frame("r")
    assert frame["step"].tolist() == [1, 2, 3] and frame["throughput"].tolist() == [
        2001,
        2002,
        2003,
    ]
    log.write_text("".join(f"step {i} | loss 3.0 | tok/s {3000 + i}\n" for i in range(1, 4)))
    replaced = lg.ingest(log)
    assert replaced.reset == "replaced"
    assert lg.steps_frame("r")["throughput"].tolist() == [3001, 3002, 3003]


def test_unfinished_bar_counts_for_fate_but_waits_to_be_stored(lg, tmp_path: Path) -> None:
    log = tmp_path / "train_load.log"
    shutil.copy(FIXTURES / "loading_weights.log", log)
    result = lg.ingest(log)
    assert result.fate == "loading" and "81/851" in result.fate_reason
    assert lg.show("load").fate == "loading"


def test_nan_and_inf_round_trip(lg, tmp_path: Path) -> None:
    log = tmp_path / "train_nan.log"
    log.write_text("step 1 | loss nan | tok/s 10\nstep 2 | loss inf | tok/s 11\n")
    lg.ingest(log)
    loss = lg.steps_frame("nan")["loss"].tolist()
    assert math.isnan(loss[0]) and math.isinf(loss[1])


def test_stalled_when_a_running_log_stops_growing(lg, tmp_path: Path) -> None:
    log = tmp_path / "train_s.log"
    log.write_text("step 1 | loss 1.0 | tok/s 10\n")
    assert lg.ingest(log, stall_after=0).fate == "running"
    assert lg.ingest(log, stall_after=0).fate == "stalled"
    with log.open("a") as f:
        f.write("step 2 | loss 1.0 | tok/s 10\n")
    assert lg.ingest(log, stall_after=0).fate == "running"


def test_trainer_state_json(lg, tmp_path: Path) -> None:
    folder = tmp_path / "my_run" / "checkpoint-20"
    folder.mkdir(parents=True)
    state = {
        "global_step": 20,
        "max_steps": 20,
        "log_history": [
            {"loss": 2.0, "learning_rate": 5e-5, "epoch": 0.5, "step": 10},
            {"loss": 1.5, "grad_norm": 0.3, "epoch": 1.0, "step": 20},
            {"eval_loss": 1.7, "epoch": 1.0, "step": 20},
            {"train_runtime": 12.0, "train_loss": 1.75, "epoch": 1.0, "step": 20},
        ],
    }
    path = folder / "trainer_state.json"
    path.write_text(json.dumps(state))
    result = lg.ingest(path)
    assert (result.run, result.steps, result.fate) == ("my_run", 2, "finished")
    assert lg.ingest(path).steps == 0
    names = set(lg.metrics_frame("my_run")["name"])
    assert {"learning_rate", "grad_norm", "eval_loss"} <= names


def test_cli_ingest_and_patterns(db_url: str, tmp_path: Path) -> None:
    log = tmp_path / "train_cli.log"
    log.write_text("it=1 L=2.5 v=100\nit=2 L=2.4 v=110\n")
    run_cli("init")
    added = run_cli("pattern", "add", r"it=(?P<step>\d+) L=(?P<loss>[\d.]+) v=(?P<throughput>\d+)")
    assert added.exit_code == 0, added.stderr
    data = run_json("ingest", str(log))
    assert (data["run"], data["steps"], data["summary"]["steps"]) == ("cli", 2, 2)
    text = run_cli("ingest", str(log))
    assert text.exit_code == 0 and "nothing new" in text.stdout
    bad = run_cli("pattern", "add", "(?P<step>")
    assert bad.exit_code == 2 and bad.stderr.startswith("Error:")
    missing = run_cli("ingest", str(tmp_path / "missing.log"))
    assert missing.exit_code == 2 and "no such file" in missing.stderr  # a usage error
    assert run_json("pattern", "list") == [
        r"it=(?P<step>\d+) L=(?P<loss>[\d.]+) v=(?P<throughput>\d+)"
    ]


def test_follow_stops_at_a_final_fate(lg, tmp_path: Path) -> None:
    log = tmp_path / "train_f.log"
    shutil.copy(FIXTURES / "crashed_traceback.log", log)
    data = run_json("ingest", str(log), "--follow", "--interval", "0.01")
    assert data["fate"] == "crashed"


@pytest.mark.sqlite_only
def test_upgrade_from_0001_keeps_rows(tmp_path: Path) -> None:
    from sqlalchemy import create_engine, text

    from ledger.db import schema

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_engine(url)
    schema.upgrade(engine, "0001")
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO investigation (id, name, created_at) VALUES (1, 'default', '2026-01-01')"  # noqa: E501
            )
        )
        conn.execute(
            text(
                "INSERT INTO run (id, investigation_id, name, fate, created_at) VALUES (1, 1, 'a', 'unknown', '2026-01-01')"  # noqa: E501
            )
        )
        conn.execute(
            text(
                "INSERT INTO log_file (id, run_id, path, size, \"offset\", lines, created_at) VALUES (1, 1, '/x', 5, 5, 1, '2026-01-01')"  # noqa: E501
            )
        )
    schema.upgrade(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT path, state FROM log_file")).one() == ("/x", None)
        assert conn.execute(text("SELECT count(*) FROM setting")).scalar() == 0
    engine.dispose()


def test_a_failed_write_stores_nothing(lg, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger.errors import LedgerError
    from ledger.store.steps import StepWriter

    log = tmp_path / "train_fail.log"
    log.write_text("".join(f"step {i} | loss 1.0 | tok/s {1000 + i}\n" for i in range(1, 50)))

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(StepWriter, "write", broken)
    with pytest.raises((RuntimeError, LedgerError)):
        lg.ingest(log)
    monkeypatch.undo()
    assert lg.run_names() == []  # the whole ingest was rolled back, the new run too
    assert lg.ingest(log).steps == 49


def test_ctrl_c_while_following_exits_130_and_keeps_what_was_read(
    db_url: str, tmp_path: Path
) -> None:
    import signal
    import subprocess
    import sys
    import time

    run_json("init")
    log = tmp_path / "train_followed.log"
    log.write_text("".join(f"step {i} | loss 1.0 | tok/s {1000 + i}\n" for i in range(30)))
    # SIGUSR1 dumps every thread's stack to stderr: a follower that hangs says where.
    code = (
        "import faulthandler, signal, sys\n"
        "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
        "from ledger.cli import main\nsys.argv[0] = 'ledger'\nmain()"
    )
    follower = subprocess.Popen(
        [sys.executable, "-c", code, "ingest", str(log), "--follow", "--interval", "0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # the signal comes once the follower has stored the log (a condition, not a clock:
        # on a loaded machine three seconds were not always enough to start Python)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and follower.poll() is None:
            runs = run_json("runs")
            if runs and runs[0]["steps"] == 30:
                break
            time.sleep(0.1)
        time.sleep(0.3)  # into its next wait between looks
        follower.send_signal(signal.SIGINT)
        # A minute or two: beside two CPU burners its exit took 3 s.
        _, err = follower.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        follower.send_signal(signal.SIGUSR1)
        time.sleep(2)
        follower.kill()
        _, err = follower.communicate()
        raise AssertionError(f"still running 120 s after Ctrl-C; its threads:\n{err}") from None
    finally:  # never left running: its pipes, collected later, fail another test
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == 130, err  # it exited 0 once, as if the run had ended
    assert err.strip().splitlines()[-1].startswith("Error: interrupted")
    assert run_json("runs")[0]["steps"] == 30


def test_ingest_reads_standard_input(db_url: str) -> None:
    run_json("init")
    log = "".join(f"step {i} | loss 1.0 | tok/s {1000 + i}\n" for i in range(25))
    result = run_cli("ingest", "-", "--run", "piped", "--json", input=log)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["steps"] == 25
    assert run_cli("ingest", "-", input=log).exit_code == 2  # a stream needs its run's name


@pytest.mark.sqlite_only
def test_an_ingest_overtaken_while_it_paused_goes_on_from_the_other_s_place(
    lg, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite lets another writer in between an ingest's batches: a second ingest of the log
    that reads on from there overtakes the first, which then goes on from the second's place
    (it failed, under load, with "read on by another ingest") and stores nothing twice."""
    import functools

    import ledger
    import ledger.logs.source as source
    import ledger.store.ingest as ingest_store

    # read in blocks of 2 KiB, a batch (and a pause) each: about 60 steps
    monkeypatch.setattr(ingest_store, "BATCH_ROWS", 50)
    monkeypatch.setattr(
        source, "read_blocks", functools.partial(source.read_blocks, chunk_size=2048)
    )
    log = tmp_path / "train_overtaken.log"
    log.write_text("step 0 | loss 1.0 | tok/s 1000\n")
    lg.ingest(log)  # the log's row exists: the first ingest holds no lock between batches
    crash = 'Traceback (most recent call last):\n  File "t.py", line 1\nRuntimeError: boom\n'
    with log.open("a") as handle:
        handle.write("".join(f"step {i} | loss 1.0 | tok/s {1000 + i}\n" for i in range(1, 400)))
        handle.write(crash)
    size, overtaken = log.stat().st_size, []

    def the_other_ingest(offset: int, total: int) -> None:
        if not overtaken and offset > size // 2:  # past its first batches, mid-file
            with ledger.open(db_url) as other:
                overtaken.append(other.ingest(log))

    result = lg.ingest(log, progress=the_other_ingest)
    assert overtaken and overtaken[0].steps > 0  # the other read on from the first's pause
    assert result.offset == size and result.steps < 399  # the first: on from the other's place
    assert lg.run_summary("overtaken").steps == 400
    kinds = [e["kind"] for e in lg.log_events("overtaken")]
    assert kinds == ["traceback"]  # stored once, by whichever read it
