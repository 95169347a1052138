"""benchmarks/why_gpu.py in its reduced CPU form, so that the GPU benchmark cannot rot:
real training processes under StepMeter, their logs ingested, `why` asked from both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "why_gpu.py"


@pytest.mark.slow
def test_the_reduced_form_runs_and_finds_the_data_wait(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--steps", "120", "--twins", "1",
         "--cases", "twin,data_wait", "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "why_gpu.json").read_text())
    assert summary["device"] and summary["steps"] == 120 and summary["skipped"] == []
    cases = {c["case"]: c for c in summary["cases"]}
    assert set(cases) == {"twin1", "data_wait"}
    # a 20 ms sleep before every batch of a step of a few ms: the hook's wait_s shows it
    assert cases["data_wait"]["hook"]["top"] == "data_wait", cases["data_wait"]
    assert "data_wait" not in cases["twin1"]["hook"]["kinds"]
    for case in cases.values():
        assert case["hook"]["verdict"] is not None and case["log"]["verdict"] is not None
    # each run's log holds its arguments and a line every 2 steps
    log = (out / "logs" / "train_data_wait.log").read_text().splitlines()
    assert log[0].startswith("Namespace(") and "run_name='data_wait'" in log[0]
    assert sum("mmengine - INFO - Iter(train)" in line for line in log) == 60
    table = (out / "why_gpu.md").read_text()
    assert "| data_wait | a data loader that sleeps before each batch | ✓ data_wait" in table
    assert done.stdout.rstrip().endswith(table.splitlines()[-1])
