"""Numbers as logs print them: `12,345`, `1.2K`, `3.4E+01`, `nan`, `inf`, units glued on."""

from __future__ import annotations

import math
import re

from ledger.model.logs import INT64_MAX


class Unreadable(Exception):
    """A line the reader refuses on purpose (a step no 64-bit column holds): it is counted
    as unread, in strict mode too, and the rest of the log is read."""


def int64(value: int, what: str = "step") -> int:
    """`value` when a signed 64-bit column can hold it; else the line is unread."""
    if -INT64_MAX - 1 <= value <= INT64_MAX:
        return value
    raise Unreadable(f"{what} out of range")


# A number as the metric shapes capture it (the unit, if any, is matched after it).
# Thousands separators come in groups of three, so `12345,` (a number, then a comma that
# separates fields) is the number 12345.
NUM = r"[-+]?(?:(?:\d+(?:,\d{3})*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[nN]a[nN]|[iI]nf(?:inity)?)"
# The same number for learned templates: atomic groups and possessive repeats, which match
# the same strings here (nothing after a number can be part of it) without backtracking.
NUM_FAST = (
    r"[-+]?+(?>\d++(?:,\d{3})*+(?:\.\d*+)?+(?:[eE][-+]?\d++)?+|\.\d++(?:[eE][-+]?\d++)?+"
    r"|[nN]a[nN]|[iI]nf(?:inity)?)"
)
INT_FAST = r"\d++(?:,\d{3})*+"

_SUFFIX = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9, "T": 1e12}
_MEMORY = {
    "b": 1 / 1048576,
    "kb": 1 / 1024,
    "kib": 1 / 1024,
    "mb": 1.0,
    "mib": 1.0,
    "m": 1.0,
    "gb": 1024.0,
    "gib": 1024.0,
    "g": 1024.0,
    "tb": 1048576.0,
    "tib": 1048576.0,
}
_TIME = {"ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "s": 1.0, "sec": 1.0, "secs": 1.0}
_TIME.update({"seconds": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "mins": 60.0, "h": 3600.0})


def to_float(text: str) -> float | None:
    """`text` as a float, thousands separators dropped; None when it is not a number."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def to_int(text: str, what: str = "step") -> int | None:
    """`text` as an int within 64 bits; None when it is not a number; a number out of
    range (`1e308`, 2**63) makes the line unread."""
    cleaned = text.replace(",", "").strip()
    if cleaned.isdigit() or (cleaned[:1] in "+-" and cleaned[1:].isdigit()):
        if len(cleaned) > 20:
            raise Unreadable(f"{what} out of range")
        return int64(int(cleaned), what)
    value = to_float(cleaned)
    if value is None:
        return None
    if not math.isfinite(value) or abs(value) > INT64_MAX:
        if math.isnan(value):
            return None
        raise Unreadable(f"{what} out of range")
    return int64(int(value), what)


def written_float(text: str) -> float | None:
    """`text` as a float, as written: NaN and inf only when the log wrote them; a finite
    number too large for a float (`1e400`) makes the line unread."""
    value = to_float(text)
    if value is not None and math.isinf(value) and "inf" not in text.lower():
        raise Unreadable("number out of range")
    return value


def suffix_scale(unit: str) -> float | None:
    """The multiplier of a count suffix glued to a number (`1.2K`, `3M`), else None."""
    return _SUFFIX.get(unit)


def memory_scale(unit: str) -> float | None:
    """MiB per unit of memory (`GiB` → 1024); GB is read as GiB, as PyTorch prints it."""
    return _MEMORY.get(unit.lower())


def time_scale(unit: str) -> float | None:
    """Seconds per unit of time (`ms` → 0.001)."""
    return _TIME.get(unit) if unit in _TIME else _TIME.get(unit.lower())


_FRACTION = re.compile(r"(\d[\d.,]*)\s*([kKMGTB]?)")


def scaled_count(text: str) -> float | None:
    """A tqdm count such as `851`, `1.23k`, `4.5M`."""
    m = _FRACTION.fullmatch(text.strip())
    if not m:
        return None
    value = to_float(m.group(1))
    if value is None:
        return None
    return value * _SUFFIX.get(m.group(2), 1.0) if m.group(2) else value
