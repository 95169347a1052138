"""One run's analysis: the use case behind `Ledger.analyze`, `show`'s figures and
`baseline set --from-run`. The store reads the steps in one session; ledger.analyze
judges them after it closes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.store.launches import with_figures

if TYPE_CHECKING:
    from ledger.model import records
    from ledger.model.analysis import Baseline, RunAnalysis
    from ledger.store import Store


def analyze(
    store: Store, run: str, *, threshold: float | None = None, baseline: float | None = None
) -> RunAnalysis:
    """One run's steady window, statistics, outliers, change points and rank spread."""
    from ledger.analyze import DEFAULT_THRESHOLD, analyze_run

    columns, unit, chosen = store.analysis_inputs(run, baseline)
    limit = DEFAULT_THRESHOLD if threshold is None else threshold
    return analyze_run(run, columns, unit=unit, threshold=limit, baseline=chosen)


def show(store: Store, run: str, *, figures: bool = False) -> records.RunDetail:
    """The run as stored; with `figures`, the latest launch's effective throughput and its
    % of the baseline too (an analysis of its steps)."""
    detail = store.detail(run)
    if figures and detail.steps:
        return with_figures(detail, analyze(store, detail.run))
    return detail


def baseline_from_run(store: Store, run: str, *, threshold: float | None = None) -> Baseline:
    """Make the effective throughput of `run` the baseline (its final regime, if it
    changed; in the run's unit)."""
    analysis = analyze(store, run, threshold=threshold, baseline=None)
    return store.set_baseline_of_run(analysis.judged_effective, analysis.unit, run)
