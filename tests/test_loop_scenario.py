"""The loop as a user lives it, with real processes and the stand-in trainer: a slow launch,
a fix, a relaunch under the same name, watch again — each launch gets its own verdict,
both ways; a trainer watch launched runs to its own end; an interrupted watch leaves no
run `running`, and no viewer behind it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import run_json

import ledger

PACE = ["--step-time", "0.003", "--load-time", "0.3", "--noise", "0.01"]
TRAINER = [sys.executable, "-m", "ledger.demo.trainer", *PACE]
CLI = [
    sys.executable,
    "-c",
    "import sys\nfrom ledger.cli import main\nsys.argv[0] = 'ledger'\nmain()",
]


def _ledger(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "gone"


def _wait_for(check, what: str, seconds: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"waited {seconds} s for {what}")


@pytest.fixture
def box(db_url: str, tmp_path: Path) -> Path:
    run_json("init", "--baseline", "14200", "--unit", "tok/s")
    return tmp_path


def test_slow_launch_fix_relaunch_watch_each_launch_its_own_verdict(box: Path) -> None:
    # 1. The slow launch, watched as it trains: REGRESSION, said at once; the trainer is
    # not stopped by the decision, and its fate comes from how it ended.
    slow = [*TRAINER, "--level", "10650", "--steps", "700", "--ending", "finish"]
    done = _ledger("watch", "eager_b", "--interval", "0.1", "--json", "--", *slow)
    assert done.returncode == 1, done.stderr
    first = json.loads(done.stdout)
    assert first["outcome"] == "regression" and first["launch"] == 1
    assert first["exit_code"] == 0 and first["fate"] == "finished"
    assert first["decided_at_step"] < 700

    # 2. A fix, its relaunch recorded, then watch again: the relaunch alone is judged.
    hypothesis = run_json("hypothesis", "add", "the budget halves the batch")["id"]
    run_json("record-fix", "--hypothesis", str(hypothesis), "--summary", "budget back",
             "--run", "eager_b")  # fmt: skip
    relaunch = _ledger("deploy", "--run", "eager_b", "--step", "relaunch", "--", "true")
    assert relaunch.returncode == 0, relaunch.stderr
    back = [*TRAINER, "--level", "14200", "--steps", "700", "--ending", "finish"]
    done = _ledger("watch", "eager_b", "--interval", "0.1", "--json", "--", *back)
    assert done.returncode == 0, done.stderr
    second = json.loads(done.stdout)
    assert second["outcome"] == "same" and second["launch"] == 2
    # judged from its own steps: it waited for them (the old launch's 700 were there)
    assert second["steady_steps"] >= 100 and second["elapsed_s"] > 0.5
    assert second["fate"] == "finished"

    # 3. The other way round: a new launch at 10.5K, its log followed by --log, is not SAME
    # because of the launch before it.
    log = box / "train_eager_b_v2.log"
    trainer = subprocess.Popen([*TRAINER, "--log", str(log), "--level", "10500",
                                "--steps", "700", "--ending", "finish"])  # fmt: skip
    try:
        done = _ledger("watch", "eager_b", "--log", str(log), "--interval", "0.1", "--json")
    finally:
        trainer.wait(timeout=120)
    assert done.returncode == 1, done.stderr
    third = json.loads(done.stdout)
    assert third["outcome"] == "regression" and third["launch"] == 3
    # watch stopped reading the log at its decision; the rest is read as a user would,
    # into the same launch
    assert _ledger("ingest", str(log), "--run", "eager_b").returncode == 0

    # 4. What is kept: three launches, each with its fate and its own verdict; compare
    # judges the latest unless asked; nothing is spliced (no change point at a seam).
    detail = run_json("show", "eager_b")
    launches = [(x["number"], x["verdict"]) for x in detail["launches"]]
    assert launches == [(1, "regression"), (2, "same"), (3, "regression")]
    assert [x["steps"] for x in detail["launches"]] == [700, 700, 700]
    assert detail["fate"] in ("finished", "running")  # the log is read as far as watch read
    assert 70 < detail["pct_of_baseline"] < 80
    report = run_json("compare", "eager_b@2", "eager_b")
    assert [r["run"] for r in report["runs"]] == ["eager_b@2", "eager_b"]
    assert all(not r["change_points"] for r in report["runs"])
    assert report["comparisons"][0]["verdict"] == "regression"


def test_ctrl_c_leaves_the_trainer_running_said_so_and_no_run_running(box: Path) -> None:
    forever = [*TRAINER, "--level", "14200", "--steps", "100000", "--step-time", "0.02",
               "--ending", "ok"]  # fmt: skip
    args = [*CLI, "watch", "cut", "--interval", "0.1", "--", *forever]
    watcher = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = None
    try:
        _wait_for(lambda: _steps("cut") > 10, "watch to store steps")
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=120)
        assert watcher.returncode == 130, err
        found = re.search(r"trainer \(pid (\d+)\) was left running", err)
        assert found, err
        pid = int(found[1])
        assert _alive(pid)  # by design: watch never ends a trainer on its own
        with ledger.open() as lg:
            summary = lg.run_summary("cut")
            shown = lg.show("cut")
            # what watch said and the launches stored, should either ever be other than this
            said = f"{err}\nlaunch {summary.launch}, launches {shown.launches}"
            assert summary.fate == "unknown", said  # not `running` for good
            reason = shown.fate_reason or ""
            assert "left running" in reason and str(pid) in reason, said
    finally:
        if pid is not None and _alive(pid):
            os.killpg(pid, signal.SIGKILL)  # the trainer this test made watch start
        if watcher.poll() is None:
            watcher.kill()


def _steps(run: str) -> int:
    with ledger.open() as lg:
        return lg.run_summary(run).steps if run in lg.run_names() else 0


@pytest.mark.parametrize("how", ["decision", "sigterm"])
def test_a_viewer_is_stopped_and_leaves_nothing_open(box: Path, how: str) -> None:
    log = box / "train_viewed.log"
    pace = "0.01" if how == "decision" else "0.1"  # slow enough to be signalled before deciding
    endless = ["--level", "14200", "--steps", "100000", "--step-time", pace, "--ending", "ok"]
    trainer = subprocess.Popen([*TRAINER, "--log", str(log), *endless])
    viewer = ["tail", "-n", "+1", "-F", str(log)]
    try:
        args = [*CLI, "watch", "viewed", "--interval", "0.1", "--json", "--", *viewer]
        watcher = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)  # fmt: skip
        if how == "sigterm":
            _wait_for(lambda: _steps("viewed") > 10, "watch to store steps")
            watcher.send_signal(signal.SIGTERM)
        out, err = watcher.communicate(timeout=180)
        if how == "sigterm":
            assert watcher.returncode == 143, err
            assert "interrupted by SIGTERM" in err
        else:
            assert watcher.returncode == 0, err
            result = json.loads(out)
            assert result["role"] == "viewer" and result["stopped"]
            assert result["outcome"] == "same"
            assert not _alive(result["pid"])
        assert trainer.poll() is None  # the trainer the viewer showed was never touched
        tails = subprocess.run(["pgrep", "-f", f"tail -n \\+1 -F {log}"], capture_output=True,
                               text=True, check=False)  # fmt: skip
        assert tails.stdout.strip() == "", "the viewer outlived watch"
        with ledger.open() as lg:
            assert lg.run_summary("viewed").fate not in ("running", "loading")
    finally:
        trainer.kill()
        trainer.wait()
