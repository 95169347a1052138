"""The hook on a GPU host, without a GPU: device values read without waiting, memory
sampled by time as well as by step, a leak found by `ledger why`, the meter's own cost as
the training thread paid it, and `dropped` true at once after a close that gave up."""

from __future__ import annotations

import itertools
import sqlite3
import time
import types
from typing import Any

import pytest

import ledger
from ledger.config import sqlite_path
from ledger.hook import StepMeter, torch_side
from ledger.hook import meter as meter_module
from ledger.hook.reads import Batch, Resolver

MIB = 1 << 20


class _Blocking(AssertionError):
    pass


class DeviceScalar:
    """A one-element "CUDA tensor": every call that would wait for the GPU raises."""

    is_cuda = True

    def __init__(self, value: float) -> None:
        self.value = value

    def numel(self) -> int:
        return 1

    def item(self) -> float:
        raise _Blocking("item() waits for the GPU")

    def cpu(self) -> Any:
        raise _Blocking("cpu() waits for the GPU")

    def tolist(self) -> Any:
        raise _Blocking("tolist() waits for the GPU")

    def __float__(self) -> float:
        raise _Blocking("float() waits for the GPU")


class SlowCopy:
    """A copy to the host that completes after `polls` queries."""

    def __init__(self, tensors: list[DeviceScalar], polls: int) -> None:
        self._values = [t.value for t in tensors]
        self.left = polls
        self.queries = 0

    def ready(self) -> bool:
        self.queries += 1
        self.left -= 1
        return self.left < 0

    def values(self) -> list[float]:
        assert self.left < 0, "values read before the copy completed"
        return list(self._values)


class SlowDevice:
    def __init__(self, polls: int) -> None:
        self.polls = polls
        self.copies: list[SlowCopy] = []

    def on_device(self, value: Any) -> bool:
        return isinstance(value, DeviceScalar)

    def copy(self, tensors: list[Any]) -> SlowCopy:
        copy = SlowCopy(tensors, self.polls)
        self.copies.append(copy)
        return copy


def test_the_resolver_reads_device_values_only_once_their_copy_is_done() -> None:
    device = SlowDevice(polls=3)
    resolver = Resolver(device)
    loss, norm = DeviceScalar(2.5), DeviceScalar(0.75)
    batch = resolver.start([loss, 7, None, norm, 1.5])
    assert len(device.copies) == 1  # one copy for the whole round, host values left out
    assert [batch.ready() for _ in range(4)] == [False, False, False, True]
    assert batch.ready() and device.copies[0].queries == 4  # answered from memory now
    assert resolver.number(loss, batch) == 2.5 and resolver.number(norm, batch) == 0.75
    assert resolver.number(7, batch) == 7 and resolver.number(None, batch) is None
    assert resolver.failures == 0
    # A device value the batch does not hold (a step that gave up waiting): missing, counted.
    assert resolver.number(DeviceScalar(1.0), batch) is None and resolver.failures == 1
    empty = resolver.start([1, 2.0])
    assert isinstance(empty, Batch) and empty.ready() and len(device.copies) == 1


class _Event:
    """A CUDA event on the host clock, ready when the test says."""

    ready = True

    def __init__(self, enable_timing: bool = False) -> None:
        self.at = 0.0

    def record(self, stream: Any = None) -> None:
        self.at = time.perf_counter()

    def query(self) -> bool:
        return type(self).ready

    def synchronize(self) -> None:
        raise _Blocking("synchronize() waits for the GPU")

    def elapsed_time(self, end: _Event) -> float:
        return (end.at - self.at) * 1000


def _fake_cuda(monkeypatch: pytest.MonkeyPatch, stats: dict[str, int]) -> SlowDevice:
    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(
            Event=_Event, memory_stats=lambda: dict(stats), is_available=lambda: True
        )
    )
    device = SlowDevice(polls=5)
    monkeypatch.setattr(torch_side, "loaded_torch", lambda: fake)
    monkeypatch.setattr(torch_side, "device_reads", lambda torch, events: device)
    monkeypatch.setattr(_Event, "ready", True)
    return device


def _stats(allocated: int) -> dict[str, int]:
    return {
        "allocated_bytes.all.current": allocated,
        "allocated_bytes.all.peak": allocated,
        "reserved_bytes.all.current": allocated + 512 * MIB,
    }


def test_cuda_losses_arrive_once_copied_and_nothing_blocks(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    device = _fake_cuda(monkeypatch, _stats(64 * MIB))
    meter = StepMeter("device_values", db=db_url, flush_interval=0.2)
    for i in range(40):
        with meter.step(tokens=8) as s:
            s.set(loss=DeviceScalar(float(i)), grad_norm=DeviceScalar(i / 10))
            time.sleep(0.005)  # a step long enough that an event pair is lost in it
    meter.log(39, eval_loss=DeviceScalar(0.125))
    meter.close()
    assert meter.dropped == 0 and meter.bad_values == 0
    assert device.copies and all(c.left < 0 for c in device.copies)  # each read once done
    with ledger.open(db_url) as lg:
        steps, metrics = lg.steps_frame("device_values"), lg.metrics_frame("device_values")
    assert steps["loss"].tolist() == [float(i) for i in range(40)]
    norms = metrics[metrics["name"] == "grad_norm"].sort_values("step")["value"].tolist()
    assert norms == pytest.approx([i / 10 for i in range(40)])
    assert metrics[metrics["name"] == "eval_loss"]["value"].tolist() == [0.125]
    # Automatic event timing: an event costs next to nothing here, so once the meter has
    # seen what one costs (16 steps), steps have a GPU time — every one on a quiet machine.
    # The interval is chosen from measured host costs, which a loaded machine inflates
    # (every third step was seen under `pytest -n 4` beside CPU burners): still more often
    # than the first guess, one step in 8 (three of these 24).
    timed = steps["gpu_time_s"].iloc[16:].notna()
    assert timed.sum() >= 4, timed.tolist()


def test_memory_is_sampled_by_time_as_well_as_by_step(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a clock of the test's own, so a loaded machine changes nothing: each step takes
    20 ms of it, a step every 8th 130 ms (a stall)."""
    clock = [0]
    monkeypatch.setattr(meter_module, "_now", lambda: clock[0])
    monkeypatch.setattr(torch_side, "_now", lambda: clock[0])
    _fake_cuda(monkeypatch, _stats(64 * MIB))
    meter = StepMeter("by_time", db=db_url, memory_every=100, memory_interval_s=0.05)
    ended: list[int] = []  # each step's end on that clock
    for i in range(200):
        with meter.step():
            clock[0] += 130_000_000 if i % 8 == 7 else 20_000_000
        ended.append(clock[0])
    meter.close()
    with ledger.open(db_url) as lg:
        sampled = lg.steps_frame("by_time").dropna(subset=["memory_allocated_mib"])
    steps = sampled["step"].tolist()
    assert 0 in steps and 100 in steps  # memory_every still means steps
    # And a step is sampled as soon as 0.05 s have passed since the last sample: never two
    # samples further apart than 0.05 s and one step, and a stall's step is always sampled.
    gaps = [ended[b] - ended[a] for a, b in itertools.pairwise(steps)]
    assert all(gap <= 50_000_000 + 130_000_000 for gap in gaps), gaps
    assert {i for i in range(200) if i % 8 == 7} <= set(steps)
    assert 60 < len(steps) < 100  # by time, about every third step: not every step
    assert (sampled["memory_allocated_mib"] == 64).all()


def _train(meter: StepMeter, stats: dict[str, int], leak: int, steps: int = 600) -> None:
    for _ in range(steps):
        with meter.step(tokens=4096) as s:
            time.sleep(0.004)
            stats["allocated_bytes.all.current"] += leak
            stats["reserved_bytes.all.current"] += leak
            s.set(loss=1.0)


def test_a_16_mib_a_step_leak_over_600_steps_is_a_memory_growth_finding(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stats = _stats(2048 * MIB)
    _fake_cuda(monkeypatch, stats)
    # The defaults: memory every 100 steps and every 0.1 s.
    meter = StepMeter("steady", db=db_url)
    _train(meter, stats, 0)
    meter.close()
    stats.update(_stats(2048 * MIB))
    meter = StepMeter("leaky", db=db_url)
    _train(meter, stats, 16 * MIB)
    meter.close()
    with ledger.open(db_url) as lg:
        samples = lg.steps_frame("leaky")["memory_allocated_mib"].notna().sum()
        result = lg.why("leaky", "steady")
        against = lg.why("steady", "leaky")
    assert samples >= 24  # dozens, where every 100 steps alone gives 6
    kinds = [f.kind for f in result.findings]
    assert "memory_growth" in kinds, kinds
    growth = next(f for f in result.findings if f.kind == "memory_growth")
    assert "grew by" in growth.claim
    assert "memory_growth" not in [f.kind for f in against.findings]


def test_the_stored_cost_is_what_the_training_thread_paid(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a clock of the test's own: every clock read is 1 µs, an event record 100 µs. With
    a pair every 8th step the thread pays about 2 + 200 / 8 µs a step on average; the
    median (2) or the event steps alone (202) would be wrong."""
    clock = [0]

    def now() -> int:
        clock[0] += 1_000
        return clock[0]

    class PricedEvent(_Event):
        def record(self, stream: Any = None) -> None:
            clock[0] += 100_000

        def elapsed_time(self, end: _Event) -> float:
            return 1.0

    _fake_cuda(monkeypatch, _stats(64 * MIB))
    torch_side.loaded_torch().cuda.Event = PricedEvent
    monkeypatch.setattr(meter_module, "_now", now)
    monkeypatch.setattr(torch_side, "_now", now)
    meter = StepMeter("priced", db=db_url, event_every=8, memory_interval_s=0)
    for _ in range(4096):
        with meter.step():
            pass
    meter.close()
    with ledger.open(db_url) as lg:
        cost = lg.meter_summary("priced").hook_cost_us
    assert cost is not None and 15 < cost < 60, cost


def _writer_gone(meter: StepMeter, timeout: float) -> bool:
    pid = meter._link.writer_pid()
    assert pid is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if meter._link._proc is not None and meter._link._proc.poll() is not None:
            return True
        time.sleep(0.05)
    return False


def test_dropped_is_true_at_once_after_a_close_that_gave_up(db_url: str) -> None:
    """A ledger locked throughout: close() gives up, and `dropped` says every step at once,
    not only after the writer process has given up too."""
    with ledger.open(db_url) as lg:  # the schema exists before the lock
        conn = lg.engine.connect()
        if conn.dialect.name == "sqlite":
            conn.close()
            raw = sqlite3.connect(sqlite_path(db_url), timeout=0)
            raw.execute("BEGIN EXCLUSIVE")
            release = raw.close
        else:
            conn.exec_driver_sql("LOCK TABLE step IN ACCESS EXCLUSIVE MODE")

            def release() -> None:
                conn.rollback()
                conn.close()

        try:
            meter = StepMeter("given_up", db=db_url, close_timeout=1.0, handle_sigterm=False)
            for _ in range(5000):
                with meter.step(loss=1.0):
                    pass
            meter.close()
            assert meter.dropped == 5000
            assert _writer_gone(meter, 30)
            assert meter.dropped == 5000  # the writer's own count later changes nothing
        finally:
            release()


def test_a_step_waiting_for_its_values_gives_its_events_back_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step whose GPU events are done but whose loss is still being copied is looked at
    again on the next round. Its events go back to the pool only when it is sent: given back
    earlier, the trainer records them again for a later step while this one still holds
    them (on an H200 the forwarder then died on "Both events must be completed")."""
    _fake_cuda(monkeypatch, _stats(64 * MIB))
    given: list[int] = []
    give = torch_side.EventPool.give

    def counted(self: torch_side.EventPool, *events: Any) -> None:
        given.extend(id(e) for e in events)
        give(self, *events)

    monkeypatch.setattr(torch_side.EventPool, "give", counted)
    meter = StepMeter("events_once", db=db_url, flush_interval=0.05)
    for i in range(40):
        with meter.step(tokens=8) as s:
            s.set(loss=DeviceScalar(float(i)))  # a copy that needs five polls to arrive
            time.sleep(0.002)
    meter.close()
    assert meter.dropped == 0 and meter.bad_values == 0
    with ledger.open(db_url) as lg:
        steps = lg.steps_frame("events_once")
    assert steps["loss"].tolist() == [float(i) for i in range(40)]
    timed = int(steps["gpu_time_s"].notna().sum())
    assert timed > 0
    assert len(given) == 2 * timed  # each timed step's pair, given back exactly once
