"""Deploy steps: getting a patch onto the box, and catching a stale file on the way.

A deploy step that names an artifact is checked against its run's patch: the artifact's
sha256 must equal the sha256 the patch recorded for a file of the same name. A mismatch is
drift — the box is about to run something other than the patch — and is stored as such.

A step that (re)launches the run (its name says launch, start, train or run) has its
command split into what it set: `--token-budget 49152` → `flag.token-budget = 49152`,
`--compile-drafter` → `flag.compile-drafter = true`, `NCCL_ALGO=Ring python …` →
`env.NCCL_ALGO = Ring`, kept in run_config with source `deploy` (the latest relaunch's
replace the earlier ones), so `why` can say how the run was started.
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
from ledger.model import records
from ledger.proc import CommandResult, run_command
from ledger.store import gate, launches
from ledger.store.lookup import run_row

LAUNCH_STEP = re.compile(r"launch|start|train|^run$", re.IGNORECASE)
_ENV = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$", re.DOTALL)
_FLAG = re.compile(r"^--?(?P<name>[A-Za-z][\w.-]*)(?:=(?P<value>.*))?$", re.DOTALL)
_NUMBER = re.compile(r"^-\d")
# Commands that run the next word as a command: their own options are not the run's
_WRAPPERS = ("env", "nohup", "exec", "time", "sudo", "srun", "nice")
MAX_FLAGS = 400


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
    run_ = run_row(session, inv, run)
    if run_.patch_id is None:
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
) -> m.DeployStep:
    """The step's row, written before its command runs (a killed deploy still shows)."""
    run_ = run_row(session, inv, run)
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
    if LAUNCH_STEP.search(step):
        launches.begin(session, run_, launches.DEPLOY, row.command)  # the relaunch's own launch
        store_flags(session, run_.id, split_flags(redacted_words(argv)))
    session.flush()
    return row


def redacted_words(argv: Sequence[str]) -> list[str]:
    """The command's words after redaction of the whole command line, so that a secret is
    found in its context (`mysql -p SECRET`) before the words are parted; no words when
    the redacted line cannot be split again."""
    try:
        return shlex.split(gate.command(argv))
    except ValueError:
        return []


def split_flags(argv: Sequence[str]) -> list[tuple[str, str]]:
    """What a launch command sets, as (key, value): `flag.<name>` for each option (`true`
    for one without a value), `env.<NAME>` for each leading assignment. A shell command
    (`sh -c '…'`, `ssh host '…'`) is split again; the last setting of a key wins."""
    words = list(argv)
    if (
        len(words) >= 2
        and words[-1].count(" ")
        and (os.path.basename(words[0]) in ("sh", "bash", "zsh", "ssh") or words[-2] == "-c")
    ):
        try:
            words = shlex.split(words[-1])
        except ValueError:  # an unclosed quote: read the words as they are
            words = words[-1].split()
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(words) and (words[i] in _WRAPPERS or _ENV.match(words[i])):
        m = _ENV.match(words[i])
        if m is not None:
            out.append((f"env.{m.group('name')}", m.group("value")))
        i += 1
    while i < len(words):
        word = words[i]
        if word == "--":
            break
        m = _FLAG.match(word)
        if m is None or _NUMBER.match(word):
            i += 1
            continue
        name, value = m.group("name"), m.group("value")
        following = words[i + 1] if i + 1 < len(words) else None
        if value is None and following is not None and _is_value(following):
            value = following
            i += 1
        out.append((f"flag.{name}", "true" if value is None else value))
        i += 1
    latest = dict(out[:MAX_FLAGS])
    return list(latest.items())


def _is_value(word: str) -> bool:
    """Whether the word after an option is its value: not an option, not a script."""
    if _NUMBER.match(word):
        return True
    if word.startswith("-"):
        return False
    return not re.search(r"\.(?:py|sh)$", word)


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
    session: Session, step_id: int, run: str, result: CommandResult
) -> records.DeployStep:
    row = session.get_one(m.DeployStep, step_id)
    store_command_result(row, result)
    row.output_bytes = result.output_bytes
    return record(row, run)


def record_only(
    session: Session,
    inv: int,
    run: str,
    step: str,
    argv: list[str],
    check: records.DriftCheck | None,
    exit_code: int,
    output: str | None,
) -> records.DeployStep:
    row = new_step(session, inv, run, step, argv, check)
    row.recorded_only = True
    row.exit_code = exit_code
    row.ended_at = row.started_at
    row.output = output
    row.output_bytes = len(output.encode()) if output is not None else None
    return record(row, run)


def steps_of(session: Session, run_id: int, run: str) -> list[records.DeployStep]:
    rows = session.scalars(
        select(m.DeployStep)
        .where(m.DeployStep.run_id == run_id)
        .order_by(m.DeployStep.started_at, m.DeployStep.id)
    ).all()
    return [record(row, run) for row in rows]


def run(
    argv: list[str], *, timeout: float | None, echo: Callable[[bytes], None] | None
) -> CommandResult:
    """Run a deploy's or a probe's command, reading more of its output than is kept: the
    gate redacts all it read, then keeps the tail."""
    return run_command(argv, timeout=timeout, echo=echo, tail_bytes=gate.OUTPUT_READ_BYTES)


def store_command_result(row: m.DeployStep | m.Probe, result: CommandResult) -> None:
    """What a deploy step or a probe keeps of the command it ran (the gate redacts the
    output, then keeps its tail)."""
    row.started_at = result.started_at
    row.ended_at = result.ended_at
    row.exit_code = result.exit_code
    row.timed_out = result.timed_out
    row.output = result.output


def record(row: m.DeployStep, run: str) -> records.DeployStep:
    return records.from_row(records.DeployStep, row, run=run, drift_reason=drift_reason(row, run))


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
