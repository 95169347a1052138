"""Probes: the status check people type by hand, recorded.

`ledger probe --run R --wait 360 -- ssh host "tail -n 90 train.log; nvidia-smi …"` waits,
runs the command with a timeout (ledger.proc), stores its output (bounded, redacted),
reads it with the log reader (fate, last bar, last step) and stores the nvidia-smi rows
as gpu_sample. The probe row exists before the command starts, so a probe that fails,
times out or is interrupted is still a row with its exit status.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ledger.cleantext import cut_words
from ledger.db import models as m
from ledger.db.types import utcnow
from ledger.errors import UsageError
from ledger.model import records
from ledger.model.logs import LogEvent, LogSummary
from ledger.model.terms import FAILED_FATES, FINAL_FATES, Fate
from ledger.proc import EXIT_INTERRUPTED, EXIT_NOT_FOUND, CommandResult, Stop
from ledger.store import gate, launches, settings
from ledger.store.deploys import store_command_result
from ledger.store.lookup import NEW_RUN_HINT, ensure_run
from ledger.store.lookup import run_row as run_row_of

Position = tuple[Any, Any, Any]  # (last step, last bar's description, last bar's n)


@dataclass(frozen=True)
class Earlier:
    """The run's previous probe: where its output showed the run, and when."""

    position: Position
    started_at: datetime
    ended_at: datetime


def check_command(command: Sequence[str], patterns: Sequence[str] = ()) -> list[str]:
    """The probe's command, and its step-line patterns checked: a bad one is refused
    before anything waits or runs."""
    argv = [str(a) for a in command]
    if not argv:
        raise UsageError(
            "give the command after --, e.g. ledger probe --run R -- tail -n 90 train.log"
        )
    for pattern in patterns:
        settings.check_pattern(pattern)
    return argv


def wait(seconds: float, sleep: Callable[[float], None], stop: Stop | None) -> bool:
    """The wait before the probe's command (`--wait 360`); False when a signal or Ctrl-C
    cut it short (then `stop` holds the signal)."""
    if seconds <= 0:
        return True
    try:
        if stop is None:
            sleep(seconds)
            return True
        return stop.sleep(seconds, sleep)
    except KeyboardInterrupt:
        if stop is not None:
            stop.signum = stop.signum or signal.SIGINT
        return False


def start(session: Session, inv: int, run: str, argv: list[str], new: bool) -> tuple[int, int]:
    """The probe's row, before its command runs; returns (probe id, run id). An unknown
    run is refused (a typo would make a stray run) unless `new` asks for it."""
    run_row = (
        ensure_run(session, inv, run)[0] if new else run_row_of(session, inv, run, NEW_RUN_HINT)
    )
    row = m.Probe(
        run_id=run_row.id,
        command=gate.command(argv),
        started_at=utcnow(),
        timed_out=False,
    )
    session.add(row)
    session.flush()
    return row.id, run_row.id


def previous(session: Session, run_id: int, probe_id: int) -> Earlier | None:
    """The run's last finished probe before this one, with the position its output showed."""
    from ledger.logs import parse_text

    prev = session.scalar(
        select(m.Probe)
        .where(m.Probe.run_id == run_id, m.Probe.id != probe_id, m.Probe.ended_at.is_not(None))
        .order_by(m.Probe.id.desc())
        .limit(1)
    )
    if prev is None or not prev.output or prev.ended_at is None:
        return None
    return Earlier(_position(parse_text(prev.output)), prev.started_at, prev.ended_at)


@dataclass(frozen=True)
class Reading:
    """What a probe's output says (line numbers are lines of that output)."""

    fate: Fate
    reason: str
    summary: LogSummary
    conclusion: str
    events: list[LogEvent]


_LINE = re.compile(r"\(line (\d+)\)$")


def _of_output(text: str, probe_id: int) -> str:
    """`… (line 90)` is a line of the probe's output, not of the log: say so."""
    return _LINE.sub(lambda m: f"(line {m.group(1)} of probe #{probe_id}'s output)", text)


def read_output(
    run: str,
    probe_id: int,
    argv: list[str],
    result: CommandResult,
    patterns: Sequence[str],
    earlier: Earlier | None,
    stall_after: float,
) -> Reading:
    """Read the command's output for the fate, the last bar and step, the GPUs, and the
    events it shows (an OOM, a recompile), kept with the probe."""
    from ledger.logs.nvsmi import query_from_command
    from ledger.logs.reader import LogReader

    try:
        reader = LogReader(
            patterns=list(patterns), gpu_query=query_from_command(" ".join(argv)), rows=False
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    events = [*reader.feed(result.output).events, *reader.finish().events]
    summary = reader.summary()
    position = _position(summary)
    stalled = (
        earlier is not None
        and earlier.position == position
        and position != (None, None, None)
        and result.started_at - earlier.ended_at >= timedelta(seconds=0)
        and result.ended_at - earlier.started_at >= timedelta(seconds=stall_after)
    )
    if stalled:
        summary = reader.summary(stalled=True)
    conclusion = _of_output(_conclusion(run, summary, result), probe_id)
    reason = _of_output(summary.fate_reason or "", probe_id)
    return Reading(summary.fate, reason, summary, conclusion, events)


def interrupted(session: Session, probe_id: int, stop: Stop | None) -> None:
    """A probe stopped before its command ran: by Ctrl-C (exit 130), SIGTERM (143) or
    SIGHUP (129), recorded as such."""
    row = session.get_one(m.Probe, probe_id)
    row.ended_at = utcnow()
    signum = stop.signum if stop is not None else None
    row.exit_code = EXIT_INTERRUPTED if signum is None else 128 + signum
    if signum in (None, signal.SIGINT):
        row.conclusion = "interrupted before the command ran"
    else:
        row.conclusion = f"stopped by {signal.Signals(signum).name} before the command ran"


def finish(
    session: Session, probe_id: int, run_id: int, result: CommandResult, reading: Reading
) -> None:
    row = session.get_one(m.Probe, probe_id)
    store_command_result(row, result)
    row.fate = reading.fate
    row.conclusion = reading.conclusion
    for event in reading.events:
        session.add(
            m.LogEvent(
                run_id=run_id, probe_id=probe_id, line=event.line, step=event.step,
                kind=event.kind, text=event.text, rank=event.rank,
            )
        )  # fmt: skip
    for gpu in reading.summary.gpus:
        session.add(
            m.GpuSample(
                probe_id=probe_id,
                gpu_index=gpu.index,
                name=gpu.name,
                memory_used_mib=gpu.memory_used_mib,
                memory_total_mib=gpu.memory_total_mib,
                utilization_pct=gpu.utilization_pct,
            )
        )
    run_row = session.get_one(m.Run, run_id)
    # A look cannot undo an ending: a probe that shows an earlier step of a run that has
    # crashed since (a stale log, a tail cut short) keeps the fate the log told. A new
    # launch starts from `unknown`, so a relaunched run is probed afresh.
    settled = Fate(run_row.fate) in FINAL_FATES and Fate(reading.fate) not in FINAL_FATES
    if reading.fate != Fate.UNKNOWN and not settled:
        launch = launches.latest(session.connection(), run_id)
        launches.set_fate(session, run_row, launch, reading.fate, reading.reason or None)


def result_record(
    probe_id: int, run: str, result: CommandResult, reading: Reading
) -> records.ProbeResult:
    return records.ProbeResult(
        probe_id=probe_id,
        run=run,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        fate=reading.fate,
        fate_reason=reading.reason,
        progress=reading.summary.progress.to_dict() if reading.summary.progress else None,
        last_step=reading.summary.last_step,
        gpus=[g.to_dict() for g in reading.summary.gpus],
        conclusion=reading.conclusion,
    )


def _position(summary: LogSummary) -> Position:
    p = summary.position
    return (p.last_step, p.bar_desc, p.bar_n)


def _conclusion(run: str, summary: LogSummary, result: CommandResult) -> str:
    """One line for a person: `eager_dynamiccopy: loading — Loading weights 81/851 (10%),
    no crash; 8 GPUs, 61.2 GiB used on average, 0% util`."""
    parts = []
    bar = summary.progress
    if summary.fate == Fate.LOADING and bar is not None:
        parts.append(bar.describe())
    elif summary.last_step is not None:
        total = f"/{summary.total_steps}" if summary.total_steps else ""
        step = f"step {summary.last_step}{total}"
        tp = summary.throughput
        if tp.last is not None:
            step += f", {tp.last:,.0f} {tp.unit or ''}".rstrip()
        parts.append(step)
    elif bar is not None:
        parts.append(bar.describe())
    fate = summary.fate
    failed = result.timed_out or result.exit_code not in (0, None)
    if failed and fate == Fate.UNKNOWN:
        # The probe itself failed (ssh could not connect, tail found no file): say so with
        # the command's own last words, never "no crash" about a run nobody looked at.
        parts.append(_failure(result))
    elif fate not in FAILED_FATES:
        parts.append("no crash")
    else:
        # Say what decided the fate (the OOM line), not whatever the launcher printed last.
        told = summary.last_event.text if summary.last_event else ""
        # redacted, then cut at a word with an ellipsis
        parts.append(cut_words(gate.text(str(summary.fate_reason or told)), 120))
    head = f"{run}: {summary.fate}"
    line = f"{head} — {', '.join(parts)}" if parts else head
    if summary.gpus:
        from ledger.logs.nvsmi import describe

        line += "; " + describe(summary.gpus)
    if result.timed_out and not (failed and fate == Fate.UNKNOWN):
        line += " (the probe timed out)"
    elif result.exit_code and not (failed and fate == Fate.UNKNOWN):
        line += f" (the probe command exited {result.exit_code})"
    return line


def _failure(result: CommandResult) -> str:
    """What went wrong with the probe command, in its own words where it left some."""
    if result.timed_out:
        head = "the probe command timed out"
    elif result.exit_code == EXIT_NOT_FOUND and "command not found" in result.output:
        head = "the probe command was not found"
    elif result.exit_code == EXIT_INTERRUPTED:
        head = "the probe was interrupted"
    else:
        head = f"the probe command failed (exit {result.exit_code})"
    said = [line.strip() for line in result.output.splitlines() if line.strip()]
    return f"{head}: {cut_words(said[-1], 160)}" if said else head
