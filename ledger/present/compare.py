"""`ledger compare` in words: the table of runs, then a sentence per comparison and per
change inside a run."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ledger.model.terms import Verdict
from ledger.present.table import table

if TYPE_CHECKING:
    from ledger.model.analysis import CompareReport


def render_report(report: CompareReport) -> str:
    """The table of runs, the verdicts, what changed inside each run, the resolution."""
    lines = [_runs_table(report), "", *_verdicts(report), *_inside_runs(report)]
    if report.resolution is not None:
        res = report.resolution
        lines.append(f"hypothesis #{res.hypothesis} {res.status} (comparison recorded)")
    return "\n".join(lines)


def _runs_table(report: CompareReport) -> str:
    from ledger.present.words import short_value

    base = report.baseline
    rows = []
    for r in report.runs:
        effective_ci = r.effective_ci95
        rows.append(
            (
                r.run,
                report.fates.get(r.run, "-"),
                f"{r.steady_from_step:,}",
                f"{r.n_steady:,}",
                short_value(r.effective) if math.isfinite(r.effective) else "-",
                f"{short_value(effective_ci[0])}–{short_value(effective_ci[1])}"
                if effective_ci
                else "-",
                short_value(r.median),
                f"{r.stalls.recurring} ({r.stalls.cost_pct:.1f} %)"
                if r.stalls is not None and r.stalls.recurring
                else "-",
                f"{100 * r.cv:.1f} %" if math.isfinite(r.cv) else "-",
                len(r.change_points),
                f"{r.vs_baseline_pct:.1f} %" if r.vs_baseline_pct is not None else "-",
            )
        )
    unit = next((r.unit for r in report.runs if r.unit), None) or base.unit or ""
    headers = [
        "RUN",
        "FATE",
        "STEADY FROM",
        "STEPS",
        f"EFFECTIVE {unit}".strip(),
        "95% CI",
        "MEDIAN",
        "STALLS (TIME)",
        "CV",
        "CHANGES",
        "OF BASELINE",
    ]
    return table(rows, headers)


def _verdicts(report: CompareReport) -> list[str]:
    """A sentence per comparison (with the top `why` finding of a slower run), then each
    run against the baseline that no comparison covered."""
    from ledger.present.words import baseline_sentence, cut_words

    base = report.baseline
    lines = []
    by_run = {r.run: r for r in report.runs}
    for c in report.comparisons:
        run_b = by_run[c.b]
        against = baseline_sentence(
            run_b.vs_baseline_pct, base.value, run_b.recovered, report.fates.get(c.b)
        )
        lines.append(c.summary + (f"; {against}" if against else "") + ".")
        top = report.why.get(c.b)
        if top is not None and c.verdict != Verdict.IMPROVEMENT:
            claim = cut_words(top.claim, 200)
            told = f"{top.kind}, {top.score:.2f}; ledger why {c.b} --against {c.a}"
            lines.append(f"  why: {claim} [{told}]")
    if base.value is not None:
        covered = {c.b for c in report.comparisons}
        for r in report.runs:
            if r.run not in covered:
                said = baseline_sentence(
                    r.vs_baseline_pct, base.value, r.recovered, report.fates.get(r.run)
                )
                lines.append(f"{r.run} is {said}.")
    else:
        lines.append("no baseline (ledger baseline set 14200 --unit tok/s, or --baseline)")
    return lines


def _inside_runs(report: CompareReport) -> list[str]:
    """What changed inside each run: its final regime, change points, the rank spread."""
    from ledger.present.words import short_value

    lines = []
    for r in report.runs:
        if r.regime is not None:
            lines.append(
                f"{r.run}: judged on the {r.regime.n_steps:,} steps from step "
                f"{r.regime.from_step:,}, after its last change ({r.regime.shift_pct:+.1f} %): "
                f"effective {short_value(r.regime.effective)}, "
                f"median {short_value(r.regime.median)}"
            )
        for cp in r.change_points:
            verb = "rose" if cp.shift_pct > 0 else "fell"
            lines.append(
                f"{r.run}: throughput {verb} {abs(cp.shift_pct):.1f} % at step {cp.step:,} "
                f"({short_value(cp.before)} → {short_value(cp.after)})"
            )
        if r.ranks is not None:
            lines.append(
                f"{r.run}: slowest of {r.ranks.ranks} ranks is rank {r.ranks.slowest_rank} "
                f"({short_value(r.ranks.slowest_median)}); ranks spread "
                f"{r.ranks.spread_pct:.1f} %"
            )
    return lines
