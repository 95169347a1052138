"""Ingesting logs: incremental, idempotent, resumable.

A log_file row keeps the byte offset reached, the sha256 of the bytes before it and the
reader's state there. Ingesting again verifies that prefix (a shorter file was truncated,
a different prefix means the file was replaced: both are read again from the start),
then reads only what was appended. Steps go in with one executemany per batch and
ON CONFLICT DO NOTHING, so a re-read adds nothing twice; events of a re-read file are
replaced. Bytes after the last line or redraw boundary (a bar being redrawn right now)
are read for the run's fate but not stored until they are complete.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, delete, func, select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.db.types import NAN_TEXT, utcnow
from ledger.errors import InputFileError, UsageError
from ledger.model import records
from ledger.store.base import LedgerBase
from ledger.store.steps import STEP_COLUMNS, insert_statement

BATCH_ROWS = 100_000
STALL_AFTER_S = 300.0  # a log that has not grown for this long, while running, is stalled
PATTERNS_SETTING = "log.patterns"
FINAL_FATES = ("finished", "oom", "crashed", "nccl", "killed")

_TRAIN_PREFIX = re.compile(r"^(?:train(?:ing)?)[_\-.]", re.I)
_LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".stdout", ".stderr")


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


@dataclass(frozen=True)
class IngestResult(records.Record):
    """What one ingestion of one file did."""

    run: str
    path: str
    log_file_id: int
    read_bytes: int
    offset: int
    lines: int
    steps: int  # step rows sent (rows already there are not added twice)
    metrics: int
    events: int
    reset: str | None  # "truncated" or "replaced" when the file was read again from 0
    fate: str
    fate_reason: str
    summary: dict[str, Any]


class IngestMixin(LedgerBase):
    # -- settings -------------------------------------------------------------------------

    def log_patterns(self) -> list[str]:
        """The user's own step-line regexes, kept in the ledger's settings."""
        with self._read() as session:
            row = session.get(m.Setting, PATTERNS_SETTING)
            return list(json.loads(row.value)) if row is not None else []

    def add_log_pattern(self, pattern: str) -> list[str]:
        from ledger.logs.parser import compile_patterns

        try:
            compile_patterns([pattern])
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        with self._write() as session:
            row = session.get(m.Setting, PATTERNS_SETTING)
            patterns = list(json.loads(row.value)) if row is not None else []
            if pattern not in patterns:
                patterns.append(pattern)
            self._set(session, PATTERNS_SETTING, patterns)
            return patterns

    def remove_log_pattern(self, index: int) -> list[str]:
        with self._write() as session:
            row = session.get(m.Setting, PATTERNS_SETTING)
            patterns = list(json.loads(row.value)) if row is not None else []
            if not 1 <= index <= len(patterns):
                raise UsageError(f"no pattern #{index}; there are {len(patterns)}")
            patterns.pop(index - 1)
            self._set(session, PATTERNS_SETTING, patterns)
            return patterns

    @staticmethod
    def _set(session: Session, name: str, value: Any) -> None:
        row = session.get(m.Setting, name)
        if row is None:
            session.add(m.Setting(name=name, value=json.dumps(value)))
        else:
            row.value = json.dumps(value)

    # -- ingesting ------------------------------------------------------------------------

    def ingest(
        self,
        path: str | os.PathLike[str],
        run: str | None = None,
        *,
        patterns: list[str] | tuple[str, ...] = (),
        tokens_per_step: float | None = None,
        progress: Callable[[int, int], None] | None = None,
        stall_after: float = STALL_AFTER_S,
    ) -> IngestResult:
        """Read what is new in a log into `run` (default: named after the file)."""
        file = Path(path)
        _check_readable(file)
        run = run or run_name_for(file)
        if file.name.endswith(".json"):
            return self._ingest_trainer_state(file, run)
        all_patterns = [*self.log_patterns(), *patterns]
        with self._write() as session:
            run_row = self._ensure_run(session, run)
            lf = self._log_file(session, run_row.id, file)
            return self._read_into(
                session, run_row, lf, file, all_patterns, tokens_per_step, progress, stall_after
            )

    def _log_file(self, session: Session, run_id: int, file: Path) -> m.LogFile:
        key = str(file.resolve())
        lf = session.scalar(
            select(m.LogFile).where(m.LogFile.run_id == run_id, m.LogFile.path == key)
        )
        if lf is None:
            lf = m.LogFile(run_id=run_id, path=key, size=0, offset=0, lines=0)
            session.add(lf)
            session.flush()
        return lf

    def _read_into(
        self,
        session: Session,
        run_row: m.Run,
        lf: m.LogFile,
        file: Path,
        patterns: list[str],
        tokens_per_step: float | None,
        progress: Callable[[int, int], None] | None,
        stall_after: float,
    ) -> IngestResult:
        from ledger.logs.parser import LogParser
        from ledger.logs.reader import read_blocks

        stat = file.stat()
        size = stat.st_size
        offset = lf.offset or 0
        digest = hashlib.sha256()
        reset = None
        if offset > size:
            reset = "truncated"
        elif offset:
            prefix = self._known_prefix(lf, file, stat.st_ino) or _hash_prefix(file, offset)
            if prefix.hexdigest() != lf.sha256:
                reset = "replaced"
            else:
                digest = prefix
        conn = session.connection()
        if reset is not None:
            self._forget(session, run_row.id, lf)
            offset = 0
            digest = hashlib.sha256()
        try:
            parser = LogParser(patterns=patterns, tokens_per_step=tokens_per_step, keep_rows=True)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        if offset and not (lf.state and parser.restore(json.loads(lf.state))):
            self._forget(session, run_row.id, lf)  # a state this version cannot use
            offset, digest, reset = 0, hashlib.sha256(), reset or "reread"
        grew = size > (lf.size or 0) or reset is not None
        start = offset
        sent = [0, 0, 0]
        tail = ""
        # One thread: a writer thread was tried, and the GIL hand-over between binding rows
        # and parsing lines cost more than the overlap won.
        with file.open("rb") as handle:
            handle.seek(offset)
            for text, end, complete in read_blocks(handle, offset=offset, digest=digest):
                if not complete:
                    tail = text
                    break
                parser.feed(text)
                offset = end
                if len(parser.rows) + len(parser.metric_rows) >= BATCH_ROWS:
                    _store(conn, run_row.id, lf.id, parser, sent)
                if progress is not None:
                    progress(offset, size)
        _store(conn, run_row.id, lf.id, parser, sent)
        state = parser.snapshot()
        # The fate reads the unfinished tail and closes what is open, on a copy.
        final = LogParser(patterns=patterns, tokens_per_step=tokens_per_step)
        final.restore(state)
        if tail:
            final.feed(tail)
        final.finish()
        now = utcnow()
        last_read = lf.ingested_at
        stalled = (
            not grew and last_read is not None and now - last_read >= timedelta(seconds=stall_after)
        )
        fate, reason = final.fate(stalled=stalled)
        lf.offset = offset
        lf.size = max(size, offset)  # the file may have grown while it was read
        lf.lines = parser.line_no - 1
        lf.sha256 = digest.hexdigest()
        self._remember_prefix(lf, file, stat.st_ino, digest)
        lf.state = json.dumps(state, allow_nan=False)
        if grew or last_read is None:
            lf.ingested_at = now
        run_row.fate = fate
        run_row.fate_reason = reason[:2000] if reason else None
        unit = final.throughput()["unit"]
        if unit and not run_row.throughput_unit:
            run_row.throughput_unit = unit
        summary = final.summary(stalled=stalled).to_dict()
        counts = _step_counts(session, run_row.id)
        summary["steps"], summary["ranks"] = counts
        return IngestResult(
            run=run_row.name,
            path=lf.path,
            log_file_id=lf.id,
            read_bytes=offset - start,
            offset=offset,
            lines=lf.lines,
            steps=sent[0],
            metrics=sent[1],
            events=sent[2],
            reset=reset,
            fate=fate,
            fate_reason=reason,
            summary=summary,
        )

    # Following a log re-reads it every few seconds: within one process the hash of the
    # prefix already read is kept, so that a 2 GB log is not hashed again on every look.
    # The file must still be the same one (inode) and start with the same bytes.

    def _known_prefix(self, lf: m.LogFile, file: Path, inode: int) -> Any:
        known = getattr(self, "_prefixes", {}).get(lf.id)
        if known is None:
            return None
        offset, sha, digest, known_inode, head = known
        if (offset, sha, known_inode) != (lf.offset, lf.sha256, inode):
            return None
        with file.open("rb") as handle:
            if handle.read(len(head)) != head:
                return None
        return digest.copy()

    def _remember_prefix(self, lf: m.LogFile, file: Path, inode: int, digest: Any) -> None:
        prefixes = self.__dict__.setdefault("_prefixes", {})
        with file.open("rb") as handle:
            head = handle.read(min(4096, lf.offset))
        prefixes[lf.id] = (lf.offset, lf.sha256, digest.copy(), inode, head)

    def _forget(self, session: Session, run_id: int, lf: m.LogFile) -> None:
        """A truncated or replaced file is read again: its events go, and so do the run's
        steps when this file is the run's only log (they came from the old content)."""
        session.execute(delete(m.LogEvent).where(m.LogEvent.log_file_id == lf.id))
        others = session.scalar(
            select(func.count(m.LogFile.id)).where(
                m.LogFile.run_id == run_id, m.LogFile.id != lf.id
            )
        )
        if not others:
            session.execute(delete(m.Metric).where(m.Metric.run_id == run_id))
            session.execute(delete(m.Step).where(m.Step.run_id == run_id))
        lf.offset = 0
        lf.state = None
        lf.sha256 = None
        session.flush()

    # -- Hugging Face trainer_state.json -------------------------------------------------

    def _ingest_trainer_state(self, file: Path, run: str) -> IngestResult:
        data = file.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        try:
            state = json.loads(data)
            history = state["log_history"]
            if not isinstance(history, list):
                raise TypeError
        except (ValueError, KeyError, TypeError) as exc:
            raise InputFileError(f"{file} is not a trainer_state.json with a log_history") from exc
        with self._write() as session:
            run_row = self._ensure_run(session, run)
            lf = self._log_file(session, run_row.id, file)
            if lf.sha256 == digest:
                return self._unchanged(session, run_row, lf)
            rows, metric_rows, finished = _history_rows(history)
            conn = session.connection()
            sent = [0, 0, 0]
            _write_rows(conn, run_row.id, rows, metric_rows, sent)
            max_steps = state.get("max_steps") or 0
            global_step = state.get("global_step") or 0
            if finished or (max_steps and global_step >= max_steps):
                fate, reason = "finished", f"global_step {global_step} of max_steps {max_steps}"
            else:
                fate, reason = "running", f"global_step {global_step}"
            run_row.fate, run_row.fate_reason = fate, reason
            lf.size = lf.offset = len(data)
            lf.lines = len(history)
            lf.sha256 = digest
            lf.ingested_at = utcnow()
            steps, ranks = _step_counts(session, run_row.id)
            return IngestResult(
                run=run_row.name, path=lf.path, log_file_id=lf.id, read_bytes=len(data),
                offset=len(data), lines=len(history), steps=sent[0], metrics=sent[1],
                events=0, reset=None, fate=fate, fate_reason=reason,
                summary={"fate": fate, "steps": steps, "ranks": ranks},
            )  # fmt: skip

    def _unchanged(self, session: Session, run_row: m.Run, lf: m.LogFile) -> IngestResult:
        steps, ranks = _step_counts(session, run_row.id)
        return IngestResult(
            run=run_row.name, path=lf.path, log_file_id=lf.id, read_bytes=0, offset=lf.offset,
            lines=lf.lines, steps=0, metrics=0, events=0, reset=None, fate=run_row.fate,
            fate_reason=run_row.fate_reason or "",
            summary={"fate": run_row.fate, "steps": steps, "ranks": ranks},
        )  # fmt: skip

    def log_events(self, run: str, kind: str | None = None) -> list[dict[str, Any]]:
        """A run's log events in order: line, kind, text, rank."""
        with self._read() as session:
            run_id = self._run_row(session, run).id
            query = select(m.LogEvent).where(m.LogEvent.run_id == run_id)
            if kind is not None:
                query = query.where(m.LogEvent.kind == kind)
            rows = session.scalars(
                query.order_by(m.LogEvent.log_file_id, m.LogEvent.line, m.LogEvent.id)
            )
            return [{"line": e.line, "kind": e.kind, "text": e.text, "rank": e.rank} for e in rows]


def _check_readable(file: Path) -> None:
    if file.is_dir():
        raise InputFileError(f"{file} is a directory, not a log file")
    if not file.exists():
        raise InputFileError(f"{file}: no such file")
    if not os.access(file, os.R_OK):
        raise InputFileError(f"cannot read {file}: permission denied")


def _hash_prefix(file: Path, length: int) -> Any:
    digest = hashlib.sha256()
    left = length
    with file.open("rb") as handle:
        while left > 0:
            chunk = handle.read(min(left, 1 << 20))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
    return digest


def _step_counts(session: Session, run_id: int) -> tuple[int, int]:
    steps, ranks = session.execute(
        select(
            func.count(func.distinct(m.Step.step)), func.count(func.distinct(m.Step.rank))
        ).where(m.Step.run_id == run_id)
    ).one()
    return int(steps or 0), int(ranks or 0)


def _store(conn: Connection, run_id: int, log_file_id: int, parser: Any, sent: list[int]) -> None:
    """Write what the parser read since the last call; `sent` counts steps, metrics, events."""
    nan = parser.batch_has_nan
    rows, metric_rows, event_rows = parser.take()
    _write_rows(conn, run_id, rows, metric_rows, sent, nan=nan)
    if event_rows:
        from ledger.redact import redact

        conn.exec_driver_sql(
            insert_statement(
                conn.dialect.name,
                "log_event",
                ("run_id", "log_file_id", "line", "kind", "text", "rank", "created_at"),
            ).replace(" ON CONFLICT DO NOTHING", ""),
            [
                (
                    run_id,
                    log_file_id,
                    line,
                    kind,
                    redact(text) or "",
                    rank,
                    utcnow().replace(tzinfo=None),
                )
                for line, kind, text, rank in event_rows
            ],
        )
        sent[2] += len(event_rows)


def _write_rows(
    conn: Connection,
    run_id: int,
    rows: list[tuple[Any, ...]],
    metric_rows: list[tuple[Any, ...]],
    sent: list[int],
    *,
    nan: bool = True,
) -> None:
    """Rows as the parser made them, without run_id: it goes into the statement as a
    literal (an int of ours), so millions of rows are not copied to prepend it."""
    dialect = conn.dialect.name
    fix = dialect == "sqlite" and nan
    if rows:
        if fix:
            rows = [tuple(_nan_text(v) for v in r) for r in rows]
        conn.exec_driver_sql(
            _insert(dialect, "step", ("rank", "step", *STEP_COLUMNS), run_id), rows
        )
        sent[0] += len(rows)
    if metric_rows:
        if fix:
            metric_rows = [(a, b, c, _nan_text(v)) for a, b, c, v in metric_rows]
        conn.exec_driver_sql(
            _insert(dialect, "metric", ("rank", "step", "name", "value"), run_id), metric_rows
        )
        sent[1] += len(metric_rows)


def _insert(dialect: str, table: str, columns: tuple[str, ...], run_id: int) -> str:
    """INSERT … ON CONFLICT DO NOTHING with run_id fixed in the statement."""
    sql = insert_statement(dialect, table, ("run_id", *columns))
    mark = "?" if dialect == "sqlite" else "%s"
    return sql.replace(f"VALUES ({mark}, ", f"VALUES ({int(run_id)}, ", 1)


def _nan_text(value: Any) -> Any:
    """SQLite would store a bound NaN as NULL; ledger stores it as the text 'NaN'."""
    if isinstance(value, float) and math.isnan(value):
        return NAN_TEXT
    return value


def _history_rows(
    history: list[Any],
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], bool]:
    """Step and metric rows from a trainer_state.json log_history."""
    rows: dict[int, tuple[Any, ...]] = {}
    metrics: list[tuple[Any, ...]] = []
    finished = False
    for i, entry in enumerate(history, 1):
        if not isinstance(entry, dict):
            continue
        if "train_runtime" in entry:
            finished = True
        step = entry.get("step", i)
        if not isinstance(step, int | float):
            continue
        step = int(step)
        loss = entry.get("loss")
        if isinstance(loss, int | float) and step not in rows:
            tput = entry.get("train_tokens_per_second")
            rows[step] = (0, step, None, None, None, None, tput, float(loss), None, None)
        for name, value in entry.items():
            if name in ("step", "loss") or not isinstance(value, int | float):
                continue
            metrics.append((0, step, str(name)[:100], float(value)))
    return list(rows.values()), metrics, finished
