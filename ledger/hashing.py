"""sha256 of files, streamed so that a multi-GB artifact costs no memory."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ledger.errors import InputFileError

CHUNK = 1 << 20


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The hex sha256 of a file; InputFileError when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with Path(path).open("rb") as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
    except IsADirectoryError as exc:
        raise InputFileError(f"{path} is a directory, not a file") from exc
    except FileNotFoundError as exc:
        raise InputFileError(f"{path}: no such file") from exc
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return digest.hexdigest()
