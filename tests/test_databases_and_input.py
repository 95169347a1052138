"""Broken databases and bad input: refused with one line, and nothing already recorded is
lost or changed (each test here failed before its fix)."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import run_cli, run_json

import ledger
from ledger.db import schema
from ledger.errors import StorageError

# -- databases ------------------------------------------------------------------------------


@pytest.mark.sqlite_only
def test_a_read_only_command_does_not_change_a_file_that_is_not_a_ledger(tmp_path: Path) -> None:
    other = tmp_path / "notes.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('keep me')")
    before = other.read_bytes()
    for command in (["runs"], ["timeline"], ["report", "--out", str(tmp_path / "r.html")]):
        result = run_cli("--db", str(other), *command)
        assert result.exit_code == 1 and "not a ledger" in result.stderr
    for command in (["hypothesis", "add", "x"], ["ingest", str(other)]):
        assert run_cli("--db", str(other), *command).exit_code != 0
    assert other.read_bytes() == before  # not even switched to WAL
    with sqlite3.connect(other) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


@pytest.mark.sqlite_only
def test_a_read_only_ledger_refuses_writes_in_words(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    run_cli("--db", str(db), "init")
    with ledger.open(db) as lg:
        lg.add_hypothesis("kept")
    lg = ledger.Ledger.open(db, read_only=True)
    try:
        assert [h.text for h in lg.hypotheses()] == ["kept"]
        with pytest.raises(StorageError, match="read-only"):
            lg.add_hypothesis("never stored")
    finally:
        lg.close()


def _corrupt(path: Path) -> bytes:
    """Overwrite the b-tree header of the step table's root page, as a bad disk would."""
    with sqlite3.connect(path) as conn:
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'step'").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(path.read_bytes())
    start = (root - 1) * size
    data[start : start + 16] = b"\x0d\x00\x00\x00\xff\xff\xff\xff" * 2
    path.write_bytes(bytes(data))
    return bytes(data)


@pytest.mark.sqlite_only
def test_a_damaged_ledger_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    log = tmp_path / "train_x.log"
    log.write_text("".join(f"step {i} | loss 1.0 | tok/s {1000 + i}\n" for i in range(200)))
    run_cli("--db", str(db), "init")
    run_cli("--db", str(db), "ingest", str(log))
    with sqlite3.connect(db) as conn:  # fold the WAL into the file, then damage it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    damaged = _corrupt(db)
    for command in (["init"], ["ingest", str(log)], ["db", "upgrade"]):
        result = run_cli("--db", str(db), *command)
        assert result.exit_code == 1, (command, result.stderr)
        assert "is damaged" in result.stderr and len(result.stderr.splitlines()) == 1
    assert db.read_bytes() == damaged


def test_a_ledger_from_a_newer_version_is_named_as_such(db_url: str) -> None:
    from ledger.db.engine import make_engine

    engine = make_engine(db_url, create_dir=True)
    schema.upgrade(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0999'")
    engine.dispose()
    upgraded = run_cli("db", "upgrade")
    assert upgraded.exit_code == 1 and "written by a newer ledger" in upgraded.stderr
    assert "internal error" not in upgraded.stderr and "0999" in upgraded.stderr
    current = run_cli("db", "current")
    assert current.exit_code == 0 and "written by a newer ledger" in current.stdout
    assert run_json("db", "current")["state"] == "newer"


def test_a_db_path_inside_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "some_file").write_text("x")
    result = run_cli("--db", str(tmp_path / "some_file" / "x.db"), "init")
    assert result.exit_code == 2 and "is a file, not a folder" in result.stderr
    assert "internal error" not in result.stderr


def test_only_init_makes_a_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write command in the wrong folder (or a typo in --db) says where it looked."""
    monkeypatch.delenv("LEDGER_DB")
    wrong = tmp_path / "wrong_folder"
    wrong.mkdir()
    monkeypatch.chdir(wrong)
    added = run_cli("hypothesis", "add", "in the wrong folder")
    assert added.exit_code == 1 and "no ledger here" in added.stderr
    assert str(wrong) in added.stderr and "ledger init" in added.stderr
    typo = run_cli("--db", str(tmp_path / "typo" / "x.db"), "hypothesis", "add", "h")
    assert typo.exit_code == 1 and "ledger init --db" in typo.stderr
    assert list(tmp_path.iterdir()) == [wrong] and list(wrong.iterdir()) == []
    assert run_cli("init").exit_code == 0
    assert run_cli("hypothesis", "add", "now there is one").exit_code == 0


# -- numeric input -----------------------------------------------------------------------------

BAD_COMMAND_LINES = [
    ["hypothesis", "resolve", str(2**63), "--refuted"],
    ["hypothesis", "add", "x", "--parent", str(2**64)],
    ["ingest", "x.log", "--follow", "--interval", "-1"],
    ["ingest", "x.log", "--follow", "--interval", "nan"],
    ["ingest", "x.log", "--stall-after", "nan"],
    ["ingest", "x.log", "--stall-after", "-5"],
    ["ingest", "x.log", "--tokens-per-step", "0"],
    ["ingest", "x.log", "--tokens-per-step", "nan"],
    ["parse", "x.log", "--tokens-per-step", "inf"],
    ["probe", "--run", "r", "--wait", "inf", "--", "true"],
    ["probe", "--run", "r", "--timeout", "nan", "--", "true"],
    ["deploy", "--run", "r", "--step", "s", "--timeout", "0", "--", "true"],
    ["report", "--threshold", "nan"],
    ["compare", "a", "--threshold", "inf"],
    ["compare", "a", "--alpha", "nan"],
    ["compare", "a", "--baseline", "inf"],
    ["compare", "a", "b", "--resolve", "-1"],
    ["init", "--baseline", "nan"],
    ["init", "--baseline", "inf"],
    ["init", "--baseline", "-5"],
    ["baseline", "set", "0"],
    ["pattern", "remove", "0"],
    ["deploy", "--run", "r", "--step", "s", "--record-only", "--exit-code", "999", "--", "x"],
]


@pytest.mark.parametrize("args", BAD_COMMAND_LINES, ids=lambda a: " ".join(a)[:40])
def test_a_bad_number_is_a_usage_error(args: list[str], db_url: str) -> None:
    run_json("init", "--baseline", "14200")
    result = run_cli(*args)
    assert result.exit_code == 2, (args, result.stderr)
    assert result.stderr.startswith("Error: ") and len(result.stderr.splitlines()) == 1
    assert "internal error" not in result.stderr
    assert run_json("baseline")["value"] == 14200  # `init --baseline nan` erased it once


def test_the_api_refuses_a_baseline_that_is_not_a_throughput(lg) -> None:
    from ledger.errors import UsageError

    lg.set_baseline(14200)
    for bad in (math.nan, math.inf, -5.0, 0.0):
        with pytest.raises(UsageError, match="finite throughput above 0"):
            lg.set_baseline(bad)
    assert lg.baseline().value == 14200


def test_values_a_column_cannot_hold_cost_only_themselves(lg) -> None:
    seed = 2**64 - 59  # torch.initial_seed() is one of these half the time
    written = lg.write_steps(
        "r",
        [
            {"step": 0, "throughput": 10.0, "seed": seed},
            {"step": 1, "tokens": 2**70, "throughput": 11.0},
            {"step": 2**63, "throughput": 12.0},  # a key that cannot be stored: that row only
            {"step": 3, "throughput": math.nan, "loss": math.inf, "name\x00with nul": 1.0},
            {"step": 4, "throughput": 13.0, "g" * 300: 2.0},  # a long name is kept whole
        ],
    )
    assert (written.steps, written.bad_rows) == (4, 1)
    assert written.bad_values == 2  # the tokens, and the NUL in a name (escaped)
    frame = lg.steps_frame("r")
    assert frame["step"].tolist() == [0, 1, 3, 4]
    assert math.isnan(frame.loc[frame["step"] == 1, "tokens"].iloc[0])
    metrics = lg.metrics_frame("r")
    assert metrics.loc[metrics["name"] == "seed", "value"].iloc[0] == float(seed)
    assert "g" * 300 in set(metrics["name"])
    assert "name\\x00with nul" in set(metrics["name"])


# -- files given as input ----------------------------------------------------------------------


def test_trainer_state_with_absurd_numbers_is_read_as_far_as_it_goes(lg, tmp_path: Path) -> None:
    folder = tmp_path / "run_x"
    folder.mkdir()
    history = [
        {"loss": 1.0, "step": 1},
        {"loss": float("inf"), "step": 2},
        {"loss": float("nan"), "step": 3},
        {"loss": 1.0, "step": 1e30},  # a step no column holds: that entry only
        {"loss": 10**400, "step": 5},  # a loss no float holds: that value only
        {"loss": 0.5, "step": 6, "grad_norm": -(10**400)},
    ]
    text = json.dumps({"log_history": history, "global_step": 6, "max_steps": float("inf")})
    (folder / "trainer_state.json").write_text(text)
    result = lg.ingest(folder / "trainer_state.json")
    assert result.steps == 5
    assert lg.steps_frame("run_x")["step"].tolist() == [1, 2, 3, 5, 6]
    deep = tmp_path / "deep" / "trainer_state.json"
    deep.parent.mkdir()
    deep.write_text("[" * 100_000 + "]" * 100_000)
    from ledger.errors import BadContentError

    with pytest.raises(BadContentError, match=r"nests too deeply|not a trainer_state"):
        lg.ingest(deep)


def test_a_diff_from_dev_zero_is_refused_without_reading_it_all(db_url: str) -> None:
    run_json("init")
    start = time.process_time()  # this process's CPU, which a loaded machine does not stretch
    result = run_cli("record-fix", "--hypothesis", "h", "--summary", "s", "--diff", "/dev/zero")
    assert time.process_time() - start < 20  # it used to grow to 10 GB
    assert result.exit_code == 1 and "NUL bytes" in result.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_instead_of_read_for_ever(db_url: str, tmp_path: Path) -> None:
    run_json("init")
    fifo = tmp_path / "train_fifo.log"
    os.mkfifo(fifo)
    code = (
        "import sys\nfrom ledger.cli import cli\n"
        f"cli.main(['ingest', {str(fifo)!r}], prog_name='ledger')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2 and "not a regular file" in done.stderr
    for special in ("/dev/zero", "/dev/stdin"):
        result = run_cli("ingest", special, "--run", "x")
        assert result.exit_code == 2 and "not a regular file" in result.stderr, special


def test_rereading_a_rewritten_log_keeps_what_the_hook_wrote(lg, tmp_path: Path) -> None:
    lg.add_steps("eager", [{"step": i, "throughput": 1000.0} for i in range(1000, 2000)])
    log = tmp_path / "train_eager.log"
    log.write_text("".join(f"step {i} | loss 1.0 | tok/s {900 + i}\n" for i in range(5)))
    assert lg.ingest(log).steps == 5
    log.write_text("step 0 | loss 2.0 | tok/s 100\nstep 1 | loss 2.0 | tok/s 100\n")
    again = lg.ingest(log)
    assert again.reset in ("replaced", "truncated")
    # A rewritten log is a new launch: its rows are that launch's, and the first launch
    # keeps all it had (the hook's 1,000 and the log's first five)
    assert lg.steps_frame("eager")["step"].tolist() == [0, 1]
    first = lg.steps_frame("eager@1")["step"].tolist()
    assert len(first) == 1005 and first[:5] == [0, 1, 2, 3, 4] and first[-1] == 1999


def test_a_log_of_another_run_is_refused(lg, tmp_path: Path) -> None:
    log = tmp_path / "train_a.log"  # a real log's size: a copy shares more than a banner
    log.write_text("".join(f"step {i} | loss 1.0 | tok/s {1000 + i}\n" for i in range(3000)))
    lg.ingest(log)
    lg.set_fate("a", "oom", "CUDA out of memory")
    lg.add_steps("b", [{"step": 0, "throughput": 5.0}])
    from ledger.errors import ConflictError

    copy = tmp_path / "copy.log"
    copy.write_bytes(log.read_bytes() + b"step 3000 | loss 1.0 | tok/s 4000\n")
    for candidate in (log, copy):
        with pytest.raises(ConflictError, match="is the log of run 'a'"):
            lg.ingest(candidate, "b")
    assert lg.run_summary("b").steps == 1 and lg.show("b").log_files == []
    assert lg.show("a").fate == "oom"  # untouched
    # Two runs of one script share a banner: a short common start is not a copy.
    banner = "".join(f"config line {i}\n" for i in range(20))
    (tmp_path / "train_c.log").write_text(banner + "step 1 | loss 1.0 | tok/s 10\n")
    (tmp_path / "train_d.log").write_text(banner + "step 1 | loss 2.0 | tok/s 20\n")
    lg.ingest(tmp_path / "train_c.log")
    assert lg.ingest(tmp_path / "train_d.log").run == "d"


def test_a_file_with_no_training_output_makes_no_run(db_url: str, tmp_path: Path) -> None:
    run_json("init")
    (tmp_path / "empty0").write_bytes(b"")
    (tmp_path / "binary").write_bytes(bytes(range(256)) * 64)
    good = tmp_path / "train_good.log"
    good.write_text("".join(f"step {i} | loss 1.0 | tok/s {1000 + i}\n" for i in range(10)))
    alone = run_cli("ingest", str(tmp_path / "empty0"))
    assert alone.exit_code == 1 and "no training output" in alone.stderr
    mixed = run_cli("ingest", str(tmp_path / "binary"), str(good))
    assert mixed.exit_code == 1 and "skipped:" in mixed.stderr
    assert [r["run"] for r in run_json("runs")] == ["good"]


def test_debug_works_after_the_subcommand(db_url: str) -> None:
    from ledger.errors import NotFoundError

    run_json("init")
    with pytest.raises(NotFoundError, match="no run 'nope'"):  # the traceback, not a line
        run_cli("show", "nope", "--debug")


def test_concurrent_ingests_of_one_growing_log_store_each_event_once(
    db_url: str, tmp_path: Path
) -> None:
    """Eight shells following one log on a shared PostgreSQL once stored its events 8 times."""
    run_json("init")
    log = tmp_path / "train_shared.log"
    crash = 'Traceback (most recent call last):\n  File "t.py", line 1\nRuntimeError: boom\n'
    part = "".join(f"step {i} | loss 1.0 | tok/s {1000 + i}\n" for i in range(100))
    log.write_text(part + "[W] warning: something odd\n")
    assert run_cli("ingest", str(log)).exit_code == 0
    with log.open("a") as handle:
        # enough to read that the eight overlap: each reads for a second or so
        handle.write(
            "".join(f"step {i} | loss 1.0 | tok/s {1000 + i}\n" for i in range(100, 40_000))
        )
        handle.write(crash)
    code = (
        "import sys\nfrom ledger.cli import cli\n"
        f"cli.main(['--db', {db_url!r}, 'ingest', {str(log)!r}], prog_name='ledger')"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(8)
    ]  # fmt: skip
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    said = run_json("parse", str(log))["events"]  # what the log holds, read once
    with ledger.open(db_url) as lg:
        kinds = [e["kind"] for e in lg.log_events("shared")]
        assert said and {k: kinds.count(k) for k in said} == said
        assert kinds.count("traceback") == 1
        assert lg.run_summary("shared").steps == 40_000
