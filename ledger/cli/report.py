"""`ledger report`: the investigation as figures and a page to share."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ledger.cli.app import cli, emit, json_option, with_ledger
from ledger.cli.params import Percent

if TYPE_CHECKING:
    from ledger.store import Ledger


@cli.command()
@click.option(
    "--runs",
    "runs",
    multiple=True,
    metavar="RUN",
    help="Only these runs (repeatable; default: all, oldest first).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("report.html"),
    show_default=True,
    metavar="FILE",
    help="report.html (one self-contained page), .png (one image) or .pdf (a page a figure).",
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
    """Draw the investigation: throughput per run, every attempt against the baseline,
    step-time distributions, GPU memory and utilisation, and the chain from each hypothesis
    to its verdict. The HTML page needs no network and opens from disk."""
    path = lg.write_report(out, list(runs) or None, threshold=threshold)
    emit({"out": str(path)}, as_json, lambda _: f"report written to {path}")
