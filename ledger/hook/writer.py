"""The hook's background writer: one thread per StepMeter that turns queued steps into rows.

It owns everything slow: opening the ledger (creating it when this rank is the first),
waiting for CUDA events, reading tensors, and writing batches, each in one transaction, at
least every `flush_interval / 2`. When the database is locked or unreachable it retries
with backoff, here and never on the training thread; meanwhile the training thread's
bounded queue drops, and counts, what does not fit.
"""

from __future__ import annotations

import logging
import math
import socket
import sys
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledger.errors import LedgerError, StorageError
from ledger.hook import torch_side
from ledger.model.records import FateChange

if TYPE_CHECKING:
    from ledger.hook.meter import StepMeter
    from ledger.store import Ledger

log = logging.getLogger("ledger.hook")

# Rows per transaction, and per slice of Python work between two yields of the GIL.
BATCH_MAX = 10_000
SLICE = 256
MAX_BACKOFF_S = 5.0


@dataclass
class Control:
    """Something other than a step, queued in order with the steps around it."""

    kind: str  # "fate", "log" or "flush"
    fate: FateChange | None = None
    step: int | None = None
    scalars: dict[str, Any] | None = None
    done: threading.Event | None = None


class Writer(threading.Thread):
    """Drains one meter's queue into the ledger; started by the meter, stopped by close()."""

    def __init__(self, meter: StepMeter) -> None:
        super().__init__(name=f"ledger-hook-writer[{meter.run}]", daemon=True)
        self.meter = meter
        self.wake = threading.Event()
        self.closing = threading.Event()
        self.deadline = math.inf
        self.rows_written = 0
        self.lost = 0  # steps this thread could not store (a batch the database refused)
        self._ledger: Ledger | None = None
        self._opened: bool | None = None  # None: not tried yet, or worth trying again
        self._run_id: int | None = None
        self._rank: int | None = None
        self._resolver = torch_side.Resolver(meter._torch)
        self._pending: deque[Any] = deque()  # taken from the queue, not yet resolved
        self._rows: list[dict[str, Any]] = []  # resolved, not yet written
        self._metrics: list[tuple[int, int, str, Any]] = []
        self._fates: list[FateChange] = []
        self._dones: list[threading.Event] = []
        self._costs: Counter[int] = Counter()  # caller-side cost per step, 10 ns buckets
        self._costs_seen = 0
        self._cost_stored = 0  # samples behind the cost last stored
        self._dropped_stored = 0
        self._dynamo_stored: dict[str, int] = {}
        self._backoff = 0.0
        self._warned: set[str] = set()

    # -- the loop ------------------------------------------------------------------------

    def open_first(self) -> None:
        """One attempt to open the ledger, on the thread that makes the meter.

        Opening imports SQLAlchemy and may create the schema with Alembic: pure Python that
        holds the GIL for a second or so. Done here, before the training loop starts, it
        costs the script's start-up once; done on this thread later, it would compete with
        the first training steps for the GIL. When it fails, `run` keeps retrying.
        """
        self._opened = self._try_open()

    def run(self) -> None:
        try:
            opened = self._opened if self._opened is not None else self._open_with_retry()
            if opened:
                self._write_until_closed()
            else:
                self._discard_until_closed()
        except Exception:
            log.exception("ledger.hook: the writer stopped; later steps are not recorded")
        finally:
            self._release_waiters()
            if self._ledger is not None:
                self._ledger.close()

    def _write_until_closed(self) -> None:
        period = self.meter.flush_interval / 2
        while True:
            closing = self.closing.is_set()
            self._cycle(force=closing)
            if closing and self._idle():
                return
            if closing and time.monotonic() > self.deadline:
                unwritten = len(self._rows) + sum(type(i) is tuple for i in self._pending)
                unwritten += len(self.meter._queue)
                log.warning(
                    "ledger.hook: gave up on %d steps of run %r: the ledger stayed unwritable",
                    unwritten,
                    self.meter.run,
                )
                return
            self.wake.wait(self._backoff or period)
            self.wake.clear()

    def _idle(self) -> bool:
        return not (self.meter._queue or self._pending or self._rows or self._fates)

    def _cycle(self, *, force: bool) -> None:
        while True:
            self._take()
            flushing = force or any(type(i) is Control and i.done for i in self._pending)
            self._resolve(force=flushing)
            dropped = self.meter._dropped + self.lost != self._dropped_stored
            if not (self._rows or self._metrics or self._fates or self._dones or dropped):
                return
            if not self._send(closing=force):
                return
            if not self.meter._queue and not self._pending:
                return

    def _take(self) -> None:
        queue = self.meter._queue
        room = BATCH_MAX - len(self._pending) - len(self._rows)
        while room > 0:
            try:
                self._pending.append(queue.popleft())
            except IndexError:
                return
            room -= 1

    # -- turning queued items into rows ------------------------------------------------

    def _resolve(self, *, force: bool) -> None:
        pending = self._pending
        wall, anchor = time.time(), time.perf_counter_ns()
        done = 0
        while pending:
            item = pending[0]
            if type(item) is tuple:
                end_event = item[7]
                if end_event is not None and not force and not end_event.query():
                    return  # the GPU has not got there yet; later steps are behind it
                self._rows.append(self._row(item, self._rank_now(), wall, anchor, force))
            else:
                self._control(item)
            pending.popleft()
            done += 1
            if done % SLICE == 0:
                time.sleep(0)  # hand the GIL to the training thread if it is waiting

    def _row(
        self, item: tuple[Any, ...], rank: int, wall: float, anchor: int, force: bool
    ) -> dict[str, Any]:
        step, t0, t1, tokens, loss, scalars, start_event, end_event, memory = item
        host_s = (t1 - t0) / 1e9
        gpu_s = None
        if end_event is not None:
            if force:
                end_event.synchronize()
            gpu_s = start_event.elapsed_time(end_event) / 1000.0
            events = self.meter._events
            assert events is not None  # CUDA events come only from the meter's pool
            events.give(start_event, end_event)
        number = self._resolver.number
        tokens = number(tokens, end_event)
        row: dict[str, Any] = {
            "step": step,
            "rank": rank,
            "wall_time": wall - (anchor - t1) / 1e9,
            "step_time_s": host_s,
            "gpu_time_s": gpu_s,
            "tokens": tokens,
            "throughput": tokens / host_s if tokens and host_s > 0 else None,
            "loss": number(loss, end_event),
        }
        if memory is not None:
            allocated, peak, reserved = memory
            row["memory_allocated_mib"] = allocated
            row["memory_reserved_mib"] = reserved
            row["memory_max_allocated_mib"] = peak
        if scalars:
            for name, value in scalars.items():
                if name not in row:
                    row[name] = number(value, end_event)
        return row

    def _control(self, item: Control) -> None:
        if item.kind == "fate" and item.fate is not None:
            self._fates.append(item.fate)
        elif item.kind == "log" and item.scalars:
            rank = self._rank_now()
            for name, value in item.scalars.items():
                number = self._resolver.number(value)
                if number is not None:
                    self._metrics.append((rank, int(item.step or 0), name, number))
        if item.done is not None:
            self._dones.append(item.done)

    def _rank_now(self) -> int:
        # Decided at the first step or log written, not at construction: a script may
        # build its meter before torch.distributed.init_process_group.
        if self._rank is None:
            explicit = self.meter._rank
            self._rank = explicit if explicit is not None else torch_side.detect_rank()
        return self._rank

    # -- writing -------------------------------------------------------------------------

    def _send(self, *, closing: bool) -> bool:
        """Write what is resolved in one transaction; False when it must be retried later."""
        assert self._ledger is not None and self._run_id is not None
        dropped = self.meter._dropped + self.lost - self._dropped_stored
        cost = self._cost_due(closing or any(f.ended for f in self._fates))
        metrics = self._metrics + self._dynamo_metrics()
        try:
            self._ledger.write_meter_batch(
                self._run_id,
                self._rows,
                metrics=metrics,
                dropped=dropped,
                cost_us=cost,
                fates=self._fates,
            )
        except Exception as exc:
            if _transient(exc):
                self._backoff = min(max(0.05, self._backoff * 2), MAX_BACKOFF_S)
                self._warn_once("retry", "ledger.hook: writing steps failed (%s); retrying", exc)
                return False
            self._warn_once(
                "refused", "ledger.hook: the ledger refused %d steps (%s)", len(self._rows), exc
            )
            self.lost += len(self._rows)
        else:
            self.rows_written += len(self._rows)
            self._dropped_stored += dropped
            if cost is not None:
                self._cost_stored = self._costs_seen
            self._note_dynamo(metrics)
        self._backoff = 0.0
        self._rows, self._metrics, self._fates = [], [], []
        for done in self._dones:
            done.set()
        self._dones = []
        return True

    def _cost_due(self, ending: bool) -> float | None:
        """The median caller-side cost in µs over the whole run, when this rank is ending.

        Stored only then: the run keeps the largest value any rank stored, so an early
        figure from a handful of cold first steps must not get there first.
        """
        samples = self.meter._costs
        while samples:
            self._costs[samples.popleft() // 10] += 1
            self._costs_seen += 1
        if not ending or self._costs_seen == self._cost_stored:
            return None
        half, total = self._costs_seen / 2, 0
        for bucket in sorted(self._costs):
            total += self._costs[bucket]
            if total >= half:
                return round((bucket * 10 + 5) / 1000, 3)
        return None

    def _dynamo_metrics(self) -> list[tuple[int, int, str, Any]]:
        """Dynamo's counters on the newest step of the batch, when they changed."""
        if not self._rows:
            return []
        counters = torch_side.dynamo_counters()
        if not counters:
            return []
        newest = self._rows[-1]
        return [
            (newest["rank"], newest["step"], name, value)
            for name, value in counters.items()
            if self._dynamo_stored.get(name) != value
        ]

    def _note_dynamo(self, metrics: list[tuple[int, int, str, Any]]) -> None:
        for _, _, name, value in metrics:
            if name.startswith("dynamo_"):
                self._dynamo_stored[name] = value

    # -- opening, and what to do when it cannot ------------------------------------------

    def _open_with_retry(self) -> bool:
        backoff = 0.05
        while True:
            opened = self._try_open()
            if opened is not None:
                return opened
            if self.closing.is_set() and time.monotonic() > self.deadline:
                return False
            self.wake.wait(backoff)
            self.wake.clear()
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _try_open(self) -> bool | None:
        """Open the ledger and start the run: True done, False hopeless, None try again."""
        from ledger.store import Ledger

        meter = self.meter
        try:
            self._ledger = Ledger.open(meter.db, create=True, investigation=meter.investigation)
            started = self._ledger.start_metered_run(
                meter.run,
                host=socket.gethostname(),
                command=" ".join(sys.argv) or None,
                launched_at=meter.created_at,
            )
            self._run_id = started.id
            if started.earlier_steps:
                log.warning(
                    "ledger.hook: run %r already holds steps of an earlier launch; a step "
                    "number recorded before keeps its first row (name each launch anew)",
                    meter.run,
                )
            return True
        except Exception as exc:
            if self._ledger is not None:
                self._ledger.close()
                self._ledger = None
            if not _transient(exc) and not isinstance(exc, StorageError):
                log.warning(
                    "ledger.hook: cannot record run %r (%s); training goes on unrecorded",
                    meter.run,
                    exc,
                )
                return False
            self._warn_once("open", "ledger.hook: cannot open the ledger (%s); retrying", exc)
            return None

    def _discard_until_closed(self) -> None:
        """The ledger cannot be used at all: keep the queue empty and the waiters answered."""
        while True:
            while self.meter._queue:
                item = self.meter._queue.popleft()
                if type(item) is tuple:
                    self.lost += 1
                elif item.done is not None:
                    item.done.set()
            if self.closing.is_set():
                return
            self.wake.wait(self.meter.flush_interval)
            self.wake.clear()

    def _release_waiters(self) -> None:
        for done in self._dones:
            done.set()
        for item in list(self._pending) + list(self.meter._queue):
            if type(item) is Control and item.done is not None:
                item.done.set()

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)


def _transient(exc: BaseException) -> bool:
    """Errors worth retrying: a locked SQLite file, a PostgreSQL server gone for a while."""
    from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

    cause = exc.__cause__ if isinstance(exc, LedgerError) and exc.__cause__ else exc
    if isinstance(cause, OperationalError | InterfaceError):
        return True
    return isinstance(cause, DBAPIError) and bool(cause.connection_invalidated)
