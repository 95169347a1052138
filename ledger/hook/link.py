"""The training process's end of the hook: it starts the writer process and feeds it.

The writer (ledger.hook.writer) is a separate process, started with `sys.executable` in
a session of its own (Ctrl-C and the process group's signals do not reach it), fed
through a pipe. It does everything that takes time (SQLAlchemy, the database, NVML), so
that none of it competes with the training thread for the GIL, and it sees the trainer
die: a pipe closed without a "close" is a run killed, its fate written at once.

Here, one thread (the forwarder) wakes every FORWARD_S, takes what the training thread
queued, resolves it into plain numbers (CUDA events, tensors: they cannot cross a
process boundary) and writes it to the pipe; a kill -9 therefore loses at most the last
FORWARD_S of steps, and what is in the pipe still reaches the ledger. A second thread
reads the writer's replies (flushes done, counts, warnings to log here).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.hook import runinfo, torch_side, wire

if TYPE_CHECKING:
    from ledger.hook.meter import StepMeter

log = logging.getLogger("ledger.hook")

FORWARD_S = 0.02  # what a kill -9 can lose, at most (plus steps the GPU had not reached)
DYNAMO_EVERY_S = 0.5
SLICE = 256  # items resolved between two yields of the GIL


class Control:
    """Something other than a step, queued in order with the steps around it."""

    __slots__ = ("done", "item")

    def __init__(self, item: tuple[Any, ...], done: threading.Event | None = None) -> None:
        self.item = item  # sent as it is; a "flush" gets its token added
        self.done = done


class Link:
    """The writer process, the pipe to it and the two threads that use the pipe."""

    def __init__(self, meter: StepMeter) -> None:
        self.meter = meter
        self.rows_written = 0
        self.bad_values = 0
        self.lost = 0  # steps the writer could not store, as it last said
        self.unsent = 0  # steps this side could not hand over (the writer was gone)
        self.closed = threading.Event()  # the writer said it is done (or is gone)
        self.wake = threading.Event()
        self.closing = False
        self._waiters: dict[int, threading.Event] = {}
        self._tokens = 0
        self._resolver = torch_side.Resolver(meter._torch)
        self._pending: deque[Any] = deque()  # taken from the queue, not yet sent
        self._held: dict[str, Any] | None = None  # the newest step, waiting for the next start
        self._last_t1: int | None = None
        # A step waits this long at most for the next one's start (its throughput's end).
        self._hold_ns = int(meter.flush_interval / 4 * 1e9)
        self._rank: int | None = None
        self._dynamo: dict[str, int] = {}
        self._dynamo_at = 0.0
        self._config_sent = False
        self._sent_lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._out: int | None = None
        self._in: int | None = None
        try:
            self._proc, self._out, self._in = _spawn(meter)
        except OSError as exc:  # no interpreter to start (an embedded Python, a full table)
            log.warning(
                "ledger.hook: cannot start the writer process (%s); run %r goes unrecorded",
                exc,
                meter.run,
            )
            self.closed.set()
        self._send([("hello", _hello(meter))])
        self._forwarder = threading.Thread(
            target=self._forward, name=f"ledger-hook-forwarder[{meter.run}]", daemon=True
        )
        self._replies = threading.Thread(
            target=self._read_replies, name=f"ledger-hook-replies[{meter.run}]", daemon=True
        )
        self._forwarder.start()
        self._replies.start()
        _LINKS.add(self)

    # -- what the meter calls --------------------------------------------------------------

    def flush_token(self, done: threading.Event) -> Control:
        self._tokens += 1
        self._waiters[self._tokens] = done
        return Control(("flush", self._tokens), done)

    def is_alive(self) -> bool:
        return self._forwarder.is_alive() and not self.closed.is_set()

    def join(self, timeout: float) -> bool:
        """Wait for the forwarder to hand everything over and the writer to finish."""
        deadline = time.monotonic() + timeout
        self._forwarder.join(max(0.0, deadline - time.monotonic()))
        done = self.closed.wait(max(0.0, deadline - time.monotonic()))
        if done and self._proc is not None:
            try:
                self._proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return False
        return done

    def writer_pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _forked(self) -> None:
        # A forked child (a DataLoader worker) must not hold the pipe open: the writer
        # would not see the trainer die until every worker had died too.
        wire.close(self._out)
        wire.close(self._in)
        self._out = self._in = None

    # -- the forwarder thread ------------------------------------------------------------

    def _forward(self) -> None:
        meter = self.meter
        try:
            while True:
                closing = self.closing
                self._cycle(force=closing)
                if closing and not meter._queue and not self._pending:
                    self._send([("close",)])
                    wire.close(self._out)
                    self._out = None
                    return
                self.wake.wait(FORWARD_S)
                self.wake.clear()
        except Exception:
            log.exception("ledger.hook: the forwarder stopped; later steps are not recorded")
            self.closed.set()

    def _cycle(self, *, force: bool) -> None:
        queue = self.meter._queue
        pending = self._pending
        while queue:
            pending.append(queue.popleft())
        urgent = force or any(type(i) is Control and i.item[0] == "flush" for i in pending)
        items: list[Any] = [None]
        self._resolve(items, force=urgent)
        # First in the frame: the writer knows the counters before it writes these steps.
        items[0] = self._meta(urgent)
        if not self._config_sent:
            self._config_sent = True
            items.append(("config", runinfo.torch_config(self.meter._torch, self._events())))
        self._send(items)

    def _events(self) -> bool:
        return self.meter._events is not None

    def _resolve(self, items: list[Any], *, force: bool) -> None:
        pending = self._pending
        # Steps are timed on a sample (event_every): a timed step whose end event is done
        # clears every step queued before it on the stream, tensors and all.
        cleared = -1
        if not force:
            for i, item in enumerate(pending):
                if type(item) is tuple and item[7] is not None:
                    if not item[7].query():
                        break
                    cleared = i
        self._prefetch(cleared if not force else len(pending) - 1, force)
        done = 0
        while pending:
            item = pending[0]
            if type(item) is tuple:
                if not force and done > cleared and (item[7] is not None or _on_gpu(item)):
                    break  # the GPU has not got there yet; later steps are behind it
                row = self._row(item, force)
                if self._held is not None:
                    items.append(self._release(row["_t0"]))
                self._held = row
            else:
                if self._held is not None and item.item[0] in ("flush", "fate", "close"):
                    items.append(self._release(None))
                items.append(self._control(item))
            pending.popleft()
            done += 1
            if done % SLICE == 0:
                time.sleep(0)  # hand the GIL to the training thread if it is waiting
        self._resolver.forget()
        held = self._held
        if held is not None and (force or time.perf_counter_ns() - held["_t1"] > self._hold_ns):
            items.append(self._release(None))  # no next step for a while: over its own block

    def _prefetch(self, upto: int, force: bool) -> None:
        """Read the CUDA scalars of the steps that can be resolved now, all at once."""
        if self.meter._events is None or upto < 1:
            return
        tensors: list[Any] = []
        ready = None
        for i, item in enumerate(self._pending):
            if i > upto:
                break
            if type(item) is not tuple:
                continue
            _, _, _, tokens, loss, scalars, _, end_event, _ = item
            ready = end_event if end_event is not None else ready
            for value in (tokens, loss, *(scalars.values() if scalars else ())):
                if getattr(value, "is_cuda", False) and value.numel() == 1:
                    tensors.append(value)
        self._resolver.prefetch(tensors, None if force else ready)

    def _release(self, next_t0: int | None) -> dict[str, Any]:
        """The held step, its throughput over its start to the next step's start (or, with no
        next step yet, over its own block)."""
        row = self._held
        assert row is not None
        self._held = None
        t0 = row.pop("_t0")
        del row["_t1"]
        tokens = row["tokens"]
        interval = (next_t0 - t0) / 1e9 if next_t0 is not None else row["step_time_s"]
        if isinstance(tokens, int | float) and tokens and interval > 0:
            row["throughput"] = tokens / interval
        return row

    def _row(self, item: tuple[Any, ...], force: bool) -> dict[str, Any]:
        step, t0, t1, tokens, loss, scalars, start_event, end_event, memory = item
        gpu_s = None
        if end_event is not None:
            if force:
                end_event.synchronize()
            gpu_s = start_event.elapsed_time(end_event) / 1000.0
            events = self.meter._events
            assert events is not None  # CUDA events come only from the meter's pool
            events.give(start_event, end_event)
        number = self._resolver.number
        wall, anchor = time.time(), time.perf_counter_ns()
        wait = (t0 - self._last_t1) / 1e9 if self._last_t1 is not None else None
        self._last_t1 = t1
        row: dict[str, Any] = {
            "step": step,
            "rank": self._rank_now(),
            "wall_time": wall - (anchor - t1) / 1e9,
            "step_time_s": (t1 - t0) / 1e9,
            "wait_s": wait if wait is None or wait >= 0 else None,
            "gpu_time_s": gpu_s,
            "tokens": number(tokens, end_event),
            "throughput": None,
            "loss": number(loss, end_event),
            "_t0": t0,
            "_t1": t1,
        }
        if memory is not None:
            allocated, peak, reserved = memory
            row["memory_allocated_mib"] = allocated
            row["memory_reserved_mib"] = reserved
            row["memory_max_allocated_mib"] = peak
        if scalars:
            for name, value in scalars.items():
                if name not in row:
                    row[str(name)] = number(value, end_event)
        return row

    def _control(self, control: Control) -> tuple[Any, ...]:
        item = control.item
        if item[0] == "log":
            _, step, scalars = item
            values = {str(k): self._resolver.number(v) for k, v in scalars.items()}
            return ("log", self._rank_now(), step, values)
        return item

    def _meta(self, urgent: bool) -> tuple[Any, ...]:
        meter = self.meter
        costs: list[int] = []
        samples = meter._costs
        while samples:
            costs.append(samples.popleft())
        now = time.monotonic()
        dynamo = None
        if urgent or now - self._dynamo_at >= DYNAMO_EVERY_S:
            self._dynamo_at = now
            counters = torch_side.dynamo_counters()
            if counters and counters != self._dynamo:
                self._dynamo = dynamo = counters
        device = meter._events.device() if meter._events is not None else None
        dropped = meter._dropped + self.unsent
        return ("meta", dropped, costs, dynamo, device, self._resolver.failures)

    def _rank_now(self) -> int:
        # Decided at the first step or log handed over, not at construction: a script may
        # build its meter before torch.distributed.init_process_group.
        if self._rank is None:
            explicit = self.meter._rank
            self._rank = explicit if explicit is not None else torch_side.detect_rank()
        return self._rank

    def _send(self, items: list[Any]) -> None:
        fd = self._out
        if fd is None or self.closed.is_set():
            self._count_unsent(items)
            return
        try:
            wire.send(fd, items)
        except OSError:  # the writer is gone (a broken pipe)
            self._count_unsent(items)
            self.closed.set()

    def _count_unsent(self, items: list[Any]) -> None:
        for item in items:
            if type(item) is dict:
                self.unsent += 1
            elif item[0] == "flush":
                waiter = self._waiters.pop(item[1], None)
                if waiter is not None:
                    waiter.set()

    # -- the replies thread --------------------------------------------------------------

    def _read_replies(self) -> None:
        fd = self._in
        try:
            if fd is None:
                return
            reader = wire.Reader(fd)
            while True:
                frame = reader.read()
                if frame is None:
                    break
                for reply in frame:
                    self._reply(reply)
        except (OSError, ValueError, EOFError) as exc:
            log.warning("ledger.hook: lost touch with the writer process (%s)", exc)
        finally:
            if not self.closed.is_set() and not self.closing:
                log.warning(
                    "ledger.hook: the writer process of run %r ended; later steps are not recorded",
                    self.meter.run,
                )
            self.closed.set()
            if self._in is not None:
                wire.close(self._in)
                self._in = None
            for waiter in list(self._waiters.values()):
                waiter.set()
            self._waiters.clear()

    def _reply(self, reply: Any) -> None:
        kind = reply[0]
        if kind in ("stats", "done", "closed"):
            self.rows_written, self.lost, self.bad_values = reply[1], reply[2], reply[3]
        if kind == "done":
            waiter = self._waiters.pop(reply[4], None)
            if waiter is not None:
                waiter.set()
        elif kind == "warn":
            log.warning("%s", reply[1])
        elif kind == "info":
            log.info("%s", reply[1])
        elif kind == "closed":
            self.closed.set()


def _on_gpu(item: tuple[Any, ...]) -> bool:
    """Whether a step hands over a CUDA tensor (reading it would wait for the GPU)."""
    _, _, _, tokens, loss, scalars, _, _, _ = item
    if getattr(tokens, "is_cuda", False) or getattr(loss, "is_cuda", False):
        return True
    return bool(scalars) and any(getattr(v, "is_cuda", False) for v in scalars.values())


_LINKS: weakref.WeakSet[Link] = weakref.WeakSet()


def _after_fork() -> None:
    for link in list(_LINKS):
        link._forked()


os.register_at_fork(after_in_child=_after_fork)


def _hello(meter: StepMeter) -> dict[str, Any]:
    return {
        "db": meter.db,
        "run": meter.run,
        "investigation": meter.investigation,
        "created_at": meter.created_at.timestamp(),
        "argv": list(sys.argv),
        "flush_interval": meter.flush_interval,
        "close_timeout": meter.close_timeout,
        "max_pending": meter._cap,
        "gpu_every": meter.gpu_every,
        "cwd": os.getcwd(),
    }


def _spawn(meter: StepMeter) -> tuple[subprocess.Popen[bytes], int | None, int | None]:
    """Start the writer: this interpreter, this package, nothing of the trainer's state.

    Returns the process, the pipe's end to write steps to and the end to read replies."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    steps_r, steps_w = os.pipe()
    replies_r, replies_w = os.pipe()
    wire.widen(steps_w)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "ledger.hook.writer"],
            stdin=steps_r,
            stdout=replies_w,
            env=env,
            start_new_session=True,  # Ctrl-C and the group's SIGTERM: the trainer's, not ours
            close_fds=True,
        )
    except BaseException:
        for fd in (steps_w, replies_r):
            wire.close(fd)
        raise
    finally:
        wire.close(steps_r)
        wire.close(replies_w)
    return proc, steps_w, replies_r
