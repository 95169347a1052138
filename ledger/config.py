"""Where the ledger lives.

Discovery mirrors git's: `--db` (a path or SQLAlchemy URL), else `$LEDGER_DB`, else the
nearest `.ledger/ledger.db` walking up from the working directory, else
`./.ledger/ledger.db` (created on first write).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

LEDGER_DIR = ".ledger"
LEDGER_FILE = "ledger.db"
ENV_DB = "LEDGER_DB"
DEFAULT_INVESTIGATION = "default"


@dataclass(frozen=True)
class Location:
    """A resolved ledger location: the SQLAlchemy URL, and the file when it is SQLite."""

    url: str
    path: Path | None
    source: str  # "option", "env", "found" or "default": how discovery got here

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")

    def display(self) -> str:
        """The location as shown to a person: the file, or the URL without its password."""
        return str(self.path) if self.path is not None else hide_password(self.url)


def locate(db: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Location:
    """Resolve where the ledger is, without touching it."""
    if db is not None and str(db) != "":
        return _from_value(str(db), "option", cwd)
    env = os.environ.get(ENV_DB)
    if env:
        return _from_value(env, "env", cwd)
    start = (cwd or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        candidate = folder / LEDGER_DIR / LEDGER_FILE
        if candidate.is_file():
            return Location(sqlite_url(candidate), candidate, "found")
    default = start / LEDGER_DIR / LEDGER_FILE
    return Location(sqlite_url(default), default, "default")


def _from_value(value: str, source: str, cwd: Path | None) -> Location:
    if "://" in value:
        url = normalize_url(value)
        path = sqlite_path(url)
        return Location(url, path, source)
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    if path.is_dir():
        # `--db some/folder` means the ledger kept in that folder.
        path = path / LEDGER_FILE
    return Location(sqlite_url(path), path.resolve(), source)


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path.resolve()}"


def sqlite_path(url: str) -> Path | None:
    """The file behind a sqlite URL, or None for other databases and in-memory SQLite."""
    if not url.startswith("sqlite"):
        return None
    rest = url.split(":///", 1)[1] if ":///" in url else ""
    rest = rest.split("?", 1)[0]
    if rest in ("", ":memory:"):
        return None
    return Path(rest)


def normalize_url(url: str) -> str:
    """Accept the URL spellings people paste: postgres:// and postgresql:// mean psycopg 3."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def hide_password(url: str) -> str:
    """`scheme://user:secret@host` → `scheme://user:***@host`, for messages."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, at, host = rest.rpartition("@")
    if ":" in creds:
        user = creds.split(":", 1)[0]
        creds = f"{user}:***"
    return f"{scheme}://{creds}{at}{host}"
