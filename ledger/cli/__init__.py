"""The command line: a thin click layer over the Python API (see ledger.cli.app)."""

from __future__ import annotations

from ledger.cli import (  # noqa: F401 — registers the commands
    analyze,
    demo,
    imports,
    logs,
    read,
    record,
    report,
    serve,
    watch,
    why,
)
from ledger.cli.app import cli


def main() -> None:
    cli.main(prog_name="ledger")


__all__ = ["cli", "main"]
