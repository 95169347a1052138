"""What goes wrong around a StepMeter costs only what went wrong: a value that cannot be
stored, a full disk, a locked or silent database, a trainer killed with SIGKILL."""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import ledger
from ledger.config import sqlite_path
from ledger.errors import NotFoundError
from ledger.hook import StepMeter
from ledger.hook.writer import CONNECT_TIMEOUT_S

WORKER = Path(__file__).with_name("hook_worker.py")
BIG = 1 << 63  # one past int64: half of all torch.initial_seed() values are at least this


def _worker(db: str, run: str, *args: str) -> list[str]:
    return [sys.executable, str(WORKER), "--db", db, "--run", run, *args]


def _hook_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ledger.hook"]


def test_values_past_int64_cost_only_themselves(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Dynamo's counters (read once it is imported) ride on the newest step: not one past int64.
    pytest.importorskip("torch._dynamo.utils")

    with caplog.at_level(logging.WARNING, logger="ledger.hook"):
        meter = StepMeter("big", db=db_url)
        for i in range(500):
            with meter.step(tokens=BIG * 4 if i == 7 else 16) as s:
                s.set(seed=BIG + i, loss=1.0, grad_norm=BIG * 3)
        with meter.step(step=BIG):  # a step number no column holds: that row alone
            pass
        meter.log(BIG, eval_loss=0.5)  # likewise
        meter.log(3, huge=10**400)  # past any float: stored as missing
        meter.close()
    assert meter.dropped == 2  # the two rows whose step cannot be a key
    with ledger.open(db_url) as lg:
        steps, metrics = lg.steps_frame("big"), lg.metrics_frame("big")
        summary = lg.meter_summary("big")
    assert steps["step"].tolist() == list(range(500))
    assert math.isnan(steps["tokens"][7]) and steps["tokens"].drop(7).eq(16).all()
    seeds = metrics[metrics["name"] == "seed"].sort_values("step")
    assert seeds["value"].tolist() == [float(BIG + i) for i in range(500)]  # as floats
    assert summary.fate == "finished" and summary.dropped_steps == 2
    said = [w for w in _hook_warnings(caplog) if "could not be stored as given" in w]
    assert len(said) == 1  # warned once, for the whole run


def test_odd_metric_names_are_kept(db_url: str) -> None:
    fsdp = "_fsdp_wrapped_module." * 5 + "model.layers.31.mlp.down_proj.weight_grad_norm"
    assert len(fsdp) > 107
    meter = StepMeter("names", db=db_url)
    with meter.step(loss=1.0) as s:
        s.set(**{"lone\ud800surrogate": 1.0, "nul\x00name": 2.0, fsdp: 3.0, "x" * 5000: 4.0})
    meter.close()
    assert meter.dropped == 0
    with ledger.open(db_url) as lg:
        names = dict(lg.metrics_frame("names")[["name", "value"]].values.tolist())
        assert lg.run_summary("names").steps == 1
    assert names[fsdp] == 3.0 and names["x" * 5000] == 4.0  # whole, never cut
    assert names["lone\\ud800surrogate"] == 1.0 and names["nul\\x00name"] == 2.0


def test_nan_and_inf_everywhere(db_url: str) -> None:
    meter = StepMeter("nan", db=db_url)
    for value in (math.nan, math.inf, -math.inf):
        with meter.step(tokens=value, loss=value) as s:
            s.set(grad_norm=value)
    meter.close()
    with ledger.open(db_url) as lg:
        steps, metrics = lg.steps_frame("nan"), lg.metrics_frame("nan")
        assert lg.meter_summary("nan").fate == "finished"
    assert len(steps) == 3 and steps["tokens"].isna().all()  # no int holds them
    assert math.isnan(steps["loss"][0]) and steps["loss"][1] == math.inf
    assert len(metrics[metrics["name"] == "grad_norm"]) == 3


@pytest.mark.sqlite_only
def test_a_full_disk_is_counted_said_and_given_up_on_in_time(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger.open(db).close()  # the schema exists; then the disk "fills"
    limit = os.path.getsize(sqlite_path(db)) + 64 * 1024
    started = time.monotonic()
    done = subprocess.run(
        [
            *_worker(db, "full", "--steps", "30000", "--file-size-limit", str(limit)),
            *("--close-timeout", "3", "--report", "--flush-interval", "0.2"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    dropped = int(done.stdout.split("dropped=")[1])
    assert dropped > 20000  # nearly all of it, counted
    assert done.stderr.count("gave up on") == 1, done.stderr
    assert took < 3 + 15  # the close timeout, plus start-up on a busy box


@pytest.mark.sqlite_only
def test_construction_returns_at_once_while_another_process_holds_the_lock(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger.open(db).close()
    # The holder keeps the lock until this test says so (or 120 s pass), so "it did not
    # wait" is a condition, not a clock: the meter is made and 100 steps are taken while
    # the lock is still held, however slowly a loaded machine runs them.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import select, sqlite3, sys\n"
            f"c = sqlite3.connect({str(sqlite_path(db))!r}, isolation_level=None)\n"
            "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True)\n"
            "told = select.select([sys.stdin], [], [], 120)[0]\n"
            "c.execute('COMMIT'); print('told' if told else 'gave up', flush=True)",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    meter = StepMeter("locked", db=db)
    for _ in range(100):
        with meter.step(loss=1.0):
            pass
    holder.stdin.write("release\n")
    holder.stdin.close()
    assert holder.stdout.readline().strip() == "told"  # the lock was held all along
    holder.wait(30)
    holder.stdout.close()
    meter.close()
    assert meter.dropped == 0
    with ledger.open(db) as lg:
        assert lg.meter_summary("locked").steps == 100


def _silent_server() -> tuple[socket.socket, list[socket.socket]]:
    """A port that accepts connections and never says a word (a hung PostgreSQL)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                accepted.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    return server, accepted


def test_a_postgresql_port_that_never_answers(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("psycopg")
    server, accepted = _silent_server()
    port = server.getsockname()[1]
    try:
        with caplog.at_level(logging.WARNING, logger="ledger.hook"):
            started = time.monotonic()
            meter = StepMeter(
                "silent", db=f"postgresql+psycopg://nobody@127.0.0.1:{port}/x", close_timeout=2
            )
            # Waiting for the server would cost its connect timeout at least; a loaded
            # machine may take a while to start the writer process, never that long.
            assert time.monotonic() - started < CONNECT_TIMEOUT_S
            for _ in range(50):
                with meter.step(loss=1.0):
                    pass
            # Constructed and stepped although the server has never said a word (nothing
            # waited for it); the writer's connection reaches the port in its own time.
            deadline = time.monotonic() + 120
            while not accepted:
                assert time.monotonic() < deadline, "the writer never tried the port"
                time.sleep(0.05)
            closing = time.monotonic()
            meter.close()
            took = time.monotonic() - closing
        assert took < 2 + 8  # the close timeout, and a busy box
        assert meter.dropped == 50
        assert any("gave up" in w for w in _hook_warnings(caplog))
    finally:
        server.close()
        for conn in accepted:
            conn.close()


@pytest.mark.parametrize("fork", [False, True], ids=["plain", "with-a-forked-worker"])
def test_kill_9_loses_at_most_50ms_and_the_fate_becomes_killed(db_url: str, fork: bool) -> None:
    args = ["--steps", "100000", "--step-sleep", "0.001", "--print"]
    if fork:  # a DataLoader worker, forked after the meter, that outlives the trainer
        args.append("--fork-sleeper")
    proc = subprocess.Popen(_worker(db_url, "nine", *args), stdout=subprocess.PIPE)
    arrived: dict[int, float] = {}

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            arrived[int(line)] = time.monotonic()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while 1500 not in arrived:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    proc.kill()
    killed_at = time.monotonic()
    proc.wait(30)
    reader.join(30)
    assert proc.stdout is not None
    proc.stdout.close()

    fate = "running"
    while fate == "running" and time.monotonic() < killed_at + 10:
        time.sleep(0.1)
        with ledger.open(db_url) as lg:
            try:
                fate = lg.meter_summary("nine").fate
            except NotFoundError:  # a busy box: the writer has not created the run yet
                continue
    became_killed = time.monotonic() - killed_at
    assert fate == "killed" and became_killed < 10
    with ledger.open(db_url) as lg:
        stored = set(lg.steps_frame("nine")["step"])
        reason = lg.meter_summary("nine").fate_reason
    assert reason is not None and "without closing" in reason
    # A printed step was recorded before it was printed, so this set is conservative.
    old = {s for s, at in arrived.items() if at < killed_at - 0.05}
    assert len(old) > 1000
    assert old <= stored, f"missing {len(old - stored)} steps, from {min(old - stored)}"
    assert stored == set(range(len(stored)))  # a prefix: nothing half-written
    path = sqlite_path(db_url)
    if path is not None:
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_the_writer_is_a_process_that_outlives_a_killed_trainer_only_briefly(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    code = (
        "import os, sys, time\n"
        "from ledger.hook import StepMeter\n"
        f"m = StepMeter('brief', db={db!r})\n"
        "print(m._link.writer_pid(), flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    writer = int(proc.stdout.readline())
    proc.stdout.close()
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    deadline = time.monotonic() + 20
    while _alive(writer):
        assert time.monotonic() < deadline, "the writer outlived its trainer"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split()[2] == "Z")


def test_a_writer_that_cannot_start_never_stops_training(
    db_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from ledger.hook import link

    def no_process() -> None:
        raise OSError("no interpreter here")

    monkeypatch.setattr(link, "_spawn", no_process)
    with caplog.at_level(logging.WARNING, logger="ledger.hook"):
        meter = StepMeter("nowriter", db=db_url)
        for _ in range(10):
            with meter.step(loss=1.0):
                pass
        assert not meter.flush(1)
        meter.close()
    assert meter.dropped == 10
    assert any("cannot start the writer process" in w for w in _hook_warnings(caplog))


def test_an_nvml_reading_refused_is_counted_per_call_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A reading NVML refuses costs its field alone; each refusal is counted, by call, and
    the first of each call is logged with its reason (not one line per sample)."""
    import types

    from ledger.hook.gpu import Sampler

    def refuses(*_args: object) -> object:
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    refuses.__name__ = "nvmlDeviceGetPowerUsage"
    memory = types.SimpleNamespace(used=1 << 30, total=8 << 30)
    nvml = types.SimpleNamespace(
        nvmlDeviceGetHandleByIndex=lambda index: f"handle{index}",
        nvmlDeviceGetName=lambda handle: b"H200",
        nvmlDeviceGetMemoryInfo=lambda handle: memory,
        nvmlDeviceGetUtilizationRates=lambda handle: types.SimpleNamespace(gpu=97),
        nvmlDeviceGetPowerUsage=refuses,
        nvmlDeviceGetEnforcedPowerLimit=lambda handle: 700_000,
        nvmlDeviceGetClockInfo=lambda handle, kind: 1980,
        nvmlDeviceGetMaxClockInfo=lambda handle, kind: 1980,
        nvmlDeviceGetTemperature=lambda handle, sensor: 61,
    )
    sampler = Sampler()
    sampler._nvml = nvml
    with caplog.at_level(logging.DEBUG, logger="ledger.hook"):
        rows = [sampler.sample(0, rank=0, step=s) for s in (1, 2, 3)]
    assert all(r is not None and r["power_w"] is None for r in rows)
    assert all(r is not None and r["power_limit_w"] == 700.0 for r in rows)
    assert sampler.failures == 3
    assert sampler.refused == {"nvmlDeviceGetPowerUsage": 3}
    said = [r.getMessage() for r in caplog.records if "NVML refused" in r.getMessage()]
    assert len(said) == 1 and "nvmlDeviceGetPowerUsage" in said[0]
    assert "NVML_ERROR_NOT_SUPPORTED" in said[0]
