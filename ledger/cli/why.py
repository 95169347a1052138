"""`ledger why`: the likely causes of a difference between two runs, ranked."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ledger.cli.app import cli, emit, json_option, with_ledger
from ledger.present.why import render_why

if TYPE_CHECKING:
    from ledger.usecases.ledger import Ledger


@cli.command()
@click.argument("run", metavar="RUN")
@click.option(
    "--against",
    metavar="REF",
    help="The run to explain RUN against (default: the best other run, else the baseline).",
)
@json_option
@with_ledger(read_only=True)
def why(lg: Ledger, run: str, against: str | None, as_json: bool) -> None:
    """Why RUN is slower (or faster) than REF: the difference as compare states it, then
    the likely causes ranked, each with the rows that show it and what to try next.

    A cause is named only when its evidence holds (docs/why.md lists the kinds and what
    each needs); two runs of the same process with nothing planted get none.

    \b
      ledger why compiled_flex --against eager_unpadded
      ledger why compiled_flex --json
    """
    emit(lg.why(run, against), as_json, render_why)
