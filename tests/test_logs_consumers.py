"""What the reader's consumers do with it: ingest stores unread lines, events with their
step and config items; `ledger parse` reads standard input and gzip and says what it could
not read; split and whole-file ingests store the same. On SQLite and (make test-pg)
PostgreSQL."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

from helpers import db_rows, run_cli

FIXTURES = Path(__file__).parent / "fixtures" / "logs"


def test_ingest_stores_unread_lines_and_reports_them(lg: Any, db_url: str, tmp_path: Path) -> None:
    log = tmp_path / "train_huge.log"
    shutil.copy(FIXTURES / "huge_numbers.log", log)
    result = lg.ingest(log)
    assert result.unread_lines == 3 and result.summary["unread_lines"] == 3
    assert result.summary["unread_values"] == 1  # step 4's loss of 1e400: the step is kept
    assert [u["line"] for u in result.summary["unread"]] == [4, 5, 6, 7]
    frame = lg.steps_frame("huge")
    assert len(frame) == 7  # the rest of the log is stored, step 4 without its loss
    assert frame.set_index("step").loss.isna().tolist() == [False, False, False, True] + [False] * 3
    assert db_rows(db_url, "SELECT unread_lines FROM log_file") == [(3,)]
    clean = tmp_path / "train_clean.log"
    shutil.copy(FIXTURES / "torchtitan_running.log", clean)
    assert lg.ingest(clean).unread_lines == 0


def test_events_carry_the_step_before_them(lg: Any, db_url: str, tmp_path: Path) -> None:
    log = tmp_path / "train_rec.log"
    shutil.copy(FIXTURES / "recompiles_logs.log", log)
    lg.ingest(log)
    events = lg.log_events("rec")
    assert [(e["kind"], e["step"]) for e in events] == [("recompile", 1), ("graph_break", 2)]
    assert db_rows(db_url, "SELECT kind, step FROM log_event ORDER BY line") == [
        ("recompile", 1),
        ("graph_break", 2),
    ]


def test_config_items_go_to_run_config(lg: Any, db_url: str, tmp_path: Path) -> None:
    log = tmp_path / "train_cfg.log"
    shutil.copy(FIXTURES / "config_launch.log", log)
    result = lg.ingest(log)
    assert result.config >= 10
    stored = dict(
        (key, value)
        for key, value, source in db_rows(db_url, "SELECT key, value, source FROM run_config")
        if source == "log"
    )
    assert stored["torch"] == "2.5.1+cu124" and stored["arg.token_budget"] == "49152"
    assert stored["world_size"] == "8" and stored["gpu.name"] == "NVIDIA H100 80GB HBM3"
    with log.open("a") as f:  # a relaunch with another value: the last one told wins
        f.write("[rank0]: Namespace(lr=0.0001, token_budget=65536)\n")
    lg.ingest(log)
    again = dict(db_rows(db_url, "SELECT key, value FROM run_config WHERE source = 'log'"))
    assert again["arg.token_budget"] == "65536" and again["torch"] == "2.5.1+cu124"


def test_a_gzip_log_ingests_and_grows(lg: Any, tmp_path: Path) -> None:
    body = (FIXTURES / "torchtitan_running.log").read_bytes()
    log = tmp_path / "train_packed.log.gz"
    log.write_bytes(gzip.compress(body[: len(body) // 2]))
    first = lg.ingest(log, "packed")
    log.write_bytes(gzip.compress(body))
    second = lg.ingest(log, "packed")
    assert first.steps > 0 and second.fate == "running"
    assert len(lg.steps_frame("packed")) == 40  # 20 steps of 2 ranks, none twice
    assert lg.ingest(log, "packed").read_bytes == 0


def test_split_and_whole_ingests_store_the_same(lg: Any, tmp_path: Path) -> None:
    text_ = (FIXTURES / "recompile_running.log").read_text()
    text_ += (FIXTURES / "torchrun_oom.log").read_text()
    whole = tmp_path / "train_whole.log"
    whole.write_text(text_)
    lg.ingest(whole)
    split = tmp_path / "train_split.log"
    cuts = [text_.index("function:"), text_.index("[rank1]:   File"), len(text_)]
    done = 0
    for cut in cuts:  # cut inside the recompile warning and inside the traceback
        with split.open("a") as f:
            f.write(text_[done:cut])
        done = cut
        lg.ingest(split)
    assert lg.log_events("whole") == lg.log_events("split")
    columns = ["rank", "step", "throughput", "loss"]
    assert lg.steps_frame("whole")[columns].equals(lg.steps_frame("split")[columns])
    assert lg.show("whole").fate == lg.show("split").fate == "oom"


def test_parse_reports_unread_lines(tmp_path: Path) -> None:
    data = json.loads(run_cli("parse", str(FIXTURES / "huge_numbers.log"), "--json").stdout)
    assert data["unread_lines"] == 3 and data["unread_values"] == 1
    assert data["unread"][0] == {"line": 4, "reason": "step out of range", "text": ""}
    assert data["unread"][3] == {"line": 7, "reason": "value out of range: loss", "text": ""}
    clean = json.loads(run_cli("parse", str(FIXTURES / "torchtitan_running.log"), "--json").stdout)
    assert clean["unread_lines"] == 0 and clean["unread"] == []
    said = run_cli("parse", str(FIXTURES / "huge_numbers.log"))
    assert said.exit_code == 0
    assert "3 lines could not be read (first: line 4, step out of range)" in said.stdout
    assert "1 value could not be read (their lines were)" in said.stdout
    quiet = run_cli("parse", str(FIXTURES / "torchtitan_running.log")).stdout
    assert "could not be read" not in quiet


def test_parse_reads_standard_input_and_gzip(tmp_path: Path) -> None:
    piped = run_cli("parse", "-", "--json", input=(FIXTURES / "torchrun_oom.log").read_text())
    assert piped.exit_code == 0, piped.stderr
    assert json.loads(piped.stdout)["fate"] == "oom"
    said = run_cli("parse", "-", input=(FIXTURES / "nccl_timeout.log").read_text())
    assert said.stdout.startswith("stdin: nccl")
    packed = json.loads(run_cli("parse", str(FIXTURES / "gzip_torchtitan.log.gz"), "--json").stdout)
    assert (packed["fate"], packed["steps"]) == ("finished", 10)


def test_parse_says_what_a_file_is(tmp_path: Path) -> None:
    for name, content in (("empty.log", "empty"), ("binary.bin", "binary"), ("prose.txt", "prose")):
        data = json.loads(run_cli("parse", str(FIXTURES / name), "--json").stdout)
        assert (data["content"], data["fate"]) == (content, "unknown")
        said = run_cli("parse", str(FIXTURES / name)).stdout
        assert content in said


def test_parse_refuses_what_is_not_a_file(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    refused = run_cli("parse", str(fifo))
    assert refused.exit_code == 2 and refused.stderr.startswith("Error:")  # a usage error
    assert "give -" in refused.stderr


def test_a_file_that_is_not_a_log_says_what_it_is(lg: Any, tmp_path: Path) -> None:
    import pytest

    from ledger.errors import BadContentError

    for name, said in (("empty.log", "empty"), ("binary.bin", "binary"), ("prose.txt", "prose")):
        with pytest.raises(BadContentError, match=f"no training output \\(the file is {said}"):
            lg.ingest(FIXTURES / name, f"x_{said}")
    assert lg.runs() == []


def test_config_items_pass_the_redaction_gate(lg: Any, db_url: str, tmp_path: Path) -> None:
    token = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"
    log = tmp_path / "train_secret.log"
    log.write_text(
        f"Namespace(lr=0.001, hf_token='{token}', wandb_api_key='0123456789abcdef0123456789abcdef01234567')\n"  # noqa: E501
        "step 1 | loss 2.0 | tok/s 100\n"
    )
    lg.ingest(log)
    stored = dict(db_rows(db_url, "SELECT key, value FROM run_config WHERE source = 'log'"))
    assert stored["arg.lr"] == "0.001"
    everything = " ".join(str(v) for v in stored.values())
    assert token not in everything and "0123456789abcdef0123456789abcdef" not in everything
    assert {"arg.hf_token", "arg.wandb_api_key"} <= set(stored)  # kept, their values masked


def test_ingest_warns_once_per_file_of_lines_it_did_not_read(lg: Any, tmp_path: Path) -> None:
    planted = tmp_path / "train_planted.log"
    shutil.copy(FIXTURES / "unknown_shapes_planted.log", planted)
    clean = tmp_path / "train_clean.log"
    shutil.copy(FIXTURES / "torchtitan_running.log", clean)
    result = run_cli("ingest", str(planted), str(clean))
    assert result.exit_code == 0, result.stderr
    warnings = [ln for ln in result.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1  # once for the planted file, nothing for the clean one
    assert "train_planted.log: 20 lines could not be read, e.g. line 4: ep#0" in warnings[0]
    assert "ledger pattern add" in warnings[0]
    assert "20 lines could not be read" in result.stdout
    again = run_cli("ingest", str(planted))  # nothing new read: nothing to warn of
    assert not [ln for ln in again.stderr.splitlines() if ln.startswith("warning:")]
    data = json.loads(run_cli("ingest", str(planted), "--json").stdout)
    assert data["unread_lines"] == 20
