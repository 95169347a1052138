"""Deploy steps: getting a patch onto the box, and catching a stale file on the way.

A deploy step that names an artifact is checked against its run's patch before its
command runs: the artifact's sha256 must equal the sha256 the patch recorded for a file of
the same name. A mismatch is drift — the box would run something other than the patch —
and the step is recorded but held: its command does not run (`allow_drift` runs it). The
run's drift mark is its current state: for each artifact, what its latest checked step
found, so a later step that ships the patched file clears it (both steps stay rows).

A step that (re)launches the run (its name says launch, start, train or run) has its
command read for what it sets (ledger.launchcmd, through ssh, `pct exec`, `kubectl exec`,
`bash -lc`, torchrun…): `--token-budget 49152` → `flag.token-budget = 49152`,
`--compile-drafter` → `flag.compile-drafter = true`, `NCCL_ALGO=Ring python …` →
`env.NCCL_ALGO = Ring`, kept in run_config with source `deploy` (the latest relaunch's
replace the earlier ones), so `why` can say how the run was started. A command whose flags
cannot be read keeps the earlier launch's, and the step's record says why.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import PurePath

from sqlalchemy import select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.db.types import utcnow
from ledger.errors import UsageError
from ledger.launchcmd import split as read_launch
from ledger.model import records
from ledger.proc import CommandResult, Stop, run_command
from ledger.store import gate, launches
from ledger.store.lookup import NEW_RUN_HINT, ensure_run, find_run, run_row

LAUNCH_STEP = re.compile(r"launch|start|train|^run$", re.IGNORECASE)
HELD = "not run: the artifact drifted from the patch"  # how a held step's output begins


def check_command(command: Sequence[str], step: str) -> list[str]:
    argv = [str(part) for part in command]
    if not argv:
        raise UsageError(
            "give the command after --, e.g. ledger deploy --run R --step copy -- scp a b"
        )
    if not step.strip():
        raise UsageError("a deploy step needs a name (compile, copy, push, relaunch…)")
    return argv


def drift_check(
    session: Session, inv: int, run: str, artifact: str | os.PathLike[str], digest: str
) -> records.DriftCheck:
    """Compare a file about to be shipped (its sha256 `digest`) with what the patch recorded."""
    path = os.fspath(artifact)
    name = PurePath(path).name
    run_ = find_run(session, inv, run)  # an unknown run is refused (or made) by new_step
    if run_ is None or run_.patch_id is None:
        reason = f"run {run!r} has no patch recorded (ledger record-fix --run {run})"
        return records.DriftCheck(path, digest, None, None, None, reason)
    files = session.scalars(select(m.PatchFile).where(m.PatchFile.patch_id == run_.patch_id)).all()
    same_name = [f for f in files if PurePath(f.path).name == name]
    if not same_name:
        reason = f"patch #{run_.patch_id} recorded no file named {name}"
        return records.DriftCheck(path, digest, None, None, None, reason)
    for candidate in same_name:
        if candidate.sha256 == digest:
            reason = f"matches {candidate.path} of patch #{run_.patch_id}"
            return records.DriftCheck(path, digest, candidate.path, digest, False, reason)
    expected = same_name[0]
    reason = f"{path} is not the {expected.path} recorded by patch #{run_.patch_id}"
    return records.DriftCheck(path, digest, expected.path, expected.sha256, True, reason)


def new_step(
    session: Session,
    inv: int,
    run: str,
    step: str,
    argv: list[str],
    check: records.DriftCheck | None,
    *,
    new: bool = False,
    held: bool = False,
) -> tuple[m.DeployStep, str | None]:
    """The step's row, written before its command runs (a killed deploy still shows), and
    for a launch step whose flags could not be read, why (None otherwise). An unknown run
    is refused (a typo would make a stray run) unless `new` asks for it. A `held` step (its
    artifact drifted) is closed at once: its command does not run."""
    run_ = ensure_run(session, inv, run)[0] if new else run_row(session, inv, run, NEW_RUN_HINT)
    row = m.DeployStep(
        run_id=run_.id,
        patch_id=run_.patch_id,
        name=step,
        command=gate.command(argv),
        started_at=utcnow(),
        timed_out=False,
        recorded_only=False,
    )
    if check is not None:
        row.artifact_path = check.artifact_path
        row.artifact_sha256 = check.artifact_sha256
        row.expected_sha256 = check.expected_sha256
        row.drift = check.drift
    session.add(row)
    note = None
    if held and check is not None:
        row.ended_at = row.started_at
        row.output = f"ledger: {HELD} ({check.reason}); nothing was shipped\n"
        row.output_bytes = 0
    elif LAUNCH_STEP.search(step):
        launches.begin(session, run_, launches.DEPLOY, row.command)  # the relaunch's own launch
        note = launch_flags(session, run_.id, argv)
    session.flush()
    return row, note


def launch_flags(session: Session, run_id: int, argv: Sequence[str]) -> str | None:
    """Keep what a (re)launch command sets as the run's deploy settings; when it cannot be
    read, keep the earlier ones and say why."""
    words = redacted_words(argv)
    launch = read_launch(words) if words is not None else None
    if launch is None or launch.unsplit is not None:
        why = "it cannot be split after redaction" if launch is None else launch.unsplit
        return f"flags not read from this launch ({why}); the earlier launch's are kept"
    store_flags(session, run_id, launch.flags)
    return None


def was_held(row: m.DeployStep) -> bool:
    """Whether the step was held before its command ran (its artifact drifted)."""
    output = row.output or ""
    return bool(row.drift) and row.exit_code is None and output.startswith(f"ledger: {HELD}")


def current_drift(session: Session, run_id: int) -> bool | None:
    """The run's drift mark now: True when, for some artifact, the latest step that checked
    it found drift; None when no step checked one."""
    rows = session.execute(
        select(m.DeployStep.artifact_path, m.DeployStep.drift)
        .where(m.DeployStep.run_id == run_id, m.DeployStep.drift.is_not(None))
        .order_by(m.DeployStep.started_at, m.DeployStep.id)
    ).all()
    if not rows:
        return None
    latest = {PurePath(path or "").name: bool(drift) for path, drift in rows}
    return any(latest.values())


def redacted_words(argv: Sequence[str]) -> list[str] | None:
    """The command's words after redaction of the whole command line, so that a secret is
    found in its context (`mysql -p SECRET`) before the words are parted; None when the
    redacted line cannot be split again."""
    try:
        return shlex.split(gate.command(argv))
    except ValueError:
        return None


def store_flags(session: Session, run_id: int, items: list[tuple[str, str]]) -> int:
    """Replace the run's deploy settings with `items` (the gate redacts the values; a key
    that holds a secret is left out rather than refusing the whole step)."""
    from sqlalchemy import delete

    session.execute(
        delete(m.RunConfig).where(m.RunConfig.run_id == run_id, m.RunConfig.source == "deploy")
    )
    kept = 0
    for key, value in items:
        key = key[:500]
        try:
            gate.identity(key)
        except UsageError:
            continue
        session.add(m.RunConfig(run_id=run_id, source="deploy", key=key, value=value))
        kept += 1
    return kept


def finish_step(
    session: Session, step_id: int, run: str, result: CommandResult, note: str | None
) -> records.DeployStep:
    row = session.get_one(m.DeployStep, step_id)
    store_command_result(row, result)
    row.output_bytes = result.output_bytes
    return record(row, run, note)


def record_only(
    session: Session,
    inv: int,
    run: str,
    step: str,
    argv: list[str],
    check: records.DriftCheck | None,
    exit_code: int,
    output: str | None,
    new: bool = False,
) -> records.DeployStep:
    row, note = new_step(session, inv, run, step, argv, check, new=new)
    row.recorded_only = True
    row.exit_code = exit_code
    row.ended_at = row.started_at
    row.output = output
    row.output_bytes = len(output.encode()) if output is not None else None
    return record(row, run, note)


def steps_of(session: Session, run_id: int, run: str) -> list[records.DeployStep]:
    rows = session.scalars(
        select(m.DeployStep)
        .where(m.DeployStep.run_id == run_id)
        .order_by(m.DeployStep.started_at, m.DeployStep.id)
    ).all()
    return [record(row, run) for row in rows]


def run(
    argv: list[str],
    *,
    timeout: float | None,
    echo: Callable[[bytes], None] | None,
    stop: Stop | None = None,
) -> CommandResult:
    """Run a deploy's or a probe's command, reading more of its output than is kept: the
    gate redacts all it read, then keeps the tail. A stopping signal (`stop`) stops it."""
    return run_command(
        argv, timeout=timeout, echo=echo, tail_bytes=gate.OUTPUT_READ_BYTES, stop=stop
    )


def store_command_result(row: m.DeployStep | m.Probe, result: CommandResult) -> None:
    """What a deploy step or a probe keeps of the command it ran (the gate redacts the
    output, then keeps its tail)."""
    row.started_at = result.started_at
    row.ended_at = result.ended_at
    row.exit_code = result.exit_code
    row.timed_out = result.timed_out
    row.output = result.output


def record(row: m.DeployStep, run: str, note: str | None = None) -> records.DeployStep:
    return records.from_row(
        records.DeployStep, row, run=run, drift_reason=drift_reason(row, run),
        held=was_held(row), launch_note=note,
    )  # fmt: skip


def drift_reason(row: m.DeployStep, run: str) -> str | None:
    """Why the step's artifact drifted, matched, or could not be checked; None without one."""
    if row.artifact_path is None:
        return None
    name = PurePath(row.artifact_path).name
    if row.drift:
        return f"{row.artifact_path} is NOT the {name} that patch #{row.patch_id} recorded"
    if row.drift is False:
        return f"{row.artifact_path} matches the {name} of patch #{row.patch_id}"
    if row.patch_id is None:
        return f"run {run!r} has no patch recorded (ledger record-fix --run {run})"
    return f"patch #{row.patch_id} recorded no file named {name}"
