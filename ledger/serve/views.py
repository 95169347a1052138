"""The records the API returns, as the JSON the pages read.

Each function shapes one API result: it adds the figures in words, in the formats
`ledger compare` prints them (ledger.analyze.wording), and computes nothing new. Text from
the ledger is passed through as data; the pages put it into the document as text only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledger.model.records import jsonable
from ledger.model.terms import ComparisonKind, Verdict
from ledger.present.words import baseline_sentence, p_text, pct, short_value

if TYPE_CHECKING:
    from ledger.model.analysis import CompareReport, RunAnalysis
    from ledger.model.records import RunDetail, StoredComparison
    from ledger.model.report import Attempt, ReportData
    from ledger.model.series import Downsampled

WATCH_KIND = (
    ComparisonKind.WATCH
)  # the kind of a comparison row `ledger watch` keeps (Ledger.record_watch)


def interval(ci: tuple[float, float] | None) -> str:
    """'13.9K–14.1K', as `ledger compare` prints an effective figure's interval."""
    return f"{short_value(ci[0])}–{short_value(ci[1])}" if ci else "-"


def figures(analysis: RunAnalysis) -> dict[str, Any]:
    """The figures of a run the pages show, raw and in words."""
    effective, ci = analysis.judged_effective, analysis.judged_effective_ci95
    return {
        "judged_effective": jsonable(effective),
        "judged_effective_ci95": jsonable(ci),
        "effective_text": short_value(effective),
        "ci_text": interval(ci),
        "median_text": short_value(analysis.median),
        "vs_baseline_pct": jsonable(analysis.vs_baseline_pct),
        "vs_baseline_text": pct(analysis.vs_baseline_pct),
        "recovered": analysis.recovered,
        "judged_from_step": analysis.regime.from_step if analysis.regime else None,
    }


def investigation(data: ReportData) -> dict[str, Any]:
    """The investigation page: the baseline, then every attempt in the order it ran."""
    analysed = data.analysed
    reference = analysed[0].name if analysed else None
    return {
        "investigation": data.investigation,
        "db": data.db,
        "baseline": data.baseline.to_dict(),
        "baseline_text": short_value(data.baseline.value),
        "unit": data.unit,
        "reference": reference,
        "attempts": [_attempt(a, a.name == reference) for a in data.attempts],
    }


def _attempt(attempt: Attempt, is_reference: bool) -> dict[str, Any]:
    detail, comparison = attempt.detail, attempt.comparison
    drifts = [d.drift for d in detail.deploy_steps if d.drift is not None]
    out: dict[str, Any] = {
        "run": detail.run,
        "fate": detail.fate,
        "fate_reason": detail.fate_reason,
        "steps": detail.steps,
        "ranks": detail.ranks,
        "ran_at": jsonable(attempt.ran_at),
        "launches": _launches(detail),
        "drift": any(drifts) if drifts else None,
        "hypothesis": _hypothesis(detail),
        "patch": detail.patch.summary if detail.patch else None,
        "analysed": attempt.analysis is not None,
        "why_not_analysed": attempt.why_not_analysed,
        "is_reference": is_reference,
        "verdict": comparison.verdict if comparison else None,
        "verdict_summary": comparison.summary if comparison else None,
        "delta_pct": jsonable(comparison.delta_pct) if comparison else None,
        "top_finding": attempt.why.top.claim if attempt.why and attempt.why.top else None,
    }
    if attempt.analysis is not None:
        out.update(figures(attempt.analysis))
    return out


def _hypothesis(detail: RunDetail) -> dict[str, Any] | None:
    h = detail.hypothesis
    return None if h is None else {"id": h.id, "text": h.text, "status": h.status}


def _launches(detail: RunDetail) -> int:
    """How many times the run was launched (RUN@1, RUN@2…)."""
    return len(detail.launches)


def run_detail(detail: RunDetail) -> dict[str, Any]:
    return detail.to_dict()


def analysis(result: RunAnalysis) -> dict[str, Any]:
    out = result.to_dict()
    out.update(figures(result))
    return out


def compare(report: CompareReport) -> dict[str, Any]:
    """`compare --json`'s value, with each verdict in the words `ledger compare` prints."""
    by_run = {r.run: r for r in report.runs}
    base = report.baseline
    lines = []
    for c in report.comparisons:
        b = by_run[c.b]
        against = baseline_sentence(b.vs_baseline_pct, base.value, b.recovered)
        lines.append(
            {
                "a": c.a,
                "b": c.b,
                "verdict": c.verdict,
                "sentence": c.summary + (f"; {against}" if against else "") + ".",
                "p_text": p_text(c.p_value),
            }
        )
    covered = {c.b for c in report.comparisons}
    alone = [
        f"{r.run} is {baseline_sentence(r.vs_baseline_pct, base.value, r.recovered)}."
        for r in report.runs
        if base.value is not None and r.run not in covered
    ]
    return {
        "report": report.to_dict(),
        "figures": {r.run: figures(r) for r in report.runs},
        "sentences": lines,
        "baseline_sentences": alone,
    }


def decisions(rows: list[StoredComparison], run: str) -> list[dict[str, Any]]:
    """The comparisons recorded for `run` (watch decisions, compare --resolve), newest first."""
    mine = [r for r in rows if r.b == run]
    return [
        {**r.to_dict(), "is_watch": r.kind == WATCH_KIND, "decided": r.verdict != Verdict.UNDECIDED}
        for r in reversed(mine)
    ]


def series(found: Downsampled) -> dict[str, Any]:
    """A Downsampled as plain lists (its values are floats or None already: no walk)."""
    return {
        "run": found.run,
        "width": found.width,
        "first_step": found.first_step,
        "last_step": found.last_step,
        "rows": found.rows,
        "ranks": found.ranks,
        "steps": found.steps,
        "columns": {k: {"low": e.low, "high": e.high} for k, e in found.columns.items()},
        "per_rank": {str(k): v for k, v in found.per_rank.items()},
    }
