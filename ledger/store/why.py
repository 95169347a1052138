"""Gathering what `ledger why` reasons over, in one read session: for RUN and REF their
steps (wait_s included), memory per step, the counters the findings read (dynamo's,
data time), log events, GPU samples (the hook's and the probes'), and run_config; and
what was recorded between them (RUN's patch, its files and hypothesis, when REF does not
share it). The flags of the command line the hook recorded are read as settings too.
The analysis (ledger.usecases.why, over ledger.analyze.diagnose) runs after the session
closes.

The reference, unless named: the investigation's best other run (the highest mean
throughput over the second half of its steps, in RUN's unit, at least MIN_STEPS steps),
else the baseline number, else nothing (RUN's own evidence only).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.errors import UsageError
from ledger.launchcmd import split as read_launch
from ledger.model.terms import WHY_EVENT_KINDS, EventKind, Fate
from ledger.store import analysed, compare, launches
from ledger.store.columnar import fetch_floats
from ledger.store.steps import placeholder

if TYPE_CHECKING:
    import numpy as np

    from ledger.readings.evidence import (
        ChangeRow,
        ConfigRow,
        EventRow,
        GpuRow,
        Memory,
        RunEvidence,
    )
    from ledger.readings.steps import StepColumns

MIN_STEPS = 20
# The events the findings read, and how many of each (the latest) are kept.
EVENT_KINDS = WHY_EVENT_KINDS
EVENTS_KEPT = 2000
SAMPLES_KEPT = 5000
# Counters the findings read: dynamo's (the hook) and a log's data-time fields.
METRICS = re.compile(
    r"^dynamo_(?:recompiles|graph_breaks|frames_compiled)$|^(?:train[/_.])?(?:data(?:_?time|_?load(?:ing)?"
    r"(?:_time)?|loader(?:_time)?|_wait)|time[/_.]data|load_time)(?:_s)?$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Gathered:
    run: RunEvidence
    ref: RunEvidence | None
    changes: tuple[ChangeRow, ...]
    baseline: float | None  # the number RUN is judged against when there is no REF run


def gather(
    session: Session,
    inv: int,
    investigation: str,
    run: str,
    against: str | None,
    columns: dict[str, StepColumns] | None = None,
) -> Gathered:
    """What `why` reads for `run` against `against` (None: the default reference);
    `columns`: steps already read, by run name."""
    columns = columns or {}
    named = launches.find(session, inv, run)  # RUN (its latest launch) or RUN@N
    row = named.run
    if against is not None and against == run:
        raise UsageError(f"a run cannot be explained against itself ({run!r}); name another")
    ref = launches.find(session, inv, against) if against is not None else None
    ref_row = ref.run if ref is not None else best_run(session, inv, row)
    baseline = None
    if ref_row is None:
        baseline = compare.baseline(session, investigation).value
    ref_label = ref.label if ref is not None else ref_row.name if ref_row is not None else ""
    return Gathered(
        run=evidence(session, row, columns.get(named.label), named),
        ref=evidence(session, ref_row, columns.get(ref_label), ref)
        if ref_row is not None
        else None,
        changes=tuple(changes_between(session, ref_row, row)),
        baseline=baseline,
    )


def compared(
    session: Session,
    inv: int,
    investigation: str,
    names: Sequence[str],
    columns: Mapping[str, StepColumns],
    wanted: Collection[str] | None = None,
) -> list[Gathered]:
    """What `why` reads for each later run of a comparison (of those `wanted`, when given)
    against the first, reusing the steps compare read (`columns`, by name)."""
    first, later = names[0], names[1:]
    return [
        gather(session, inv, investigation, n, first, dict(columns))
        for n in later
        if wanted is None or n in wanted
    ]


def best_run(session: Session, inv: int, row: m.Run) -> m.Run | None:
    """The other run of the investigation with the highest mean throughput over the second
    half of its steps, in RUN's unit (a cheap stand-in for the analysis: one query)."""
    conn = session.connection()
    mark = placeholder(conn.dialect.name)
    rate = "COALESCE(s.throughput, CASE WHEN s.step_time_s > 0 THEN s.tokens / s.step_time_s END)"
    sql = (
        f"SELECT s.run_id, AVG({rate}), COUNT(*) FROM step s JOIN run r ON r.id = s.run_id "
        "JOIN (SELECT run_id, MAX(step) AS top FROM step GROUP BY run_id) t ON t.run_id = s.run_id "
        f"WHERE r.investigation_id = {mark} AND s.run_id <> {mark} AND 2 * s.step >= t.top "
        "GROUP BY s.run_id"
    )
    unit = row.throughput_unit
    best: tuple[float, int] | None = None
    for run_id, mean, count in conn.exec_driver_sql(sql, (inv, row.id)).all():
        if mean is None or count is None or 2 * int(count) < MIN_STEPS:
            continue
        candidate = session.get_one(m.Run, int(run_id))
        if unit is not None and candidate.throughput_unit not in (None, unit):
            continue
        if best is None or float(mean) > best[0]:
            best = (float(mean), int(run_id))
    return session.get_one(m.Run, best[1]) if best is not None else None


def evidence(
    session: Session,
    row: m.Run,
    columns: StepColumns | None = None,
    named: launches.Named | None = None,
) -> RunEvidence:
    """What `why` reads of one launch of a run (`named`; default its latest; `columns`: its
    steps, when already read)."""
    from ledger.readings.evidence import RunEvidence

    launch = named.launch if named is not None else launches.latest(session.connection(), row.id)
    has_steps = session.scalar(
        select(m.Step.step).where(m.Step.run_id == row.id, m.Step.launch == launch).limit(1)
    )
    if columns is None and has_steps is not None:
        columns = analysed.step_columns(session, row.id, None, launch)
    events, counts = _events(session, row.id, launch)
    fate, reason = launches.fate_and_reason(session, row, launch)
    return RunEvidence(
        name=named.label if named is not None else row.name,
        id=row.id,
        fate=Fate(fate),
        fate_reason=reason,
        unit=row.throughput_unit,
        columns=columns,
        memory=_memory(session, row.id) if has_steps is not None else None,
        metrics=_metrics(session, row.id),
        events=events,
        event_counts=counts,
        gpu=_gpu(session, row.id),
        config=_config(session, row.id),
    )


def _memory(session: Session, run_id: int) -> Memory | None:
    from ledger.readings.evidence import Memory

    conn = session.connection()
    mark = placeholder(conn.dialect.name)
    table = fetch_floats(
        conn,
        ("step", "MAX(memory_allocated_mib)", "MAX(memory_reserved_mib)"),
        f"FROM step WHERE run_id = {mark} AND (memory_allocated_mib IS NOT NULL "
        "OR memory_reserved_mib IS NOT NULL) GROUP BY step ORDER BY step",
        (run_id,),
    )
    if not len(table):
        return None
    return Memory(step=table[:, 0].astype("int64"), allocated=table[:, 1], reserved=table[:, 2])


def _metrics(session: Session, run_id: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    names = session.scalars(select(m.Metric.name).where(m.Metric.run_id == run_id).distinct()).all()
    conn = session.connection()
    mark = placeholder(conn.dialect.name)
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in names:
        if not METRICS.match(name):
            continue
        table = fetch_floats(
            conn,
            ("step", "MAX(value)"),
            f"FROM metric WHERE run_id = {mark} AND name = {mark} GROUP BY step ORDER BY step",
            (run_id, name),
        )
        out[name] = (table[:, 0].astype("int64"), table[:, 1])
    return out


def _events(
    session: Session, run_id: int, launch: int
) -> tuple[tuple[EventRow, ...], dict[str, int]]:
    from ledger.readings.evidence import EventRow

    counts = {
        kind: int(n)
        for kind, n in session.execute(
            select(m.LogEvent.kind, func.count(m.LogEvent.id))
            .where(m.LogEvent.run_id == run_id, m.LogEvent.launch == launch)
            .group_by(m.LogEvent.kind)
        ).all()
    }
    rows: list[m.LogEvent] = []
    for kind in EVENT_KINDS:
        if counts.get(kind):
            rows.extend(
                session.scalars(
                    select(m.LogEvent)
                    .where(
                        m.LogEvent.run_id == run_id,
                        m.LogEvent.launch == launch,
                        m.LogEvent.kind == kind,
                    )
                    .order_by(m.LogEvent.id.desc())
                    .limit(EVENTS_KEPT)
                ).all()
            )
    rows.sort(key=lambda e: (e.log_file_id or 0, e.line or 0, e.id))
    events = tuple(
        EventRow(
            id=e.id,
            kind=EventKind(e.kind),  # the column's CHECK holds it to the enum
            text=e.text,
            step=e.step,
            line=e.line,
            rank=e.rank,
            probe=e.probe_id is not None,
        )
        for e in rows
    )
    return events, counts


def _gpu(session: Session, run_id: int) -> tuple[GpuRow, ...]:
    from ledger.readings.evidence import GpuRow

    probes = select(m.Probe.id).where(m.Probe.run_id == run_id)
    rows = session.scalars(
        select(m.GpuSample)
        .where(or_(m.GpuSample.run_id == run_id, m.GpuSample.probe_id.in_(probes)))
        .order_by(m.GpuSample.id.desc())
        .limit(SAMPLES_KEPT)
    ).all()
    return tuple(
        GpuRow(
            id=g.id,
            gpu_index=g.gpu_index,
            probe_id=g.probe_id,
            rank=g.rank,
            step=g.step,
            utilization_pct=g.utilization_pct,
            memory_used_mib=g.memory_used_mib,
            memory_total_mib=g.memory_total_mib,
            power_w=g.power_w,
            power_limit_w=g.power_limit_w,
            sm_clock_mhz=g.sm_clock_mhz,
            max_sm_clock_mhz=g.max_sm_clock_mhz,
            temperature_c=g.temperature_c,
            throttle=g.throttle,
        )
        for g in reversed(rows)
    )


def _config(session: Session, run_id: int) -> tuple[ConfigRow, ...]:
    from ledger.readings.evidence import ConfigRow

    rows = session.scalars(
        select(m.RunConfig).where(m.RunConfig.run_id == run_id).order_by(m.RunConfig.key)
    ).all()
    out = [ConfigRow(r.key, r.value, r.source) for r in rows]
    have = {r.key for r in rows}
    for r in rows:
        if r.key == "command" and r.source == "hook" and r.value:
            # the hook keeps the command line whole: its flags are settings like a relaunch's
            out += [
                ConfigRow(key, value, r.source)
                for key, value in _command_flags(r.value)
                if key not in have
            ]
    return tuple(out)


def _command_flags(command: str) -> list[tuple[str, str]]:
    """The flags of the command line the hook kept, read as a relaunch's are."""
    try:
        words = shlex.split(command)
    except ValueError:  # an unclosed quote: read the words as they are
        words = command.split()
    return list(read_launch(words).flags)


def changes_between(session: Session, ref: m.Run | None, run: m.Run) -> list[ChangeRow]:
    """RUN's patch with its files and hypothesis, when REF does not test the same patch."""
    from ledger.readings.evidence import ChangeRow

    if run.patch_id is None or (ref is not None and ref.patch_id == run.patch_id):
        return []
    patch = session.get(m.Patch, run.patch_id)
    if patch is None:
        return []
    out = [ChangeRow("patch", patch.id, patch.summary)]
    files = session.scalars(
        select(m.PatchFile).where(m.PatchFile.patch_id == patch.id).order_by(m.PatchFile.path)
    ).all()
    out += [ChangeRow("patch_file", f.id, f.path) for f in files]
    hypothesis = session.get(m.Hypothesis, patch.hypothesis_id)
    if hypothesis is not None:
        out.append(
            ChangeRow("hypothesis", hypothesis.id, f"{hypothesis.text} ({hypothesis.status})")
        )
    return out
