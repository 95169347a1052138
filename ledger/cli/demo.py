"""`ledger demo`: an example investigation, end to end."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.app import cli


@cli.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Where to build it (default: ./ledger-demo); the ledger is DIR/.ledger/ledger.db",
)
def demo(out: Path | None) -> None:
    """Build a whole example investigation in a fresh ledger: hypotheses, patches, deploys
    (one ships a stale file), probes, realistic logs, comparisons and DIR/report.html."""
    from ledger.demo import run_demo

    result = run_demo(out or Path("ledger-demo"), say=lambda line: click.echo(f"· {line}"))
    click.echo("")
    click.echo(f"verdict: {result.verdict}")
    click.echo(f"report:  {result.report}")
    click.echo(f"ledger:  {result.db}")
    click.echo(f"look around: cd {result.folder}")
    command = _ledger_command()
    click.echo(f"             {command} timeline; {command} compare baseline eager_dynamiccopy")


def _ledger_command() -> str:
    """`ledger`, or its full path when it is not on PATH (a .venv that is not activated)."""
    import shutil
    import sys

    if shutil.which("ledger"):
        return "ledger"
    beside = Path(sys.executable).with_name("ledger")
    return str(beside) if beside.exists() else f"{sys.executable} -m ledger"
