"""Commands that record: init, hypothesis, record-fix, deploy."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from ledger.cli.app import (
    cli,
    emit,
    json_option,
    live_output,
    root_option,
    run_option,
    table,
    with_ledger,
)
from ledger.cli.params import EXIT_CODE, ID, THROUGHPUT, seconds
from ledger.model.terms import HYPOTHESIS_STATUSES, RESOLUTIONS, HypothesisStatus

if TYPE_CHECKING:
    from ledger.model import records
    from ledger.usecases.ledger import Ledger


EXIT_DRIFT = 3  # the artifact is not the patch's file: the step was held, not run


def _fmt_value(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:g}"


@cli.command()
@click.option(
    "--baseline",
    type=THROUGHPUT,
    metavar="VALUE",
    help="The throughput to get back to, e.g. 14200.",
)
@click.option("--unit", metavar="UNIT", help="Its unit (default tok/s).")
@json_option
def init(baseline: float | None, unit: str | None, as_json: bool) -> None:
    """Create the ledger here (.ledger/ledger.db) or where --db says, and set the baseline.

    Running it again is safe: an existing ledger is kept and only its baseline changes.
    """
    from ledger.usecases.admin import init as init_ledger

    if unit is not None and baseline is None:
        raise click.UsageError("--unit goes with --baseline")
    result = init_ledger(
        root_option("db"), baseline=baseline, unit=unit, investigation=root_option("investigation")
    )

    def text(r: records.InitResult) -> str:
        state = "created" if r.created else "already there"
        inv = r.investigation
        base = "no baseline yet (ledger init --baseline 14200 --unit tok/s)"
        if inv.baseline_value is not None:
            base = f"baseline {_fmt_value(inv.baseline_value)} {inv.baseline_unit or ''}".rstrip()
        return f"ledger {r.db} ({state}); {base}"

    emit(result, as_json, text)


@cli.group()
def hypothesis() -> None:
    """Add, resolve and list hypotheses: what you think is wrong."""


@hypothesis.command("add")
@click.argument("text")
@click.option("--parent", type=ID, metavar="ID", help="The hypothesis this one refines.")
@json_option
@with_ledger()
def hypothesis_add(lg: Ledger, text: str, parent: int | None, as_json: bool) -> None:
    """Record a hypothesis, e.g. "torch.compile recompiles because mask closures change"."""
    h = lg.add_hypothesis(text, parent=parent)
    emit(h, as_json, lambda h: f"hypothesis #{h.id} recorded")


@hypothesis.command("resolve")
@click.argument("hypothesis_id", metavar="ID", type=ID)
@click.argument(
    "outcome", required=False, metavar="[confirmed|refuted|inconclusive]",
    type=click.Choice(RESOLUTIONS, case_sensitive=False),
)  # fmt: skip
@click.option("--confirmed", is_flag=True, help="The evidence supports it.")
@click.option("--refuted", is_flag=True, help="The evidence contradicts it.")
@click.option("--inconclusive", is_flag=True, help="The evidence does not decide.")
@click.option("--note", metavar="TEXT", help="Why: the run, the numbers.")
@json_option
@with_ledger()
def hypothesis_resolve(
    lg: Ledger,
    hypothesis_id: int,
    outcome: str | None,
    confirmed: bool,
    refuted: bool,
    inconclusive: bool,
    note: str | None,
    as_json: bool,
) -> None:
    """Mark hypothesis ID confirmed, refuted or inconclusive: as a word or as a flag.

    \b
      ledger hypothesis resolve 3 refuted --note "still 10.4K tok/s"
      ledger hypothesis resolve 3 --confirmed
    """
    flags = {
        HypothesisStatus.CONFIRMED: confirmed,
        HypothesisStatus.REFUTED: refuted,
        HypothesisStatus.INCONCLUSIVE: inconclusive,
    }
    said = [name for name, on in flags.items() if on] + ([outcome.lower()] if outcome else [])
    if len(set(said)) > 1:
        raise click.UsageError(f"say one outcome, not {' and '.join(sorted(set(said)))}")
    if not said:
        raise click.UsageError(
            "say how it ended: confirmed, refuted or inconclusive (as a word, or as "
            "--confirmed, --refuted, --inconclusive)"
        )
    h = lg.resolve_hypothesis(hypothesis_id, said[0], note=note)
    emit(h, as_json, lambda h: f"hypothesis #{h.id} {h.status}")


@hypothesis.command("list")
@click.option(
    "--status",
    type=click.Choice(HYPOTHESIS_STATUSES),
    help="Only hypotheses with this status.",
)
@json_option
@with_ledger(read_only=True)
def hypothesis_list(lg: Ledger, status: str | None, as_json: bool) -> None:
    """List hypotheses, oldest first."""
    from ledger.cli.app import local_time

    items = lg.hypotheses(status=status)

    def text(items: list[records.Hypothesis]) -> str:
        if not items:
            return "no hypotheses yet (ledger hypothesis add TEXT)"
        rows = [(f"#{h.id}", h.status, local_time(h.created_at), h.text) for h in items]
        return table(rows, ["ID", "STATUS", "CREATED", "TEXT"])

    emit(items, as_json, text)


@cli.command("record-fix")
@click.option(
    "--hypothesis",
    "hypothesis_ref",
    required=True,
    metavar="ID|TEXT",
    help="An existing hypothesis id, or the text of a new one.",
)
@click.option("--summary", required=True, metavar="TEXT", help="What the patch changes, in a line.")
@click.option(
    "--diff",
    "diff_file",
    type=click.File("r", encoding="utf-8", errors="replace"),
    metavar="FILE",
    help="The patch as a unified diff (- for stdin); the files it names are hashed where "
    "they exist here.",
)
@click.option(
    "--git",
    "git_dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Take HEAD's commit and `git diff HEAD` from this repository.",
)
@click.option(
    "--file",
    "files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    metavar="PATH",
    help="A file the patch touched; its sha256 is what deploys must ship. Repeatable.",
)
@run_option(required=False, help="The run that will test this patch (created if new).")
@json_option
@with_ledger()
def record_fix(
    lg: Ledger,
    hypothesis_ref: str,
    summary: str,
    diff_file: Any,
    git_dir: str | None,
    files: tuple[str, ...],
    run: str | None,
    as_json: bool,
) -> None:
    """Record a fix attempt in one go: the hypothesis, the patch and the run that tests it."""
    if diff_file is not None and git_dir is not None:
        raise click.UsageError("--diff and --git are two ways to give the diff; use one")
    fix = lg.record_fix(
        hypothesis_ref, summary, diff=diff_file, git_dir=git_dir, files=files, run=run
    )

    def text(f: records.FixRecord) -> str:
        new = " (new)" if f.hypothesis_created else ""
        lines = [
            f"hypothesis #{f.hypothesis_id}{new} · patch #{f.patch_id}"
            + (f" · run {f.run}" if f.run else "")
        ]
        lines += [f"  {pf.sha256[:12]}  {pf.path}" for pf in f.files]
        return "\n".join(lines)

    emit(fix, as_json, text)


def drift_banner(step: records.DeployStep) -> str:
    """The warning a tired person cannot miss."""
    from pathlib import PurePath

    bar = "!" * 76
    name = PurePath(step.artifact_path or "").name
    if step.held:
        what = "!!  NOT RUN: nothing was shipped. Rebuild or re-copy, then deploy again"
        then = "!!  (or --allow-drift to ship it anyway)."
    else:
        what = f"!!  Shipped anyway (--allow-drift): run {step.run!r} will not test the patch."
        then = "!!  Rebuild or re-copy, then deploy again."
    return "\n".join(
        [
            bar,
            f"!!  DRIFT: {step.artifact_path} is NOT the {name} "
            f"that patch #{step.patch_id} recorded.",
            f"!!    artifact sha256 {step.artifact_sha256}",
            f"!!    patched  sha256 {step.expected_sha256}",
            what,
            then,
            bar,
        ]
    )


@cli.command()
@run_option()
@click.option(
    "--step", "step", required=True, metavar="NAME", help="compile, copy, push, relaunch…"
)
@click.option(
    "--artifact",
    type=click.Path(exists=True, dir_okay=False),
    metavar="PATH",
    help="The file this step ships; its sha256 is checked against the run's patch.",
)
@click.option(
    "--timeout",
    type=seconds(zero=False),
    metavar="SECONDS",
    help="Kill the command after this long.",
)
@click.option(
    "--record-only", is_flag=True, help="Do not run anything: record a step that ran elsewhere."
)
@click.option(
    "--exit-code", type=EXIT_CODE, metavar="N", help="With --record-only: the exit status it had."
)
@click.option(
    "--allow-drift",
    is_flag=True,
    help="Run the command even when the artifact drifted from the patch (by default a "
    "drifted step is recorded, not run, and exits 3).",
)
@click.option(
    "--new",
    is_flag=True,
    help="RUN is a new run: make it (without --new an unknown run is refused, so a typo "
    "does not make a stray run).",
)
@json_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@with_ledger()
def deploy(
    lg: Ledger,
    run: str,
    step: str,
    artifact: str | None,
    timeout: float | None,
    record_only: bool,
    exit_code: int | None,
    allow_drift: bool,
    new: bool,
    as_json: bool,
    command: tuple[str, ...],
) -> None:
    """Run one deploy step and record it: ledger deploy --run R --step copy -- scp a host:b

    The command runs without a shell (write sh -c '…' for one); its output is shown as it
    comes and its last 64 KiB are kept, with secrets redacted. Exits with its status. With
    --artifact, the file's sha256 is checked first: when it drifted from the patch (the box
    would run a stale file), the step is recorded but its command does not run, and it
    exits 3 — so `deploy --step copy … && deploy --step relaunch …` stops before anything
    stale ships — unless --allow-drift. A launch step's flags (read through ssh, pct exec,
    kubectl exec, bash -lc, torchrun…) are kept for `ledger why`. SIGTERM, SIGHUP or
    Ctrl-C stop the command's process group and record the step with how it ended.
    """
    if record_only:
        if exit_code is None:
            raise click.UsageError("--record-only needs --exit-code N: how the step ended")
        result = lg.record_deploy(
            run, step, command, exit_code=exit_code, artifact=artifact, new=new
        )
    else:
        if exit_code is not None:
            raise click.UsageError("--exit-code goes with --record-only")
        result = lg.deploy(
            run, step, command, artifact=artifact, timeout=timeout, echo=live_output(as_json),
            allow_drift=allow_drift, new=new,
        )  # fmt: skip

    if result.drift:
        click.echo(click.style(drift_banner(result), fg="red", bold=True), err=True)
    elif result.artifact_path is not None and result.drift is None:
        click.echo(f"note: drift not checked: {result.drift_reason}", err=True)
    if result.launch_note:
        click.echo(f"note: {result.launch_note}", err=True)

    def text(r: records.DeployStep) -> str:
        status = "timed out" if r.timed_out else f"exit {r.exit_code}"
        if r.held:
            status = "not run"
        verdict = {True: "DRIFT", False: "matches the patch", None: ""}[r.drift]
        tail = f", artifact {r.artifact_sha256[:12]} {verdict}" if r.artifact_sha256 else ""
        return f"deploy step #{r.id} {r.run}/{r.name}: {status}{tail}"

    emit(result, as_json, text)
    if result.exit_code:
        sys.exit(result.exit_code if 0 < result.exit_code < 256 else 1)
    if result.drift and (result.held or not allow_drift):
        sys.exit(EXIT_DRIFT)
