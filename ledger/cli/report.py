"""`ledger report`: the investigation as figures and a page to share."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ledger.cli.app import cli, emit, json_option, with_ledger
from ledger.cli.params import Percent
from ledger.report.render import FORMAT_HELP

if TYPE_CHECKING:
    from ledger.usecases.ledger import Ledger

OUT_HELP = (
    "The file to write, in the format its suffix names: "
    + "; ".join(f"{suffix} ({words})" for suffix, words in FORMAT_HELP.items())
    + ". A missing folder is created."
)


@cli.command()
@click.option(
    "--runs",
    "runs",
    multiple=True,
    metavar="RUN",
    help="Only these runs (repeatable; default: all). Attempts are shown in the order they ran.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("report.html"),
    show_default=True,
    metavar="FILE",
    help=OUT_HELP,
)
@click.option(
    "--threshold",
    type=Percent(),
    metavar="PCT",
    help="Smallest change that counts, in percent (default 2).",
)
@json_option
@with_ledger(read_only=True)
def report(
    lg: Ledger, runs: tuple[str, ...], out: Path, threshold: float | None, as_json: bool
) -> None:
    """Draw the investigation: every attempt in the order it ran (by its first step) against
    the baseline, each with the figure its verdict uses (effective throughput, stalls
    included, beside the typical step), throughput per run with its stalls, recompiles,
    OOMs and NCCL failures marked, loss, step-time distributions with their spikes, GPU
    memory against the card's capacity, and the chain from each hypothesis to its verdict
    and why. The HTML page needs no network and opens from disk."""
    path = lg.write_report(out, list(runs) or None, threshold=threshold)
    emit({"out": str(path)}, as_json, lambda _: f"report written to {path}")
