"""Probes: a row for every check, its output read for the fate, GPUs stored."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import db_rows, run_cli, run_json

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
CAT = [sys.executable, "-c", "import sys; sys.stdout.write(open(sys.argv[1]).read())"]


def test_probe_reads_loading_and_gpus(lg) -> None:
    result = lg.probe(
        "eager_dynamiccopy", [*CAT, str(FIXTURES / "probe_output_loading.txt")], new=True
    )
    assert result.fate == "loading" and result.exit_code == 0
    assert result.progress["n"] == 81 and result.progress["total"] == 851
    assert len(result.gpus) == 8
    assert result.conclusion.startswith(
        "eager_dynamiccopy: loading — Loading weights 81/851 (10%), no crash; 8 GPUs"
    )
    assert "0% util" in result.conclusion
    detail = lg.show("eager_dynamiccopy")
    assert detail.fate == "loading"
    assert [g.gpu_index for g in detail.probes[0].gpus] == list(range(8))


def test_failed_and_timed_out_commands_are_still_probes(lg) -> None:
    failed = lg.probe(
        "r", [sys.executable, "-c", "import sys; print('step 5 loss 1.0'); sys.exit(3)"], new=True
    )
    assert failed.exit_code == 3 and failed.last_step == 5
    timed = lg.probe("r", [sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert timed.timed_out and timed.exit_code == 124
    missing = lg.probe("r", ["/no/such/command"])
    assert missing.exit_code == 127
    assert len(lg.show("r").probes) == 3


def test_same_position_twice_is_stalled(lg) -> None:
    cmd = [*CAT, str(FIXTURES / "probe_output_loading.txt")]
    assert lg.probe("s", cmd, stall_after=0, new=True).fate == "loading"
    assert lg.probe("s", cmd, stall_after=0).fate == "stalled"
    assert lg.probe("s", cmd, stall_after=3600).fate == "loading"


def test_probe_cli(db_url: str) -> None:
    run_json("init")
    cat = [*CAT, str(FIXTURES / "nvidia_smi_table.txt")]
    data = run_json("probe", "--run", "x", "--new", "--", *cat)
    assert set(data) >= {"probe_id", "exit_code", "fate", "progress", "gpus", "last_step"}
    assert [g["utilization_pct"] for g in data["gpus"]] == [0, 97]
    text = run_cli("probe", "--run", "x", "--", sys.executable, "-c", "import sys; sys.exit(2)")
    assert text.exit_code == 2 and text.stdout.startswith("x: ")
    sleeping: list[float] = []
    import ledger

    with ledger.open(db_url) as lg:
        lg.probe("x", [sys.executable, "-c", "pass"], wait=5, sleep=sleeping.append)
    assert sleeping == [5]


def test_gpu_columns_come_from_the_probe_command(lg) -> None:
    from ledger.logs.nvsmi import query_from_command

    query = "nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader"
    assert query_from_command(f"ssh host '{query}'") == ("index", "utilization.gpu", "memory.used")
    script = "print('0, 97 %, 1000 MiB'); print('1, 50 %, 2000 MiB')  # " + query
    result = lg.probe("q", [sys.executable, "-c", script], new=True)
    assert [(g["utilization_pct"], g["memory_used_mib"]) for g in result.gpus] == [
        (97, 1000),
        (50, 2000),
    ]


def test_an_unknown_run_is_refused_unless_new(db_url: str) -> None:
    """A typo must not make a stray run that then shows in the report."""
    run_json("init")
    run_json("probe", "--run", "eager_dynamiccopy", "--new", "--", sys.executable, "-c", "pass")
    typo = run_cli("probe", "--run", "eager_dynamicopy", "--", sys.executable, "-c", "pass")
    assert typo.exit_code == 1
    assert "no run 'eager_dynamicopy'; did you mean 'eager_dynamiccopy'" in typo.stderr
    assert [r["run"] for r in run_json("runs")] == ["eager_dynamiccopy"]


def test_a_failed_probe_says_what_failed(lg) -> None:
    """Not "no crash" about a run nobody looked at: the command's own last words."""
    said = "ssh: connect to host box port 22: Connection timed out"
    ssh = f"import sys; sys.stderr.write({said!r} + chr(10)); sys.exit(255)"
    failed = lg.probe("r", [sys.executable, "-c", ssh], new=True)
    assert failed.exit_code == 255 and "no crash" not in failed.conclusion
    assert "failed (exit 255): ssh: connect to host box port 22: Connection timed out" in (
        failed.conclusion
    )
    missing = lg.probe("r", ["/no/such/probe-command"])
    assert "the probe command was not found" in missing.conclusion
    assert "no crash" not in missing.conclusion


def test_ctrl_c_during_the_wait_is_recorded(lg) -> None:
    import pytest

    def interrupted(_: float) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lg.probe("r", [sys.executable, "-c", "pass"], wait=360, sleep=interrupted, new=True)
    (probe,) = lg.show("r").probes
    assert probe.exit_code == 130 and probe.ended_at is not None
    assert probe.conclusion == "interrupted before the command ran"


def test_a_line_number_says_which_text_it_is_a_line_of(lg) -> None:
    """After `tail -n 90`, "line 62" is a line of the probe's output, not of the log."""
    tail = "".join(f"step {i} | loss 1.0 | tok/s 10000\n" for i in range(61))
    tail += (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.50 GiB. GPU 3 has a "
        "total capacity of 79.19 GiB of which 1.21 GiB is free.\n"
    )
    probe = lg.probe("r", [*CAT[:2], f"import sys; sys.stdout.write({tail!r})"], new=True)
    assert probe.fate == "oom" and "of probe #1's output" in probe.fate_reason
    assert "(line 62)" not in probe.conclusion
    detail = lg.show("r")
    (oom,) = [e for e in detail.events if e.kind == "oom"]
    assert oom.probe_id == probe.probe_id and oom.log_file_id is None and oom.line == 62
    assert oom.where == "line 62 of probe #1's output" and oom.step == 60
    assert "of probe #1's output" in (detail.fate_reason or "")


def test_a_bad_pattern_is_refused_before_the_wait_and_the_command(db_url: str, tmp_path) -> None:
    """`--pattern '('` fails at once: no --wait (the row is written just before it), no
    command run, no probe row, no run made."""
    run_json("init")
    made = tmp_path / "ran"
    result = run_cli(
        "probe", "--run", "r", "--new", "--wait", "300", "--pattern", "(", "--",
        "touch", str(made),
    )  # fmt: skip
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith("Error: ") and len(result.stderr.strip().splitlines()) == 1
    assert not made.exists()
    assert db_rows(db_url, "SELECT count(*) FROM probe") == [(0,)]
    assert db_rows(db_url, "SELECT count(*) FROM run") == [(0,)]
