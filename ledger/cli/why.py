"""`ledger why`: the likely causes of a difference between two runs, ranked."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ledger.cli.app import cli, emit, json_option, with_ledger

if TYPE_CHECKING:
    from ledger.model.why import Finding, WhyResult
    from ledger.store import Ledger


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


def finding_line(f: Finding) -> str:
    return f"[{f.kind}, {f.score:.2f}] {f.claim}"


def render_why(result: WhyResult) -> str:
    lines = [result.summary + ("" if result.summary.endswith(".") else ".")]
    for note in result.notes:
        lines.append(f"note: {note}")
    if not result.findings:
        lines.append(
            "no finding: nothing in the evidence explains a difference"
            if result.verdict is not None
            else "no finding (the difference is unknown: too little data)"
        )
        return "\n".join(lines)
    for number, f in enumerate(result.findings, 1):
        lines.append("")
        lines.append(f"{number}. {finding_line(f)}")
        if f.explains:
            lines.append(f"   explains: {', '.join(f.explains)}")
        for e in f.evidence:
            where = f"{e.table}" + (f" #{e.id}" if e.id is not None else "")
            lines.append(f"     {where}: {e.text}")
        lines.append(f"   next: {f.next}")
    return "\n".join(lines)
