"""Probes: the status check people type by hand, recorded.

`ledger probe --run R --wait 360 -- ssh host "tail -n 90 train.log; nvidia-smi …"` waits,
runs the command with a timeout (ledger.proc), stores its output (bounded, redacted),
reads it with the log reader (fate, last bar, last step) and stores the nvidia-smi rows
as gpu_sample. The probe row exists before the command starts, so a probe that fails,
times out or is interrupted is still a row with its exit status.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import select

from ledger.db import models as m
from ledger.db.types import utcnow
from ledger.errors import UsageError
from ledger.model import records
from ledger.proc import run_command
from ledger.redact import redact
from ledger.store.base import LedgerBase
from ledger.store.ingest import STALL_AFTER_S


@dataclass(frozen=True)
class ProbeResult(records.Record):
    probe_id: int
    run: str
    exit_code: int | None
    timed_out: bool
    fate: str
    fate_reason: str
    progress: dict[str, Any] | None
    last_step: int | None
    gpus: list[dict[str, Any]]
    conclusion: str


class ProbesMixin(LedgerBase):
    def probe(
        self,
        run: str,
        command: Sequence[str],
        *,
        wait: float = 0.0,
        timeout: float | None = None,
        echo: Callable[[bytes], None] | None = None,
        patterns: Sequence[str] = (),
        stall_after: float = STALL_AFTER_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> ProbeResult:
        """Wait `wait` seconds, run `command` (no shell), record and read what it said."""
        from ledger.logs import parse_text
        from ledger.logs.nvsmi import query_from_command

        argv = [str(a) for a in command]
        if not argv:
            raise UsageError(
                "give the command after --, e.g. ledger probe --run R -- tail -n 90 train.log"
            )
        with self._write() as session:
            run_row = self._ensure_run(session, run)
            row = m.Probe(
                run_id=run_row.id, command=redact(shlex.join(argv)) or "", started_at=utcnow(),
                timed_out=False,
            )  # fmt: skip
            session.add(row)
            session.flush()
            probe_id, run_id = row.id, run_row.id
        if wait > 0:
            sleep(wait)
        result = run_command(argv, timeout=timeout, echo=echo)
        previous = self._previous_probe(run_id, probe_id)
        all_patterns = [*self._patterns_or_empty(), *patterns]
        try:
            parser, summary = parse_text(
                result.output, patterns=all_patterns, gpu_query=query_from_command(" ".join(argv))
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        position = _position(parser)
        stalled = (
            previous is not None
            and previous["position"] == position
            and position != (None, None, None)
            and result.started_at - previous["ended_at"] >= timedelta(seconds=0)
            and result.ended_at - previous["started_at"] >= timedelta(seconds=stall_after)
        )
        fate, reason = parser.fate(stalled=stalled)
        conclusion = _conclusion(run, fate, parser, summary.to_dict(), result)
        with self._write() as session:
            row = session.get_one(m.Probe, probe_id)
            self._store_command_result(row, result)
            row.fate = fate
            row.conclusion = conclusion
            for gpu in summary.gpus:
                session.add(
                    m.GpuSample(
                        probe_id=probe_id,
                        gpu_index=gpu["index"],
                        name=gpu["name"],
                        memory_used_mib=gpu["memory_used_mib"],
                        memory_total_mib=gpu["memory_total_mib"],
                        utilization_pct=gpu["utilization_pct"],
                    )
                )
            if fate != "unknown":
                run_row = session.get_one(m.Run, run_id)
                run_row.fate = fate
                run_row.fate_reason = reason[:2000] if reason else None
        if result.interrupted:
            raise KeyboardInterrupt
        return ProbeResult(
            probe_id=probe_id,
            run=run,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            fate=fate,
            fate_reason=reason,
            progress=summary.progress,
            last_step=summary.last_step,
            gpus=summary.gpus,
            conclusion=conclusion,
        )

    def _patterns_or_empty(self) -> list[str]:
        getter = getattr(self, "log_patterns", None)
        return list(getter()) if getter is not None else []

    def _previous_probe(self, run_id: int, probe_id: int) -> dict[str, Any] | None:
        """The run's last probe before this one, with the position its output showed."""
        from ledger.logs import parse_text

        with self._read() as session:
            prev = session.scalar(
                select(m.Probe)
                .where(
                    m.Probe.run_id == run_id, m.Probe.id != probe_id, m.Probe.ended_at.is_not(None)
                )
                .order_by(m.Probe.id.desc())
                .limit(1)
            )
            if prev is None or not prev.output:
                return None
            parser, _ = parse_text(prev.output)
            return {
                "position": _position(parser),
                "started_at": prev.started_at,
                "ended_at": prev.ended_at,
            }


def _position(parser: Any) -> tuple[Any, Any, Any]:
    """Where the run was: (last step, last bar's desc, last bar's n)."""
    bar = parser.bar
    return (parser.max_step, bar.desc if bar else None, bar.n if bar else None)


def _conclusion(run: str, fate: str, parser: Any, summary: dict[str, Any], result: Any) -> str:
    """One line for a person: `eager_dynamiccopy: loading — Loading weights 81/851 (10%),
    no crash; 8 GPUs, 61.2 GiB used on average, 0% util`."""
    parts = []
    if parser.phase == "loading" and parser.bar is not None and parser.bar.loading:
        parts.append(parser.bar.describe())
    elif parser.max_step is not None:
        step = f"step {parser.max_step}" + (f"/{parser.total}" if parser.total else "")
        tp = summary["throughput"]
        if tp.get("last") is not None:
            step += f", {tp['last']:,.0f} {tp['unit'] or ''}".rstrip()
        parts.append(step)
    elif parser.bar is not None:
        parts.append(parser.bar.describe())
    crash = {"oom", "crashed", "nccl", "killed"}
    if fate not in crash:
        parts.append("no crash")
    else:
        # Say what decided the fate (the OOM line), not whatever the launcher printed last.
        reason = summary.get("fate_reason") or (summary.get("last_event") or {}).get("text", "")
        parts.append(str(reason)[:120])
    head = f"{run}: {fate}"
    line = f"{head} — {', '.join(parts)}" if parts else head
    if summary["gpus"]:
        from ledger.logs.nvsmi import describe

        line += "; " + describe(summary["gpus"])
    if result.timed_out:
        line += " (the probe timed out)"
    elif result.exit_code:
        line += f" (the probe command exited {result.exit_code})"
    return line
