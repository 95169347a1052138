"""Where an ingest of a log goes on from: the byte offset reached and the sha256 of the
bytes before it, checked against the file as it is now.

A log_file row keeps both. The file is read on from there only while it still begins with
those bytes: a file shorter than the offset was truncated, one whose first bytes hash to
something else was replaced; either way it is read again from the start (`reset` says
why). A gzip log's offsets and hashes are of the text inside (it can only be replaced).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger.db import models as m

HEAD_BYTES = 4096  # what a follower keeps of a log's start, to know it is still that file


@dataclass
class PrefixCache:
    """What a follower remembers between looks at a growing log, so a 2 GB log is not
    hashed again on every look: per log file, the offset, its sha256 and the running
    digest, the inode and the first bytes (the file must still be the same one)."""

    entries: dict[int, tuple[int, str | None, Any, int, bytes]] = field(default_factory=dict)

    def known(self, lf: m.LogFile, file: Path, inode: int) -> Any:
        found = self.entries.get(lf.id)
        if found is None:
            return None
        offset, sha, digest, known_inode, head = found
        if (offset, sha, known_inode) != (lf.offset, lf.sha256, inode):
            return None
        with file.open("rb") as handle:
            if handle.read(len(head)) != head:
                return None
        return digest.copy()

    def remember(self, lf: m.LogFile, file: Path, inode: int, digest: Any) -> None:
        with file.open("rb") as handle:
            head = handle.read(min(HEAD_BYTES, lf.offset))
        self.entries[lf.id] = (lf.offset, lf.sha256, digest.copy(), inode, head)


@dataclass
class Cursor:
    """The offset reached and the running sha256 of the bytes before it; `reset` is why
    the log is read from the start again ("truncated", "replaced", "reread"), else None."""

    offset: int = 0
    digest: Any = field(default_factory=hashlib.sha256)
    reset: str | None = None

    @classmethod
    def of(
        cls,
        lf: m.LogFile,
        file: Path,
        info: os.stat_result,
        *,
        packed: bool,
        cache: PrefixCache | None = None,
    ) -> Cursor:
        """Where the log's row says to go on from, if the file still begins as it did."""
        offset = lf.offset or 0
        if offset > info.st_size and not packed:  # (a gzip's offsets are of its text)
            return cls(reset="truncated")
        if not offset:
            return cls()
        known = cache.known(lf, file, info.st_ino) if cache is not None else None
        prefix = known or hash_prefix(file, offset)
        if prefix.hexdigest() != lf.sha256:
            return cls(reset="replaced")
        return cls(offset, prefix)

    def restart(self, reason: str) -> None:
        """Read from the start again; an earlier reason stands."""
        self.offset, self.digest = 0, hashlib.sha256()
        self.reset = self.reset or reason

    def advance(self, end: int) -> None:
        """The bytes up to `end` are read (the digest is fed as they are read)."""
        self.offset = end

    @property
    def sha256(self) -> str:
        return str(self.digest.hexdigest())


def hash_prefix(file: Path, length: int) -> Any:
    """The sha256 of the first `length` bytes of what the log holds (gzip: decompressed)."""
    from ledger.logs.source import open_log

    digest = hashlib.sha256()
    left = length
    with open_log(file) as handle:
        while left > 0:
            chunk = handle.read(min(left, 1 << 20))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
    return digest
