"""Probes: a row for every check, its output read for the fate, GPUs stored."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import run_cli, run_json

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
CAT = [sys.executable, "-c", "import sys; sys.stdout.write(open(sys.argv[1]).read())"]


def test_probe_reads_loading_and_gpus(lg) -> None:
    result = lg.probe("eager_dynamiccopy", [*CAT, str(FIXTURES / "probe_output_loading.txt")])
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
        "r", [sys.executable, "-c", "import sys; print('step 5 loss 1.0'); sys.exit(3)"]
    )
    assert failed.exit_code == 3 and failed.last_step == 5
    timed = lg.probe("r", [sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert timed.timed_out and timed.exit_code == 124
    missing = lg.probe("r", ["/no/such/command"])
    assert missing.exit_code == 127
    assert len(lg.show("r").probes) == 3


def test_same_position_twice_is_stalled(lg) -> None:
    cmd = [*CAT, str(FIXTURES / "probe_output_loading.txt")]
    assert lg.probe("s", cmd, stall_after=0).fate == "loading"
    assert lg.probe("s", cmd, stall_after=0).fate == "stalled"
    assert lg.probe("s", cmd, stall_after=3600).fate == "loading"


def test_probe_cli(db_url: str) -> None:
    data = run_json("probe", "--run", "x", "--", *CAT, str(FIXTURES / "nvidia_smi_table.txt"))
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
    result = lg.probe("q", [sys.executable, "-c", script])
    assert [(g["utilization_pct"], g["memory_used_mib"]) for g in result.gpus] == [
        (97, 1000),
        (50, 2000),
    ]
