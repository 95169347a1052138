"""`ledger compare` and `ledger baseline`: is it faster, slower, or noise?"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import click

from ledger.cli.app import cli, emit, json_option, open_ledger, table, warn, with_ledger
from ledger.cli.params import ALPHA, ID, THROUGHPUT, Percent

if TYPE_CHECKING:
    from ledger.model.analysis import Baseline, CompareReport
    from ledger.store import Ledger


@cli.command()
@click.argument("runs", nargs=-1, required=True, metavar="RUN_A [RUN_B RUN_C…]")
@click.option(
    "--baseline",
    type=THROUGHPUT,
    metavar="VALUE",
    help="Compare with this throughput instead of the investigation's baseline.",
)
@click.option(
    "--threshold",
    type=Percent(),
    default="2",
    show_default=True,
    metavar="PCT",
    help="Smallest difference that counts as a change, in percent.",
)
@click.option(
    "--alpha",
    type=ALPHA,
    default=0.01,
    show_default=True,
    metavar="P",
    help="Significance level a change must reach.",
)
@click.option(
    "--plot",
    "plot_file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Also draw throughput over steps (.png, .pdf or .svg; a missing folder is created).",
)
@click.option(
    "--resolve",
    "hypothesis_id",
    type=ID,
    metavar="H",
    help="Record the comparison on hypothesis H and resolve H by its verdict "
    "(two runs: before the fix, then with it).",
)
@json_option
@with_ledger(read_only=lambda options: options["hypothesis_id"] is None)
def compare(
    lg: Ledger,
    runs: tuple[str, ...],
    baseline: float | None,
    threshold: float,
    alpha: float,
    plot_file: str | None,
    hypothesis_id: int | None,
    as_json: bool,
) -> None:
    """Compare the steady throughput of runs: each later run against RUN_A, and each
    against the baseline.

    Warm-up and isolated stalls are left out; the verdict (regression, improvement or
    no-change) needs both significance (p < --alpha, from a test that respects
    autocorrelated steps) and a difference of at least --threshold. Change points inside
    a run and the spread between ranks are reported too; docs/analysis.md explains the
    method. A run is judged by its latest launch; RUN@N names another (eager_b@1: the
    first launch of a run relaunched under the same name).

    \b
      ledger compare eager_unpadded eager_dynamiccopy
      ledger compare eager_unpadded eager_dynamiccopy --baseline 14200 --plot cmp.png
      ledger compare eager_unpadded eager_dynamiccopy --resolve 3
      ledger compare eager_b@1 eager_b
    """
    report = lg.compare(
        list(runs),
        baseline=baseline,
        threshold=threshold,
        alpha=alpha,
        resolve=hypothesis_id,
        plot=plot_file,
    )
    for note in report.notes:
        warn(f"warning: {note}")
    emit(report, as_json, render_report)
    if report.plot is not None and not as_json:
        click.echo(f"plot written to {report.plot}")


def render_report(report: CompareReport) -> str:
    from ledger.analyze.wording import baseline_sentence, short_value
    from ledger.report.text import cut_words

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
    lines = [table(rows, headers), ""]
    by_run = {r.run: r for r in report.runs}
    for c in report.comparisons:
        run_b = by_run[c.b]
        against = baseline_sentence(
            run_b.vs_baseline_pct, base.value, run_b.recovered, report.fates.get(c.b)
        )
        lines.append(c.summary + (f"; {against}" if against else "") + ".")
        top = report.why.get(c.b)
        if top is not None and c.verdict != "improvement":
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
    if report.resolution is not None:
        res = report.resolution
        lines.append(f"hypothesis #{res.hypothesis} {res.status} (comparison recorded)")
    return "\n".join(lines)


@cli.group(invoke_without_command=True)
@json_option
@click.pass_context
def baseline(ctx: click.Context, as_json: bool) -> None:
    """Show the throughput the investigation is trying to get back to.

    \b
      ledger baseline                          show it
      ledger baseline set 14200 --unit tok/s   set it
      ledger baseline set --from-run eager_restored
      ledger baseline clear
    """
    if ctx.invoked_subcommand is not None:
        return
    lg = open_ledger(read_only=True)
    try:
        current = lg.baseline()
    finally:
        lg.close()
    emit(current, as_json, _render_baseline)


def _render_baseline(b: Baseline) -> str:
    from ledger.analyze.wording import short_value

    if b.value is None:
        return "no baseline yet (ledger baseline set 14200 --unit tok/s)"
    source = f" (from {b.source})" if b.source and b.source.startswith("run ") else ""
    return f"baseline {b.value:,.6g} {b.unit or ''}".rstrip() + f" ({short_value(b.value)}){source}"


@baseline.command("set")
@click.argument("value", type=THROUGHPUT, required=False)
@click.option("--unit", metavar="UNIT", help="Its unit (default: the current one, else tok/s).")
@click.option(
    "--from-run",
    "from_run",
    metavar="NAME",
    help="Use the effective throughput of this run (stalls included) instead of a number.",
)
@json_option
@with_ledger()
def baseline_set(
    lg: Ledger, value: float | None, unit: str | None, from_run: str | None, as_json: bool
) -> None:
    """Set the baseline to VALUE, or to the effective throughput of --from-run NAME."""
    if (value is None) == (from_run is None):
        raise click.UsageError("give either VALUE or --from-run NAME")
    if from_run is not None and unit is not None:
        raise click.UsageError("--unit goes with VALUE; --from-run takes the run's unit")
    if from_run is not None:
        result = lg.set_baseline_from_run(from_run)
    else:
        result = lg.set_baseline(value, unit)
    emit(result, as_json, _render_baseline)


@baseline.command("clear")
@json_option
@with_ledger()
def baseline_clear(lg: Ledger, as_json: bool) -> None:
    """Forget the baseline: runs are then compared only with each other."""
    result = lg.set_baseline(None)
    emit(result, as_json, lambda _: "baseline cleared")
