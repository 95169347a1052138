"""What a person types as a name or an id: run names (refused when empty, blank or holding
control characters, and never printed raw), hypothesis ids, `deploy --new`, and the
plural in "there are no … yet"."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from helpers import db_rows, run_cli, run_json

from ledger.errors import NotFoundError, UsageError, plural

BAD_NAMES = ["", "   ", "eager\nb", "\x1b[31mred\x1b[0m", "tab\there", "bell\a", "nul\x00x"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_run_name_without_text_or_with_control_characters_is_refused(
    lg: Any, db_url: str, name: str
) -> None:
    with pytest.raises(UsageError, match="run"):
        lg.ensure_run(name)
    with pytest.raises(UsageError):
        lg.add_steps(name, [{"step": 1, "throughput": 1.0}])
    with pytest.raises(UsageError):
        lg.probe(name, [sys.executable, "-c", "pass"], new=True)
    with pytest.raises(UsageError):
        lg.deploy(name, "copy", ["true"], new=True)
    with pytest.raises(UsageError):
        lg.record_fix("h", "s", run=name)
    assert db_rows(db_url, "SELECT name FROM run") == []
    assert db_rows(db_url, "SELECT count(*) FROM probe") == [(0,)]


@pytest.mark.parametrize("name", BAD_NAMES[:4])
def test_the_command_line_says_so_in_one_line(db_url: str, tmp_path: Any, name: str) -> None:
    run_json("init")
    log = tmp_path / "train.log"
    log.write_text("step 1 | loss 1.0 | tok/s 10000\n")
    for args in (
        ["ingest", str(log), "--run", name],
        ["deploy", "--run", name, "--step", "copy", "--new", "--", "true"],
        ["probe", "--run", name, "--new", "--", "true"],
    ):
        result = run_cli(*args)
        assert result.exit_code == 2, (args, result.stdout, result.stderr)
        line = result.stderr.strip()
        assert line.startswith("Error: ") and "run" in line and len(line.splitlines()) == 1
        assert "\x1b" not in result.stderr  # shown escaped, never raw
    assert db_rows(db_url, "SELECT name FROM run") == []


def test_names_printed_to_a_terminal_carry_no_control_characters(lg: Any, db_url: str) -> None:
    """A name stored before names were checked is printed with its control characters
    escaped, so it cannot repaint the terminal."""
    from sqlalchemy import create_engine, text

    lg.ensure_run("fine")
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE run SET name = :n"), {"n": "old\x1b[2Jname\r"})
    engine.dispose()
    for args in (["runs"], ["show", "old\x1b[2Jname\r"], ["timeline"]):
        result = run_cli(*args)
        assert result.exit_code == 0, result.stderr
        assert "\x1b" not in result.stdout and "\r" not in result.stdout
        assert "old\\x1b[2Jname\\r" in result.stdout


def test_a_hypothesis_id_is_positive(lg: Any, db_url: str) -> None:
    run_json("init")
    first = run_json("record-fix", "--hypothesis", "cache leaks", "--summary", "gate it")
    for ref in ("-3", "0", "-0", "+0"):
        result = run_cli("record-fix", "--hypothesis", ref, "--summary", "s")
        assert result.exit_code == 2, (ref, result.stderr)
        assert "a hypothesis id is a whole number from 1" in result.stderr
    assert db_rows(db_url, "SELECT id, text FROM hypothesis") == [
        (first["hypothesis_id"], "cache leaks")
    ]
    again = run_json("record-fix", "--hypothesis", "#1", "--summary", "again")
    assert again["hypothesis_id"] == 1 and not again["hypothesis_created"]
    missing = run_cli("record-fix", "--hypothesis", "7", "--summary", "s")
    assert missing.exit_code == 1 and "no hypothesis 7" in missing.stderr


def test_deploy_new_names_a_run_that_has_no_row_yet(db_url: str) -> None:
    run_json("init")
    refused = run_cli("deploy", "--run", "eager_baseline", "--step", "relaunch", "--", "true")
    assert refused.exit_code == 1 and "no run 'eager_baseline'" in refused.stderr
    assert "--new records it as a new run" in refused.stderr  # the way out, said
    probe = run_cli("probe", "--run", "eager_baseline", "--", "true")
    assert probe.exit_code == 1 and "--new records it as a new run" in probe.stderr
    made = run_json(
        "deploy", "--run", "eager_baseline", "--step", "relaunch", "--new", "--", "true"
    )
    assert made["run"] == "eager_baseline" and made["exit_code"] == 0
    recorded = run_json(
        "deploy", "--run", "eager_other", "--step", "relaunch", "--new", "--record-only",
        "--exit-code", "0", "--", "ssh", "box", "torchrun t.py --token-budget 4096",
    )  # fmt: skip
    assert recorded["run"] == "eager_other"
    typo = run_cli("deploy", "--run", "eager_baselin", "--step", "copy", "--", "true")
    assert typo.exit_code == 1 and "did you mean 'eager_baseline'" in typo.stderr
    again = run_json("deploy", "--run", "eager_baseline", "--step", "copy", "--new", "--", "true")
    assert again["run"] == "eager_baseline"  # --new on a run that exists is that run
    assert [r["run"] for r in run_json("runs")] == ["eager_baseline", "eager_other"]


def test_no_hypotheses_yet_is_spelled_right(db_url: str) -> None:
    run_json("init")
    result = run_cli("hypothesis", "resolve", "77", "confirmed")
    assert result.exit_code == 1
    assert "there are no hypotheses yet" in result.stderr
    assert "no run 'x' (there are no runs yet)" in str(NotFoundError("run", "x"))


@pytest.mark.parametrize(
    ("noun", "plural_"),
    [("run", "runs"), ("hypothesis", "hypotheses"), ("patch", "patches"),
     ("deploy step", "deploy steps"), ("probe", "probes"), ("analysis", "analyses"),
     ("index", "indexes"), ("query", "queries"), ("key", "keys")],
)  # fmt: skip
def test_plural(noun: str, plural_: str) -> None:
    assert plural(noun) == plural_
