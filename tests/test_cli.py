"""The command line: the scenario of issue 2, JSON shapes, and the one-line error contract."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import Result
from helpers import run_cli, run_json

from ledger.cli import cli


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "build").mkdir()
    (tmp_path / "train.py").write_text("old = True\n")
    (tmp_path / "build" / "train.py").write_text("old = True\n")
    (tmp_path / "train.py").write_text("old = False  # the patch\n")
    return tmp_path


def test_the_scenario(db_url: str, project: Path) -> None:
    init = run_json("init", "--baseline", "14200", "--unit", "tok/s")
    assert init["created"] and init["investigation"]["baseline_value"] == 14200
    added = run_json("hypothesis", "add", "torch.compile recompiles")
    assert (added["id"], added["text"], added["status"]) == (1, "torch.compile recompiles", "open")
    fix = run_json(
        "record-fix",
        "--hypothesis",
        "1",
        "--summary",
        "gate the GPU buffer cache",
        "--file",
        "train.py",
        "--run",
        "eager_dynamiccopy",
    )
    assert set(fix) == {"hypothesis_id", "patch_id", "run", "files", "hypothesis_created"}
    assert fix["files"][0]["path"] == "train.py" and len(fix["files"][0]["sha256"]) == 64

    stale = run_cli(
        "deploy",
        "--run",
        "eager_dynamiccopy",
        "--step",
        "copy",
        "--artifact",
        "build/train.py",
        "--json",
        "--",
        "cp",
        "build/train.py",
        "box.py",
    )
    assert stale.exit_code == 3  # drift: the step is held, its command not run
    assert json.loads(stale.stdout)["drift"] is True and not Path("box.py").exists()
    assert "DRIFT" in stale.stderr and "NOT the train.py" in stale.stderr

    relaunch = run_cli(
        "deploy",
        "--run",
        "eager_dynamiccopy",
        "--step",
        "relaunch",
        "--",
        "sh",
        "-c",
        "HF_TOKEN=hf_leakyleakyleakyleaky123 echo relaunched; exit 3",
    )
    assert relaunch.exit_code == 3  # the command's own status
    assert "relaunched" in relaunch.stdout

    shown = run_json("show", "eager_dynamiccopy")
    assert [d["name"] for d in shown["deploy_steps"]] == ["copy", "relaunch"]
    assert shown["deploy_steps"][1]["command"] == "sh -c 'HF_TOKEN=*** echo relaunched; exit 3'"
    assert shown["hypothesis"]["id"] == 1 and shown["patch"]["id"] == fix["patch_id"]
    assert {"probes", "log_files", "deploy_steps"} <= set(shown)

    text = run_cli("timeline")
    assert text.exit_code == 0
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["WHEN", "KIND", "ID", "WHAT"]
    assert [line.split()[2] for line in lines[1:]] == [
        "hypothesis",
        "patch",
        "run",
        "deploy",
        "deploy",
    ]
    assert "DRIFT" in text.stdout

    runs = run_json("runs")
    assert runs[0]["run"] == "eager_dynamiccopy" and runs[0]["drift"] is True
    assert runs[0]["fate"] == "unknown" and runs[0]["steps"] == 0


@pytest.mark.sqlite_only
def test_secret_never_reaches_the_file(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    secret = "hf_" + "NeverStoreMe" * 3
    leaky = f"echo token is {secret}; HF_TOKEN={secret} true"

    def relaunch() -> Result:
        return run_cli(
            "--db", str(db), "deploy", "--run", "r", "--step", "relaunch", "--", "sh", "-c", leaky
        )

    result = relaunch()
    assert result.exit_code == 1 and "no ledger at" in result.stderr  # only init makes one
    run_cli("--db", str(db), "init")
    result = relaunch()
    assert result.exit_code == 1 and "no run 'r'" in result.stderr  # unknown run: nothing ran
    run_cli("--db", str(db), "record-fix", "--hypothesis", "h", "--summary", "s", "--run", "r")
    result = relaunch()
    assert result.exit_code == 0 and secret in result.stdout  # the person still sees it live
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("l.db*"))
    assert secret.encode() not in stored


def test_record_fix_from_a_diff_on_stdin(db_url: str) -> None:
    run_json("init")
    diff = "--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-a\n+b\n"
    fix = run_cli(
        "record-fix",
        "--hypothesis",
        "new idea",
        "--summary",
        "s",
        "--diff",
        "-",
        "--json",
        input=diff,
    )
    assert fix.exit_code == 0
    patch_id = json.loads(fix.stdout)["patch_id"]
    import ledger

    with ledger.open(db_url) as lg:
        assert lg.patch(patch_id).diff == diff


def test_hypothesis_commands(db_url: str) -> None:
    run_json("init")
    run_json("hypothesis", "add", "first")
    assert run_json("hypothesis", "add", "refined", "--parent", "1")["parent_id"] == 1
    resolved = run_json("hypothesis", "resolve", "1", "--refuted", "--note", "no recompiles seen")
    assert resolved["status"] == "refuted" and resolved["note"] == "no recompiles seen"
    listed = run_json("hypothesis", "list", "--status", "open")
    assert [h["id"] for h in listed] == [2]
    missing = run_cli("hypothesis", "resolve", "1")
    assert missing.exit_code == 2 and "--confirmed" in missing.stderr


def test_record_only(db_url: str) -> None:
    run_json("init")
    run_cli("record-fix", "--hypothesis", "h", "--summary", "s", "--run", "r")
    step = run_json(
        "deploy",
        "--run",
        "r",
        "--step",
        "push",
        "--record-only",
        "--exit-code",
        "0",
        "--",
        "pct",
        "push",
    )
    assert step["exit_code"] == 0 and step["drift"] is None
    bad = run_cli("deploy", "--run", "r", "--step", "push", "--record-only", "--", "pct", "push")
    assert bad.exit_code == 2 and "--exit-code" in bad.stderr


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["frobnicate"], 2, "No such command"),
        (["runs", "--bogus"], 2, "No such option"),
        (["deploy", "--run", "r", "--step", "x", "ls", "-l"], 2, "after --"),
        (
            ["record-fix", "--hypothesis", "1", "--summary", "s", "--file", "missing.py"],
            2,
            "missing.py",
        ),
        (["init", "--baseline", "fast"], 2, "fast"),
        (["show", "nope"], 1, "no ledger"),
        (["hypothesis", "resolve", "abc", "--confirmed"], 2, "abc"),
    ],
)
def test_errors_are_one_line(db_url: str, args: list[str], code: int, says: str) -> None:
    if db_url.startswith("postgresql") and "no ledger" in says:
        pytest.skip("a fresh PostgreSQL schema is an empty database, covered separately")
    result = run_cli(*args)
    assert result.exit_code == code
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: ")
    assert says in result.stderr


def test_unknown_run_names_the_closest(db_url: str) -> None:
    run_json("init")
    run_cli("record-fix", "--hypothesis", "h", "--summary", "s", "--run", "eager_dynamiccopy")
    result = run_cli("show", "eager_dynamicopy")
    assert result.exit_code == 1
    assert result.stderr == "Error: no run 'eager_dynamicopy'; did you mean 'eager_dynamiccopy'?\n"


def test_debug_shows_the_traceback(db_url: str) -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["--debug", "show", "nope"])
    assert result.exit_code == 1 and result.exception is not None
    assert type(result.exception).__name__ == "LedgerNotFoundError"


def test_every_command_explains_itself() -> None:
    import click

    def walk(group: click.Group, path: list[str]):
        for name, command in group.commands.items():
            yield [*path, name], command
            if isinstance(command, click.Group):
                yield from walk(command, [*path, name])

    for path, command in walk(cli, []):
        assert command.help and len(command.help.strip()) > 20, path
        result = run_cli(*path, "--help")
        assert result.exit_code == 0 and "Usage:" in result.stdout, path


def test_python_dash_m_and_the_console_script(tmp_path: Path) -> None:
    env_db = str(tmp_path / "cli.db")
    for argv in ([sys.executable, "-m", "ledger"], [str(Path(sys.executable).with_name("ledger"))]):
        done = subprocess.run(
            [*argv, "--db", env_db, "init", "--json"], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["db"] == env_db
    done = subprocess.run(
        [sys.executable, "-m", "ledger", "--db", env_db, "show", "x"],
        capture_output=True,
        text=True,
    )
    assert (
        done.returncode == 1
        and done.stderr.startswith("Error: no run 'x'")
        and "Traceback" not in done.stderr
    )
