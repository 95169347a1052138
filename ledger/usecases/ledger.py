"""The Ledger: the public facade of the Python API (`ledger.open()`), and what the command
line, `serve` and the notebook call.

It is a `Store` (ledger.store.facade: every read and write, one transaction per method)
with the use cases on top: each analysis method is one call of a use-case function of
this package (analyze, compare, why, report, imports), which takes the store and typed
inputs and returns records of ledger.model.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.model import records
from ledger.store import Store
from ledger.store.ingest import STALL_AFTER_S
from ledger.usecases import analyze, commands, compare, imports, report, why
from ledger.usecases.commands import Echo

if TYPE_CHECKING:
    import pandas as pd

    from ledger.model.analysis import Baseline, CompareReport, RunAnalysis
    from ledger.model.imports import ImportResult
    from ledger.model.report import ReportData
    from ledger.model.why import WhyResult


class Ledger(Store):
    """One ledger (a SQLite file or a PostgreSQL database) and one investigation in it."""

    def show(self, run: str, *, figures: bool = False) -> records.RunDetail:
        """The run with its hypothesis, patch, deploy steps, log files, probes, launches and
        last verdict; with `figures`, the latest launch's effective throughput and its % of
        the baseline too (an analysis of its steps)."""
        return analyze.show(self, run, figures=figures)

    def runs_frame(self) -> pd.DataFrame:
        """`runs()` as a pandas DataFrame, one row per run."""
        import pandas as pd

        rows = [r.to_dict() for r in self.runs()]
        frame = pd.DataFrame(rows, columns=list(records.RunSummary.__dataclass_fields__))
        frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True)
        return frame

    def set_baseline_from_run(self, run: str, *, threshold: float | None = None) -> Baseline:
        """Make the effective throughput of `run` the baseline (its final regime, if it
        changed; in the run's unit)."""
        return analyze.baseline_from_run(self, run, threshold=threshold)

    def analyze(
        self, run: str, *, threshold: float | None = None, baseline: float | None = None
    ) -> RunAnalysis:
        """One run's steady window, statistics, outliers, change points and rank spread."""
        return analyze.analyze(self, run, threshold=threshold, baseline=baseline)

    def compare(
        self,
        runs: Sequence[str],
        *,
        baseline: float | None = None,
        threshold: float | None = None,
        alpha: float | None = None,
        resolve: int | None = None,
        plot: str | os.PathLike[str] | None = None,
    ) -> CompareReport:
        """Analyse each run and compare every later run with the first (and with the
        baseline: the investigation's, or `baseline`). `threshold` (0.02 = 2 %) and `alpha`
        decide the verdicts. With `resolve` (two runs), the comparison is stored on that
        hypothesis and resolves it (docs/analysis.md). With `plot`, the throughput figure
        is written there (.png, .pdf or .svg)."""
        return compare.compare(
            self,
            runs,
            baseline=baseline,
            threshold=threshold,
            alpha=alpha,
            resolve=resolve,
            plot=plot,
        )

    def why(self, run: str, against: str | None = None) -> WhyResult:
        """Why `run` differs from `against` (default: the best other run, else the
        baseline): the difference, then the likely causes ranked (docs/why.md)."""
        return why.why(self, run, against)

    def report_data(
        self, runs: Sequence[str] | None = None, *, threshold: float | None = None
    ) -> ReportData:
        """Everything `ledger report` draws, for `runs` (default: every run, oldest first)."""
        return report.report_data(self, runs, threshold=threshold)

    def write_report(
        self,
        out: str | os.PathLike[str],
        runs: Sequence[str] | None = None,
        *,
        threshold: float | None = None,
    ) -> Path:
        """Write the report to `out` (.html, .png or .pdf) and return its path."""
        return report.write_report(self, out, runs, threshold=threshold)

    def deploy(
        self,
        run: str,
        step: str,
        command: Sequence[str],
        *,
        artifact: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        echo: Echo | None = None,
        allow_drift: bool = False,
        new: bool = False,
    ) -> records.DeployStep:
        """Run one deploy step (no shell) and record it (the row exists before the command
        starts). A drifted artifact holds the step, not run (`held`), unless `allow_drift`.
        SIGTERM, SIGHUP and Ctrl-C stop the command's process group and close the row
        before they are given back (ledger.proc). An unknown run is refused unless `new`."""
        return commands.deploy(
            self,
            run,
            step,
            command,
            artifact=artifact,
            timeout=timeout,
            echo=echo,
            allow_drift=allow_drift,
            new=new,
        )

    def probe(
        self,
        run: str,
        command: Sequence[str],
        *,
        wait: float = 0.0,
        timeout: float | None = None,
        echo: Echo | None = None,
        patterns: Sequence[str] = (),
        stall_after: float = STALL_AFTER_S,
        sleep: Callable[[float], None] = time.sleep,
        new: bool = False,
    ) -> records.ProbeResult:
        """Wait `wait` seconds, run `command` (no shell), record and read what it said. An
        unknown run is refused unless `new`; signals are taken as `deploy` takes them."""
        return commands.probe(
            self,
            run,
            command,
            wait=wait,
            timeout=timeout,
            echo=echo,
            patterns=patterns,
            stall_after=stall_after,
            sleep=sleep,
            new=new,
        )

    def import_runs(
        self, paths: Sequence[str | os.PathLike[str]], run: str | None = None, *,
        names: Sequence[str] = (),
    ) -> ImportResult:  # fmt: skip
        """Runs other trackers recorded (docs/import.md), new steps only; `names`: SRC=COLUMN."""
        return imports.import_runs(self, paths, run, names=names)
