"""Ingesting a Hugging Face `trainer_state.json`: its `log_history` as steps and metrics.

The file is rewritten whole at every checkpoint, so it is read whole: unchanged (same
sha256) adds nothing, changed adds the entries not stored yet.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from ledger.db.types import utcnow
from ledger.errors import BadContentError
from ledger.model import records
from ledger.model.terms import Fate
from ledger.store.ingest import log_file_row
from ledger.store.lookup import ensure_run
from ledger.store.runs import step_counts
from ledger.store.steps import StepWriter

COLUMNS = ("throughput", "loss")


MAX_BYTES = 1 << 30  # a trainer_state.json is kilobytes; a GB of JSON is not one


def read(path: Path) -> tuple[bytes, dict[str, Any], list[Any]]:
    """The file's bytes, its state and its log_history, or BadContentError."""
    if path.stat().st_size > MAX_BYTES:
        raise BadContentError(f"{path} is too large to be a trainer_state.json")
    data = path.read_bytes()
    try:
        state = json.loads(data)
        history = state["log_history"]
        if not isinstance(history, list):
            raise TypeError
    except RecursionError as exc:
        raise BadContentError(f"{path} nests too deeply to be a trainer_state.json") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise BadContentError(f"{path} is not a trainer_state.json with a log_history") from exc
    return data, state, history


def _number(value: Any) -> float | int | None:
    """A JSON number as Python reads it (NaN, Infinity and huge ints included), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def ingest(session: Session, inv: int, path: Path, run: str) -> records.IngestResult:
    data, state, history = read(path)
    digest = hashlib.sha256(data).hexdigest()
    run_row, created = ensure_run(session, inv, run)
    lf = log_file_row(session, run_row.id, path, "trainer_state")
    sent = records.StepWrite()
    if lf.sha256 != digest:
        rows, metric_rows, finished = history_rows(history)
        writer = StepWriter(session.connection(), run_row.id, log_file_id=lf.id, columns=COLUMNS)
        sent = writer.write(rows, metric_rows)
        max_steps = _number(state.get("max_steps")) or 0
        global_step = _number(state.get("global_step")) or 0
        if finished or (max_steps and global_step >= max_steps):
            run_row.fate = Fate.FINISHED
            run_row.fate_reason = f"global_step {global_step} of max_steps {max_steps}"
        else:
            run_row.fate = Fate.RUNNING
            run_row.fate_reason = f"global_step {global_step}"
        lf.size = lf.offset = len(data)
        lf.lines = len(history)
        lf.sha256 = digest
        lf.ingested_at = utcnow()
    steps, ranks, _ = step_counts(session, run_row.id)
    read_bytes = len(data) if sent.steps or sent.metrics else 0
    return records.IngestResult(
        run=run_row.name, path=lf.path, log_file_id=lf.id, read_bytes=read_bytes,
        offset=lf.offset, lines=lf.lines, steps=sent.steps, metrics=sent.metrics, events=0,
        reset=None, fate=run_row.fate, fate_reason=run_row.fate_reason or "",
        summary={"fate": run_row.fate, "steps": steps, "ranks": ranks}, run_created=created,
    )  # fmt: skip


def history_rows(
    history: list[Any],
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, Any, str, Any]], bool]:
    """Step rows (rank, step, throughput, loss) and metric rows from a log_history."""
    rows: dict[Any, tuple[Any, ...]] = {}
    metrics: list[tuple[Any, Any, str, Any]] = []
    finished = False
    for i, entry in enumerate(history, 1):
        if not isinstance(entry, dict):
            continue
        if "train_runtime" in entry:
            finished = True
        raw = entry.get("step", i)
        if not isinstance(raw, int | float) or isinstance(raw, bool):
            continue
        step: Any = int(raw) if abs(raw) < 2**63 else raw  # the writer counts what is not int64
        loss = _number(entry.get("loss"))
        if loss is not None and step not in rows:
            # the writer checks each value: a 400-digit number or Infinity costs only itself
            rows[step] = (0, step, entry.get("train_tokens_per_second"), loss)
        for name, value in entry.items():
            if name in ("step", "loss") or _number(value) is None:
                continue
            metrics.append((0, step, str(name), value))
    return list(rows.values()), metrics, finished
