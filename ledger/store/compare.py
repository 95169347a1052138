"""Comparisons: read steps (only the columns needed), hand them to ledger.analyze, and
keep what `--resolve H` decided. The baseline lives on the investigation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import select

from ledger.db import models as m
from ledger.db.types import utcnow
from ledger.errors import UsageError
from ledger.model import records
from ledger.store.base import LedgerBase

if TYPE_CHECKING:
    from ledger.analyze import Baseline, CompareReport, RunAnalysis, StepColumns


@dataclasses.dataclass(frozen=True)
class StoredComparison(records.Record):
    """A row of the `comparison` table, with the runs and the hypothesis by name and id."""

    id: int
    a: str
    b: str
    hypothesis_id: int | None
    created_at: datetime
    unit: str | None
    steady_from_a: int | None
    steady_from_b: int | None
    median_a: float | None
    median_b: float | None
    delta_pct: float | None
    ci95_pct: tuple[float, float] | None
    p_value: float | None
    threshold_pct: float
    alpha: float
    verdict: str
    summary: str


class CompareMixin(LedgerBase):
    # -- reading steps ---------------------------------------------------------------------

    def step_columns(self, run: str) -> StepColumns:
        """The run's steps as arrays for ledger.analyze (raises NotFoundError for a bad name).

        Reads only what the analysis needs, with the same raw reader as `steps_frame`:
        rank only when the run has several, tokens only when a throughput is missing.
        """
        import numpy as np

        from ledger.analyze import StepColumns
        from ledger.store.steps import _fetch_floats, _mark

        with self._read() as session:
            run_id = self._run_row(session, run).id
            conn = session.connection()
            mark = _mark(conn)
            where = f"FROM step WHERE run_id = {mark}"
            # one aggregate per subquery: SQLite then reads each end of the key, not the range
            low, high = conn.exec_driver_sql(
                f"SELECT (SELECT min(rank) {where}), (SELECT max(rank) {where})", (run_id, run_id)
            ).one()
            names = ("step", "throughput", "step_time_s")
            if low != high:
                names = ("rank", *names)
            order = "ORDER BY rank, step"  # the primary key's order: no sort in the database
            table = _fetch_floats(
                conn, f"SELECT {', '.join(names)} {where} {order}", (run_id,), len(names)
            )
            column = {name: table[:, i] for i, name in enumerate(names)}
            tokens = None
            if np.isnan(column["throughput"]).any():
                tokens = _fetch_floats(conn, f"SELECT tokens {where} {order}", (run_id,), 1)[:, 0]
        return StepColumns(
            step=column["step"].astype(np.int64),
            rank=column["rank"].astype(np.int64) if "rank" in column else None,
            throughput=column["throughput"],
            tokens=tokens,
            step_time_s=column["step_time_s"],
        )

    def _run_unit(self, run: str) -> str | None:
        with self._read() as session:
            return self._run_row(session, run).throughput_unit

    # -- analysing ---------------------------------------------------------------------------

    def analyze(
        self, run: str, *, threshold: float | None = None, baseline: float | None = None
    ) -> RunAnalysis:
        """One run's steady window, statistics, outliers, change points and rank spread."""
        from ledger.analyze import DEFAULT_THRESHOLD, analyze_run

        if baseline is None:
            baseline = self.baseline().value
        return analyze_run(
            run,
            self.step_columns(run),
            unit=self._run_unit(run),
            threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
            baseline=baseline,
        )

    def compare(
        self,
        runs: Sequence[str],
        *,
        baseline: float | None = None,
        threshold: float | None = None,
        alpha: float | None = None,
        resolve: int | None = None,
    ) -> CompareReport:
        """Analyse each run and compare every later run with the first.

        `baseline` overrides the investigation's; `threshold` (relative, 0.02 = 2 %) and
        `alpha` decide the verdicts. With `resolve`, exactly two runs: the comparison is
        stored with hypothesis `resolve`, which is resolved by the verdict (faster:
        confirmed; slower, or no change the interval can vouch for: refuted; otherwise
        inconclusive) — see docs/analysis.md.
        """
        from ledger.analyze import DEFAULT_ALPHA, DEFAULT_THRESHOLD, compare_runs

        threshold = DEFAULT_THRESHOLD if threshold is None else threshold
        alpha = DEFAULT_ALPHA if alpha is None else alpha
        names = list(runs)
        if not names:
            raise UsageError("name the runs to compare, e.g. ledger compare eager_a eager_b")
        if len(set(names)) != len(names):
            raise UsageError("each run can be named once")
        if resolve is not None:
            if len(names) != 2:
                raise UsageError(
                    "--resolve takes exactly two runs: the one before the fix, then the one "
                    "that tests hypothesis " + str(resolve)
                )
            self.hypothesis(resolve)  # fail before the work when it does not exist
        units = [self._run_unit(name) for name in names]  # unknown names fail here, first
        chosen = self._baseline_for(baseline, units)
        report = compare_runs(
            [
                (name, self.step_columns(name), unit)
                for name, unit in zip(names, units, strict=True)
            ],
            baseline=chosen,
            threshold=threshold,
            alpha=alpha,
        )
        if resolve is not None:
            report = dataclasses.replace(report, resolution=self._resolve(report, resolve))
        return report

    # -- the baseline -------------------------------------------------------------------------

    def baseline(self) -> Baseline:
        """The investigation's baseline (value None when there is none)."""
        from ledger.analyze import Baseline

        with self._read() as session:
            inv = session.scalar(
                select(m.Investigation).where(m.Investigation.name == self.investigation_name)
            )
            if inv is None or inv.baseline_value is None:
                return Baseline(None, None, None)
            return Baseline(inv.baseline_value, inv.baseline_unit, "investigation")

    def set_baseline(self, value: float | None, unit: str | None = None) -> Baseline:
        """Set (or with None, clear) the throughput the investigation is trying to get back to;
        the unit stays unless given (tok/s if there was none)."""
        from ledger.analyze import Baseline

        if value is not None and unit is None:
            unit = self.baseline().unit or "tok/s"
        inv = self._set_baseline(value, unit)
        if inv.baseline_value is None:
            return Baseline(None, None, None)
        return Baseline(inv.baseline_value, inv.baseline_unit, "investigation")

    def set_baseline_from_run(self, run: str, *, threshold: float | None = None) -> Baseline:
        """Make the steady median of `run` the investigation's baseline (in the run's unit)."""
        from ledger.analyze import Baseline

        analysis = self.analyze(run, threshold=threshold, baseline=None)
        unit = analysis.unit or self.baseline().unit or "tok/s"
        inv = self._set_baseline(analysis.median, unit)
        return Baseline(inv.baseline_value, inv.baseline_unit, f"run {run}")

    def _baseline_for(self, value: float | None, units: list[str | None]) -> Baseline:
        from ledger.analyze import Baseline

        stored = self.baseline()
        if value is None:
            return stored
        if not value > 0:
            raise UsageError(f"the baseline is a throughput above 0, not {value:g}")
        unit = stored.unit or next((u for u in units if u), None)
        return Baseline(value, unit, "option")

    # -- recorded comparisons ------------------------------------------------------------------

    def comparisons(self, *, hypothesis: int | None = None) -> list[StoredComparison]:
        """Comparisons recorded with `--resolve`, oldest first (of one hypothesis if given)."""
        with self._read() as session:
            query = select(m.Comparison).where(
                m.Comparison.investigation_id == self._investigation_id_in(session)
            )
            if hypothesis is not None:
                query = query.where(m.Comparison.hypothesis_id == hypothesis)
            rows = session.scalars(query.order_by(m.Comparison.id)).all()
            names = dict(
                session.execute(
                    select(m.Run.id, m.Run.name).where(
                        m.Run.id.in_({r.run_a_id for r in rows} | {r.run_b_id for r in rows})
                    )
                ).all()
            )
            return [_stored(row, names) for row in rows]

    def _resolve(self, report: CompareReport, hypothesis_id: int) -> object:
        from ledger.analyze import resolution_status
        from ledger.model.analysis import Resolution

        comparison = report.comparisons[0]
        first, second = report.runs
        status = resolution_status(comparison)
        line = f"compare {comparison.a} {comparison.b}: {comparison.summary} → {status}"
        with self._write() as session:
            hypothesis = self._hypothesis_row(session, hypothesis_id)
            row = m.Comparison(
                investigation_id=self._investigation(session).id,
                hypothesis_id=hypothesis.id,
                run_a_id=self._run_row(session, comparison.a).id,
                run_b_id=self._run_row(session, comparison.b).id,
                unit=second.unit or first.unit,
                steady_from_a=first.steady_from_step,
                steady_from_b=second.steady_from_step,
                median_a=comparison.median_a,
                median_b=comparison.median_b,
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
            return Resolution(
                hypothesis=hypothesis.id, status=status, comparison_ids=[row.id], note=line
            )


def _stored(row: m.Comparison, names: dict[int, str]) -> StoredComparison:
    ci = None
    if row.ci_low_pct is not None and row.ci_high_pct is not None:
        ci = (row.ci_low_pct, row.ci_high_pct)
    return records.from_row(
        StoredComparison,
        row,
        a=names.get(row.run_a_id, "?"),
        b=names.get(row.run_b_id, "?"),
        ci95_pct=ci,
    )
