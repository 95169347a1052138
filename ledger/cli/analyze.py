"""`ledger compare` and `ledger baseline`: is it faster, slower, or noise?"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ledger.cli.app import UNLESS_WRITABLE, cli, emit, json_option, open_ledger, warn, with_ledger
from ledger.cli.params import ALPHA, ID, THROUGHPUT, Percent
from ledger.present.compare import render_report

if TYPE_CHECKING:
    from ledger.model.analysis import Baseline
    from ledger.usecases.ledger import Ledger


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
# Without --resolve, compare only reads, but it keeps the analyses it made where it may
# write the ledger (ledger.store.kept): comparing the same runs again reads no steps.
@with_ledger(
    read_only=lambda options: UNLESS_WRITABLE if options["hypothesis_id"] is None else False
)
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
    first launch of a run relaunched under the same name). Each run's analysis is kept
    in the ledger (where this process may write it): comparing again runs whose steps
    have not changed reads no steps.

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
    from ledger.present.words import short_value

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
