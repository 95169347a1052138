"""StepMeter: per-step metrics from inside a training loop, at a cost the step cannot notice.

    meter = StepMeter(run="eager_dynamiccopy")
    for batch in loader:
        with meter.step(tokens=batch["input_ids"].numel()) as s:
            loss = train_step(batch)
            s.set(loss=loss)             # a tensor: read later, off the training thread

The training thread's share of a step is a clock read on each side, on CUDA one event
recorded on the current stream at each boundary of the steps it times (never a
synchronize) and a memory read on the steps it samples, and one StepRecord appended to a
bounded deque (ledger.hook.feed). A forwarder thread (ledger.hook.link) turns the records
into numbers without waiting for the GPU and pipes them to a writer process
(ledger.hook.writer), which writes the ledger. See docs/hook.md for what is guaranteed on
exit, exception, SIGTERM and kill -9.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ledger.config import locate
from ledger.hook import exits, link, torch_side
from ledger.hook.feed import Feed
from ledger.hook.protocol import Log, SetFate, StepRecord, fate_of
from ledger.model.terms import Fate

_now = time.perf_counter_ns
_record = tuple.__new__  # a StepRecord without its Python-level __new__: half the cost
log = logging.getLogger("ledger.hook")

DEFAULT_MAX_PENDING = 65_536
DEFAULT_FLUSH_INTERVAL = 1.0
DEFAULT_CLOSE_TIMEOUT = 60.0
DEFAULT_MEMORY_EVERY = 100
DEFAULT_MEMORY_INTERVAL_S = 0.1
DEFAULT_GPU_EVERY = 5.0
COST_SAMPLE_MASK = 15  # the meter times its own share of one step in 16
CLOSE_MARGIN_S = 3.0  # past close_timeout: the writer's own grace (2 s), and the pipe's
FIRST_WINDOW = 16  # steps before the automatic event interval is first decided
ADAPT_EVERY = 64  # steps between two reconsiderations of it
EVENT_BUDGET = 0.002  # an event pair may cost the host this share of a step, at most
MAX_EVENT_EVERY = 64
FIRST_EVENT_EVERY = 8  # until the host cost of an event is known

__all__ = ["MeteredStep", "StepMeter", "fate_of"]


class StepMeter:
    """Records each training step of one rank into a ledger run.

    run: the run's name (default: $LEDGER_RUN, else the script's name). db: a path or
    SQLAlchemy URL (default: what the CLI would find). rank: default torch.distributed's,
    else $RANK / $LOCAL_RANK, else 0. flush_interval: a recorded step is in the ledger
    within this many seconds (while the database accepts writes). max_pending: steps held
    while the writer is behind; beyond it steps are dropped and counted, never waited for.
    cuda: time steps with CUDA events (default: when torch.cuda is available).
    memory_every: on CUDA, sample the memory counters every this many steps, and also
    whenever memory_interval_s seconds have passed since the last sample (0: by step only).
    event_every: on CUDA, time every this many steps with an event pair (gpu_time_s; NULL
    between); default (None): every step where a pair costs the host at most 0.2 % of a
    step, else as often as that allows. gpu_every: seconds between two NVML samples of this
    rank's GPU, taken by the writer process (0: never).
    """

    def __init__(
        self,
        run: str | None = None,
        *,
        db: str | os.PathLike[str] | None = None,
        investigation: str | None = None,
        rank: int | None = None,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        max_pending: int = DEFAULT_MAX_PENDING,
        cuda: bool | None = None,
        memory_every: int = DEFAULT_MEMORY_EVERY,
        memory_interval_s: float = DEFAULT_MEMORY_INTERVAL_S,
        handle_sigterm: bool = True,
        close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
        gpu_every: float = DEFAULT_GPU_EVERY,
        event_every: int | None = None,
    ) -> None:
        if flush_interval <= 0 or max_pending < 1 or memory_every < 1:
            raise ValueError("flush_interval, max_pending and memory_every must be positive")
        if event_every is not None and event_every < 1:
            raise ValueError("event_every must be positive (or None: automatic)")
        if gpu_every < 0 or memory_interval_s < 0:
            raise ValueError("gpu_every and memory_interval_s must not be negative")
        self.created_at = datetime.now(UTC)
        self.run = run or os.environ.get("LEDGER_RUN") or _script_name()
        self.db = locate(db).url  # resolved now: the working directory may change later
        self.investigation = investigation or os.environ.get("LEDGER_INVESTIGATION") or None
        self.flush_interval = float(flush_interval)
        self.close_timeout = float(close_timeout)
        self.gpu_every = float(gpu_every)
        self._rank = rank
        self._torch = torch_side.loaded_torch()
        if cuda and self._torch is None:  # asked for CUDA timing before importing torch
            import torch

            self._torch = torch
        use_cuda = torch_side.cuda_in_use() if cuda is None else cuda
        self._events = torch_side.EventPool(self._torch) if use_cuda else None
        self._memory_every = memory_every
        self._memory_gap_ns = int(memory_interval_s * 1e9) if memory_interval_s else 1 << 62
        self._memory_at = 0  # perf_counter_ns after which the next step samples memory
        self._auto_events = event_every is None
        self._event_every = FIRST_EVENT_EVERY if event_every is None else event_every
        self._window_at = 0  # perf_counter_ns at the start of the adaptation window
        self._window_from = 0  # the step count there
        self._adapt_at = 0 if self._auto_events and self._events is not None else 1 << 62
        self._feed = Feed(self._torch, self._events, rank)
        self._queue = self._feed.queue
        self._costs = self._feed.costs
        self._cap = max_pending
        self._next_step = 0
        self._count = -1
        self._failed = False  # an exception left the last step's `with` block
        self._closed = False
        # close() may be re-entered on one thread: a SIGTERM handler interrupting atexit's.
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._current = MeteredStep(self)
        self._wake_at = max(1, min(max_pending // 2, 4096))
        # The writer process starts here, and imports and opens the ledger while the loop
        # runs: its start-up is paid beside the first steps, not at close().
        self._link = link.Link(
            self._feed,
            link.hello(
                db=self.db,
                run=self.run,
                investigation=self.investigation,
                created_at=self.created_at.timestamp(),
                flush_interval=self.flush_interval,
                close_timeout=self.close_timeout,
                max_pending=max_pending,
                gpu_every=self.gpu_every,
            ),
        )
        self._wake = self._link.wake
        self._exits = exits.install(self, sigterm=handle_sigterm)

    # -- the training thread's side ------------------------------------------------------

    def step(
        self, step: int | None = None, *, tokens: Any = None, loss: Any = None, **scalars: Any
    ) -> MeteredStep:
        """A context manager around one training step; `step` defaults to the next number.

        Values may be numbers or tensors (read later, off this thread, without waiting for
        the GPU).
        """
        self._count = count = self._count + 1
        # The meter times its own share of one step in 16, a different one in each block
        # of 16, so the timed steps fall on event and memory steps as often as the rest do.
        called = 0 if (count ^ (count >> 4)) & COST_SAMPLE_MASK else _now()
        if count >= self._adapt_at:
            self._adapt_events(count)
        if step is None:
            step = self._next_step
        self._next_step = step + 1
        # One context object per meter, refilled each step: a step allocates nothing but
        # its record. Steps of one meter do not nest, and it belongs to one thread.
        current = self._current
        current.step = step
        current.tokens = tokens
        current.loss = loss
        current.scalars = scalars or None
        current._called = called
        current._timed = count % self._event_every == 0
        return current

    def _adapt_events(self, count: int) -> None:
        """Time every step whose period an event pair cannot be seen in (EVENT_BUDGET):
        reconsidered after the first FIRST_WINDOW steps, then every ADAPT_EVERY."""
        now = _now()
        started, self._window_at = self._window_at, now
        steps, self._window_from = count - self._window_from, count
        self._adapt_at = count + (FIRST_WINDOW if not started else ADAPT_EVERY)
        events = self._events
        record = events.record_ns() if events is not None else None
        if not started or record is None or steps < 1:
            return
        period = (now - started) / steps
        every = math.ceil(2 * record / max(1.0, EVENT_BUDGET * period))
        self._event_every = max(1, min(MAX_EVENT_EVERY, every))

    def log(self, step: int, **scalars: Any) -> None:
        """Record named scalars for a step outside a `with meter.step()` (eval loss, lr…)."""
        if len(self._queue) < self._cap:  # bounded like steps; after close(), ignored
            self._queue.append(Log(step, scalars))

    # -- flushing and ending ---------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything recorded so far is in the ledger; False on timeout.

        On CUDA it waits (sleeping, not holding the GIL) until the GPU has reached the
        steps recorded so far."""
        if not self._link.is_alive():
            return False
        done = threading.Event()
        self._queue.append(self._feed.flush_request(done))
        self._wake.set()
        return done.wait(self.close_timeout if timeout is None else timeout)

    def close(self, fate: Fate | str | None = None, reason: str | None = None) -> None:
        """Write everything, mark this rank's end (fate finished unless a step failed last).

        Idempotent; also called at interpreter exit and on SIGTERM. When the writer does
        not finish within close_timeout, what it had not confirmed is in `dropped` at once.
        """
        if os.getpid() != self._pid:
            return  # a forked child (a DataLoader worker): the writer is the parent's
        with self._lock:
            first = not self._closed
            self._closed = True
        if first:
            self._cap = -1  # later steps are dropped, not queued for a writer that is gone
            if fate is None and not self._failed:
                fate = Fate.FINISHED
            if fate is not None:
                self._queue.append(SetFate(Fate(fate), reason, True))
            self._link.close()
        # A second close (SIGTERM arriving while atexit closes) waits for the first one's.
        # The writer gives up at close_timeout itself and says so, and ends GRACE_S later
        # even inside a database call that never returns; this is its margin.
        done = self._link.join(self.close_timeout + CLOSE_MARGIN_S)
        if first:
            self._exits.uninstall()
            if not done:
                log.warning(
                    "ledger.hook: the writer of run %r did not finish within %.0f s; "
                    "closing without it (%d steps not confirmed)",
                    self.run,
                    self.close_timeout,
                    self._link.abandoned,
                )

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def failed(self) -> bool:
        """An exception left the last step's `with` block (its fate is recorded)."""
        return self._failed

    @property
    def dropped(self) -> int:
        """Steps not recorded: dropped while the writer was behind, refused by the ledger,
        or unconfirmed when close() gave up."""
        link_ = self._link
        return self._feed.dropped + link_.unsent + link_.lost + link_.abandoned

    @property
    def bad_values(self) -> int:
        """Values stored as missing or as a float because their column could not hold them."""
        return self._link.bad_values

    @property
    def rows_written(self) -> int:
        return self._link.rows_written

    def __enter__(self) -> StepMeter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        fate = fate_of(exc_type, exc) if exc_type is not None and not self._failed else None
        if fate is None:
            self.close()
        else:
            self.close(fate.fate, fate.reason)

    def __repr__(self) -> str:
        return f"<StepMeter run={self.run!r} closed={self._closed}>"

    # -- what MeteredStep calls ------------------------------------------------------------

    def _left_with(self, exc_type: type[BaseException], exc: BaseException | None) -> None:
        """An exception left a step's `with` block: record the fate now and flush, because
        the process is probably about to die of it."""
        fate = fate_of(exc_type, exc)
        if fate is None:
            return
        self._failed = True
        self._queue.append(fate)
        self.flush()

    def _recovered(self) -> None:
        """A step succeeded after one failed: the script caught the exception and trains on."""
        self._failed = False
        self._queue.append(SetFate(Fate.RUNNING, None, False))

    def _memory(self) -> tuple[float, float, float] | None:
        return torch_side.cuda_memory_mib(self._torch)


class MeteredStep:
    """The current step's context manager, as `with meter.step() as s` names it.

    `s.set()` adds values known only inside the step; use it inside the `with` block only
    (the meter refills the same object for its next step).
    """

    __slots__ = (
        "_called",
        "_ev0",
        "_meter",
        "_t0",
        "_timed",
        "loss",
        "scalars",
        "step",
        "tokens",
    )

    def __init__(self, meter: StepMeter) -> None:
        self._meter = meter
        self.step = 0
        self.tokens: Any = None
        self.loss: Any = None
        self.scalars: dict[str, Any] | None = None
        self._called = self._t0 = 0
        self._ev0: Any = None
        self._timed = False

    def set(self, *, tokens: Any = None, loss: Any = None, **scalars: Any) -> None:
        """Give values found during the step (the loss it computed, its tokens, grad norm…)."""
        if tokens is not None:
            self.tokens = tokens
        if loss is not None:
            self.loss = loss
        if scalars:
            if self.scalars is None:
                self.scalars = scalars
            else:
                self.scalars.update(scalars)

    def __enter__(self) -> MeteredStep:
        events = self._meter._events
        self._ev0 = events.recorded() if events is not None and self._timed else None
        self._t0 = _now()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        t1 = _now()
        meter = self._meter
        events = meter._events
        end_event = memory = None
        if events is not None:
            if self._ev0 is not None:
                end_event = events.recorded()
            step = self.step
            if t1 >= meter._memory_at or step % meter._memory_every == 0:
                memory = meter._memory()
                meter._memory_at = t1 + meter._memory_gap_ns
        queue = meter._queue
        waiting = len(queue)
        if waiting < meter._cap:
            queue.append(
                _record(
                    StepRecord,
                    (
                        self.step,
                        self._t0,
                        t1,
                        self.tokens,
                        self.loss,
                        self.scalars,
                        self._ev0,
                        end_event,
                        memory,
                    ),
                )
            )
            if waiting == meter._wake_at:
                meter._wake.set()  # far behind: do not wait for the flush interval
        else:
            meter._feed.dropped += 1
        if self._called:
            meter._costs.append((self._t0 - self._called) + (_now() - t1))
        if exc_type is not None:
            meter._left_with(exc_type, exc)
        elif meter._failed:
            meter._recovered()


def _script_name() -> str:
    stem = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    return stem or "run"
