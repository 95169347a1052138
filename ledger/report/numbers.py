"""Numbers as the report prints them: as short as possible, but never so short that two
different figures, or the two ends of an interval, print the same."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ledger.analyze.wording import short_value

FEWEST_DIGITS = 3  # short_value's own default
MOST_DIGITS = 9

Interval = tuple[float, float]


def value_text(value: float | None, digits: int = FEWEST_DIGITS) -> str:
    """14200 → '14.2K' (3 digits), 10932.4 → '10.932K' (5); '–' when there is none."""
    return short_value(value, digits, missing="–")


def interval_text(interval: Interval | None, digits: int = FEWEST_DIGITS) -> str:
    if interval is None:
        return "–"
    return f"{value_text(interval[0], digits)}–{value_text(interval[1], digits)}"


def _separates(intervals: Sequence[Interval], digits: int) -> bool:
    printed: dict[str, Interval] = {}
    for low, high in intervals:
        if low != high and value_text(low, digits) == value_text(high, digits):
            return False
        text = interval_text((low, high), digits)
        if printed.setdefault(text, (low, high)) != (low, high):
            return False
    return True


def interval_digits(intervals: Sequence[Interval | None]) -> int:
    """The fewest significant digits (3 or more) at which every interval's ends differ
    and no two different intervals print alike. One precision for all, so a column of
    intervals reads evenly."""
    finite = [
        (low, high)
        for low, high in (i for i in intervals if i is not None)
        if math.isfinite(low) and math.isfinite(high)
    ]
    for digits in range(FEWEST_DIGITS, MOST_DIGITS + 1):
        if _separates(finite, digits):
            return digits
    return MOST_DIGITS


def value_digits(values: Sequence[float | None]) -> int:
    """The fewest significant digits (3 or more) at which different values print apart."""
    return interval_digits([(v, v) for v in values if v is not None])


def grouped(value: float, *, signed: bool = False) -> str:
    """A percentage or ratio with thousands separated: 1187964.5 → '1,187,964'."""
    if not math.isfinite(value):
        return "–"
    sign = "+" if signed else ""
    if abs(value) >= 1000:
        return f"{value:{sign},.0f}"
    return f"{value:{sign}.1f}"
