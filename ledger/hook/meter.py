"""StepMeter: per-step metrics from inside a training loop, at a cost the step cannot notice.

    meter = StepMeter(run="eager_dynamiccopy")
    for batch in loader:
        with meter.step(tokens=batch["input_ids"].numel()) as s:
            loss = train_step(batch)
            s.set(loss=loss)             # a tensor: read later, off the training thread

The training thread's share of a step is a clock read on each side, on CUDA one event
recorded on the current stream at each boundary (never a synchronize), and one tuple
appended to a bounded deque. A forwarder thread (ledger.hook.link) resolves the tuples
into numbers and pipes them to a writer process (ledger.hook.writer), which writes the
ledger. See docs/hook.md for what is guaranteed on exit, exception, SIGTERM and kill -9.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ledger.config import locate
from ledger.hook import exits, torch_side
from ledger.hook.link import Control, Link

_now = time.perf_counter_ns
log = logging.getLogger("ledger.hook")

DEFAULT_MAX_PENDING = 65_536
DEFAULT_FLUSH_INTERVAL = 1.0
DEFAULT_CLOSE_TIMEOUT = 60.0
DEFAULT_MEMORY_EVERY = 100
DEFAULT_GPU_EVERY = 5.0
DEFAULT_EVENT_EVERY = 8
COST_SAMPLE_MASK = 15
REASON_CHARS = 500


class StepMeter:
    """Records each training step of one rank into a ledger run.

    run: the run's name (default: $LEDGER_RUN, else the script's name). db: a path or
    SQLAlchemy URL (default: what the CLI would find). rank: default torch.distributed's,
    else $RANK / $LOCAL_RANK, else 0. flush_interval: a recorded step is in the ledger
    within this many seconds (while the database accepts writes). max_pending: steps held
    while the writer is behind; beyond it steps are dropped and counted, never waited for.
    cuda: time steps with CUDA events (default: when torch.cuda is available).
    memory_every: sample CUDA memory counters every this many steps. event_every: on CUDA,
    time every this many steps with an event pair (gpu_time_s; NULL between, default 8:
    an event record costs the host 7-10 µs on an H200 host). gpu_every: seconds
    between two NVML samples of this rank's GPU, taken by the writer process (0: never).
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
        handle_sigterm: bool = True,
        close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
        gpu_every: float = DEFAULT_GPU_EVERY,
        event_every: int = DEFAULT_EVENT_EVERY,
    ) -> None:
        if flush_interval <= 0 or max_pending < 1 or memory_every < 1 or event_every < 1:
            raise ValueError(
                "flush_interval, max_pending, memory_every and event_every must be positive"
            )
        if gpu_every < 0:
            raise ValueError("gpu_every must not be negative")
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
        self._event_every = event_every
        self._queue: deque[Any] = deque()
        self._cap = max_pending
        self._dropped = 0
        self._next_step = 0
        self._count = -1  # the first step is among those the meter times itself on
        self._costs: deque[int] = deque(maxlen=100_000)  # sampled caller-side ns per step
        self._failed = False  # an exception left the last step's `with` block
        self._closed = False
        # close() may be re-entered on one thread: a SIGTERM handler interrupting atexit's.
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._current = MeteredStep(self)
        self._wake_at = max(1, min(max_pending // 2, 4096))
        self._link = Link(self)
        self._wake = self._link.wake
        self._exits = exits.install(self, sigterm=handle_sigterm)

    # -- the training thread's side ------------------------------------------------------

    def step(
        self, step: int | None = None, *, tokens: Any = None, loss: Any = None, **scalars: Any
    ) -> MeteredStep:
        """A context manager around one training step; `step` defaults to the next number.

        Values may be numbers or tensors (read later on the writer thread, not here).
        """
        self._count = count = self._count + 1
        # The meter times its own share of every 16th step (two more clock reads).
        called = 0 if count & COST_SAMPLE_MASK else _now()
        if step is None:
            step = self._next_step
        self._next_step = step + 1
        # One context object per meter, refilled each step: a step allocates nothing but
        # its tuple. Steps of one meter do not nest, and it belongs to one thread.
        current = self._current
        current.step = step
        current.tokens = tokens
        current.loss = loss
        current.scalars = scalars or None
        current._called = called
        current._timed = count % self._event_every == 0
        return current

    def log(self, step: int, **scalars: Any) -> None:
        """Record named scalars for a step outside a `with meter.step()` (eval loss, lr…)."""
        if len(self._queue) < self._cap:  # bounded like steps; after close(), ignored
            self._queue.append(Control(("log", step, scalars)))

    # -- flushing and ending ---------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything recorded so far is in the ledger; False on timeout."""
        if not self._link.is_alive():
            return False
        done = threading.Event()
        self._queue.append(self._link.flush_token(done))
        self._wake.set()
        return done.wait(self.close_timeout if timeout is None else timeout)

    def close(self, fate: str | None = None, reason: str | None = None) -> None:
        """Write everything, mark this rank's end (fate finished unless a step failed last).

        Idempotent; also called at interpreter exit and on SIGTERM.
        """
        if os.getpid() != self._pid:
            return  # a forked child (a DataLoader worker): the writer is the parent's
        with self._lock:
            first = not self._closed
            self._closed = True
        if first:
            self._cap = -1  # later steps are dropped, not queued for a writer that is gone
            if fate is None and not self._failed:
                fate = "finished"
            if fate is not None:
                self._queue.append(Control(_fate(fate, reason, ended=True)))
            self._link.closing = True
            self._link.wake.set()
        # A second close (SIGTERM arriving while atexit closes) waits for the first one's.
        # The writer gives up at close_timeout itself and says so; this is its margin.
        done = self._link.join(self.close_timeout + 2.0)
        if first:
            self._exits.uninstall()
            if not done:
                log.warning(
                    "ledger.hook: the writer of run %r did not finish within %.0f s; "
                    "closing without it",
                    self.run,
                    self.close_timeout,
                )

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def dropped(self) -> int:
        """Steps not recorded: dropped while the writer was behind, refused by the ledger,
        or still unwritten when close() gave up."""
        return self._dropped + self._link.unsent + self._link.lost

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
            self.close(*fate)

    def __repr__(self) -> str:
        return f"<StepMeter run={self.run!r} closed={self._closed}>"

    # -- what exits.py and MeteredStep call ----------------------------------------------------

    def _left_with(self, exc_type: type[BaseException], exc: BaseException | None) -> None:
        """An exception left a step's `with` block: record the fate now and flush, because
        the process is probably about to die of it."""
        fate = fate_of(exc_type, exc)
        if fate is None:
            return
        self._failed = True
        self._queue.append(Control(_fate(*fate, ended=True)))
        self.flush()

    def _recovered(self) -> None:
        """A step succeeded after one failed: the script caught the exception and trains on."""
        self._failed = False
        self._queue.append(Control(_fate("running", None, ended=False)))

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
            if self.step % meter._memory_every == 0:
                memory = meter._memory()
        queue = meter._queue
        waiting = len(queue)
        if waiting < meter._cap:
            queue.append(
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
                )
            )
            if waiting == meter._wake_at:
                meter._wake.set()  # far behind: do not wait for the flush interval
        else:
            meter._dropped += 1
        if self._called:
            meter._costs.append((self._t0 - self._called) + (_now() - t1))
        if exc_type is not None:
            meter._left_with(exc_type, exc)
        elif meter._failed:
            meter._recovered()


def fate_of(exc_type: type[BaseException], exc: BaseException | None) -> tuple[str, str] | None:
    """(fate, reason) for an exception that ended a step, or None when it is not a failure."""
    if issubclass(exc_type, SystemExit) and getattr(exc, "code", None) in (None, 0):
        return None
    if issubclass(exc_type, GeneratorExit):
        return None
    name = exc_type.__name__
    message = str(exc).strip().splitlines()[0] if exc is not None and str(exc).strip() else ""
    reason = f"{name}: {message}" if message else name
    if name == "OutOfMemoryError":
        fate = "oom"
    elif issubclass(exc_type, KeyboardInterrupt):
        fate = "killed"
    else:
        fate = "crashed"
    return fate, reason[:REASON_CHARS]


def _fate(fate: str, reason: str | None, *, ended: bool) -> tuple[str, str, str | None, bool]:
    return ("fate", fate, reason, ended)


def _script_name() -> str:
    stem = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    return stem or "run"
