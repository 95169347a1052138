"""The hook's benchmark scripts run end to end on the CPU, so GPU time is never spent on a
script that does not work: hook_gpu.py in its smoke mode (one process, and two ranks under
torchrun with gloo), hook_overhead.py with few repetitions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _run(*args: str, timeout: float = 300) -> str:
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.slow
def test_hook_gpu_smoke_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "out"
    stdout = _run(
        sys.executable, str(BENCHMARKS / "hook_gpu.py"), "--device", "cpu", "--steps", "20",
        "--out", str(out),
    )  # fmt: skip
    assert "overhead %" in stdout and "fate finished" in stdout
    result = json.loads((out / "hook_gpu.json").read_text())
    assert result["steps_per_arm"] == 20 and result["world_size"] == 1
    assert result["ledger"]["rows_per_rank"] == {"0": 20}
    assert result["ledger"]["dropped_steps"] == 0
    (rank,) = result["ranks"]
    assert rank["host_step_ms"]["with"] > 0 and rank["host_step_ms"]["without"] > 0
    assert "agreement" not in rank  # no CUDA events on the CPU


@pytest.mark.slow
def test_hook_gpu_ddp_smoke_two_ranks_one_ledger(tmp_path: Path) -> None:
    out = tmp_path / "out"
    stdout = _run(
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
        str(BENCHMARKS / "hook_gpu.py"), "--ddp", "--device", "cpu", "--steps", "20",
        "--out", str(out),
    )  # fmt: skip
    assert "2 rank(s)" in stdout
    result = json.loads((out / "hook_gpu_ddp.json").read_text())
    assert result["ledger"]["rows_per_rank"] == {"0": 20, "1": 20}
    assert [r["rank"] for r in result["ranks"]] == [0, 1]
    assert result["ledger"]["fate"] == "finished"


@pytest.mark.slow
def test_hook_overhead_runs(tmp_path: Path) -> None:
    figures = tmp_path / "overhead.json"
    stdout = _run(
        sys.executable, str(BENCHMARKS / "hook_overhead.py"), "--reps", "3", "--calls", "200",
        "--json", str(figures),
    )  # fmt: skip
    assert "SimpleQueue.put" in stdout
    result = json.loads(figures.read_text())
    assert len(result["meter"]["caught_up_us"]) == 3
    assert result["meter"]["durable_after_close_s"] > 0
    for other in ("mlflow", "wandb"):  # not dependencies of ledger: absent from this venv
        try:
            __import__(other)
        except ImportError:
            assert result[other] is None and "not installed" in stdout
