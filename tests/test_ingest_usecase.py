"""Ingest as one use case (files, standard input, follow); one write_config, its policy an
argument; the reader's columns from STEP_COLUMNS; the typed summary of an ingest."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import typing
from pathlib import Path
from typing import Any

import pytest
from helpers import db_rows
from sqlalchemy import select

from ledger.db import models as m
from ledger.errors import BadContentError, UsageError
from ledger.model.logs import LogSummary, StepRow
from ledger.model.summary import IngestSummary
from ledger.model.terms import STEP_COLUMNS
from ledger.store.config_rows import Keep, write_config
from ledger.store.ingest import HOOK_ONLY_COLUMNS, READER_COLUMNS
from ledger.usecases.ingest import IngestRequest, ingest

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
LOG = b"step 1 | loss 2.0 | tok/s 100\nstep 2 | loss 1.9 | tok/s 101\n"


def test_files_are_ingested_in_one_call_and_junk_among_them_skipped(
    lg: Any, tmp_path: Path
) -> None:
    good, junk = tmp_path / "train_good.log", tmp_path / "train_junk.log"
    good.write_bytes(LOG)
    junk.write_bytes(b"just a note to self\n")
    said: list[BadContentError] = []
    meters: list[str] = []
    outcome = ingest(
        lg, IngestRequest((str(good), str(junk))), meter=lambda p: meters.append(p) or None,
        on_skip=said.append,
    )  # fmt: skip
    assert [r.run for r in outcome.results] == ["good"] and outcome.results[0].steps == 2
    assert outcome.skipped == said and len(said) == 1 and "no training output" in str(said[0])
    assert meters == [str(good), str(junk)]
    with pytest.raises(BadContentError, match="no training output"):
        ingest(lg, IngestRequest((str(junk),)))  # alone, a junk file is the error
    with pytest.raises(BadContentError):
        ingest(lg, IngestRequest((str(junk), str(junk))))  # nothing read at all


def test_standard_input_is_kept_as_a_file_then_ingested(lg: Any) -> None:
    outcome = ingest(lg, IngestRequest((), run="piped", stdin=io.BytesIO(LOG)))
    (result,) = outcome.results
    assert (result.run, result.steps, result.read_bytes) == ("piped", 2, len(LOG))
    assert Path(result.path).read_bytes() == LOG
    for wrong in (
        IngestRequest(("x.log",), run="piped", stdin=io.BytesIO(LOG)),
        IngestRequest((), stdin=io.BytesIO(LOG)),
        IngestRequest((), run="piped", stdin=io.BytesIO(LOG), follow=True),
        IngestRequest(("a.log", "b.log"), follow=True),
    ):
        with pytest.raises(UsageError):
            ingest(lg, wrong)


def test_following_is_the_same_call(lg: Any, tmp_path: Path) -> None:
    log = tmp_path / "train_done.log"
    shutil.copy(FIXTURES / "completed_finished.log", log)
    looks: list[Any] = []
    outcome = ingest(
        lg, IngestRequest((str(log),), follow=True, interval=0.01), on_look=looks.append
    )
    assert looks and outcome.results == [looks[-1]] and outcome.skipped == []
    assert outcome.results[0].fate == "finished"


def test_one_write_config_keeps_the_first_or_the_last(lg: Any, db_url: str) -> None:
    lg.set_config("r", {"a": "1"})  # the API: the last value told wins
    lg.set_config("r", {"a": "2", "b": "x"})
    with lg.engine.begin() as conn:
        run_id = conn.execute(select(m.Run.id).where(m.Run.name == "r")).scalar_one()
        assert write_config(conn, run_id, "hook", {"a": "10"}, keep=Keep.FIRST) == 1
        assert (
            write_config(
                conn, run_id, "hook", [("a", "11"), ("c", "3"), ("c", "4")], keep=Keep.FIRST
            )
            == 2
        )
        assert write_config(conn, run_id, "log", [("a", "5"), ("a", "6")], keep=Keep.LAST) == 1
        assert write_config(conn, run_id, "log", [("a", "7")], keep=Keep.LAST) == 1
        assert write_config(conn, run_id, "log", [], keep=Keep.LAST) == 0
    rows = db_rows(db_url, "SELECT source, key, value FROM run_config ORDER BY source, key")
    assert rows == [
        ("api", "a", "2"), ("api", "b", "x"),
        ("hook", "a", "10"), ("hook", "c", "3"),
        ("log", "a", "7"),
    ]  # fmt: skip


def test_reader_columns_are_the_step_columns_a_log_can_say() -> None:
    assert [c for c in STEP_COLUMNS if c in READER_COLUMNS] == list(READER_COLUMNS)  # in order
    assert set(STEP_COLUMNS) - set(READER_COLUMNS) == set(HOOK_ONLY_COLUMNS) == {"wait_s"}
    assert len(typing.get_args(StepRow)) == 2 + len(READER_COLUMNS)  # (rank, step, *values)


def test_the_summary_declares_what_a_log_summary_holds(lg: Any, tmp_path: Path) -> None:
    declared = list(typing.get_type_hints(IngestSummary))
    assert declared == [f.name for f in dataclasses.fields(LogSummary)]
    assert IngestSummary.__required_keys__ == {"fate", "steps", "ranks"}
    log = tmp_path / "train_typed.log"
    log.write_bytes(LOG)
    result = lg.ingest(log)
    assert list(result.summary) == declared
    printed = json.loads(json.dumps(result.to_dict(), allow_nan=False))["summary"]
    assert printed["steps"] == 2 and printed["ranks"] == 1 and printed["fate"] == result.fate
