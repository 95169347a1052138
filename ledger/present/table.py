"""Plain text tables and times, as every command prints them (light: the command line's
root imports it)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A plain left-aligned text table."""
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def local_time(value: datetime | None) -> str:
    """A UTC datetime as local wall-clock time, to the second."""
    if value is None:
        return "-"
    return value.astimezone().strftime("%Y-%m-%d %H:%M:%S")
