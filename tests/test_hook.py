"""StepMeter in one process: a tiny nn.Linear trained on the CPU, and what the ledger holds."""

from __future__ import annotations

import logging
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import ledger
from ledger.errors import NotFoundError

torch = pytest.importorskip("torch")

from ledger.hook import StepMeter  # noqa: E402


def _train(meter: StepMeter, steps: int, *, start: int = 0) -> list[float]:
    """Train a tiny linear model for `steps` steps under the meter; returns the losses."""
    torch.manual_seed(start)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        inputs, targets = torch.randn(16, 8), torch.randn(16, 1)
        with meter.step(tokens=inputs.shape[0]) as s:
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            s.set(loss=loss.detach(), grad_norm=model.weight.grad.norm())
        losses.append(loss.item())
    return losses


def _wait_for_run(db_url: str, name: str, timeout: float = 30) -> None:
    """Until the writer process has opened the ledger and started the run."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with ledger.open(db_url) as lg:
                lg.meter_summary(name)
            return
        except NotFoundError:
            assert time.monotonic() < deadline, f"run {name!r} never started"
            time.sleep(0.05)


def test_records_every_step_of_a_training_loop(db_url: str) -> None:
    meter = StepMeter("linear", db=db_url)
    before = time.time()
    losses = _train(meter, 50)
    meter.log(49, eval_loss=torch.tensor(0.25))
    meter.close()
    assert meter.closed and meter.dropped == 0

    with ledger.open(db_url) as lg:
        steps = lg.steps_frame("linear")
        metrics = lg.metrics_frame("linear")
        summary = lg.meter_summary("linear")
    assert steps["step"].tolist() == list(range(50))
    assert set(steps["rank"]) == {0}
    # Tensors handed over on the training thread were read on the writer, to the same value.
    assert steps["loss"].tolist() == pytest.approx(losses, rel=1e-6)
    assert (steps["tokens"] == 16).all()
    assert (steps["step_time_s"] > 0).all() and steps["gpu_time_s"].isna().all()
    # Throughput is over each step's start to the next one's: its block and the wait after.
    interval = steps["step_time_s"] + steps["wait_s"].shift(-1).fillna(0.0)
    assert steps["throughput"].tolist() == pytest.approx((16 / interval).tolist(), rel=1e-3)
    assert math.isnan(steps["wait_s"].iloc[0]) and (steps["wait_s"].iloc[1:] >= 0).all()
    assert steps["wall_time"].is_monotonic_increasing
    assert before - 1 < steps["wall_time"].iloc[0] <= steps["wall_time"].iloc[-1] < time.time() + 1
    grad_norms = metrics[metrics["name"] == "grad_norm"]
    assert len(grad_norms) == 50 and (grad_norms["value"] > 0).all()
    assert metrics[metrics["name"] == "eval_loss"][["step", "value"]].values.tolist() == [
        [49, 0.25]
    ]
    assert summary.fate == "finished" and summary.fate_reason is None
    assert summary.dropped_steps == 0
    assert summary.started_at is not None and summary.ended_at >= summary.started_at
    # The meter's own caller-side cost, as a run figure: microseconds, so small but not zero.
    assert summary.hook_cost_us is not None and 0 < summary.hook_cost_us < 1000


def test_the_ledger_is_opened_by_the_writer_process(db_url: str) -> None:
    # Opening (imports, maybe creating the schema) is Python that holds a GIL: it happens
    # in the writer process, so the constructor returns at once.
    started = time.perf_counter()
    meter = StepMeter("opened_early", db=db_url)
    assert time.perf_counter() - started < 1.0
    try:
        assert meter._link.writer_pid() != os.getpid()
        assert meter.flush(30)
        with ledger.open(db_url) as lg:
            assert lg.meter_summary("opened_early").fate == "running"
    finally:
        meter.close()


def test_steps_reach_the_ledger_within_the_flush_interval(db_url: str) -> None:
    meter = StepMeter("fresh", db=db_url, flush_interval=0.4)
    assert meter.flush(30)  # the run exists from here on
    try:
        for i in range(20):
            with meter.step(loss=float(i)):
                pass
        # The interval, plus slack for a loaded machine, which can stall the writer process
        # for seconds: the point is that steps arrive while the meter is open, unasked.
        deadline = time.monotonic() + 0.4 + 20.0
        with ledger.open(db_url) as lg:
            while True:
                if lg.run_summary("fresh").steps == 20 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert lg.run_summary("fresh").steps == 20
            assert lg.meter_summary("fresh").fate == "running"
    finally:
        meter.close()


def test_exception_in_the_with_block_flushes_and_sets_fate_crashed(db_url: str) -> None:
    meter = StepMeter("boom", db=db_url, flush_interval=60)  # only the crash can flush
    _train(meter, 5)
    with pytest.raises(RuntimeError, match="exploded"), meter.step():
        raise RuntimeError("exploded\nsecond line")
    # Before any close(): the crash itself flushed every step and the fate.
    with ledger.open(db_url) as lg:
        summary = lg.meter_summary("boom")
    assert summary.steps == 6  # the failing step is recorded too
    assert summary.fate == "crashed"
    assert summary.fate_reason == "RuntimeError: exploded"
    assert summary.ended_at is not None
    meter.close()  # a close after the crash keeps the crash
    with ledger.open(db_url) as lg:
        assert lg.meter_summary("boom").fate == "crashed"


def test_a_caught_exception_then_more_steps_ends_finished(db_url: str) -> None:
    meter = StepMeter("recovers", db=db_url)
    for i in range(4):
        try:
            with meter.step():
                if i == 1:
                    raise ValueError("skip this batch")
        except ValueError:
            pass
    meter.flush()
    with ledger.open(db_url) as lg:
        assert lg.meter_summary("recovers").fate == "running"
    meter.close()
    with ledger.open(db_url) as lg:
        summary = lg.meter_summary("recovers")
    assert (summary.fate, summary.steps) == ("finished", 4)


@pytest.mark.parametrize(
    ("exception", "fate", "reason"),
    [
        (type("OutOfMemoryError", (RuntimeError,), {})("CUDA out of memory."), "oom", None),
        (KeyboardInterrupt(), "killed", "KeyboardInterrupt"),
        (SystemExit(2), "crashed", "SystemExit: 2"),
    ],
)
def test_fate_follows_the_exception(
    db_url: str, exception: BaseException, fate: str, reason: str | None
) -> None:
    meter = StepMeter("fates", db=db_url)
    with pytest.raises(type(exception)), meter.step():
        raise exception
    meter.close()
    with ledger.open(db_url) as lg:
        summary = lg.meter_summary("fates")
    assert summary.fate == fate
    assert summary.fate_reason == (reason or "OutOfMemoryError: CUDA out of memory.")


def test_sys_exit_zero_in_a_step_is_not_a_crash(db_url: str) -> None:
    meter = StepMeter("exits", db=db_url)
    with pytest.raises(SystemExit), meter.step():
        raise SystemExit(0)
    meter.close()
    with ledger.open(db_url) as lg:
        assert lg.meter_summary("exits").fate == "finished"


def test_meter_as_context_manager_records_a_crash_between_steps(db_url: str) -> None:
    with pytest.raises(ZeroDivisionError), StepMeter("ctx", db=db_url) as meter:
        _train(meter, 3)
        1 / 0  # noqa: B018
    with ledger.open(db_url) as lg:
        summary = lg.meter_summary("ctx")
    assert (summary.fate, summary.steps) == ("crashed", 3)
    assert summary.fate_reason == "ZeroDivisionError: division by zero"


def test_meter_as_context_manager_left_by_sys_exit_zero_is_finished(db_url: str) -> None:
    with pytest.raises(SystemExit), StepMeter("ctx_exit", db=db_url) as meter:
        _train(meter, 2)
        raise SystemExit(0)
    with ledger.open(db_url) as lg:
        assert lg.meter_summary("ctx_exit").fate == "finished"


def test_explicit_steps_rank_and_odd_values(db_url: str) -> None:
    meter = StepMeter("odd", db=db_url, rank=3)
    with meter.step(step=100, loss=math.nan, tokens=torch.tensor(7)):
        pass
    with meter.step(loss=torch.ones(3)):  # step 101; a loss of 3 elements cannot be a scalar
        pass
    meter.close()
    with ledger.open(db_url) as lg:
        steps = lg.steps_frame("odd")
    assert steps[["rank", "step"]].values.tolist() == [[3, 100], [3, 101]]
    assert math.isnan(steps["loss"][0]) and steps["tokens"][0] == 7
    assert math.isnan(steps["loss"][1])  # stored as missing; the step itself is kept


def test_rank_comes_from_the_environment(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "5")
    meter = StepMeter("env_rank", db=db_url)
    with meter.step():
        pass
    meter.close()
    with ledger.open(db_url) as lg:
        assert lg.steps_frame("env_rank")["rank"].tolist() == [5]


def test_back_pressure_drops_and_counts_but_never_blocks(db_url: str) -> None:
    """A database locked by someone else: the training thread keeps its pace, drops beyond
    max_pending, and the count of what it dropped is stored once the lock goes."""
    meter = StepMeter("pressure", db=db_url, max_pending=100, flush_interval=0.2)
    with meter.step():
        pass
    assert meter.flush(10)
    try:
        with ledger.open(db_url) as lg, _locked(lg):
            time.sleep(0.3)  # the writer is now stuck behind the lock
            slowest = 0.0
            for _ in range(1000):
                t = time.perf_counter()
                with meter.step():
                    pass
                slowest = max(slowest, time.perf_counter() - t)
            # The loop ended while the lock was still held: a step that waited for the
            # database would have waited for ever. (A loaded machine can still pause a step
            # for a while.) At most max_pending steps wait in each of three places — the
            # meter's queue, the writer's inbox and the batch it is stuck writing — and the
            # rest are dropped; the writer's share of the count arrives when it reads the
            # pipe, which a loaded machine delays: wait for it, not for the clock.
            floor = 1000 - 3 * 100 - 1
            deadline = time.monotonic() + 30
            while meter.dropped < floor and time.monotonic() < deadline:
                time.sleep(0.05)
            assert meter.dropped >= floor
        assert slowest < 5.0
    finally:
        meter.close()
    with ledger.open(db_url) as lg:
        summary = lg.meter_summary("pressure")
    assert summary.dropped_steps == meter.dropped
    assert summary.steps + summary.dropped_steps == 1001


class _locked:
    """Hold the ledger's write lock from another connection (SQLite) or lock the step
    table (PostgreSQL), as a CLI or another rank in a long transaction would."""

    def __init__(self, lg: ledger.Ledger) -> None:
        self.conn = lg.engine.connect()

    def __enter__(self) -> None:
        if self.conn.dialect.name == "sqlite":
            self.conn.connection.driver_connection.execute("BEGIN EXCLUSIVE")
        else:
            self.conn.exec_driver_sql("LOCK TABLE step IN ACCESS EXCLUSIVE MODE")

    def __exit__(self, *exc: object) -> None:
        if self.conn.dialect.name == "sqlite":
            self.conn.connection.driver_connection.execute("ROLLBACK")
        else:
            self.conn.rollback()
        self.conn.close()


def test_a_ledger_that_cannot_be_used_never_stops_training(
    tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlite3

    foreign = tmp_path / "not_a_ledger.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE something_else (x)")
    with caplog.at_level(logging.WARNING, logger="ledger.hook"):
        meter = StepMeter("nowhere", db=str(foreign))
        losses = _train(meter, 20)
        meter.close()
    assert len(losses) == 20
    assert meter.dropped == 20
    # (a meter of another test still closing may say something of its own run meanwhile)
    warnings = [
        r for r in caplog.records if r.name == "ledger.hook" and "nowhere" in r.getMessage()
    ]
    assert len(warnings) == 1 and "cannot record run 'nowhere'" in warnings[0].getMessage()


def test_a_second_launch_under_an_ended_run_name_is_a_launch_of_its_own(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    first = StepMeter("again", db=db_url)
    with first.step(loss=1.0):
        pass
    first.close()
    with caplog.at_level(logging.WARNING, logger="ledger.hook"):
        second = StepMeter("again", db=db_url)
        with second.step(loss=2.0):  # step 0 again: in a launch of its own
            pass
        second.close()
    assert any("new launch" in r.getMessage() for r in caplog.records)
    with ledger.open(db_url) as lg:
        assert lg.steps_frame("again")["loss"].tolist() == [2.0]  # the latest launch
        assert lg.steps_frame("again@1")["loss"].tolist() == [1.0]  # the first, kept apart
        assert lg.meter_summary("again").fate == "finished"


def test_steps_after_close_are_dropped_not_queued(db_url: str) -> None:
    meter = StepMeter("late", db=db_url)
    meter.close()
    with meter.step():
        pass
    assert meter.dropped == 1
    meter.close()  # idempotent


def test_two_meters_in_one_process_write_two_runs(db_url: str) -> None:
    a, b = StepMeter("a", db=db_url), StepMeter("b", db=db_url)
    for _ in range(10):
        with a.step(), b.step():
            pass
    b.close()
    a.close()
    with ledger.open(db_url) as lg:
        assert [lg.run_summary(n).steps for n in ("a", "b")] == [10, 10]


def test_meter_on_another_thread_skips_the_signal_handler(db_url: str) -> None:
    import signal

    before = signal.getsignal(signal.SIGTERM)
    box: dict[str, StepMeter] = {}

    def train() -> None:
        meter = box["meter"] = StepMeter("threaded", db=db_url)
        with meter.step():
            pass
        meter.close()

    worker = threading.Thread(target=train)
    worker.start()
    worker.join()
    assert signal.getsignal(signal.SIGTERM) == before
    with ledger.open(db_url) as lg:
        assert lg.meter_summary("threaded").fate == "finished"


def test_closing_restores_the_previous_sigterm_handler(db_url: str) -> None:
    import signal

    before = signal.getsignal(signal.SIGTERM)
    meter = StepMeter("restores", db=db_url)
    assert signal.getsignal(signal.SIGTERM) != before
    meter.close()
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.slow
def test_dynamo_counters_become_rows(db_url: str) -> None:
    """Recompilations are rows, not guesses: a compiled function fed new shapes."""
    import torch._dynamo

    torch._dynamo.reset()

    def f(x):
        return (x.sin() + 1).sum()

    compiled = torch.compile(f, backend="eager", dynamic=False)
    meter = StepMeter("compiled", db=db_url, flush_interval=0.2)
    for n in (2, 2, 3, 4):
        with meter.step():
            compiled(torch.ones(n))
        meter.flush()
    meter.close()
    with ledger.open(db_url) as lg:
        metrics = lg.metrics_frame("compiled")
    last = metrics.groupby("name")["value"].last()
    assert last["dynamo_frames_compiled"] == 3
    assert last["dynamo_recompiles"] == 2
    assert last["dynamo_graph_breaks"] == 0
    recompiles = metrics[metrics["name"] == "dynamo_recompiles"]
    # Written when they change, on the newest step of that batch: step 3 saw the second.
    assert recompiles[["step", "value"]].values.tolist()[-1] == [3, 2]


def test_importing_ledger_imports_neither_torch_nor_the_hook() -> None:
    code = (
        "import sys, ledger, ledger.store\n"
        "assert 'torch' not in sys.modules, 'torch'\n"
        "assert 'ledger.hook' not in sys.modules, 'ledger.hook'\n"
        "import ledger.hook\n"
        "assert 'torch' not in sys.modules, 'torch via ledger.hook'\n"
        "assert 'transformers' not in sys.modules, 'transformers via ledger.hook'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


class _FakeEvent:
    """A CUDA event's interface on the host clock: what the meter's CUDA path calls."""

    ready = True  # flipped by the test: False is a GPU still behind the host
    created = 0

    def __init__(self, enable_timing: bool) -> None:
        assert enable_timing
        type(self).created += 1
        self.at: float | None = None

    def record(self) -> None:
        self.at = time.perf_counter()

    def query(self) -> bool:
        return type(self).ready

    def synchronize(self) -> None:
        raise AssertionError("the hook must never wait for the GPU (synchronize)")

    def elapsed_time(self, end: _FakeEvent) -> float:
        assert self.at is not None and end.at is not None
        return (end.at - self.at) * 1000 + 5.0  # ms; 5 ms more than the host saw


def test_the_cuda_path_with_stand_in_events(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a GPU: event pairs per step, resolved only once the end event is done (a
    flush polls, it never synchronizes), recycled, and memory counters every `memory_every`
    steps."""
    import types

    from ledger.hook import torch_side

    stats = {
        "allocated_bytes.all.current": 3 << 20,
        "allocated_bytes.all.peak": 5 << 20,
        "reserved_bytes.all.current": 8 << 20,
    }
    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(
            Event=_FakeEvent, memory_stats=lambda: stats, is_available=lambda: True
        )
    )
    monkeypatch.setattr(torch_side, "loaded_torch", lambda: fake)
    monkeypatch.setattr(_FakeEvent, "ready", False)
    monkeypatch.setattr(_FakeEvent, "created", 0)
    meter = StepMeter(
        "cuda_like",
        db=db_url,
        memory_every=4,
        memory_interval_s=0,
        flush_interval=0.2,
        event_every=1,
    )
    _wait_for_run(db_url, "cuda_like")
    for _ in range(10):
        with meter.step(tokens=8):
            pass
    time.sleep(0.5)  # two writer cycles: nothing is written while the "GPU" is behind
    with ledger.open(db_url) as lg:
        assert lg.meter_summary("cuda_like").steps == 0
    assert not meter.flush(0.5)  # a flush waits for the GPU, polling: it cannot be done
    with ledger.open(db_url) as lg:
        assert lg.meter_summary("cuda_like").steps == 0
    _FakeEvent.ready = True  # the GPU reaches them
    assert meter.flush(30)
    with ledger.open(db_url) as lg:
        assert lg.meter_summary("cuda_like").steps == 10
    for _ in range(10):  # the pool hands the resolved events back to the training thread
        with meter.step():
            pass
    meter.close()
    assert _FakeEvent.created == 20  # ten pairs, then only reused ones

    with ledger.open(db_url) as lg:
        steps = lg.steps_frame("cuda_like")
        metrics = lg.metrics_frame("cuda_like")
    assert len(steps) == 20
    gpu_minus_host = steps["gpu_time_s"] - steps["step_time_s"]
    assert gpu_minus_host.tolist() == pytest.approx([0.005] * 20, abs=1e-3)
    sampled = steps.dropna(subset=["memory_allocated_mib"])
    assert sampled["step"].tolist() == [0, 4, 8, 12, 16]
    assert (sampled["memory_allocated_mib"] == 3).all()
    assert (sampled["memory_reserved_mib"] == 8).all()
    peaks = metrics[metrics["name"] == "memory_max_allocated_mib"]
    assert peaks["step"].tolist() == [0, 4, 8, 12, 16] and (peaks["value"] == 5).all()


def test_events_record_on_the_current_stream_built_once_per_stream() -> None:
    """The pool asks torch's C side which stream is current and builds a Stream object only
    when that changes; a torch without those calls records with no stream argument."""
    import types

    from ledger.hook.torch_side import EventPool

    current = {"key": (7, 0, 1)}
    built: list[tuple[int, int, int]] = []
    recorded_on: list[object] = []

    class Stream:
        def __init__(self, stream_id: int, device_index: int, device_type: int) -> None:
            built.append((stream_id, device_index, device_type))

    class Event:
        def __init__(self, enable_timing: bool) -> None:
            assert enable_timing

        def record(self, stream: object = None) -> None:
            recorded_on.append(stream)

    fake = types.SimpleNamespace(
        _C=types.SimpleNamespace(
            _cuda_getDevice=lambda: 0, _cuda_getCurrentStream=lambda device: current["key"]
        ),
        cuda=types.SimpleNamespace(Event=Event, Stream=Stream),
    )
    pool = EventPool(fake)
    for _ in range(3):
        pool.give(pool.recorded(), pool.recorded())
    assert built == [(7, 0, 1)]  # six records, one Stream object
    current["key"] = (9, 0, 1)  # the script entered `with torch.cuda.stream(other):`
    pool.recorded()
    assert built == [(7, 0, 1), (9, 0, 1)]
    assert all(isinstance(s, Stream) for s in recorded_on) and recorded_on[-1] is not recorded_on[0]

    plain = EventPool(types.SimpleNamespace(cuda=types.SimpleNamespace(Event=Event)))
    recorded_on.clear()
    plain.recorded()
    assert recorded_on == [None]


def test_the_event_pool_makes_an_event_only_when_none_is_free() -> None:
    """Events the writer gives back are recorded again; a new one is made (and counted)
    only while every event is still out."""
    import types

    from ledger.hook.torch_side import EventPool

    made: list[object] = []

    class Event:
        def __init__(self, enable_timing: bool) -> None:
            made.append(self)

        def record(self, stream: object = None) -> None:
            pass

    pool = EventPool(types.SimpleNamespace(cuda=types.SimpleNamespace(Event=Event)))
    first = [pool.recorded(), pool.recorded()]
    assert pool.created == 2 and len(made) == 2
    for _ in range(5):
        pool.give(*first)
        first = [pool.recorded(), pool.recorded()]
    assert pool.created == 2 and len(made) == 2  # ten records, the same two events
    pool.recorded()  # both are out: a third is made
    assert pool.created == 3 and len(made) == 3


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_a_new_ledger_locked_longer_than_the_writers_wait_is_opened_when_freed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two meters starting a new ledger at once on a loaded machine: one writer creates the
    schema while the other waits to switch the empty file to WAL, longer than its busy
    timeout. The driver's own "database is locked" from that switch is worth retrying, not
    the end of the run's recording (a run was lost that way under CI's load)."""
    import sqlite3

    from ledger.hook import writer

    path = tmp_path / "new.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # an empty file, in rollback mode, write-locked
    released = threading.Timer(writer.BUSY_TIMEOUT_S + 1.0, holder.execute, args=("COMMIT",))
    released.start()
    try:
        with caplog.at_level(logging.WARNING, logger="ledger.hook"):
            meter = StepMeter("waited", db=str(path))
            steps = 0
            end = time.monotonic() + writer.BUSY_TIMEOUT_S + 2.5  # training goes on
            while time.monotonic() < end:
                with meter.step():
                    time.sleep(0.01)
                steps += 1
            meter.close()
    finally:
        released.join()
        holder.close()
    said = [r.getMessage() for r in caplog.records]
    assert not [m for m in said if "cannot record" in m or "gave up" in m], said
    with ledger.open(path) as lg:
        assert lg.run_summary("waited").steps == steps
