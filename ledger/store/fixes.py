"""Fix attempts: a hypothesis, the patch that tests it, and the run that will show it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.errors import CommandError, ConflictError, InputFileError, NotFoundError, UsageError
from ledger.hashing import sha256_file
from ledger.model import records
from ledger.redact import redact_code
from ledger.store.base import LedgerBase

MAX_DIFF_BYTES = 1 << 20  # a diff past this is a generated file; keep its head


class FixesMixin(LedgerBase):
    def record_fix(
        self,
        hypothesis: int | str,
        summary: str,
        *,
        diff: str | None = None,
        git_dir: str | os.PathLike[str] | None = None,
        files: Sequence[str | os.PathLike[str]] = (),
        run: str | None = None,
    ) -> records.FixRecord:
        """Record in one transaction: the hypothesis (new unless `hypothesis` is an id), the
        patch with its diff and the sha256 of every file it touched, and the run that tests it.

        With `git_dir`, the diff is `git diff HEAD` there, the commit is HEAD, and the files
        git reports as changed are hashed along with `files`.
        """
        summary = summary.strip()
        if not summary:
            raise UsageError("--summary must say what the patch changes")
        if diff is not None and git_dir is not None:
            raise UsageError("give the diff either as a file or from git, not both")
        commit = None
        hashed: dict[str, str] = {}
        if git_dir is not None:
            commit, diff, changed = _from_git(Path(git_dir))
            hashed.update(changed)
        for path in files:
            hashed[os.path.normpath(os.fspath(path))] = sha256_file(path)
        if diff is not None and len(diff.encode()) > MAX_DIFF_BYTES:
            diff = diff.encode()[:MAX_DIFF_BYTES].decode(errors="ignore")
            diff += f"\n[ledger: diff truncated to {MAX_DIFF_BYTES} bytes]\n"

        with self._write() as session:
            inv = self._investigation(session)
            hypothesis_row, created = self._hypothesis_for_fix(session, inv.id, hypothesis)
            patch = m.Patch(
                hypothesis_id=hypothesis_row.id,
                summary=summary,
                diff=redact_code(diff),
                git_commit=commit,
            )
            session.add(patch)
            session.flush()
            patch_files = [
                m.PatchFile(patch_id=patch.id, path=path, sha256=digest)
                for path, digest in sorted(hashed.items())
            ]
            session.add_all(patch_files)
            if run is not None:
                self._link_run(session, run, patch)
            session.flush()
            return records.FixRecord(
                hypothesis_id=hypothesis_row.id,
                patch_id=patch.id,
                run=run,
                files=[records.PatchFile(f.path, f.sha256) for f in patch_files],
                hypothesis_created=created,
            )

    def _hypothesis_for_fix(
        self, session: Session, investigation_id: int, hypothesis: int | str
    ) -> tuple[m.Hypothesis, bool]:
        if isinstance(hypothesis, int) or str(hypothesis).strip().isdigit():
            return self._hypothesis_row(session, int(hypothesis)), False
        text = str(hypothesis).strip()
        if not text:
            raise UsageError("--hypothesis needs an id or the text of a new hypothesis")
        row = m.Hypothesis(investigation_id=investigation_id, text=text)
        session.add(row)
        session.flush()
        return row, True

    def _link_run(self, session: Session, name: str, patch: m.Patch) -> None:
        run = self._ensure_run(session, name)
        if run.patch_id is not None and run.patch_id != patch.id:
            raise ConflictError(
                f"run {name!r} already tests patch {run.patch_id}; "
                f"give this attempt its own run name (e.g. {name}_2)"
            )
        run.patch_id = patch.id

    def patch(self, patch_id: int) -> records.Patch:
        with self._read() as session:
            return _patch_record(session, patch_id)


def _patch_record(session: Session, patch_id: int) -> records.Patch:
    row = session.get(m.Patch, patch_id)
    if row is None:
        raise NotFoundError("patch", patch_id, session.scalars(select(m.Patch.id)).all())
    files = session.scalars(
        select(m.PatchFile).where(m.PatchFile.patch_id == patch_id).order_by(m.PatchFile.path)
    ).all()
    return records.from_row(
        records.Patch, row, files=[records.PatchFile(f.path, f.sha256) for f in files]
    )


def _git(folder: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            errors="replace",
            check=False,
        )
    except FileNotFoundError as exc:
        raise CommandError("--git needs git, which is not installed here") from exc
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["git failed"])[-1]
        raise InputFileError(f"--git {folder}: {reason}")
    return done.stdout


def _from_git(folder: Path) -> tuple[str, str, dict[str, str]]:
    """HEAD's commit, `git diff HEAD`, and the sha256 of each changed file that still exists."""
    if not folder.is_dir():
        raise InputFileError(f"--git {folder}: no such folder")
    top = Path(_git(folder, "rev-parse", "--show-toplevel").strip())
    commit = _git(folder, "rev-parse", "HEAD").strip()
    diff = _git(folder, "diff", "HEAD")
    changed: dict[str, str] = {}
    for name in _git(folder, "diff", "HEAD", "--name-only").splitlines():
        path = top / name
        if path.is_file():
            changed[name] = sha256_file(path)
    return commit, diff, changed
