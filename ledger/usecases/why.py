"""Why a run differs from another: the use case behind `ledger why` and `Ledger.why`, and
the top finding compare and the report show. The store gathers the evidence in one read
(ledger.store.why); the findings (ledger.analyze.diagnose) are reasoned here, with no
session open."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.model.terms import Verdict

if TYPE_CHECKING:
    from ledger.model.analysis import CompareReport, RunAnalysis
    from ledger.model.why import Finding, WhyResult
    from ledger.store import Store
    from ledger.store.why import Gathered


def why(store: Store, run: str, against: str | None = None) -> WhyResult:
    """Why `run` differs from `against` (default: the best other run, else the baseline):
    the difference, then the likely causes ranked (docs/why.md)."""
    return explain(store.why_inputs(run, against))


def explain(
    found: Gathered,
    threshold: float | None = None,
    analyses: tuple[RunAnalysis | None, RunAnalysis | None] | None = None,
) -> WhyResult:
    from ledger.analyze import DEFAULT_THRESHOLD
    from ledger.analyze.diagnose import diagnose

    return diagnose(
        found.run,
        found.ref,
        found.changes,
        baseline=found.baseline,
        threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
        analyses=analyses,
    )


def top_findings(
    found: list[Gathered], report: CompareReport, threshold: float | None
) -> dict[str, Finding]:
    """The top finding of each run that compare found slower than the first (reusing its
    analyses); the others are left out."""
    slower = {c.b for c in report.comparisons if c.verdict == Verdict.REGRESSION}
    out = {}
    for pair in found:
        if pair.run.name not in slower or pair.ref is None:
            continue
        analyses = (report.run(pair.run.name), report.run(pair.ref.name))
        top = explain(pair, threshold, analyses).top
        if top is not None:
            out[pair.run.name] = top
    return out
