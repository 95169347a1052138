"""An ingest commits as it goes (ledger.store.ingest.COMMIT_EVERY_S), so other writers wait
a batch, not the whole read, and what a batch stored is kept; the result is the same as one
transaction's."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

import ledger
from ledger.store import ingest
from ledger.store.ingest import NoTrainingOutput


def _log(path: Path, steps: int) -> Path:
    with path.open("w") as out:
        for i in range(1, steps + 1):
            out.write(f"step {i} | loss {2 + 1 / i:.4f} | lr 3e-4 | tokens/s {14_000 + i % 97}\n")
        out.write("Training completed\n")
    return path


def test_committing_as_it_goes_reads_the_same_as_one_transaction(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _log(tmp_path / "train_a.log", 30_000)
    copy = tmp_path / "train_b.log"
    copy.write_bytes(log.read_bytes())
    with ledger.open(db_url) as lg:
        whole = lg.ingest(log, "whole")
        monkeypatch.setattr(ingest, "COMMIT_EVERY_S", 0.0)  # a commit after every block
        parts = lg.ingest(copy, "parts", fresh=True)  # (a copy: not refused as the same log)
        again = lg.ingest(copy, "parts")
        a, b = lg.steps_frame("whole"), lg.steps_frame("parts")
    assert parts.steps == whole.steps == 30_000 and parts.offset == whole.offset
    assert parts.fate == whole.fate == "finished"
    assert a.equals(b)
    assert again.read_bytes == 0 and again.steps == 0  # resumed at its end: nothing twice


def test_a_file_with_no_training_output_leaves_no_run_after_commits(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("nothing a trainer prints here\n" * 50_000)
    monkeypatch.setattr(ingest, "COMMIT_EVERY_S", 0.0)
    with ledger.open(db_url) as lg:
        with pytest.raises(NoTrainingOutput):
            lg.ingest(junk, "junk")
        assert lg.run_names() == []


@pytest.mark.sqlite_only  # SQLite's one write lock is what a long ingest held
def test_another_writer_gets_in_while_a_long_ingest_is_still_reading(
    db_url: str, tmp_path: Path
) -> None:
    log = _log(tmp_path / "train_big.log", 600_000)
    size = log.stat().st_size
    ledger.open(db_url).close()  # the ledger exists before the ingest starts
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "--db", db_url, "ingest", str(log)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    engine = create_engine(db_url)
    try:
        # wait (on conditions, not the clock) until the ingest has committed a first part
        offset = 0
        deadline = time.monotonic() + 300
        while offset == 0 and proc.poll() is None and time.monotonic() < deadline:
            with engine.connect() as conn:
                found = conn.execute(text('SELECT max("offset") FROM log_file')).scalar()
            offset = int(found or 0)
            time.sleep(0.05)
        assert 0 < offset < size, "the ingest committed nothing before its end"
        with ledger.open(db_url) as lg:
            lg.add_hypothesis("written beside a long ingest")  # waits a batch at most
            with engine.connect() as conn:
                reached = int(conn.execute(text('SELECT max("offset") FROM log_file')).scalar())
        assert reached < size, "the ingest had finished: the test proves nothing"
    finally:
        _, err = proc.communicate(timeout=600)
        engine.dispose()
    assert proc.returncode == 0, err
    with ledger.open(db_url) as lg:
        assert [h.text for h in lg.hypotheses()] == ["written beside a long ingest"]
        assert lg.run_summary("big").steps == 600_000
