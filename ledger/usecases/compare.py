"""Compare runs: the use case behind `ledger compare`, `Ledger.compare` and serve's pages.

The store reads each run's steps, fate and unit and the baseline in one session
(`Store.compare_inputs`); the analysis and the verdicts (ledger.analyze), the notes a
person should read first, the top `why` finding of each slower run and the figure
(ledger.report.plots) are made here with no session open; resolving a hypothesis writes
in a session of its own.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ledger.model.analysis import Baseline, CompareReport, RunAnalysis
from ledger.model.terms import FAILED_FATES, FAULT_FATES, Fate
from ledger.model.units import same_unit
from ledger.store.compare import check_names
from ledger.usecases import why

if TYPE_CHECKING:
    from ledger.readings.steps import StepColumns
    from ledger.store import Store


def compare(
    store: Store,
    runs: Sequence[str],
    *,
    baseline: float | None = None,
    threshold: float | None = None,
    alpha: float | None = None,
    resolve: int | None = None,
    plot: str | os.PathLike[str] | None = None,
) -> CompareReport:
    """Analyse each run and compare every later run with the first (and with the baseline:
    the investigation's, or `baseline`); with `resolve`, keep the comparison on that
    hypothesis and resolve it by the verdict; with `plot`, draw the throughput there."""
    names = check_names(runs, resolve)
    if plot is not None:
        from ledger.report.plots import check_plot_path

        check_plot_path(plot)  # before any work
    found = store.compare_inputs(names, baseline, resolve)
    report = analysed(found.data, found.fates, found.baseline, threshold, alpha, plot)
    report = dataclasses.replace(report, why=why.top_findings(found.pairs, report, threshold))
    if resolve is not None:
        from ledger.analyze import resolution_status

        status = resolution_status(report.comparisons[0])
        resolution = store.store_resolution(report, resolve, status)
        report = dataclasses.replace(report, resolution=resolution)
    return report


def analysed(
    data: Sequence[tuple[str, StepColumns, str | None]],
    fates: dict[str, tuple[str, str | None]],
    baseline: Baseline,
    threshold: float | None,
    alpha: float | None,
    plot: str | os.PathLike[str] | None,
) -> CompareReport:
    """compare's analysis and verdicts (no database): judged with the runs' fates, and the
    throughput figure written to `plot` when asked."""
    from ledger.analyze import DEFAULT_ALPHA, DEFAULT_THRESHOLD, compare_runs

    report = compare_runs(
        data,
        baseline=baseline,
        threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
        alpha=DEFAULT_ALPHA if alpha is None else alpha,
    )
    report = judged(report, fates)
    if plot is not None:
        from ledger.report.plots import save_compare_figure

        report = dataclasses.replace(report, plot=str(save_compare_figure(report, plot)))
    return report


ABSURD = 10.0  # a run 10x above (or below) the baseline is in another unit or scale


def judged(report: CompareReport, fates: dict[str, tuple[str, str | None]]) -> CompareReport:
    """The report with each run's fate, the notes a person should read before trusting it,
    and no "recovered" for a run whose level is absurd against the baseline."""
    runs = [
        dataclasses.replace(r, recovered=None)
        if _absurd(r.vs_baseline_pct) or _contradicts(r)
        else r
        for r in report.runs
    ]
    report = dataclasses.replace(
        report, runs=runs, fates={name: fate for name, (fate, _) in fates.items()}
    )
    return dataclasses.replace(report, notes=notes(report, fates))


def _contradicts(run: RunAnalysis) -> bool:
    """The effective figure ABSURD times the typical step or more, either way: wall times
    that contradict the step times (imported stamps in another unit, a clock reset)."""
    value, median = run.judged_effective, run.median
    if not (math.isfinite(value) and math.isfinite(median)) or value <= 0 or median <= 0:
        return False
    return not 1.0 / ABSURD < value / median < ABSURD


def _absurd(pct: float | None) -> bool:
    return pct is not None and not 100.0 / ABSURD <= pct <= 100.0 * ABSURD


def notes(report: CompareReport, fates: dict[str, tuple[str, str | None]]) -> list[str]:
    """What a person should know before trusting the table: runs that died, unsettled
    runs, levels absurd against the baseline, unit mismatches."""
    found = []
    first = report.runs[0]
    for run in report.runs:
        fate, reason = fates.get(run.run, (Fate.UNKNOWN, None))
        if fate in FAILED_FATES:
            why = f" ({reason[:100]})" if reason else ""
            ended = f"died: {fate}" if fate in FAULT_FATES else "was killed"
            found.append(f"{run.run} {ended}{why}; its figures cover the steps before it ended")
        if _absurd(run.vs_baseline_pct) and report.baseline.value is not None:
            ratio = (run.vs_baseline_pct or 0.0) / 100.0
            found.append(
                f"{run.run} runs at {ratio:,.3g}x the baseline ({report.baseline.value:,.6g} "
                f"{report.baseline.unit or ''}): a different unit or scale? It is not "
                "compared with the baseline as recovered or not".replace(" )", ")")
            )
        if not run.settled:
            found.append(
                f"{run.run} never settled in its first half; its statistics use the second half"
            )
        unit, base = run.unit, report.baseline
        if unit and base.unit and base.value is not None and not same_unit(unit, base.unit):
            found.append(f"{run.run} is in {unit}, the baseline in {base.unit}")
        if run is not first and run.unit and first.unit and not same_unit(run.unit, first.unit):
            found.append(f"{run.run} is in {run.unit}, {first.run} in {first.unit}")
        if _contradicts(run):
            found.append(
                f"{run.run}: its effective figure ({run.judged_effective:,.6g}) is "
                f"{run.judged_effective / run.median:,.3g}x its typical step "
                f"({run.median:,.6g}): its wall times contradict its step times; "
                "it is not compared with the baseline as recovered or not"
            )
    return found
