"""Ingesting logs: incremental, idempotent, resumable.

A log_file row keeps the byte offset reached, the sha256 of the bytes before it and the
reader's state there. Ingesting again places the cursor (ledger.store.cursor: a shorter
file was truncated, a different prefix means the file was replaced; both are read again
from the start, into a new launch, and only the rows read from that log are removed),
resumes the reader, then reads only what was appended. Steps go
in through the one step writer with ON CONFLICT DO NOTHING, so a re-read adds nothing
twice. Bytes after the last line or redraw boundary (a bar being redrawn right now) are
read for the run's fate but not stored until they are complete.

A long read commits as it goes (every COMMIT_EVERY_S or BATCH_ROWS rows, at a line
boundary, with the offset, hash and reader state of that point, exactly what a later ingest
resumes from), and holds no transaction while it parses: SQLite's write lock is taken for
each batch's write alone, so other writers wait for a batch, not the whole read of a 2 GB
log.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat as stat_
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.db.types import driver_time, utcnow
from ledger.errors import BadContentError, ConflictError, InputFileError, UsageError
from ledger.model import records
from ledger.model.records import StepWrite
from ledger.model.summary import IngestSummary
from ledger.model.terms import STEP_COLUMNS, Fate
from ledger.store import gate, launches
from ledger.store.config_rows import Keep
from ledger.store.config_rows import write_config as write_config
from ledger.store.cursor import Cursor
from ledger.store.cursor import PrefixCache as PrefixCache
from ledger.store.lookup import ensure_run, insert_if_missing
from ledger.store.runs import step_counts
from ledger.store.steps import StepWriter, forget_log_rows, insert_statement
from ledger.store.steps import latest_launch as latest
from ledger.store.units import house_spelling

if TYPE_CHECKING:
    from ledger.logs.reader import LogReader
    from ledger.model.logs import Found, LogSummary, Restart

BATCH_ROWS = 100_000
# An ingest commits what it read this often, so another writer (a `hypothesis add`, a
# deploy, a StepMeter) waits for SQLite's write lock at most about this long beside the
# ingest of a 2 GB log, instead of for the whole read.
COMMIT_EVERY_S = 1.0
STALL_AFTER_S = 300.0  # a log that has not grown for this long, while running, is stalled
# Step columns only the hook measures: a log never says them (revision 0005's wait_s).
HOOK_ONLY_COLUMNS = ("wait_s",)
# The values of a step row as the log reader makes them, after (rank, step).
READER_COLUMNS = tuple(c for c in STEP_COLUMNS if c not in HOOK_ONLY_COLUMNS)
EVENT_COLUMNS = (
    "run_id", "log_file_id", "line", "kind", "text", "rank", "step", "created_at", "launch",
)  # fmt: skip

_TRAIN_PREFIX = re.compile(r"^(?:train(?:ing)?)[_\-.]", re.I)
_LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".stdout", ".stderr")

Progress = Callable[[int, int], None]


def run_name_for(path: str | os.PathLike[str]) -> str:
    """train_eager_unpadded.log → eager_unpadded; trainer_state.json → its run folder."""
    p = Path(path)
    if p.name == "trainer_state.json":
        parent = p.parent
        if parent.name.startswith("checkpoint-") and parent.parent.name:
            parent = parent.parent
        return parent.name or "trainer_state"
    name = p.name
    changed = True
    while changed:
        changed = False
        for suffix in _LOG_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                changed = True
    stripped = _TRAIN_PREFIX.sub("", name)
    return stripped or name


def check_readable(file: Path) -> None:
    """Refuse what ingest cannot read as a file: missing, a folder, a FIFO or a device
    (reading those would never end, while holding the ledger's write lock)."""
    try:
        info = file.stat()
    except FileNotFoundError:
        raise InputFileError(f"{file}: no such file") from None
    except OSError as exc:
        raise InputFileError(f"cannot read {file}: {exc.strerror or exc}") from exc
    if stat_.S_ISDIR(info.st_mode):
        raise InputFileError(f"{file} is a directory, not a log file")
    if not stat_.S_ISREG(info.st_mode):
        raise InputFileError(
            f"{file} is not a regular file (a pipe, a socket or a device); save the log "
            "to a file first"
        )
    if not os.access(file, os.R_OK):
        raise InputFileError(f"cannot read {file}: permission denied")


@dataclass(frozen=True)
class LogRequest:
    """How to read one log: the user's step-line shapes, tokens per step, stall time."""

    patterns: tuple[str, ...] = ()
    tokens_per_step: float | None = None
    stall_after: float = STALL_AFTER_S
    progress: Progress | None = None
    cache: PrefixCache | None = None
    # The output of a command ledger itself runs (`watch -- CMD`): new by construction, so
    # never refused as a copy of another run's log (two launches may print the same).
    fresh: bool = False
    # read at each ingest, so that a test or a benchmark can set it
    commit_every_s: float = field(default_factory=lambda: COMMIT_EVERY_S)


def log_file_row(
    session: Session, run_id: int, file: Path, fmt: str, launch: int | None = None
) -> m.LogFile:
    """The log file's row (of its latest launch, or of `launch`), created when new (in the
    run's latest launch), and locked for this transaction: two ingests of one file (eight
    shells following it on PostgreSQL) take turns instead of both storing what they read.
    (SQLite's BEGIN IMMEDIATE already serialises every writer.)"""
    key = str(file.resolve())
    query = select(m.LogFile).where(m.LogFile.run_id == run_id, m.LogFile.path == key)
    if launch is not None:
        query = query.where(m.LogFile.launch == launch)
    found = session.scalars(query.order_by(m.LogFile.launch.desc()).limit(1)).first()
    number = found.launch if found is not None else launch or latest(session.connection(), run_id)
    insert_if_missing(
        session, m.LogFile, run_id=run_id, path=key, size=0, offset=0, lines=0, format=fmt,
        launch=number,
    )  # fmt: skip
    query = select(m.LogFile).where(
        m.LogFile.run_id == run_id, m.LogFile.path == key, m.LogFile.launch == number
    )
    # populate_existing: the row was loaded above without the lock; once the lock is ours
    # its values must be read again (another ingest may have read on and committed since),
    # or this one would read from a stale offset and store the same events again.
    locked = query.with_for_update().execution_options(populate_existing=True)
    return session.scalars(locked).one()


SAME_CONTENT_BYTES = 64 * 1024  # a shared prefix this long is one log, not one banner


def check_owner(session: Session, inv: int, run_id: int, file: Path, size: int) -> None:
    """Refuse a log another run of the investigation already holds: the same file, or a copy
    (the same first 64 KiB or more, or the same whole content). Under a second name its
    steps would be dropped as duplicates while its fate overwrote that run's. Two runs of
    one script may print the same banner and config: a short common start is not a copy."""
    key = str(file.resolve())
    others = session.execute(
        select(m.LogFile.offset, m.LogFile.sha256, m.LogFile.path, m.Run.name)
        .join(m.Run, m.Run.id == m.LogFile.run_id)
        .where(m.Run.investigation_id == inv, m.LogFile.run_id != run_id)
    ).all()
    wanted: dict[int, list[tuple[str | None, str, str]]] = {}
    for offset, sha, path, name in others:
        if path == key:
            raise _owned(file, name, path)
        copy = offset >= SAME_CONTENT_BYTES or (offset == size and offset >= 4096)
        if sha is not None and copy and offset <= size:
            wanted.setdefault(offset, []).append((sha, path, name))
    if not wanted:
        return
    digest, done = hashlib.sha256(), 0
    with file.open("rb") as handle:
        for offset in sorted(wanted):
            while done < offset:
                chunk = handle.read(min(1 << 20, offset - done))
                if not chunk:
                    return
                digest.update(chunk)
                done += len(chunk)
            for sha, path, name in wanted[offset]:
                if digest.hexdigest() == sha:
                    raise _owned(file, name, path)


def _owned(file: Path, run: str, path: str) -> ConflictError:
    return ConflictError(
        f"{file} is the log of run {run!r} (read before as {path}); ingest it under that "
        f"run (--run {run}, or no --run)"
    )


def _keep_place(lf: m.LogFile, reader: LogReader, cursor: Cursor, size: int) -> None:
    """Write into the log's row where a later ingest goes on from."""
    lf.offset = cursor.offset
    lf.size = max(size, cursor.offset)
    lf.lines = reader.state.line - 1
    lf.unread_lines = reader.state.unread
    lf.sha256 = cursor.sha256
    lf.state = json.dumps(reader.save(), allow_nan=False)


def _commit_so_far(
    session: Session, lf: m.LogFile, reader: LogReader, cursor: Cursor, size: int
) -> None:
    """Keep what an ingest has read so far (its rows, and the log's offset, hash and reader
    state at a line boundary: a later ingest resumes from there) and let other writers in
    until the next batch. A run made by this ingest is kept even if no training output has
    come yet: the ingest's end removes it if none comes at all."""
    _keep_place(lf, reader, cursor, size)
    session.commit()  # the rows stay readable (expire_on_commit is off): no query till then


class Overtaken(ConflictError):
    """Another ingest of the log read on from where this one paused (SQLite lets another
    writer in between batches): what this one stored stands; it goes on from the other's
    place (Store.ingest reads again) rather than store the same lines twice."""


def _still_ours(session: Session, lf: m.LogFile) -> None:
    """Begin the next batch's transaction by taking the log's row again; refuse to go on if
    another ingest of this log read on from here in between."""
    stored = session.scalar(select(m.LogFile.offset).where(m.LogFile.id == lf.id).with_for_update())
    if stored != lf.offset:
        raise Overtaken(
            f"{lf.path} was read on by another ingest while this one paused; run ingest "
            "again to read the rest"
        )


def has_training_output(summary: LogSummary) -> bool:
    """Steps, a bar, an event or a fate: something a training program printed."""
    return bool(summary.steps or summary.progress or summary.events) or (
        summary.fate != Fate.UNKNOWN
    )


def read_log(
    session: Session, inv: int, file: Path, run: str, request: LogRequest
) -> records.IngestResult:
    """Read what is new in `file` into `run` (created if new), in the session's transaction:
    find the rows, place the cursor (starting again in a new launch when the file was
    truncated or replaced), resume the reader, read and store, then keep the place."""
    run_row, created = ensure_run(session, inv, run)
    if created:
        launches.first_source(session, run_row, launches.WATCH if request.fresh else launches.LOG)
    from ledger.logs.source import is_gzip

    packed = is_gzip(file)
    lf = log_file_row(session, run_row.id, file, "gzip" if packed else "log")
    info = file.stat()
    if not lf.offset and not request.fresh:
        check_owner(session, inv, run_row.id, file, info.st_size)
    cursor = Cursor.of(lf, file, info, packed=packed, cache=request.cache)
    if cursor.reset is not None:
        lf = _relaunch(session, run_row, file, lf)
    reader = _reader(session, run_row.id, lf, cursor, request)
    size, now, last_read = info.st_size, utcnow(), lf.ingested_at
    grew = size > (lf.size or 0) or cursor.reset is not None
    stalled = _stalled(grew, last_read, now, request.stall_after)
    start = cursor.offset
    session.connection()
    done, tail, checkpoints = _read_and_store(
        session, LaunchWriter(session, run_row, lf), reader, cursor, file, size, request
    )
    summary = reader.summary(tail=tail, stalled=stalled)
    if created and not has_training_output(summary):
        _drop_run(session, run_row, file, summary, committed=checkpoints > 0)
    took = not done.rows.steps or _kept_own_rows(session, run_row.id, lf.id)
    _keep_place(lf, reader, cursor, size)
    if packed:
        lf.size = size  # (the text inside is longer than the file; it may have grown)
    if request.cache is not None:
        request.cache.remember(lf, file, info.st_ino, cursor.digest)
    if grew or last_read is None:
        lf.ingested_at = now
    if took:  # the gate redacts and bounds the reason
        launches.set_fate(session, run_row, lf.launch, summary.fate, summary.fate_reason)
    if summary.throughput.unit and not run_row.throughput_unit:
        run_row.throughput_unit = house_spelling(session, run_row, summary.throughput.unit)
    return records.IngestResult(
        run=run_row.name,
        path=lf.path,
        log_file_id=lf.id,
        read_bytes=cursor.offset - start,
        offset=cursor.offset,
        lines=lf.lines,
        steps=done.rows.steps,
        metrics=done.rows.metrics,
        events=done.events,
        reset=cursor.reset,
        fate=run_row.fate,
        fate_reason=(summary.fate_reason if took else run_row.fate_reason) or "",
        summary=_summary(session, run_row.id, lf.launch, summary),
        run_created=created,
        unread_lines=lf.unread_lines,
        config=done.config,
        launch=lf.launch,
        launch_fate=launches.fate_of(session, run_row, lf.launch),
    )


def _relaunch(session: Session, run_row: m.Run, file: Path, lf: m.LogFile) -> m.LogFile:
    """A trainer started again into its log: a new launch, the old one's rows kept; the
    log's row in it, emptied."""
    launch = launches.begin(session, run_row, launches.LOG).number
    lf = log_file_row(session, run_row.id, file, lf.format or "log", launch)
    _forget(session, run_row.id, lf)
    return lf


def _drop_run(
    session: Session, run_row: m.Run, file: Path, summary: LogSummary, *, committed: bool
) -> NoReturn:
    """No run is made for a file with nothing of training in it: raising rolls the
    transaction back; a run kept by a commit on the way goes now."""
    what = summary.fate_reason if summary.content != "log" else "no step, bar or event"
    if committed:
        session.delete(run_row)
        session.commit()
    raise NoTrainingOutput(f"{file} holds no training output ({what}); no run made")


def _reader(
    session: Session, run_id: int, lf: m.LogFile, cursor: Cursor, request: LogRequest
) -> LogReader:
    """A reader going on from the log's saved state, or a new one at offset 0 (when the
    state is one this version cannot use, the log's rows go and it is read again)."""
    from ledger.logs.reader import LogReader

    patterns, per_step = request.patterns, request.tokens_per_step
    try:
        reader = LogReader(patterns=patterns, tokens_per_step=per_step)  # checks the patterns
        if not cursor.offset:
            return reader
        saved = json.loads(lf.state) if lf.state else None
        resumed = LogReader.resume(saved, patterns=patterns, tokens_per_step=per_step)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if resumed is None:  # a state this version cannot use: read it all again
        _forget(session, run_id, lf)
        cursor.restart("reread")
        return reader
    return resumed


def _stalled(grew: bool, last_read: datetime | None, now: datetime, after: float) -> bool:
    """A log that has not grown since a read at least `after` seconds ago."""
    return not grew and last_read is not None and now - last_read >= timedelta(seconds=after)


def _read_and_store(
    session: Session,
    writer: LaunchWriter,
    reader: LogReader,
    cursor: Cursor,
    file: Path,
    size: int,
    request: LogRequest,
) -> tuple[Stored, str, int]:
    """Read the log from the cursor to its last complete line, storing as it goes; what
    was stored, the unfinished tail (read for the fate only) and the commits on the way.

    SQLite: parsing holds no lock; a write transaction begins with each batch (every
    BATCH_ROWS rows or `commit_every_s`) and ends with it, at a line boundary. PostgreSQL
    locks rows, not the file: the log's row stays locked for the whole read, so that eight
    shells following one log take turns. One thread: a writer thread was tried, and the GIL
    hand-over between binding rows and parsing lines cost more than the overlap won."""
    from ledger.logs.source import STREAM_ERRORS, open_log, read_blocks
    from ledger.model.logs import Found

    lf = writer.lf
    done, pending, tail = Stored(), Found(), ""
    committed, checkpoints = time.monotonic(), 0
    sqlite = session.get_bind().dialect.name == "sqlite"
    with open_log(file) as handle:
        handle.seek(cursor.offset)
        blocks = read_blocks(handle, offset=cursor.offset, digest=cursor.digest)
        try:
            for text, end, complete in blocks:
                if not complete:
                    tail = text
                    break
                pending.extend(reader.feed(text))
                cursor.advance(end)
                batch = len(pending.steps) + len(pending.metrics) >= BATCH_ROWS
                due = sqlite and time.monotonic() - committed >= request.commit_every_s
                if batch or due:
                    if checkpoints:
                        _still_ours(session, lf)
                    done.add(_store(session, writer, pending))
                    pending = Found()
                    if sqlite:
                        _commit_so_far(session, lf, reader, cursor, size)
                        writer.writer = None  # its connection went back with the commit
                        checkpoints += 1
                        committed = time.monotonic()
                if request.progress is not None:
                    request.progress(cursor.offset, size)
        except STREAM_ERRORS as exc:  # a gzip cut short: what came before it is stored
            cut = f"compressed stream cut short ({type(exc).__name__})"
            reader.rec.unread(reader.state.line, cut)
    if checkpoints:
        _still_ours(session, lf)
    done.add(_store(session, writer, pending))
    return done, tail, checkpoints


def _summary(session: Session, run_id: int, launch: int, summary: LogSummary) -> IngestSummary:
    """The log's summary as plain values, its steps and ranks those the launch now holds."""
    data = cast(IngestSummary, summary.to_dict())  # LogSummary's fields: IngestSummary's keys
    data["steps"], data["ranks"], _ = step_counts(session, run_id, launch)
    return data


class NoTrainingOutput(BadContentError):
    """Raised when a file ingested into a new run holds nothing a training program printed."""


def _kept_own_rows(session: Session, run_id: int, log_file_id: int) -> bool:
    """False when every step this log sent was already another log's: then it is not this
    run's log, and its fate must not become the run's."""
    mine = session.scalar(
        select(m.Step.step)
        .where(m.Step.run_id == run_id, m.Step.log_file_id == log_file_id)
        .limit(1)
    )
    if mine is not None:
        return True
    other_log = session.scalar(
        select(m.Step.step).where(m.Step.run_id == run_id, m.Step.log_file_id.is_not(None)).limit(1)
    )
    return other_log is None  # the rows were the hook's or the API's: the log is this run's


@dataclass
class Stored:
    """What an ingest wrote so far."""

    rows: StepWrite = field(default_factory=StepWrite)
    events: int = 0
    config: int = 0

    def add(self, other: Stored) -> None:
        self.rows += other.rows
        self.events += other.events
        self.config += other.config


def _forget(session: Session, run_id: int, lf: m.LogFile) -> None:
    """A truncated or replaced file is read again: its events and the rows read from it go;
    rows the hook or another log wrote stay."""
    session.execute(delete(m.LogEvent).where(m.LogEvent.log_file_id == lf.id))
    forget_log_rows(session.connection(), run_id, lf.id)
    lf.offset = 0
    lf.state = None
    lf.sha256 = None
    lf.unread_lines = 0
    session.flush()


class LaunchWriter:
    """The step writer of one log, in the launch its rows belong to: the log file's, unless
    the log's first steps start again at or below where the launch's steps from another
    log got to (the same run launched again into a new file): then a new launch."""

    def __init__(self, session: Session, run: m.Run, lf: m.LogFile) -> None:
        self.session, self.run, self.lf = session, run, lf
        self.steps_seen = False
        self.writer: StepWriter | None = None

    def get(self, found: Found) -> StepWriter:
        if not self.steps_seen and found.steps:
            self.steps_seen = True
            if launches.starts_again(self.session, self.run.id, self.lf, found.steps):
                number = launches.begin(self.session, self.run, launches.LOG).number
                launches.move_log(self.session, self.lf, number)
                self.writer = None
        if self.writer is None:
            self.writer = StepWriter(
                self.session.connection(), self.run.id, log_file_id=self.lf.id,
                columns=READER_COLUMNS, launch=self.lf.launch,
            )  # fmt: skip
        return self.writer

    def begin_again(self, restart: Restart) -> None:
        """A new run began in the log: the launch of the run before it keeps the fate that
        run ended with, and the log goes on in a new launch (its events from here on)."""
        session, run, lf = self.session, self.run, self.lf
        launches.set_fate(session, run, lf.launch, restart.fate, restart.reason)
        lf.launch = launches.begin(session, run, launches.LOG).number
        session.flush()
        self.writer = None
        self.steps_seen = True  # the new run's steps are its launch's own: nothing to look up


def _store(session: Session, launch_writer: LaunchWriter, found: Found) -> Stored:
    """Write what the reader found (a ledger.model.logs.Found): step and metric rows, events
    with the step before them, config items. Where a new run begins in the log (a relaunch
    appended to it, a restart after a crash), what follows goes into a new launch: its steps
    1, 2, … would otherwise be the earlier run's keys, and be dropped as written already."""
    done = Stored()
    for part, restart in found.parts():
        done.add(_store_run(session, launch_writer, part))
        if restart is not None:
            launch_writer.begin_again(restart)
    return done


def _store_run(session: Session, launch_writer: LaunchWriter, found: Found) -> Stored:
    """_store for what one run of the log printed."""
    conn = session.connection()
    writer = launch_writer.get(found)
    run_id, log_file_id, launch = launch_writer.run.id, launch_writer.lf.id, launch_writer.lf.launch
    done = Stored(rows=writer.write(found.steps, found.metrics, trusted=True, nan=found.has_nan))
    if found.events:
        now = driver_time(conn.dialect.name, utcnow().replace(tzinfo=None))
        conn.exec_driver_sql(
            insert_statement(conn.dialect.name, "log_event", EVENT_COLUMNS),
            [
                (
                    run_id,
                    log_file_id,
                    e.line,
                    e.kind,
                    _event_text(e.text),
                    e.rank,
                    e.step,
                    now,
                    launch,
                )
                for e in found.events
            ],
        )
        done.events = len(found.events)
    if found.config:
        items = [(c.key, c.value) for c in found.config]
        done.config = write_config(session, run_id, "log", items, keep=Keep.LAST)
    return done


def _event_text(text: str) -> str:
    return str(gate.clean("log_event", "text", text))


def log_events(session: Session, run_id: int, kind: str | None) -> list[dict[str, Any]]:
    """A run's log events in order: line, kind, text, rank, and the step before it."""
    query = select(m.LogEvent).where(m.LogEvent.run_id == run_id)
    if kind is not None:
        query = query.where(m.LogEvent.kind == kind)
    rows = session.scalars(query.order_by(m.LogEvent.log_file_id, m.LogEvent.line, m.LogEvent.id))
    return [
        {"line": e.line, "kind": e.kind, "text": e.text, "rank": e.rank, "step": e.step}
        for e in rows
    ]
