"""The hook's writer process: `python -m ledger.hook.writer`, one per StepMeter, started by
ledger.hook.link with the trainer's interpreter, fed resolved steps through a pipe.

It owns everything slow: opening the ledger (creating it when this rank is the first),
writing batches, each in one transaction, at least every `flush_interval / 2`, the
run's configuration once, NVML samples every `gpu_every` seconds. When the database is
locked, full or unreachable it retries with backoff, buffering at most `max_pending`
steps (more are dropped and counted). It ends when the trainer says "close", or when the
pipe closes without one: the trainer died (kill -9, a segfault) and the run's fate
becomes `killed` at once. Either way it gives up `close_timeout` seconds later, saying
how many steps it could not store.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections import Counter, deque
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ledger.errors import LedgerError, StorageError
from ledger.hook import gpu, protocol, runinfo, wire
from ledger.hook.protocol import (
    Close,
    Closed,
    Config,
    Flush,
    Flushed,
    Hello,
    Log,
    Meta,
    Say,
    SetFate,
    Stats,
    Step,
)
from ledger.hook.rows import Rows
from ledger.model.records import FateChange
from ledger.model.terms import Fate

if TYPE_CHECKING:
    from ledger.store import Store

log = logging.getLogger("ledger.hook")

BATCH_MAX = 10_000  # rows per transaction
MAX_BACKOFF_S = 5.0
BUSY_TIMEOUT_S = 5.0  # a SQLite lock held by another process: wait this long, then retry
CONNECT_TIMEOUT_S = 3.0  # a PostgreSQL server that does not answer
GRACE_S = 2.0  # past the deadline, the process ends even if a call never returns
COST_TRIM = 0.01  # the slowest share of the sampled caller costs left out of the figure
KILLED_REASON = "the training process ended without closing its meter (SIGKILL or a crash)"


class Writer:
    """Turns what the pipe brings into transactions; `run()` returns when done."""

    def __init__(self, hello: Hello, replies: int) -> None:
        self.hello = hello
        self.run_name = str(hello.run)
        self.flush_interval = float(hello.flush_interval)
        self.close_timeout = float(hello.close_timeout)
        self.max_pending = int(hello.max_pending)
        self.gpu_every = float(hello.gpu_every or 0)
        self.rows = Rows(self.flush_interval / 4)
        self.wake = threading.Event()
        self.closing = False
        self.deadline = float("inf")
        self.inbox: deque[Any] = deque()
        self.rows_written = 0
        self.lost = 0  # steps not stored: buffer overflow, refused, or given up on
        self.bad_values = 0  # as the store counted them
        self._failures = 0  # values the trainer could not read as numbers
        self.replies_lost = 0  # replies the trainer was gone for
        self._next_write = 0.0
        self.trainer_dropped = 0  # as the trainer last said
        self.overflow = 0
        self._replies = replies
        self._reply_lock = threading.Lock()
        self._ledger: Store | None = None
        self._run_id: int | None = None
        self._rows: list[dict[str, Any]] = []
        self._metrics: list[tuple[int, int, str, Any]] = []
        self._fates: list[FateChange] = []
        self._tokens: list[int] = []
        self._costs: Counter[int] = Counter()
        self._costs_seen = self._cost_stored = 0
        self._dropped_stored = 0
        self._dynamo: dict[str, int] | None = None
        self._dynamo_stored: dict[str, int] = {}
        self._config = runinfo.process_config(list(hello.argv), str(hello.cwd), git=False)
        # git runs two subprocesses: asked aside, so the ledger opens (and the first steps
        # are written) without waiting for them.
        self._git: dict[str, str] = {}
        self._git_asked = threading.Thread(target=self._ask_git, daemon=True)
        self._git_asked.start()
        self._torch_config: dict[str, str] | None = None
        self._config_written = False
        self._device: int | None = None
        self._rank: int | None = None
        self._last_step: int | None = None
        self._gpus: list[dict[str, Any]] = []
        self._sampler: gpu.Sampler | None = None
        self._sample_at = 0.0
        self._backoff = 0.0
        self._warned: set[str] = set()

    def _ask_git(self) -> None:
        self._git = runinfo.git_state(str(self.hello.cwd))

    # -- the pipe's side (a thread of its own) -------------------------------------------

    def take(self, reader: wire.Reader) -> None:
        """Read frames until the trainer closes the pipe; keep steps within max_pending."""
        try:
            while True:
                frame = reader.read()
                if frame is None:
                    break
                for item in frame:
                    self._arrived(item)
                self.wake.set()
        except Exception as exc:  # a frame that does not decode: treat as the end
            self.warn("pipe", "ledger.hook: the trainer's pipe broke (%s)", exc)
        if not self.closing:
            self._keep(self.rows.release())
            self.inbox.append(SetFate(Fate.KILLED, KILLED_REASON, True))
            self._close_now()
        self.wake.set()

    def _arrived(self, item: Any) -> None:
        message = protocol.unpack(item)
        if type(message) is Step:
            self._keep(self.rows.step(message))
        elif type(message) is Meta:
            self.trainer_dropped = message.dropped
            for cost in message.costs:
                self._costs[cost // 10] += 1
                self._costs_seen += 1
            if message.dynamo:
                self._dynamo = message.dynamo
            if message.device is not None:
                self._device = message.device
            self._failures = message.failures
            self._keep(self.rows.meta(message))
        elif type(message) is Config:
            self._torch_config = message.values
        elif type(message) is Close:
            self._keep(self.rows.release())
            self._close_now()
        elif type(message) is SetFate or type(message) is Flush:
            self._keep(self.rows.release())  # no next step comes before it is applied
            self.inbox.append(message)
        elif type(message) is Log:
            self.inbox.append(message)
        else:
            raise ValueError(f"the writer does not take {type(message).__name__}")

    def _keep(self, row: dict[str, Any] | None) -> None:
        """A row for the next batch, within max_pending (beyond it: lost, counted)."""
        if row is None:
            return
        if len(self.inbox) >= self.max_pending:
            self.overflow += 1
            self.lost += 1
        else:
            self.inbox.append(row)

    def _close_now(self) -> None:
        if not self.closing:
            self.deadline = time.monotonic() + self.close_timeout
            self.closing = True
            threading.Thread(target=self._watchdog, daemon=True).start()

    def _watchdog(self) -> None:
        """Past the deadline (and a grace), end even if a database call never returns."""
        time.sleep(max(0.0, self.deadline - time.monotonic()) + GRACE_S)
        unwritten = len(self._rows) + sum(type(i) is dict for i in list(self.inbox))
        self.warn(
            "gave-up",
            "ledger.hook: gave up on %d steps of run %r: the ledger stayed unwritable",
            unwritten,
            self.run_name,
        )
        self.lost += unwritten
        self.reply(Closed(self.rows_written, self.lost, self.values_lost()))
        os._exit(0)

    # -- the main thread -----------------------------------------------------------------

    def run(self) -> None:
        try:
            if self._open_with_retry():
                self._write_until_closed()
            else:
                self._discard_until_closed()
        except Exception as exc:
            self.warn("stopped", "ledger.hook: the writer stopped (%r); later steps are lost", exc)
            self.lost += len(self._rows) + sum(type(i) is dict for i in self.inbox)
        finally:
            if self._sampler is not None:
                self._sampler.stop()
            self.reply(Closed(self.rows_written, self.lost, self.values_lost()))
            if self._ledger is not None:
                self._ledger.close()

    def _write_until_closed(self) -> None:
        period = self.flush_interval / 2
        while True:
            closing = self.closing
            self._cycle(force=closing)
            if closing and not self._busy():
                return
            if closing and time.monotonic() > self.deadline:
                unwritten = len(self._rows) + sum(type(i) is dict for i in self.inbox)
                self.lost += unwritten
                self.warn(
                    "gave-up",
                    "ledger.hook: gave up on %d steps of run %r: the ledger stayed unwritable",
                    unwritten,
                    self.run_name,
                )
                return
            wait = max(0.0, self._next_write - time.monotonic()) if self._rows else period
            self.wake.wait(self._backoff or (0.05 if closing else min(wait, period) or period))
            self.wake.clear()

    def _busy(self) -> bool:
        return bool(self.inbox or self._rows or self._fates or self._metrics or self._tokens)

    def _cycle(self, *, force: bool) -> None:
        while True:
            flushing = self._take() or force
            self._sample_gpu()
            due = self._rows or self._metrics or self._fates or self._tokens or self._gpus
            dropped = self.trainer_dropped + self.overflow != self._dropped_stored
            if not (due or dropped or (force and self._cost_due(True) is not None)):
                return
            now = time.monotonic()
            if not flushing and len(self._rows) < BATCH_MAX and now < self._next_write:
                return
            self._next_write = now + self.flush_interval / 2
            if not self._send(closing=force):
                return
            if not self.inbox:
                return

    def _take(self) -> bool:
        """Move items from the inbox into the batch; True when one asks for a write now."""
        inbox = self.inbox
        urgent = False
        while inbox and len(self._rows) < BATCH_MAX:
            item = inbox.popleft()
            if type(item) is dict:
                self._rows.append(item)
                self._rank = item["rank"] if self._rank is None else self._rank
                self._last_step = item["step"]
            elif type(item) is SetFate:
                self._fates.append(FateChange(item.fate, item.reason, ended=item.ended))
                urgent = True
            elif type(item) is Log:
                rank = self.rows.rank
                self._rank = rank if self._rank is None else self._rank
                for name, value in item.values.items():
                    if value is not None:
                        self._metrics.append((rank, item.step, name, value))
            elif type(item) is Flush:
                self._tokens.append(item.token)
                urgent = True
        return urgent

    def _send(self, *, closing: bool) -> bool:
        """Write the batch in one transaction; False when it must be retried later."""
        assert self._ledger is not None and self._run_id is not None
        dropped = self.trainer_dropped + self.overflow - self._dropped_stored
        cost = self._cost_due(closing or any(f.ended for f in self._fates))
        metrics = self._metrics + self._dynamo_metrics()
        config = None
        if not self._config_written:
            self._git_asked.join(2 * runinfo.GIT_TIMEOUT_S)
            config = dict(self._config)
            config.update(self._git)
            config.update(self._torch_config or {})
        try:
            report = self._ledger.write_meter_batch(
                self._run_id,
                self._rows,
                metrics=metrics,
                dropped=dropped,
                cost_us=cost,
                fates=self._fates,
                config=config,
                gpus=self._gpus,
            )
        except Exception as exc:
            if _transient(exc):
                self._backoff = min(max(0.05, self._backoff * 2), MAX_BACKOFF_S)
                self.warn("retry", "ledger.hook: writing steps failed (%s); retrying", exc)
                return False
            self.warn(
                "refused", "ledger.hook: the ledger refused %d steps (%s)", len(self._rows), exc
            )
            self.lost += len(self._rows)
        else:
            self.rows_written += report.steps
            self.lost += report.bad_rows
            self.bad_values += report.bad_values
            if report.problems:
                self.warn(
                    "values",
                    "ledger.hook: some values of run %r could not be stored as given (%s); "
                    "each is stored as missing or as a float and counted, the rest is kept",
                    self.run_name,
                    "; ".join(report.problems[:3]),
                )
            self._dropped_stored += dropped
            if cost is not None:
                self._cost_stored = self._costs_seen
            if config is not None:
                self._config_written = True
            self._note_dynamo(metrics)
        self._backoff = 0.0
        self._rows, self._metrics, self._fates, self._gpus = [], [], [], []
        for token in self._tokens:
            self.reply(Flushed(self.rows_written, self.lost, self.values_lost(), token))
        if not self._tokens:
            self.reply(Stats(self.rows_written, self.lost, self.values_lost()))
        self._tokens = []
        return True

    def _cost_due(self, ending: bool) -> float | None:
        """What the training thread paid per step, in µs, when this rank is ending: the
        mean over the sampled steps (event and memory steps among them as often as they
        come), leaving out the slowest 1 % (a GC pause or a thread switch inside the timed
        code is not the meter's).

        Stored only then: the run keeps the largest value any rank stored, so an early
        figure from a handful of cold first steps must not get there first.
        """
        if not ending or self._costs_seen == self._cost_stored:
            return None
        keep = max(1, int(self._costs_seen * (1 - COST_TRIM)))
        total = counted = 0
        for bucket in sorted(self._costs):
            take = min(self._costs[bucket], keep - counted)
            total += take * (bucket * 10 + 5)
            counted += take
            if counted >= keep:
                break
        return round(total / counted / 1000, 3) if counted else None

    def _dynamo_metrics(self) -> list[tuple[int, int, str, Any]]:
        """Dynamo's counters on the newest step of the batch, when they changed."""
        counters = self._dynamo
        if not self._rows or not counters:
            return []
        # The newest step that can be a key (a step number past 64 bits is not stored).
        keyed = [r for r in self._rows[-16:] if isinstance(r["step"], int) and _int64(r["step"])]
        if not keyed:
            return []
        newest = keyed[-1]
        return [
            (newest["rank"], newest["step"], name, value)
            for name, value in counters.items()
            if self._dynamo_stored.get(name) != value
        ]

    def _note_dynamo(self, metrics: list[tuple[int, int, str, Any]]) -> None:
        for _, _, name, value in metrics:
            if name.startswith("dynamo_"):
                self._dynamo_stored[name] = value

    def _sample_gpu(self) -> None:
        if not self.gpu_every or self._run_id is None:
            return
        now = time.monotonic()
        if now < self._sample_at:
            return
        self._sample_at = now + self.gpu_every
        if self._sampler is None:
            self._sampler = gpu.Sampler()
            why = self._sampler.start()
            if why is not None:
                self.gpu_every = 0.0
                text = f"ledger.hook: no GPU samples for run {self.run_name!r}: {why}"
                self.reply(Say(self._device is not None, text))
                return
        device = self._device
        if device is None:
            local = os.environ.get("LOCAL_RANK", "")
            device = int(local) if local.isdigit() else 0
        rank = self._rank if self._rank is not None else _env_rank()
        row = self._sampler.sample(device, rank=rank, step=self._last_step)
        if row is not None:
            self._gpus.append(row)
        if self._sampler.failures and "nvml-fields" not in self._warned:
            self._warned.add("nvml-fields")
            text = (
                f"ledger.hook: NVML refused {self._sampler.failures} reading(s) of run "
                f"{self.run_name!r}'s GPU; those fields are NULL in gpu_sample"
            )
            self.reply(Say(False, text))

    # -- opening, and what to do when it cannot ------------------------------------------

    def _open_with_retry(self) -> bool:
        backoff = 0.05
        while True:
            opened = self._try_open()
            if opened is not None:
                return opened
            if self.closing and time.monotonic() > self.deadline:
                # The steps still here are counted as they are discarded.
                self.warn(
                    "gave-up",
                    "ledger.hook: gave up on run %r: the ledger could not be opened",
                    self.run_name,
                )
                return False
            self.wake.wait(backoff)
            self.wake.clear()
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _try_open(self) -> bool | None:
        """Open the ledger and start the run: True done, False hopeless, None try again."""
        from ledger.store import Store

        hello = self.hello
        try:
            self._ledger = Store.open(
                hello.db,
                create=True,
                investigation=hello.investigation,
                busy_timeout=BUSY_TIMEOUT_S,
                connect_timeout=CONNECT_TIMEOUT_S,
            )
            started = self._ledger.start_metered_run(
                self.run_name,
                host=self._config["host"],
                command=self._config["command"] or None,
                launched_at=datetime.fromtimestamp(float(hello.created_at), UTC),
            )
            self._run_id = started.id
            if started.earlier_steps:
                self.warn(
                    "earlier",
                    "ledger.hook: run %r was launched before: this is a new launch of it, "
                    "the earlier launch's steps stay apart (RUN@N names an earlier one)",
                    self.run_name,
                )
            return True
        except Exception as exc:
            if self._ledger is not None:
                self._ledger.close()
                self._ledger = None
            if not _transient(exc) and not isinstance(exc, StorageError):
                self.warn(
                    "hopeless",
                    "ledger.hook: cannot record run %r (%s); training goes on unrecorded",
                    self.run_name,
                    exc,
                )
                return False
            self.warn("open", "ledger.hook: cannot open the ledger (%s); retrying", exc)
            return None

    def _discard_until_closed(self) -> None:
        """The ledger cannot be used at all: keep the inbox empty and the waiters answered."""
        while True:
            while self.inbox:
                item = self.inbox.popleft()
                if type(item) is dict:
                    self.lost += 1
                elif type(item) is Flush:
                    counts = (self.rows_written, self.lost, self.values_lost())
                    self.reply(Flushed(*counts, item.token))
            if self.closing:
                return
            self.wake.wait(self.flush_interval)
            self.wake.clear()

    # -- talking back ----------------------------------------------------------------------

    def values_lost(self) -> int:
        return self.bad_values + self._failures

    def reply(self, message: protocol.ToTrainer) -> None:
        with self._reply_lock:
            try:
                wire.send(self._replies, [protocol.pack(message)])
            except OSError as exc:  # the trainer is gone: nobody to tell, counted
                self.replies_lost += 1
                if self.replies_lost == 1:
                    log.debug("ledger.hook: the trainer is gone; replies dropped (%r)", exc)

    def warn(self, key: str, message: str, *args: Any) -> None:
        """Said once per kind, in the trainer's log (its `ledger.hook` logger)."""
        if key not in self._warned:
            self._warned.add(key)
            self.reply(Say(True, message % args))


def _int64(value: int) -> bool:
    return -(1 << 63) <= value < (1 << 63)


def _env_rank() -> int:
    for name in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def _transient(exc: BaseException) -> bool:
    """Errors worth retrying: a locked or full SQLite file, a PostgreSQL server away.

    sqlite3's own OperationalError too: the pragmas run outside a transaction go straight
    to the driver (the switch of a new file to WAL among them), so its "database is locked"
    comes unwrapped when another process holds the file past the busy timeout.
    """
    import sqlite3

    from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

    cause = exc.__cause__ if isinstance(exc, LedgerError) and exc.__cause__ else exc
    if isinstance(cause, OperationalError | InterfaceError | sqlite3.OperationalError):
        return True
    return isinstance(cause, DBAPIError) and bool(cause.connection_invalidated)


def main() -> int:
    # Our own session already keeps Ctrl-C away; a SIGTERM sent to us directly means
    # "finish now": write what is here, within a short deadline.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.dup(1)
    os.dup2(2, 1)  # a stray print must not land in the replies
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.WARNING)
    reader = wire.Reader(0)
    first = reader.read()
    hello = protocol.unpack(first[0]) if first else None
    if type(hello) is not Hello:
        return 2
    writer = Writer(hello, replies)

    def on_term(signum: int, frame: Any) -> None:
        writer.close_timeout = min(writer.close_timeout, GRACE_S)
        writer._close_now()
        writer.wake.set()

    signal.signal(signal.SIGTERM, on_term)
    threading.Thread(target=writer.take, args=(reader,), daemon=True).start()
    writer.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
