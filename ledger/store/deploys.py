"""Deploy steps: getting a patch onto the box, and catching a stale file on the way.

A deploy step that names an `artifact` is checked against its run's patch: the artifact's
sha256 must equal the sha256 the patch recorded for a file of the same name. A mismatch is
drift — the box is about to run something other than the patch — and is stored as such.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePath

from sqlalchemy import select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.db.types import utcnow
from ledger.errors import UsageError
from ledger.hashing import sha256_file
from ledger.model import records
from ledger.proc import run_command
from ledger.redact import redact
from ledger.store.base import LedgerBase


@dataclass(frozen=True)
class DriftCheck:
    """The artifact against the patch: `drift` is None when there was nothing to compare."""

    artifact_path: str
    artifact_sha256: str
    expected_path: str | None
    expected_sha256: str | None
    drift: bool | None
    reason: str


class DeploysMixin(LedgerBase):
    def deploy(
        self,
        run: str,
        step: str,
        command: Sequence[str],
        *,
        artifact: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        echo: Callable[[bytes], None] | None = None,
    ) -> records.DeployStep:
        """Run one deploy step (no shell) and record it; the row exists before the command
        starts, so a deploy killed halfway still shows up (with no exit code)."""
        argv = _check_command(command, step)
        check = self.check_artifact(run, artifact) if artifact is not None else None
        with self._write() as session:
            row = self._new_step(session, run, step, argv, check)
            step_id = row.id
        result = run_command(argv, timeout=timeout, echo=echo)
        with self._write() as session:
            row = session.get_one(m.DeployStep, step_id)
            self._store_command_result(row, result)
            row.output_bytes = result.output_bytes
            record = _record(row, run)
        if result.interrupted:
            raise KeyboardInterrupt
        return record

    def record_deploy(
        self,
        run: str,
        step: str,
        command: Sequence[str],
        *,
        exit_code: int,
        artifact: str | os.PathLike[str] | None = None,
        output: str | None = None,
    ) -> records.DeployStep:
        """Record a step that ran elsewhere (`deploy --record-only`)."""
        argv = _check_command(command, step)
        check = self.check_artifact(run, artifact) if artifact is not None else None
        with self._write() as session:
            row = self._new_step(session, run, step, argv, check)
            row.recorded_only = True
            row.exit_code = exit_code
            row.ended_at = row.started_at
            row.output = redact(output)
            row.output_bytes = len(output.encode()) if output is not None else None
            return _record(row, run)

    def check_artifact(self, run: str, artifact: str | os.PathLike[str]) -> DriftCheck:
        """Compare a file about to be shipped with what the run's patch recorded."""
        digest = sha256_file(artifact)
        name = PurePath(os.fspath(artifact)).name
        with self._read() as session:
            run_row = self._run_row(session, run)
            if run_row.patch_id is None:
                return DriftCheck(
                    os.fspath(artifact),
                    digest,
                    None,
                    None,
                    None,
                    f"run {run!r} has no patch recorded (ledger record-fix --run {run}), "
                    "so there is nothing to compare the artifact with",
                )
            files = session.scalars(
                select(m.PatchFile).where(m.PatchFile.patch_id == run_row.patch_id)
            ).all()
            patch_id = run_row.patch_id
        same_name = [f for f in files if PurePath(f.path).name == name]
        if not same_name:
            return DriftCheck(
                os.fspath(artifact),
                digest,
                None,
                None,
                None,
                f"patch {patch_id} recorded no file named {name}",
            )
        for candidate in same_name:
            if candidate.sha256 == digest:
                return DriftCheck(
                    os.fspath(artifact),
                    digest,
                    candidate.path,
                    digest,
                    False,
                    f"matches {candidate.path} of patch {patch_id}",
                )
        expected = same_name[0]
        return DriftCheck(
            os.fspath(artifact),
            digest,
            expected.path,
            expected.sha256,
            True,
            f"{artifact} is not the {expected.path} recorded by patch {patch_id}",
        )

    def deploy_steps(self, run: str) -> list[records.DeployStep]:
        with self._read() as session:
            run_row = self._run_row(session, run)
            rows = session.scalars(
                select(m.DeployStep)
                .where(m.DeployStep.run_id == run_row.id)
                .order_by(m.DeployStep.started_at, m.DeployStep.id)
            ).all()
            return [_record(row, run) for row in rows]

    def _new_step(
        self,
        session: Session,
        run: str,
        step: str,
        argv: list[str],
        check: DriftCheck | None,
    ) -> m.DeployStep:
        run_row = self._run_row(session, run)
        row = m.DeployStep(
            run_id=run_row.id,
            patch_id=run_row.patch_id,
            name=step,
            command=redact(shlex.join(argv)) or "",
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
        session.flush()
        return row


def _check_command(command: Sequence[str], step: str) -> list[str]:
    argv = [str(part) for part in command]
    if not argv:
        raise UsageError(
            "give the command after --, e.g. ledger deploy --run R --step copy -- scp a b"
        )
    if not step.strip():
        raise UsageError("--step needs a name (compile, copy, push, relaunch…)")
    return argv


def _record(row: m.DeployStep, run: str) -> records.DeployStep:
    return records.from_row(records.DeployStep, row, run=run)
