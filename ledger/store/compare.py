"""Comparisons: read steps (only the columns needed) in one read, for the use cases to
hand to ledger.analyze, and keep what resolving a hypothesis and watch decided. The
baseline lives on the investigation."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.db.types import utcnow
from ledger.errors import UsageError
from ledger.model import records
from ledger.model.analysis import Baseline, CompareReport, MonitorState, Resolution
from ledger.model.terms import ComparisonKind, HypothesisStatus
from ledger.store import kept as kept_rows
from ledger.store import launches
from ledger.store.columnar import BULK_ROWS, fetch_floats
from ledger.store.lookup import hypothesis_row, investigation_row, run_row
from ledger.store.steps import (
    column_counts,
    held_columns,
    latest_launch,
    placeholder,
    rank_bounds,
)

if TYPE_CHECKING:
    from ledger.readings.steps import StepColumns

DEFAULT_UNIT = "tok/s"


@dataclass(frozen=True)
class Inputs:
    """What compare analyses, read in one session (ledger.store.facade.Store.compare_inputs).

    A run whose analysis was kept (ledger.store.kept) and whose steps have not changed
    since has no steps here (None) but its analysis in `kept`; every other run has its
    steps. `versions` says what each run's steps were when looked at (before they were
    read), to keep the analysis made of them.
    """

    data: list[tuple[str, StepColumns | None, str | None]]  # label, steps, unit: as named
    fates: dict[str, tuple[str, str | None]]  # label → fate, reason
    baseline: Baseline  # the one chosen: the investigation's, or the override
    kept: dict[str, str] = field(default_factory=dict)  # label → kept analysis (JSON)
    versions: dict[str, tuple[int, int, kept_rows.Version]] = field(default_factory=dict)


def inputs(
    session: Session,
    inv: int,
    investigation: str,
    names: Sequence[str],
    baseline_value: float | None,
    settings: str | None,
) -> Inputs:
    """What compare analyses (Inputs): with `settings`, a run whose analysis was kept with
    them over the steps it still has is not read again."""
    named = [launches.find(session, inv, name) for name in names]
    units = [n.run.throughput_unit for n in named]
    fates = {n.label: launches.fate_and_reason(session, n.run, n.launch) for n in named}
    chosen = override(baseline(session, investigation), baseline_value, units)
    data: list[tuple[str, StepColumns | None, str | None]] = []
    found: dict[str, str] = {}
    versions: dict[str, tuple[int, int, kept_rows.Version]] = {}
    for n in named:
        if settings is not None:
            now = kept_rows.version(session, n.run.id, n.launch)  # before the steps are read
            versions[n.label] = (n.run.id, n.launch, now)
            body = kept_rows.find(session, n.run.id, n.launch, settings, now)
            if body is not None:
                found[n.label] = body
                data.append((n.label, None, n.run.throughput_unit))
                continue
        columns = step_columns(session, n.run.id, None, n.launch)
        data.append((n.label, columns, n.run.throughput_unit))
    return Inputs(data, fates, chosen, found, versions)


# No training throughput comes near this in any unit (tokens, samples, words or FLOP per
# second are all below 1e15 on the largest clusters); past it a figure is a typo.
MAX_BASELINE = 1e15


def check_baseline(value: float | None) -> float | None:
    """A baseline is a finite throughput above 0 and at most MAX_BASELINE (None clears it)."""
    if value is None:
        return None
    if not isinstance(value, int | float) or not math.isfinite(value) or not value > 0:
        raise UsageError(f"the baseline is a finite throughput above 0, not {value!r}")
    if value > MAX_BASELINE:
        raise UsageError(
            f"a baseline of {value:.3g} is past any training throughput (at most {MAX_BASELINE:g})"
        )
    return float(value)


def baseline(session: Session, investigation: str) -> Baseline:
    """The investigation's baseline (value None when there is none)."""
    inv = session.scalar(select(m.Investigation).where(m.Investigation.name == investigation))
    if inv is None or inv.baseline_value is None:
        return Baseline(None, None, None)
    return Baseline(inv.baseline_value, inv.baseline_unit, "investigation")


def set_baseline(
    session: Session, investigation: str, value: float | None, unit: str | None, source: str
) -> Baseline:
    """Store the baseline; the unit stays unless given (tok/s when there was none)."""
    row = investigation_row(session, investigation)
    row.baseline_value = value
    if value is None:
        row.baseline_unit = None
        return Baseline(None, None, None)
    if unit is not None and unit.strip():
        row.baseline_unit = unit.strip()
    elif not row.baseline_unit:
        row.baseline_unit = DEFAULT_UNIT
    return Baseline(value, row.baseline_unit, source)


def override(stored: Baseline, value: float | None, units: Sequence[str | None]) -> Baseline:
    """The baseline a comparison uses: `value` when given (in the stored unit, else the runs')."""
    if value is None:
        return stored
    value = check_baseline(value)
    unit = stored.unit or next((u for u in units if u), None)
    return Baseline(value, unit, "option")


# What the analyzer reads of a step, beside its number: the throughput, and what its
# effective figure needs (tokens, and the time a step cost: inside it, between steps, or
# from one wall-clock reading to the next).
ANALYSED = ("throughput", "tokens", "step_time_s", "wait_s", "wall_time")


def step_columns(
    session: Session, run_id: int, after: int | None = None, launch: int | None = None
) -> StepColumns:
    """The steps of one launch of the run (default: its latest; those after step `after`,
    when given) as arrays for ledger.analyze, reading only the columns that hold something:
    those the launch's held_columns name (ledger.store.steps), or, where the ledger does not
    know them, what a count over the rows says (on SQLite, all of them in one scan when its
    first steps hold every one); rank only when the run has several."""
    import numpy as np

    conn = session.connection()
    launch = latest_launch(conn, run_id) if launch is None else launch
    low, high = rank_bounds(conn, run_id, launch)
    mark = placeholder(conn.dialect.name)
    where = f"FROM step WHERE run_id = {mark} AND launch = {mark}"
    params: tuple[int, ...] = (run_id, launch)
    if after is not None:
        where += f" AND step > {mark}"
        params = (run_id, launch, after)
    known = held_columns(conn, run_id, launch)
    if known is not None:
        held = tuple(c for c in ANALYSED if c in known)
        rows, first, last = _extent(conn, where, params, low, high)
    elif (
        conn.dialect.name == "sqlite"
        and low is not None
        and high is not None
        and _all_held_early(conn, where, params)
    ):
        return _one_scan(conn, where, params, low, high)
    else:
        # one scan: which columns hold something, and whether the steps are 0, 1, 2, …
        # apart from where they start (then they are not read, row by row, at all)
        held, rows, first, last = column_counts(conn, where, params, ANALYSED)
    consecutive = (
        low == high and first is not None and last is not None and last - first + 1 == rows
    )
    bulk = rows >= BULK_ROWS
    names: tuple[str, ...] = held if consecutive else ("step", *held)
    if low != high:
        names = ("rank", *names)
    order = "ORDER BY rank, step"  # the primary key's order: no sort in the database
    if consecutive:
        # The bulk reader has a connection of its own, which may already see rows a
        # writer added since the count: read exactly the rows counted.
        bounded = f"{where} AND rank = {mark} AND step BETWEEN {mark} AND {mark} {order}"
        table = fetch_floats(
            conn, names or ("step",), bounded, (*params, low, first, last), bulk=bulk
        )
        if len(table) != rows:  # rows were removed meanwhile: read the steps too
            consecutive = False
            names = ("step", *held)
    if not consecutive:
        table = fetch_floats(conn, names, f"{where} {order}", params, bulk=bulk)
    column = {name: table[:, i] for i, name in enumerate(names)}
    if known is not None:
        _drop_empty(column)  # a bit may outlive its rows' values (a step written twice)
    # consecutive: the steps are first, first + 1, …, one per row read
    step = (
        first + np.arange(len(table), dtype=np.int64) if consecutive and first is not None else None
    )
    return _columns(column, step, len(table))


def _extent(
    conn: Connection, where: str, params: tuple[int, ...], low: int | None, high: int | None
) -> tuple[int, int | None, int | None]:
    """How many steps `where` selects (a count on the key's index, no row read), and, for
    one rank, the first and the last (the ends of the key)."""
    mark = placeholder(conn.dialect.name)
    if low is None or low != high:
        rows = conn.exec_driver_sql(f"SELECT count(*) {where}", params).scalar_one()
        return int(rows), None, None
    rows, first, last = conn.exec_driver_sql(
        f"SELECT (SELECT count(*) {where}), (SELECT min(step) {where} AND rank = {mark}), "
        f"(SELECT max(step) {where} AND rank = {mark})",
        (*params, *params, low, *params, low),
    ).one()
    return int(rows), first, last


def _drop_empty(column: dict[str, Any]) -> None:
    """Drop the analysed columns no row read holds a number in (throughput stays)."""
    import numpy as np

    for name in ANALYSED:
        if name != "throughput" and name in column and np.isnan(column[name]).all():
            del column[name]


# The first steps a run stored, looked at to choose how to read it on SQLite (next).
EARLY_STEPS = 1000


def _all_held_early(conn: Connection, where: str, params: tuple[int, ...]) -> bool:
    """Whether every analysed column holds a value in the run's first EARLY_STEPS rows.

    Then all of them are read in one scan (_one_scan). Otherwise a column is probably
    empty, and an empty column costs ADBC's driver as much as a full one (about 0.12 s a
    million rows): one scan that counts the columns (0.3 s), then a read of those that
    hold something, without the steps when they are consecutive, costs less.
    """
    counts = conn.exec_driver_sql(
        f"SELECT {', '.join(f'count({c})' for c in ANALYSED)} FROM "
        f"(SELECT {', '.join(ANALYSED)} {where} ORDER BY rank, step LIMIT {EARLY_STEPS})",
        params,
    ).one()
    return all(counts)


def _one_scan(
    conn: Connection, where: str, params: tuple[int, ...], low: int, high: int
) -> StepColumns:
    """SQLite: every analysed column in one bulk read (a NULL costs the driver nothing),
    the empty ones dropped after: one scan of the rows where a count of the columns that
    hold something and then the read made two. How many rows there are is judged from the
    ends of the key (cheap), to choose the bulk reader or the cursor."""

    mark = placeholder(conn.dialect.name)
    ends = conn.exec_driver_sql(
        f"SELECT (SELECT min(step) {where} AND rank = {mark}), "
        f"(SELECT max(step) {where} AND rank = {mark})",
        (*params, low, *params, high),
    ).one()
    first, last = ends
    estimate = 0 if first is None or last is None else (last - first + 1) * (high - low + 1)
    names = ("step", *ANALYSED) if low == high else ("rank", "step", *ANALYSED)
    table = fetch_floats(
        conn, names, f"{where} ORDER BY rank, step", params, bulk=estimate >= BULK_ROWS
    )
    column = {name: table[:, i] for i, name in enumerate(names)}
    _drop_empty(column)  # held by no row: as the count would have said
    return _columns(column, None, len(table))


def _columns(column: dict[str, Any], step: Any, rows: int) -> StepColumns:
    import numpy as np

    from ledger.readings.steps import StepColumns

    return StepColumns(
        step=step if step is not None else column["step"].astype(np.int64),
        rank=column["rank"].astype(np.int64) if "rank" in column else None,
        throughput=column.get("throughput", np.full(rows, np.nan)),
        tokens=column.get("tokens"),
        step_time_s=column.get("step_time_s"),
        wall_time=column.get("wall_time"),
        wait_s=column.get("wait_s"),
    )


def check_names(runs: Sequence[str], resolve: int | None) -> list[str]:
    names = list(runs)
    if not names:
        raise UsageError("name the runs to compare, e.g. ledger compare eager_a eager_b")
    if len(set(names)) != len(names):
        raise UsageError("each run can be named once")
    if resolve is not None and len(names) != 2:
        raise UsageError(
            f"resolving hypothesis {resolve} takes exactly two runs: the one before the fix, "
            "then the one that tests it"
        )
    return names


def resolve(
    session: Session,
    investigation: str,
    report: CompareReport,
    hypothesis_id: int,
    status: HypothesisStatus,
) -> Resolution:
    """Store the comparison on the hypothesis and resolve it as `status` (what its verdict
    says, ledger.analyze.resolution_status)."""
    inv = investigation_row(session, investigation).id
    comparison = report.comparisons[0]
    first, second = report.runs
    line = f"compare {comparison.a} {comparison.b}: {comparison.summary} → {status}"
    hypothesis = hypothesis_row(session, inv, hypothesis_id)
    # RUN or RUN@N: the launches compared are kept with the runs
    a, b = launches.find(session, inv, comparison.a), launches.find(session, inv, comparison.b)
    row = m.Comparison(
        investigation_id=inv,
        hypothesis_id=hypothesis.id,
        run_a_id=a.run.id,
        run_b_id=b.run.id,
        launch_a=a.launch,
        launch_b=b.launch,
        kind=ComparisonKind.COMPARE,
        unit=second.unit or first.unit,
        steady_from_a=first.steady_from_step,
        steady_from_b=second.steady_from_step,
        median_a=comparison.median_a,
        median_b=comparison.median_b,
        effective_a=comparison.effective_a,
        effective_b=comparison.effective_b,
        delta_pct=comparison.delta_pct,
        ci_low_pct=comparison.ci95_pct[0] if comparison.ci95_pct else None,
        ci_high_pct=comparison.ci95_pct[1] if comparison.ci95_pct else None,
        p_value=comparison.p_value,
        threshold_pct=comparison.threshold_pct,
        alpha=comparison.alpha,
        verdict=comparison.verdict,
        summary=comparison.summary,
    )
    session.add(row)
    hypothesis.status = status
    hypothesis.resolved_at = utcnow()
    hypothesis.note = f"{hypothesis.note}\n{line}" if hypothesis.note else line
    session.flush()
    return Resolution(hypothesis=hypothesis.id, status=status, comparison_ids=[row.id], note=line)


def stored(session: Session, inv: int, hypothesis: int | None) -> list[records.StoredComparison]:
    """Recorded comparisons, oldest first (of one hypothesis if given)."""
    query = select(m.Comparison).where(m.Comparison.investigation_id == inv)
    if hypothesis is not None:
        query = query.where(m.Comparison.hypothesis_id == hypothesis)
    rows = session.scalars(query.order_by(m.Comparison.id)).all()
    ids = {r.run_b_id for r in rows} | {r.run_a_id for r in rows if r.run_a_id is not None}
    names = dict(session.execute(select(m.Run.id, m.Run.name).where(m.Run.id.in_(ids))).all())
    return [_stored(row, names) for row in rows]


def stored_record(session: Session, row: m.Comparison) -> records.StoredComparison:
    """One stored comparison, with its runs by name."""
    ids = [i for i in (row.run_a_id, row.run_b_id) if i is not None]
    names = dict(session.execute(select(m.Run.id, m.Run.name).where(m.Run.id.in_(ids))).all())
    return _stored(row, names)


def _stored(row: m.Comparison, names: dict[int, str]) -> records.StoredComparison:
    ci = None
    if row.ci_low_pct is not None and row.ci_high_pct is not None:
        ci = (row.ci_low_pct, row.ci_high_pct)
    return records.from_row(
        records.StoredComparison,
        row,
        a=names.get(row.run_a_id) if row.run_a_id is not None else None,
        b=names.get(row.run_b_id, "?"),
        ci95_pct=ci,
    )


def watch_decision(
    session: Session,
    inv: int,
    run: str,
    against: str | None,
    state: MonitorState,
    outcome: str,
    summary: str,
) -> records.StoredComparison:
    """Keep what `ledger watch` decided about `run` (against a run, or the baseline)."""
    run_b = run_row(session, inv, run)
    run_a = launches.find(session, inv, against).run if against is not None else None
    ci = state.pct_ci
    row = m.Comparison(
        investigation_id=inv,
        run_a_id=run_a.id if run_a is not None else None,
        run_b_id=run_b.id,
        kind=ComparisonKind.WATCH,
        unit=run_b.throughput_unit,
        steady_from_b=state.steady_from_step,
        median_b=state.median,
        effective_a=state.reference.value if run_a is not None else None,
        effective_b=state.effective,
        reference_value=state.reference.value if run_a is None else None,
        delta_pct=state.pct_of_reference - 100.0 if state.pct_of_reference is not None else None,
        ci_low_pct=ci[0] - 100.0 if ci is not None else None,
        ci_high_pct=ci[1] - 100.0 if ci is not None else None,
        threshold_pct=state.threshold_pct,
        alpha=state.alpha,
        verdict=outcome,
        decided_at_step=state.decided_at_step,
        summary=summary,
    )
    session.add(row)
    session.flush()
    names = {run_b.id: run_b.name, **({run_a.id: run_a.name} if run_a is not None else {})}
    return _stored(row, names)
