"""`ledger demo`: an example investigation, end to end."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.app import cli, local_time, table


@cli.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Where to build it (default: a new temporary folder); the ledger is DIR/.ledger/ledger.db",
)
def demo(out: Path | None) -> None:
    """Build an example investigation in a fresh ledger and print its timeline."""
    import tempfile

    from ledger.demo import run_demo

    folder = out or Path(tempfile.mkdtemp(prefix="ledger-demo-"))
    result = run_demo(folder, say=lambda line: click.echo(f"· {line}"))
    click.echo("")
    rows = [(local_time(e.when), e.kind, e.id, e.summary) for e in result.timeline]
    click.echo(table(rows, ["WHEN", "KIND", "ID", "WHAT"]))
    click.echo("")
    click.echo(f"ledger: {result.db}")
    click.echo(f"look around: ledger --db {result.db} show eager_dynamiccopy")
