"""`ledger import`: runs other trackers recorded (TensorBoard, MLflow, trackio, W&B)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ledger.cli.app import cli, emit, json_option, run_option, with_ledger

if TYPE_CHECKING:
    from ledger.model.imports import ImportedRun, ImportResult
    from ledger.usecases.ledger import Ledger


@cli.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@run_option(required=False, help="The run's name, when PATH holds one run (default: its own).")
@click.option(
    "--map", "names", multiple=True, metavar="SRC=COLUMN",
    help="Send the tracker's scalar SRC to step column COLUMN (throughput:UNIT names the "
    "unit), or keep it a metric (SRC=metric). Repeatable; overrides the default table.",
)  # fmt: skip
@json_option
@with_ledger(check=True)
def import_(
    lg: Ledger, paths: tuple[str, ...], run: str | None, names: tuple[str, ...], as_json: bool
) -> None:
    """Store the runs other trackers recorded in PATH…, recognised by content.

    TensorBoard event files (a folder of them is a run), an MLflow store (mlflow.db or
    mlruns/), a trackio project (.db), a W&B offline run (wandb/offline-run-*) or an
    exported W&B history (CSV or JSON lines with _step); trackio's folder imports every
    project in it. Idempotent and incremental: importing again adds only what is new.
    Values that cannot be read are skipped, counted and named; the import fails (exit 1)
    only when nothing at all could be read. See docs/import.md.
    """
    result = lg.import_runs(paths, run, names=names)
    emit(result, as_json, _text)


def _text(result: ImportResult) -> str:
    if not result.runs:
        return "no runs found"
    return "\n".join(_line(r) for r in result.runs)


def _line(r: ImportedRun) -> str:
    """The run's line, then one indented line per kind of value skipped or file problem."""
    what = f"{r.steps:,} step rows, {r.metrics:,} metrics"
    if r.filled:
        what += f", {r.filled:,} steps given values logged since"
    if not (r.steps or r.metrics or r.filled):
        what = "nothing new"
    mapped = ", ".join(f"{src}→{col}" for src, col in r.columns.items()) or "no step columns"
    made = " (new run)" if r.run_created else ""
    ranks = f" (rank {', '.join(map(str, r.ranks))})" if r.ranks != (0,) else ""
    bad = f"; {r.bad_values:,} values not stored as given" if r.bad_values else ""
    skipped = f"; {r.skipped:,} values skipped" if r.skipped else ""
    head = f"{r.run}{ranks}{made}: {r.source} {r.origin}: {what} ({mapped}){bad}{skipped}"
    return "\n".join([f"{head}; fate {r.fate}", *(f"  - {p}" for p in r.problems)])
