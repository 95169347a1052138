"""Broken trackers' files: each built for real (the tracker writes it, then it is damaged as a
disk, a crash or a hand edit damages it) and imported. What cannot be read is skipped,
counted and named; the rest is imported; the command fails only when nothing could be read."""

from __future__ import annotations

import glob
import json
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import BadContentError
from tests.helpers import run_cli
from tests.test_import import (
    MLFLOW_SQLA,
    _log_mlflow,
    _mlflow_client,
    config_of,
    metrics_of,
    steps_of,
)
from tests.test_import_sources import TRACKIO_SCRIPT

# -- MLflow ------------------------------------------------------------------------------


@pytest.mark.filterwarnings(MLFLOW_SQLA)
def test_text_and_undecodable_values_in_mlflow_db_are_named_skips(lg: Any, tmp_path: Path) -> None:
    store = tmp_path / "mlflow.db"
    client = _mlflow_client(f"sqlite:///{store}")
    _log_mlflow(client, "eager", range(10))
    client._tracking_client.store.engine.dispose()  # MLflow keeps the file open
    with sqlite3.connect(store) as conn:  # what a hand edit or another writer leaves
        conn.execute("UPDATE metrics SET value = 'abc' WHERE key = 'loss' AND step = 3")
        conn.execute("UPDATE metrics SET value = x'00ff' WHERE key = 'loss' AND step = 4")
        conn.execute(
            "UPDATE metrics SET key = CAST(x'6c6f7373ff' AS TEXT) "
            "WHERE key = 'tokens_per_second' AND step = 5"
        )
        conn.execute("UPDATE params SET value = CAST(x'fffe' AS TEXT) WHERE key = 'compile'")

    (run,) = lg.import_runs([store]).runs
    assert run.skipped == 4
    said = "\n".join(run.problems)
    assert "2 metric values that are not numbers (loss@3 'abc'" in said
    assert "1 metrics whose key is not UTF-8" in said
    assert "1 params that are not UTF-8 ('compile')" in said
    rows = steps_of(lg, "eager")
    assert sorted(rows) == list(range(10))  # every other value of every step is there
    assert rows[3]["loss"] != rows[3]["loss"] and rows[2]["loss"] == pytest.approx(1.0)
    assert rows[5]["throughput"] != rows[5]["throughput"]


def _file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    root = tmp_path / "mlruns"
    client = _mlflow_client(root.as_uri())
    _log_mlflow(client, "eager", range(6))
    _log_mlflow(client, "compiled", range(6))
    return root


def _run_folder(root: Path, name: str) -> Path:
    for tag in root.glob("*/*/tags/mlflow.runName"):
        if tag.read_text() == name:
            return tag.parent.parent
    raise AssertionError(f"no run {name}")


def test_broken_lines_and_bytes_in_an_mlruns_store_are_named_skips(
    lg: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _file_store(tmp_path, monkeypatch)
    eager = _run_folder(root, "eager")
    with (eager / "metrics" / "loss").open("ab") as handle:
        handle.write(b"1700000000000 not-a-number 6\n")  # a line that is not numbers
        handle.write(b"garbage\n")
        handle.write(b"1700000000000 \xff\xfe 7\n")  # bytes that are not UTF-8
    (eager / "params" / "compile").write_bytes(b"max-\xffautotune")
    compiled = _run_folder(root, "compiled")
    meta = compiled / "meta.yaml"
    meta.write_bytes(meta.read_bytes().replace(b"status: 3", b"status: \xff3"))

    result = lg.import_runs([root])
    by_run = {r.run: r for r in result.runs}
    assert set(by_run) == {"eager", "compiled"}
    said = "\n".join(by_run["eager"].problems)
    assert "2 metric lines that are not numbers (loss:7 '1700000000000 not-a-number 6'" in said
    assert "1 metric lines that are not UTF-8 (loss:9)" in said
    assert "1 files that are not UTF-8" in said and "params/compile" in said
    assert by_run["eager"].skipped == 4
    assert sorted(steps_of(lg, "eager")) == list(range(6))
    assert "compile" not in config_of(lg, "eager")
    # an unreadable meta.yaml: the run is still read, its status (and fate) unknown
    assert "meta.yaml" in "\n".join(by_run["compiled"].problems)
    assert by_run["compiled"].fate == "unknown" and by_run["compiled"].steps == 6


# -- TensorBoard -------------------------------------------------------------------------


def _records(file: Path) -> list[tuple[int, int]]:
    """(offset, length) of each record, by the file's framing."""
    data = file.read_bytes()
    found, at = [], 0
    while at + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        found.append((at, length))
        at += 16 + length
    return found


def _tb_run(folder: Path, steps: int) -> Path:
    tensorboard = pytest.importorskip("torch.utils.tensorboard")
    writer = tensorboard.SummaryWriter(str(folder))
    for step in range(steps):
        writer.add_scalar("tokens_per_sec", 1000.0 + step, step)
    writer.close()
    (file,) = glob.glob(str(folder / "events.out.tfevents.*"))
    return Path(file)


def test_a_tensorboard_file_with_one_flipped_byte_says_how_much_was_read(
    tmp_path: Path, db_url: str
) -> None:
    file = _tb_run(tmp_path / "runs" / "eager", 2000)
    records = _records(file)
    assert len(records) == 2001  # TensorBoard's file_version record, then 2,000 scalars
    offset, _ = records[2]  # the second scalar's event: a byte of its payload flipped
    data = bytearray(file.read_bytes())
    data[offset + 12 + 5] ^= 0x01
    file.write_bytes(bytes(data))

    assert run_cli("init").exit_code == 0
    done = run_cli("import", str(tmp_path / "runs"), "--json")
    assert done.exit_code == 0, done.output  # one point was read: it is imported
    (run,) = json.loads(done.output)["runs"]
    assert run["steps"] == 1
    (problem,) = run["problems"]
    assert problem.startswith(file.name)
    assert "stopped at record 3 of 2,001" in problem and "1,999 records" in problem
    text = run_cli("import", str(tmp_path / "runs"))
    assert "stopped at record 3 of 2,001" in text.output


def test_a_tensorboard_file_cut_short_is_reported(lg: Any, tmp_path: Path) -> None:
    file = _tb_run(tmp_path / "runs" / "eager", 50)
    data = file.read_bytes()
    file.write_bytes(data[: len(data) - 7])  # a writer killed mid-record
    (run,) = lg.import_runs([tmp_path / "runs"]).runs
    assert run.steps == 49
    (problem,) = run.problems
    assert "the record there is corrupt or cut short" in problem


def test_a_tensorboard_file_corrupt_from_its_first_record_fails(
    tmp_path: Path, db_url: str
) -> None:
    file = _tb_run(tmp_path / "runs" / "eager", 20)
    data = bytearray(file.read_bytes())
    data[13] ^= 0x01  # inside the very first record: nothing after it can be read
    file.write_bytes(bytes(data))
    assert run_cli("init").exit_code == 0
    done = run_cli("import", str(tmp_path / "runs"))
    assert done.exit_code == 1
    assert done.stderr.startswith("Error: nothing could be read: events.out.tfevents.")
    assert len(done.stderr.strip().splitlines()) == 1


# -- W&B exports and trackio -------------------------------------------------------------


def test_an_export_with_text_bytes_and_broken_lines_keeps_the_rest(lg: Any, tmp_path: Path) -> None:
    csv_file = tmp_path / "eager_history.csv"
    csv_file.write_bytes(
        b"_step,loss,tps\n0,1.5,100\n1,oops,101\n2,1.25,\xff\xfe\n3,1.0,103\nx,1.0,104\n"
    )
    jsonl = tmp_path / "compiled.jsonl"
    jsonl.write_text('{"_step": 0, "loss": 2.0}\n{"_step": 1, "loss": \n[1, 2]\n')
    result = lg.import_runs([csv_file, jsonl])
    by_run = {r.run: r for r in result.runs}
    csv_said = "\n".join(by_run["eager_history"].problems)
    assert "1 values that are not numbers (loss@1 'oops')" in csv_said
    assert "1 rows without a whole _step (_step='x')" in csv_said
    assert "1 values that are not UTF-8 (tps@2)" in csv_said
    assert by_run["eager_history"].skipped == 3
    assert sorted(steps_of(lg, "eager_history")) == [0, 1, 2, 3]
    assert "2 lines that are not JSON objects" in "\n".join(by_run["compiled"].problems)
    assert sorted(steps_of(lg, "compiled")) == [0]


def test_an_export_with_nothing_readable_fails_in_one_line(tmp_path: Path, db_url: str) -> None:
    export = tmp_path / "eager_history.csv"
    export.write_text("_step,loss\n0,abc\n1,def\n")
    assert run_cli("init").exit_code == 0
    done = run_cli("import", str(export))
    assert done.exit_code == 1
    assert done.stderr.strip() == (
        "Error: nothing could be read: 2 values that are not numbers (loss@0 'abc'; loss@1 'def')"
    )
    with pytest.raises(BadContentError, match="nothing could be read"):
        import ledger

        with ledger.open(db_url) as lg:
            lg.import_runs([export])


def test_a_damaged_trackio_row_is_a_named_skip(lg: Any, tmp_path: Path) -> None:
    folder = tmp_path / "trackio"
    done = subprocess.run(
        [sys.executable, "-c", TRACKIO_SCRIPT, str(folder)], capture_output=True, timeout=300
    )
    if done.returncode != 0 and b"No module named 'trackio'" in done.stderr:
        pytest.skip("trackio is not installed")
    assert done.returncode == 0, done.stderr[-2000:]
    with sqlite3.connect(folder / "sweep.db") as conn:
        conn.execute("UPDATE metrics SET metrics = '{\"tps\": 1' WHERE step = 2")
        conn.execute("UPDATE metrics SET metrics = CAST(x'7bff7d' AS TEXT) WHERE step = 3")
    (run,) = lg.import_runs([folder / "sweep.db"]).runs
    assert run.skipped == 2
    assert "2 rows that are not a step and a JSON object" in "\n".join(run.problems)
    assert sorted(steps_of(lg, "compiled")) == [0, 1, 4]
    assert metrics_of(lg, "compiled") == {}
