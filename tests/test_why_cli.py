"""`ledger why` on the command line (text, --json, errors), the flags of a relaunch kept in
run_config, compare's one-line top finding and the report's why card."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import db_rows, run_cli, run_json
from why_data import hook_rows

from ledger.launchcmd import split


def _two_runs(lg: Any) -> None:
    lg.write_steps("fed", hook_rows(600, seed=1, wait_s=0.002))
    lg.write_steps("starved", hook_rows(600, seed=2, wait_s=0.06))


def test_why_json_is_the_records_dict(lg: Any) -> None:
    _two_runs(lg)
    out = run_json("why", "starved", "--against", "fed")
    assert out == json.loads(json.dumps(lg.why("starved", "fed").to_dict()))
    assert out["run"] == "starved" and out["against"] == "fed" and out["verdict"] == "regression"
    finding = out["findings"][0]
    assert set(finding) == {"kind", "claim", "score", "evidence", "next"}
    assert finding["kind"] == "data_wait"
    assert {"table", "text"} <= set(finding["evidence"][0])


def test_why_text_names_the_difference_then_the_findings(lg: Any) -> None:
    _two_runs(lg)
    result = run_cli("why", "starved")
    assert result.exit_code == 0, result.stderr
    first, *rest = result.stdout.splitlines()
    assert "slower than fed" in first
    assert any(line.startswith("1. [data_wait,") for line in rest)
    assert any("next:" in line for line in rest)


def test_why_errors_are_one_line(lg: Any) -> None:
    _two_runs(lg)
    for args, words in (
        (["why", "nope"], "no run 'nope'"),
        (["why", "starved", "--against", "nada"], "no run 'nada'"),
        (["why", "starved", "--against", "starved"], "against itself"),
    ):
        result = run_cli(*args)
        assert result.exit_code != 0
        assert result.stderr.startswith("Error: ") and words in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert run_cli("why").exit_code == 2  # RUN is required


def test_twins_say_no_finding(lg: Any) -> None:
    lg.write_steps("a", hook_rows(600, seed=3))
    lg.write_steps("b", hook_rows(600, seed=4))
    result = run_cli("why", "b", "--against", "a")
    assert result.exit_code == 0 and "no finding" in result.stdout


def split_flags(argv: list[str]) -> list[tuple[str, str]]:
    return split(argv).flags


def test_split_flags() -> None:
    argv = ["torchrun", "--nproc_per_node", "8", "train.py", "--compile-drafter",
            "--token-budget", "49152", "--lr=3e-4", "--shift", "-2"]  # fmt: skip
    assert split_flags(argv) == [
        ("flag.nproc_per_node", "8"),
        ("flag.compile-drafter", "true"),
        ("flag.token-budget", "49152"),
        ("flag.lr", "3e-4"),
        ("flag.shift", "-2"),
    ]
    remote = ["ssh", "box", "NCCL_ALGO=Ring nohup python train.py --token-budget 65536"]
    assert split_flags(remote) == [("env.NCCL_ALGO", "Ring"), ("flag.token-budget", "65536")]
    assert split_flags(["sh", "-c", "python train.py --x 'a b' --x 2"]) == [("flag.x", "2")]
    unclosed = split(["sh", "-c", "python train.py --name 'unclosed"])  # no shell would run it
    assert unclosed.flags == [] and "unclosed ' quote" in (unclosed.unsplit or "")


def test_a_relaunch_stores_its_flags(lg: Any, db_url: str) -> None:
    lg.ensure_run("r")
    lg.record_deploy("r", "copy", ["scp", "-r", "a", "box:b"], exit_code=0)
    assert db_rows(db_url, "SELECT key FROM run_config") == []  # a copy step is not a launch
    lg.record_deploy(
        "r", "relaunch",
        ["torchrun", "train.py", "--token-budget", "65536", "--wandb-key", "hunter2hunter2"],
        exit_code=0,
    )  # fmt: skip
    lg.deploy("r", "relaunch", ["true", "--token-budget", "49152", "--compile-drafter"])
    stored = db_rows(db_url, "SELECT key, value, source FROM run_config ORDER BY key")
    # the latest relaunch replaces the earlier one's flags
    assert stored == [
        ("flag.compile-drafter", "true", "deploy"),
        ("flag.token-budget", "49152", "deploy"),
    ]


def test_a_secret_flag_value_is_masked(lg: Any, db_url: str) -> None:
    lg.ensure_run("s")
    lg.record_deploy(
        "s", "launch", ["python", "t.py", "--api-key", "sk-abcdef0123456789abcdef"], exit_code=0
    )
    assert db_rows(db_url, "SELECT key, value FROM run_config") == [("flag.api-key", "***")]


def test_compare_prints_the_top_finding(lg: Any) -> None:
    _two_runs(lg)
    result = run_cli("compare", "fed", "starved")
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("  why: ")]
    assert len(lines) == 1 and "[data_wait," in lines[0] and "ledger why starved" in lines[0]
    out = run_json("compare", "fed", "starved")
    assert out["why"]["starved"]["kind"] == "data_wait"


def test_the_report_has_a_why_card_for_the_slower_attempt(lg: Any, tmp_path: Path) -> None:
    _two_runs(lg)
    lg.write_steps("twin", hook_rows(600, seed=5, wait_s=0.002))
    data = lg.report_data()
    cards = {a.name: a.why for a in data.attempts}
    assert cards["fed"] is None and cards["twin"] is None  # the reference, and no slower
    starved = cards["starved"]
    assert starved is not None and starved.findings[0].kind == "data_wait"
    page = lg.write_report(tmp_path / "report.html").read_text()
    assert page.count('class="card why"') == 1 and "data_wait" in page


def test_a_folded_symptom_is_said_under_its_cause(lg: Any, tmp_path: Path) -> None:
    from why_data import nvidia_smi_csv

    lg.write_steps("fed", hook_rows(600, seed=1, wait_s=0.002))
    lg.write_steps("starved", hook_rows(600, seed=2, wait_s=0.45))
    for name, utils in (("fed", [97, 96, 98, 97]), ("starved", [50, 48, 52, 51])):
        for probe in range(2):
            lg.probe(name, ["cat", str(nvidia_smi_csv(tmp_path / f"{name}{probe}.txt", utils))])
    out = run_json("why", "starved", "--against", "fed")
    assert [f["kind"] for f in out["findings"]] == ["data_wait"], out["findings"]
    finding = out["findings"][0]
    assert finding["explains"] == ["gpu_idle"] and finding["claim"].startswith("the GPUs waited")
    assert any(e["table"] == "gpu_sample" and "id" in e for e in finding["evidence"])
    text = run_cli("why", "starved", "--against", "fed").stdout.splitlines()
    assert text[text.index(next(t for t in text if t.startswith("1. [data_wait,"))) + 1] == (
        "   explains: gpu_idle"
    )
