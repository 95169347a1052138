"""What the hook records once per run (run_config, source 'hook') and the NVML samples its
writer process takes, with NVML absent and with a stand-in pynvml module."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import db_rows

import ledger
from ledger.hook import StepMeter

FAKE_NVML = """
from types import SimpleNamespace as NS
NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0
asked = []
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetHandleByIndex(i): return ("gpu", i)
def nvmlDeviceGetName(h): return b"Stand-in H200"
def nvmlDeviceGetMemoryInfo(h): return NS(used=40 << 30, total=141 << 30)
def nvmlDeviceGetUtilizationRates(h): return NS(gpu=97, memory=50)
def nvmlDeviceGetPowerUsage(h): return 650000
def nvmlDeviceGetEnforcedPowerLimit(h): return 700000
def nvmlDeviceGetClockInfo(h, kind): return 1755
def nvmlDeviceGetMaxClockInfo(h, kind): return 1980
def nvmlDeviceGetTemperature(h, sensor): raise RuntimeError("no sensor")
def nvmlDeviceGetCurrentClocksEventReasons(h): return 0x4 | 0x40
"""


def _short_run(
    db_url: str, name: str, until: Callable[[], bool] | None = None, **kwargs: object
) -> StepMeter:
    """Five steps, or, given `until`, steps until it holds (looked at every 0.1 s, for at
    most 120 s: a condition, not a clock, since a loaded machine can take seconds to start
    the writer process)."""
    meter = StepMeter(name, db=db_url, **kwargs)  # type: ignore[arg-type]
    deadline = time.monotonic() + 120
    step, look = 0, 0.0
    while step < 5 or until is not None:
        with meter.step(tokens=8):
            time.sleep(0.002)
        step += 1
        if step == 1 and until is not None:  # the writer has made the ledger: `until` reads it
            assert meter.flush(120)
        if until is not None and time.monotonic() >= look:
            if until():
                break
            assert time.monotonic() < deadline, f"{name}: the condition never held"
            look = time.monotonic() + 0.1
    meter.close()
    return meter


def _git_repo(path: Path) -> str:
    """A repository with one commit at `path`; returns the commit."""
    path.mkdir()
    git = ["git", "-C", str(path), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "train.py").write_text("print('train')\n")
    subprocess.run([*git, "add", "train.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    done = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True)
    return done.stdout.decode().strip()


def test_the_run_configuration_is_recorded_once_and_redacted(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    commit = _git_repo(tmp_path / "repo")
    monkeypatch.chdir(tmp_path / "repo")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.setenv("TORCH_HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz123456")
    monkeypatch.setenv("UNRELATED_VARIABLE", "kept out")
    monkeypatch.setattr(sys, "argv", ["train.py", "--hf-token", "hf_abcdefghijklmnopqrstuv1234"])
    _short_run(db_url, "configured")
    _short_run(db_url, "configured")  # a second launch adds nothing twice
    rows = db_rows(db_url, "SELECT key, value, source FROM run_config")
    config = {k: v for k, v, _ in rows}
    assert {s for _, _, s in rows} == {"hook"} and len(rows) == len(config)
    import torch

    assert config["torch"] == str(torch.__version__)
    assert config["env.NCCL_DEBUG"] == "INFO" and config["env.OMP_NUM_THREADS"] == "4"
    assert "env.UNRELATED_VARIABLE" not in config
    assert "hf_abc" not in config["env.TORCH_HF_TOKEN"]  # masked
    assert "hf_abc" not in config["command"] and config["command"].startswith("train.py")
    assert config["world_size"] == "1" and config["host"]
    assert (config["git_commit"], config["git_dirty"]) == (commit, "false")


def test_without_nvml_nothing_is_sampled_and_it_is_said_once(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "pynvml.py").write_text("raise ImportError('no NVML here')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with caplog.at_level(logging.INFO, logger="ledger.hook"):
        _short_run(db_url, "no_nvml", gpu_every=0.05, flush_interval=0.2)
    said = [r.getMessage() for r in caplog.records if "no GPU samples" in r.getMessage()]
    assert len(said) == 1 and "nvidia-ml-py" in said[0]
    assert db_rows(db_url, "SELECT COUNT(*) FROM gpu_sample") == [(0,)]
    with ledger.open(db_url) as lg:
        assert lg.meter_summary("no_nvml").steps >= 5


def test_a_stand_in_nvml_is_sampled_into_the_run(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pynvml.py").write_text(FAKE_NVML)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("LOCAL_RANK", "1")
    sampled = "SELECT COUNT(*) FROM gpu_sample"
    # Until three samples are stored while the run goes on (every 0.1 s once the run is open).
    _short_run(
        db_url,
        "sampled",
        until=lambda: db_rows(db_url, sampled)[0][0] >= 3,
        gpu_every=0.1,
        flush_interval=0.2,
    )
    rows = db_rows(
        db_url,
        "SELECT g.gpu_index, g.name, g.memory_used_mib, g.memory_total_mib, g.utilization_pct,"
        " g.power_w, g.power_limit_w, g.sm_clock_mhz, g.max_sm_clock_mhz, g.temperature_c,"
        " g.throttle, g.rank, g.probe_id, g.sampled_at FROM gpu_sample g"
        " JOIN run r ON r.id = g.run_id WHERE r.name = 'sampled'",
    )
    assert len(rows) >= 3
    first = rows[0]
    assert first[:11] == (
        1,
        "Stand-in H200",
        40 * 1024.0,
        141 * 1024.0,
        97.0,
        650.0,
        700.0,
        1755.0,
        1980.0,
        None,  # a reading that failed costs its field only
        "sw_power_cap,hw_thermal",
    )
    assert first[12] is None and first[13] is not None  # the run's, not a probe's
