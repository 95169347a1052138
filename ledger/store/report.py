"""Gathering a report: every attempt with its analysis, comparison and step times."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import LedgerError
from ledger.store.base import LedgerBase

if TYPE_CHECKING:
    from ledger.report.data import ReportData


class ReportMixin(LedgerBase):
    def report_data(
        self, runs: Sequence[str] | None = None, *, threshold: float | None = None
    ) -> ReportData:
        """Everything `ledger report` draws, for `runs` (default: every run, oldest first)."""
        from ledger.analyze import compare_pair
        from ledger.report.data import Attempt, ReportData

        names = list(runs) if runs else self.run_names()  # type: ignore[attr-defined]
        baseline = self.baseline()  # type: ignore[attr-defined]
        attempts: list[Attempt] = []
        first = None
        for name in names:
            detail = self.show(name)  # type: ignore[attr-defined]
            analysis = comparison = step_times = why = None
            if detail.steps:
                try:
                    analysis = self.analyze(name, threshold=threshold)  # type: ignore[attr-defined]
                except LedgerError as exc:  # too few steps, no throughput…: shown, not fatal
                    why = str(exc)
            else:
                why = "no steps recorded"
            if analysis is not None:
                if first is None:
                    first = analysis
                else:
                    comparison = compare_pair(first, analysis, **_threshold(threshold))
                step_times = self._steady_step_times(name, analysis.steady_from_step)
            attempts.append(Attempt(detail, analysis, comparison, step_times, why))
        return ReportData(
            db=self.location.display(),
            investigation=self.investigation_name,
            baseline=baseline,
            attempts=attempts,
            hypotheses=self.hypotheses(),  # type: ignore[attr-defined]
            timeline=self.timeline(),  # type: ignore[attr-defined]
            generated_at=datetime.now(UTC),
        )

    def write_report(
        self,
        out: str | os.PathLike[str],
        runs: Sequence[str] | None = None,
        *,
        threshold: float | None = None,
    ) -> Path:
        """Write the report to `out` (.html, .png or .pdf) and return its path."""
        from ledger.report.render import FORMATS, write_report

        if Path(out).suffix.lower() not in FORMATS:  # before any work
            from ledger.errors import UsageError

            raise UsageError(f"--out {out}: the report is written as .html, .png or .pdf")
        return write_report(self.report_data(runs, threshold=threshold), out)

    def _steady_step_times(self, run: str, steady_from: int) -> object:
        frame = self.steps_frame(run, ["step_time_s"])  # type: ignore[attr-defined]
        times = frame.loc[frame["step"] >= steady_from, "step_time_s"].dropna()
        return times.to_numpy() if len(times) else None


def _threshold(threshold: float | None) -> dict[str, float]:
    return {} if threshold is None else {"threshold": threshold}
