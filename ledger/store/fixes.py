"""Fix attempts: a hypothesis, the patch that tests it, and the run that will show it.

What a patch touched is read before the transaction (`prepare`: the diff, git's commit and
the sha256 of each file), so the write itself is short.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from sqlalchemy import select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.errors import (
    BadContentError,
    CommandError,
    ConflictError,
    InputFileError,
    NotFoundError,
    UsageError,
)
from ledger.hashing import sha256_file
from ledger.model import records
from ledger.store.gate import MAX_DIFF_BYTES, REDACTION_MARGIN_BYTES
from ledger.store.lookup import ensure_run, hypothesis_row


@dataclass(frozen=True)
class PatchInput:
    """A patch as read from disk, ready to be written."""

    summary: str
    diff: str | None
    commit: str | None
    files: dict[str, str] = field(default_factory=dict)  # path → sha256


def prepare(
    summary: str,
    diff: str | TextIO | None,
    git_dir: str | os.PathLike[str] | None,
    files: Sequence[str | os.PathLike[str]],
) -> PatchInput:
    """Read the diff (a stream is read only as far as the bound: `/dev/zero` is not read
    for ever), git's view and the hash of every touched file, each file listed once.

    Without git, the files the diff names (`+++ b/path`) are hashed where they exist here,
    so that a deploy of them can be checked for drift.
    """
    summary = summary.strip()
    if not summary:
        raise UsageError("a fix needs a summary saying what the patch changes")
    if diff is not None and git_dir is not None:
        raise UsageError("give the diff either as a file or from git, not both")
    text = _bounded(
        diff
        if diff is None or isinstance(diff, str)
        else diff.read(MAX_DIFF_BYTES + REDACTION_MARGIN_BYTES + 1)
    )
    if text is not None and "\x00" in text:
        raise BadContentError("the diff holds NUL bytes: a binary file is not a unified diff")
    commit = None
    top: Path | None = None
    hashed: dict[str, str] = {}
    if git_dir is not None:
        commit, text, changed, top = _from_git(Path(git_dir))
        hashed.update(changed)
    elif text is not None:
        for name in diff_paths(text):
            if Path(name).is_file() and name not in hashed:
                hashed[name] = sha256_file(name)
    for path in files:
        hashed[_display_path(path, top)] = sha256_file(path)
    return PatchInput(summary, text, commit, hashed)


def _bounded(diff: str | None) -> str | None:
    """The diff as far as it is kept. The gate redacts it, then keeps MAX_DIFF_BYTES: a
    margin past that stays, for what redaction must see beyond the cut (a key block's end)."""
    keep = MAX_DIFF_BYTES + REDACTION_MARGIN_BYTES
    if diff is None or (len(diff) <= keep and len(diff.encode()) <= keep):
        return diff
    return diff.encode()[:keep].decode(errors="ignore")


def diff_paths(diff: str) -> list[str]:
    """The files a unified diff changes, as its `+++ b/…` lines name them (in order)."""
    found: list[str] = []
    for line in diff.splitlines():
        if line.startswith("+++ ") and not line.startswith("+++ /dev/null"):
            name = line[4:].split("\t", 1)[0].strip()
            name = name[2:] if name.startswith(("b/", "w/")) else name
            if name and name not in found:
                found.append(os.path.normpath(name))
    return found


def _display_path(path: str | os.PathLike[str], top: Path | None) -> str:
    """A touched file's name as stored: relative to the repository when it is inside it
    (as git names the files it reports), else as given."""
    given = os.path.normpath(os.fspath(path))
    if top is not None:
        try:
            return Path(given).resolve().relative_to(top.resolve()).as_posix()
        except ValueError:
            pass
    return given


def record(
    session: Session, inv: int, hypothesis: int | str, patch: PatchInput, run: str | None
) -> records.FixRecord:
    """Write the hypothesis (new unless an id), the patch, its files and the run's link."""
    hypothesis_row_, created = _hypothesis_for_fix(session, inv, hypothesis)
    row = m.Patch(
        hypothesis_id=hypothesis_row_.id,
        summary=patch.summary,
        diff=patch.diff,
        git_commit=patch.commit,
    )
    session.add(row)
    session.flush()
    patch_files = [
        m.PatchFile(patch_id=row.id, path=path, sha256=digest)
        for path, digest in sorted(patch.files.items())
    ]
    session.add_all(patch_files)
    if run is not None:
        _link_run(session, inv, run, row)
    session.flush()
    return records.FixRecord(
        hypothesis_id=hypothesis_row_.id,
        patch_id=row.id,
        run=run,
        files=[records.PatchFile(f.path, f.sha256) for f in patch_files],
        hypothesis_created=created,
    )


def _hypothesis_for_fix(
    session: Session, inv: int, hypothesis: int | str
) -> tuple[m.Hypothesis, bool]:
    text = str(hypothesis).strip()
    if isinstance(hypothesis, int) or re.fullmatch(r"[-+]?#?\s*\d+", text):
        number = int(re.sub(r"[#\s]", "", text))
        if number < 1:  # `--hypothesis -3` is a mistyped id, not the text of a new hypothesis
            raise UsageError(f"a hypothesis id is a whole number from 1, not {text!r}")
        return hypothesis_row(session, inv, number), False
    if not text:
        raise UsageError("a fix needs the id of a hypothesis or the text of a new one")
    row = m.Hypothesis(investigation_id=inv, text=text)
    session.add(row)
    session.flush()
    return row, True


def _link_run(session: Session, inv: int, name: str, patch: m.Patch) -> None:
    run, _ = ensure_run(session, inv, name)
    if run.patch_id is not None and run.patch_id != patch.id:
        raise ConflictError(
            f"run {name!r} already tests patch {run.patch_id}; "
            f"give this attempt its own run name (e.g. {name}_2)"
        )
    run.patch_id = patch.id


def patch_record(session: Session, patch_id: int) -> records.Patch:
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
        raise CommandError("reading the patch from git needs git, which is not installed") from exc
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["git failed"])[-1]
        raise InputFileError(f"git in {folder}: {reason}")
    return done.stdout


def _from_git(folder: Path) -> tuple[str, str, dict[str, str], Path]:
    """HEAD's commit, `git diff HEAD`, the sha256 of each changed file that still exists,
    and the repository's top folder."""
    if not folder.is_dir():
        raise InputFileError(f"{folder}: no such folder (a git repository was expected)")
    top = Path(_git(folder, "rev-parse", "--show-toplevel").strip())
    commit = _git(folder, "rev-parse", "HEAD").strip()
    diff = _git(folder, "diff", "HEAD")
    changed: dict[str, str] = {}
    for name in _git(folder, "diff", "HEAD", "--name-only").splitlines():
        path = top / name
        if path.is_file():
            changed[name] = sha256_file(path)
    return commit, _bounded(diff) or "", changed, top
