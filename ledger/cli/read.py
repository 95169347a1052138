"""Commands that read: runs, show, timeline, and the schema commands under `db`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ledger.cli.app import cli, emit, json_option, local_time, root_option, table, with_ledger
from ledger.present.runs import render_run, step_count

if TYPE_CHECKING:
    from ledger.model import records
    from ledger.usecases.ledger import Ledger


@cli.command()
@json_option
@with_ledger(read_only=True)
def runs(lg: Ledger, as_json: bool) -> None:
    """List the runs: fate, steps, ranks, the patch they test, deploys and drift."""
    items = lg.runs()

    def text(items: list[records.RunSummary]) -> str:
        if not items:
            return "no runs yet (ledger record-fix --run NAME, or ledger ingest LOG)"
        rows = [
            (
                r.run,
                r.fate,
                step_count(r.steps, r.last_step),
                r.ranks,
                f"#{r.hypothesis_id}" if r.hypothesis_id else "-",
                f"#{r.patch_id}" if r.patch_id else "-",
                r.deploy_steps,
                {True: "DRIFT", False: "ok", None: "-"}[r.drift],
                local_time(r.created_at),
            )
            for r in items
        ]
        headers = ["RUN", "FATE", "STEPS", "RANKS", "HYP", "PATCH", "DEPLOYS", "DRIFT", "CREATED"]
        return table(rows, headers)

    emit(items, as_json, text)


@cli.command()
@click.argument("run")
@json_option
@with_ledger(read_only=True)
def show(lg: Ledger, run: str, as_json: bool) -> None:
    """Show RUN with its throughput (the latest launch's effective figure and its % of the
    baseline), the last watch or compare verdict, its launches (RUN@1, RUN@2…) with their
    fates and verdicts, hypothesis, patch, deploy steps, log files and probes."""
    detail = lg.show(run, figures=True)
    emit(detail, as_json, render_run)


@cli.command()
@json_option
@with_ledger(read_only=True)
def timeline(lg: Ledger, as_json: bool) -> None:
    """Every row of the investigation in time order: when, kind, id, what."""
    items = lg.timeline()

    def text(items: list[records.TimelineEntry]) -> str:
        if not items:
            return "nothing recorded yet"
        return table(
            [(local_time(e.when), e.kind, e.id, e.summary) for e in items],
            ["WHEN", "KIND", "ID", "WHAT"],
        )

    emit(items, as_json, text)


@cli.group()
def db() -> None:
    """The ledger's schema: which revision it is at, and upgrading it."""


@db.command("current")
@json_option
def db_current(as_json: bool) -> None:
    """Show the ledger's schema revision and whether it is this version's."""
    from ledger.usecases.admin import current

    emit(current(root_option("db")), as_json, _render_status)


@db.command("upgrade")
@json_option
def db_upgrade(as_json: bool) -> None:
    """Upgrade the ledger's schema to this version's, keeping every row."""
    from ledger.usecases.admin import upgrade

    emit(upgrade(root_option("db")), as_json, _render_upgrade)


def _render_upgrade(u: records.SchemaUpgrade) -> str:
    same = " (already current)" if u.from_revision == u.to_revision else ""
    return f"{u.db}: {u.from_revision or 'empty'} → {u.to_revision}{same}"


def _render_status(s: records.SchemaStatus) -> str:
    state = {
        "current": "up to date",
        "older": f"needs `ledger db upgrade` to {s.head}",
        "newer": f"written by a newer ledger; this one knows revisions up to {s.head}: "
        "upgrade the ledger package",
        "empty": "no ledger yet: `ledger init`",
        "foreign": "tables that are not a ledger's",
    }[s.state]
    return f"{s.db}: revision {s.revision or 'none'} ({state})"
