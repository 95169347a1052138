"""Compare runs: the use case behind `ledger compare`, `Ledger.compare` and serve's pages.

The store reads each run's steps (or the analysis kept of them, when they have not changed
since: ledger.store.kept), fate and unit and the baseline in one session
(`Store.compare_inputs`); the analysis and the verdicts (ledger.analyze), the notes a
person should read first and the figure (ledger.report.plots) are made here with no
session open. The top `why` finding of each slower run reads what it needs in a session
of its own; keeping the analyses made, and resolving a hypothesis, write in theirs.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.model.analysis import CompareReport, RunAnalysis
from ledger.model.terms import FAILED_FATES, FAULT_FATES, Fate, Verdict
from ledger.model.units import same_unit
from ledger.store.compare import check_names
from ledger.usecases import why

if TYPE_CHECKING:
    from ledger.readings.steps import StepColumns
    from ledger.store import Store
    from ledger.store.compare import Inputs
    from ledger.store.kept import Entry

log = logging.getLogger("ledger.compare")


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
    hypothesis and resolve it by the verdict; with `plot`, draw the throughput there.

    A run whose steps have not changed since compare last analysed it with this threshold
    is not read again: its kept analysis is (ledger.store.kept). A figure needs the steps,
    so `plot` reads them all.
    """
    from ledger.analyze import DEFAULT_ALPHA, DEFAULT_THRESHOLD, check_settings, compare_analyses

    names = check_names(runs, resolve)
    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    alpha = DEFAULT_ALPHA if alpha is None else alpha
    check_settings(threshold, alpha)
    if plot is not None:
        from ledger.report.plots import check_plot_path

        check_plot_path(plot)  # before any work
    settings = kept_settings(threshold)
    found = store.compare_inputs(names, baseline, resolve, None if plot is not None else settings)
    columns = {label: cols for label, cols, _ in found.data if cols is not None}
    analyses, made = _analyses(store, found, columns, threshold, settings)
    report = judged(
        compare_analyses(analyses, baseline=found.baseline, threshold=threshold, alpha=alpha),
        found.fates,
    )
    if plot is not None:
        from ledger.report.plots import save_compare_figure

        report = dataclasses.replace(report, plot=str(save_compare_figure(report, plot)))
    slower = [c.b for c in report.comparisons if c.verdict == Verdict.REGRESSION]
    if slower:  # the top `why` finding of each: what it reads besides the steps
        pairs = store.why_pairs(names, columns, slower)
        report = dataclasses.replace(report, why=why.top_findings(pairs, report, threshold))
    store.keep_analyses(made)
    if resolve is not None:
        from ledger.analyze import resolution_status

        status = resolution_status(report.comparisons[0])
        resolution = store.store_resolution(report, resolve, status)
        report = dataclasses.replace(report, resolution=resolution)
    return report


def _analyses(
    store: Store,
    found: Inputs,
    columns: dict[str, StepColumns],
    threshold: float,
    settings: str,
) -> tuple[list[RunAnalysis], list[Entry]]:
    """Each run's analysis, kept or made (the steps read into `columns`), and the entries
    that keep those made."""
    from ledger.analyze import reframed
    from ledger.model.kept import decode, encode
    from ledger.store.kept import Entry

    value = found.baseline.value
    kept: dict[str, RunAnalysis] = {}
    for label, _, unit in found.data:
        body = found.kept.get(label)
        if body is None:
            continue
        try:
            analysis = decode(body)
        except ValueError as e:  # written by a ledger that kept another shape
            log.warning("the kept analysis of %s is unreadable (%s): analysing it", label, e)
            columns[label] = store.step_columns(label)
        else:
            kept[label] = reframed(analysis, label, unit=unit, threshold=threshold, baseline=value)
    todo = [(label, columns[label], unit) for label, _, unit in found.data if label not in kept]
    made = dict(zip([t[0] for t in todo], _analysed(todo, threshold, value), strict=True))
    entries = []
    for label, analysis in made.items():
        if label in found.versions:
            run_id, launch, version = found.versions[label]
            entries.append(Entry(run_id, launch, settings, version, encode(analysis)))
    return [kept[label] if label in kept else made[label] for label, _, _ in found.data], entries


# Below this many steps in all, a thread costs more than the analysis it would share.
SIDE_BY_SIDE_STEPS = 200_000


def _analysed(
    todo: Sequence[tuple[str, StepColumns, str | None]], threshold: float, baseline: float | None
) -> list[RunAnalysis]:
    """analyze_run of each (label, steps, unit), in order. Long runs are analysed side by
    side, one thread a run up to the CPUs there are: numpy's sorts, partitions and
    reductions over long arrays let go of the GIL, so two million-step runs take about
    two thirds of the time one after the other takes."""
    from ledger.analyze import analyze_run

    def one(item: tuple[str, StepColumns, str | None]) -> RunAnalysis:
        label, cols, unit = item
        return analyze_run(label, cols, unit=unit, threshold=threshold, baseline=baseline)

    workers = min(len(todo), os.cpu_count() or 1)
    if workers < 2 or sum(len(cols.step) for _, cols, _ in todo) < SIDE_BY_SIDE_STEPS:
        return [one(item) for item in todo]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ledger-analysis") as pool:
        return list(pool.map(one, todo))


# The code whose change changes an analysis: a kept one made by other code is not used.
_ANALYSIS_CODE = ("analyze", "model/analysis.py", "model/kept.py", "readings/steps.py",
                  "store/compare.py", "store/analysed.py", "store/columnar.py")  # fmt: skip


@functools.cache
def _code_digest() -> str:
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for part in _ANALYSIS_CODE:
        path = root / part
        for file in sorted(path.glob("*.py")) if path.is_dir() else [path]:
            digest.update(file.name.encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()


def kept_settings(threshold: float) -> str:
    """What a kept analysis must have been made with to be used now: this analyzer's code
    and this threshold (the baseline, the unit and the label are applied after: reframed)."""
    return hashlib.sha256(f"{_code_digest()} {threshold!r}".encode()).hexdigest()


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
