"""The hook's benchmark scripts run end to end on the CPU, so GPU time is never spent on a
script that does not work: hook_gpu.py's self-check (every workload and arm, one process;
two ranks under torchrun with gloo), hook_overhead.py with few repetitions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
ARMS = {"bare", "meter", "meter+loss"}


def _run(*args: str, timeout: float = 300) -> str:
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_hook_gpu_self_check_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "out"
    stdout = _run(
        sys.executable, str(BENCHMARKS / "hook_gpu.py"), "--device", "cpu", "--steps", "20",
        "--out", str(out),
    )  # fmt: skip
    assert "mean %" in stdout and "fate finished" in stdout
    result = json.loads((out / "hook_gpu.json").read_text())
    assert result["steps_per_arm"] == 20 and result["world_size"] == 1
    assert set(result["workloads"]) == {"transformer", "tiny", "host-bound"}
    for workload in result["workloads"].values():
        # The two metered arms record every step they ran; the bare arm none.
        assert workload["ledger"]["rows_per_rank"] == {"0": 40}
        assert workload["ledger"]["dropped_steps"] == 0
        (rank,) = workload["ranks"]
        assert set(rank["arms"]) == ARMS
        for arm, figures in rank["arms"].items():
            assert figures["steps"] == 20
            assert 0 < figures["median_ms"] <= figures["p99_ms"] <= figures["max_ms"]
            assert figures["mean_ms"] > 0
            if arm != "bare":
                assert {"mean_pct", "p99_pct", "max_pct", "slow_steps_beyond_bare"} <= set(figures)
        assert "agreement" not in rank  # no CUDA events on the CPU
        assert rank["caller_cost"]["meter_step_us"] > 0


@pytest.mark.slow
def test_hook_gpu_ddp_self_check_two_ranks_one_ledger(tmp_path: Path) -> None:
    out = tmp_path / "out"
    stdout = _run(
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
        str(BENCHMARKS / "hook_gpu.py"), "--ddp", "--device", "cpu", "--steps", "20",
        "--workload", "tiny", "--out", str(out),
    )  # fmt: skip
    assert "2 rank(s)" in stdout
    result = json.loads((out / "hook_gpu_ddp.json").read_text())
    tiny = result["workloads"]["tiny"]
    assert tiny["ledger"]["rows_per_rank"] == {"0": 40, "1": 40}
    assert [r["rank"] for r in tiny["ranks"]] == [0, 1]
    assert tiny["ledger"]["fate"] == "finished"


@pytest.mark.slow
def test_hook_overhead_runs(tmp_path: Path) -> None:
    figures = tmp_path / "overhead.json"
    stdout = _run(
        sys.executable, str(BENCHMARKS / "hook_overhead.py"), "--reps", "3", "--calls", "200",
        "--fresh", "1", "--gil-blocks", "4", "--skip-peers", "--json", str(figures),
        timeout=900,
    )  # fmt: skip
    assert "SimpleQueue.put" in stdout and "fresh processes" in stdout
    result = json.loads(figures.read_text())
    assert len(result["meter"]["caught_up_us"]) == 3
    assert result["meter"]["durable_after_close_s"] > 0
    assert len(result["fresh_close"]["close_s"]) == 1
    gil = result["gil_loop"]
    assert gil["without_us"] > 0 and gil["forwarder_us"] > 0 and gil["caller_us"] > 0
    assert result["mlflow"] is None and result["wandb"] is None  # left out when asked
    assert "not run" in stdout
