"""The training process's end of the hook: it starts the writer process and feeds it.

The writer (ledger.hook.writer) is a separate process, started with `sys.executable` in
a session of its own (Ctrl-C and the process group's signals do not reach it), fed
through a pipe. It does everything that takes time (SQLAlchemy, the database, turning
steps into rows, NVML), so that none of it competes with the training thread for the GIL,
and it sees the trainer die: a pipe closed without a Close is a run killed.

Here one thread, the forwarder, wakes every FORWARD_S and pumps: it takes what the
training thread queued (ledger.hook.feed), starts one non-blocking copy of the CUDA
values among it (ledger.hook.reads), hands over every step at the head of the queue
whose events and values are on the host, as plain numbers, and writes them to the pipe
in one frame. It never waits for the GPU: a step the GPU has not reached waits for the
next pump. A kill -9 loses at most the last FORWARD_S of steps (plus those the GPU had not
reached), and what is in the pipe still reaches the ledger. A second thread reads the
writer's replies (flushes done, counts, lines to log here).
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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ledger.hook import protocol, runinfo, torch_side, wire
from ledger.hook.feed import Feed, Queued
from ledger.hook.protocol import (
    Close,
    Closed,
    Config,
    Flushed,
    Hello,
    Log,
    Meta,
    Say,
    Stats,
    StepRecord,
)
from ledger.hook.reads import Batch, Device, Resolver

log = logging.getLogger("ledger.hook")

FORWARD_S = 0.02  # what a kill -9 can lose, at most (plus steps the GPU had not reached)
POLL_S = 0.001  # between pumps while a flush waits for the GPU
DYNAMO_EVERY_S = 0.5
SLICE = 256  # items handed over between two yields of the GIL
_STEP = protocol.STEP_TAG
_FLUSH = protocol.Tag.FLUSH.value


class Link:
    """The writer process, the pipe to it and the two threads that use the pipe."""

    def __init__(self, feed: Feed, hello: Hello) -> None:
        self.feed = feed
        self.run = hello.run
        self.close_timeout = hello.close_timeout
        self.rows_written = 0
        self.bad_values = 0
        self.lost = 0  # steps the writer could not store, as it last said
        self.unsent = 0  # steps this side could not hand over (the writer was gone)
        self._gpu_time_said = False
        self.abandoned = 0  # steps handed over but unconfirmed when close() gave up
        self.sent = 0  # steps handed over to the writer
        self.closed = threading.Event()  # the writer said it is done (or is gone)
        self.wake = threading.Event()
        self.closing = False
        self.interval = FORWARD_S
        self._give_up_at = float("inf")
        self._frozen = False
        self._talk_ns = int(hello.flush_interval * 1e9)
        self._quiet_after = 0
        self._dropped_said = 0
        self._pump_lock = threading.Lock()
        self._resolver = Resolver(_device(feed))
        # Taken from the queue, not yet handed over: one batch of device reads per round.
        self._rounds: deque[tuple[Batch, deque[Queued]]] = deque()
        self._rank: int | None = None
        self._dynamo: dict[str, int] = {}
        self._dynamo_at = 0.0
        self._config_sent = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._out: int | None = None
        self._in: int | None = None
        try:
            self._proc, self._out, self._in = _spawn()
        except OSError as exc:  # no interpreter to start (an embedded Python, a full table)
            log.warning(
                "ledger.hook: cannot start the writer process (%s); run %r goes unrecorded",
                exc,
                hello.run,
            )
            self.closed.set()
        self._send([protocol.pack(hello)])
        self._forwarder = threading.Thread(
            target=self._forward, name=f"ledger-hook-forwarder[{hello.run}]", daemon=True
        )
        self._replies = threading.Thread(
            target=self._read_replies, name=f"ledger-hook-replies[{hello.run}]", daemon=True
        )
        self._forwarder.start()
        self._replies.start()
        _LINKS.add(self)

    # -- what the meter calls --------------------------------------------------------------

    def is_alive(self) -> bool:
        return self._forwarder.is_alive() and not self.closed.is_set()

    def close(self) -> None:
        """Hand over everything queued, then Close; the forwarder ends after it."""
        self._give_up_at = time.monotonic() + self.close_timeout
        self.closing = True
        self.wake.set()

    def join(self, timeout: float) -> bool:
        """Wait for the forwarder to hand everything over and the writer to finish."""
        deadline = time.monotonic() + timeout
        self._forwarder.join(max(0.0, deadline - time.monotonic()))
        done = self.closed.wait(max(0.0, deadline - time.monotonic()))
        if done and self._proc is not None:
            try:
                self._proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                done = False
        if done:
            # The writer has ended, so its pipe is at its end: the reply reader is finishing,
            # and the forwarder, which sent Close before the writer could answer it, too
            # (either may not have been scheduled yet on a loaded machine). A closed meter
            # leaves no thread of its own behind.
            for thread in (self._forwarder, self._replies):
                if thread is not threading.current_thread():
                    thread.join(max(0.1, deadline - time.monotonic()))
        if not done:
            self._abandon()
        return done

    def writer_pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _abandon(self) -> None:
        """close() gave up on the writer: what it has not confirmed counts as dropped now,
        and a later word from it changes nothing (the meter's figures are final)."""
        handed = self.sent - self.rows_written - self.lost
        self.abandoned = max(0, handed) + sum(
            type(item) is StepRecord for _, waiting in list(self._rounds) for item in list(waiting)
        )
        self.abandoned += sum(type(item) is StepRecord for item in list(self.feed.queue))
        self._frozen = True
        self.closed.set()

    def _forked(self) -> None:
        # A forked child (a DataLoader worker) must not hold the pipe open: the writer
        # would not see the trainer die until every worker had died too.
        wire.close(self._out)
        wire.close(self._in)
        self._out = self._in = None

    # -- the forwarder thread ------------------------------------------------------------

    def _forward(self) -> None:
        try:
            while True:
                closing = self.closing
                waiting = self.pump(urgent=closing)
                if closing and not waiting and not self.feed.queue:
                    self._send([protocol.pack(Close())])
                    wire.close(self._out)
                    self._out = None
                    return
                self.wake.wait(POLL_S if waiting else self.interval)
                self.wake.clear()
        except Exception:
            log.exception("ledger.hook: the forwarder stopped; later steps are not recorded")
            self.closed.set()
            self.feed.answer_all()

    def pump(self, *, urgent: bool = False, yields: bool = True) -> bool:
        """One round: take what was queued, hand over what is resolved, in one frame.

        Returns True when something must be handed over soon (a flush or close waits for the
        GPU to reach steps queued before it) and the next round should come in POLL_S.
        `yields`: sleep(0) every SLICE items, to let a waiting training thread in (not
        when the training thread itself pumps)."""
        with self._pump_lock:
            queue, rounds = self.feed.queue, self._rounds
            if queue:
                fresh: deque[Queued] = deque()
                while queue:
                    fresh.append(queue.popleft())
                device = self._resolver.device is not None
                rounds.append((self._resolver.start(_values(fresh)) if device else _HOST, fresh))
            urgent = urgent or bool(self.feed.waiters)  # a flush() waits
            give_up = urgent and self.closing and time.monotonic() > self._give_up_at
            items: list[Any] = [None]
            self._hand_over(items, give_up=give_up, yields=yields)
            meta = self._meta(urgent)
            items[0] = protocol.pack(meta)  # first: the counts before the steps
            if not self._config_sent:
                self._config_sent = True
                cuda = self.feed.events is not None
                items.append(protocol.pack(Config(runinfo.torch_config(self.feed.torch, cuda))))
            # An idle round sends nothing, except for a while after the last steps: the
            # writer holds the newest step until the trainer's clock says no next one comes.
            if len(items) > 1 or meta.costs or meta.dynamo or urgent:
                self._quiet_after = meta.now_ns + self._talk_ns
                self._send(items)
            elif meta.now_ns < self._quiet_after or meta.dropped != self._dropped_said:
                self._send(items)
            self._dropped_said = meta.dropped
            return urgent and bool(rounds)

    def _hand_over(self, items: list[Any], *, give_up: bool, yields: bool) -> None:
        """The resolved head of the queue, in order; stops at the first step the GPU has not
        reached (unless giving up at close: then what is not there is missing)."""
        rounds = self._rounds
        done = 0
        while rounds:
            batch, waiting = rounds[0]
            while waiting:
                item = waiting[0]
                if isinstance(item, StepRecord):
                    step = self._step(item, batch, give_up)
                    if step is None:
                        return
                    items.append(step)
                else:
                    if not (batch.ready() or give_up):
                        return
                    if type(item) is Log:
                        number = self._resolver.number
                        values = {str(k): number(v, batch) for k, v in item.values.items()}
                        item = Log(item.step, values)
                    items.append(protocol.pack(item))
                waiting.popleft()
                done += 1
                if done % SLICE == 0 and yields:
                    time.sleep(0)  # hand the GIL to the training thread if it is waiting
            rounds.popleft()

    def _step(self, record: StepRecord, batch: Batch, give_up: bool) -> tuple[Any, ...] | None:
        """The step as it goes on the pipe (protocol.pack of its Step), or None while the
        GPU has not reached it."""
        end = record.end_event
        ended = end is not None and end.query()
        if end is not None and not ended and not give_up:
            return None
        # Both checks come before the events are read and given back: a step still waiting
        # for its batch comes here again, and by then its events, back in the pool, would
        # have been recorded again for a later step (seen on an H200: the forwarder died).
        if not batch.ready() and not give_up:
            return None
        gpu_s = None
        if ended:
            gpu_s = self._gpu_seconds(record.start_event, end)
            events = self.feed.events
            assert events is not None  # CUDA events come only from the meter's pool
            events.give(record.start_event, end)
        number = self._resolver.number
        tokens, loss, scalars = record.tokens, record.loss, record.scalars
        # Plain numbers (the common case off the GPU) go as they are, without a call each.
        if not (tokens is None or type(tokens) is int or type(tokens) is float):
            tokens = number(tokens, batch)
        if not (loss is None or type(loss) is float or type(loss) is int):
            loss = number(loss, batch)
        if scalars and not _plain(scalars):
            scalars = {k: number(v, batch) for k, v in scalars.items()}
        return protocol.pack_step_of(
            record.step, record.t0, record.t1, tokens, loss, scalars, gpu_s, record.memory
        )

    def _gpu_seconds(self, start: Any, end: Any) -> float | None:
        """The GPU time between a step's two events; None (counted) when torch refuses it
        (the trainer recorded them on two streams, and the first is not done)."""
        try:
            return float(start.elapsed_time(end)) / 1000.0
        except RuntimeError as exc:
            # Counted with the other values that could not be read (the meter's bad_values).
            self._resolver.failures += 1
            if not self._gpu_time_said:
                self._gpu_time_said = True
                log.warning("ledger.hook: a step's GPU time could not be read (%s)", exc)
            return None

    def _meta(self, urgent: bool) -> Meta:
        feed = self.feed
        costs: list[int] = []
        samples = feed.costs
        while samples:
            costs.append(samples.popleft())
        now = time.monotonic()
        dynamo = None
        if urgent or now - self._dynamo_at >= DYNAMO_EVERY_S:
            self._dynamo_at = now
            counters = torch_side.dynamo_counters()
            if counters and counters != self._dynamo:
                self._dynamo = dynamo = counters
        device = feed.events.device() if feed.events is not None else None
        return Meta(
            feed.dropped + self.unsent,
            costs,
            dynamo,
            device,
            self._resolver.failures,
            self._rank_now(),
            time.perf_counter_ns(),
            time.time(),
        )

    def _rank_now(self) -> int:
        # Decided at the first round, not at construction: a script may build its meter
        # before torch.distributed.init_process_group.
        if self._rank is None:
            explicit = self.feed.rank
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
        else:
            self.sent += sum(1 for item in items if item[0] == _STEP)

    def _count_unsent(self, items: list[Any]) -> None:
        for item in items:
            if item[0] == _STEP:
                self.unsent += 1
            elif item[0] == _FLUSH:
                self.feed.answered(item[1])

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
                    self._reply(protocol.unpack(reply))
        except (OSError, ValueError, EOFError) as exc:
            log.warning("ledger.hook: lost touch with the writer process (%s)", exc)
        finally:
            if not self.closed.is_set() and not self.closing:
                log.warning(
                    "ledger.hook: the writer process of run %r ended; later steps are not recorded",
                    self.run,
                )
            self.closed.set()
            if self._in is not None:
                wire.close(self._in)
                self._in = None
            self.feed.answer_all()

    def _reply(self, reply: protocol.Message) -> None:
        if type(reply) is Say:
            log.log(logging.WARNING if reply.warning else logging.INFO, "%s", reply.text)
            return
        if self._frozen:
            return  # close() has given its figures; the writer's late counts change none
        if type(reply) is Stats or type(reply) is Flushed or type(reply) is Closed:
            self.rows_written, self.lost, self.bad_values = reply[0], reply[1], reply[2]
        if type(reply) is Flushed:
            self.feed.answered(reply.token)
        elif type(reply) is Closed:
            self.closed.set()


def _plain(values: dict[str, Any]) -> bool:
    for value in values.values():
        kind = type(value)
        if kind is not float and kind is not int:
            return False
    return True


def _values(items: Iterable[Queued]) -> list[Any]:
    """Every value among these that may be a tensor."""
    out: list[Any] = []
    for item in items:
        if type(item) is StepRecord:
            out.append(item.tokens)
            out.append(item.loss)
            if item.scalars:
                out.extend(item.scalars.values())
        elif type(item) is Log:
            out.extend(item.values.values())
    return out


def _device(feed: Feed) -> Device | None:
    if feed.torch is None or feed.events is None:
        return None  # no CUDA: every value can be read on the host at once
    return torch_side.device_reads(feed.torch, feed.events)


_HOST = Batch(None, [])  # values read on the host: nothing to wait for
_LINKS: weakref.WeakSet[Link] = weakref.WeakSet()


def _after_fork() -> None:
    for link in list(_LINKS):
        link._forked()


os.register_at_fork(after_in_child=_after_fork)


def _spawn() -> tuple[subprocess.Popen[bytes], int | None, int | None]:
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


def hello(
    *,
    db: str,
    run: str,
    investigation: str | None,
    created_at: float,
    flush_interval: float,
    close_timeout: float,
    max_pending: int,
    gpu_every: float,
) -> Hello:
    """The writer's first message: what only the training process knows at its start."""
    return Hello(
        db,
        run,
        investigation,
        created_at,
        list(sys.argv),
        flush_interval,
        close_timeout,
        max_pending,
        gpu_every,
        os.getcwd(),
    )
