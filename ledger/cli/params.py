"""The types of the command line's numeric options, validated in one place.

Every number a person types is checked before any work: finite (no `nan`, no `inf`),
inside its range, and an id or a count fits a 64-bit integer. A bad value is a usage
error: one line, exit status 2.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NoReturn

import click

if TYPE_CHECKING:
    _ParamType = click.ParamType[Any, Any]  # generic for type checkers since click 8.2
else:
    _ParamType = click.ParamType

INT64_MAX = (1 << 63) - 1
MAX_SECONDS = 366 * 24 * 3600.0  # a year: anything longer is a typo
MAX_EXIT_CODE = 255


class Number(_ParamType):
    """A finite float inside [low, high] (an open end excludes its bound)."""

    name = "number"

    def __init__(
        self,
        low: float | None = None,
        high: float | None = None,
        *,
        low_open: bool = False,
        high_open: bool = False,
        what: str = "a number",
        message: str | None = None,
    ) -> None:
        self.low, self.high, self.what = low, high, what
        self.low_open, self.high_open = low_open, high_open
        self.message = message  # one sentence for every failure, with {value}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float) and math.isfinite(value):
            number = value
        else:
            try:
                number = float(str(value).strip())
            except ValueError:
                self._fail(value, "", param, ctx)
        if not math.isfinite(number):
            self._fail(value, ": it must be finite", param, ctx)
        low, high = self.low, self.high
        if low is not None and (number < low or (self.low_open and number == low)):
            self._fail(value, f": it must be {'above' if self.low_open else 'at least'} {low:g}",
                       param, ctx)  # fmt: skip
        if high is not None and (number > high or (self.high_open and number == high)):
            self._fail(value, f": it must be {'below' if self.high_open else 'at most'} {high:g}",
                       param, ctx)  # fmt: skip
        return number

    def _fail(
        self, value: Any, why: str, param: click.Parameter | None, ctx: click.Context | None
    ) -> NoReturn:
        if self.message is not None:
            self.fail(self.message.format(value=repr(value)), param, ctx)
        self.fail(f"{value!r} is not {self.what}{why}", param, ctx)


class Integer(_ParamType):
    """An integer inside [low, high] (ids: 1 to 2^63 − 1)."""

    name = "integer"

    def __init__(self, low: int = 1, high: int = INT64_MAX, *, what: str = "an id") -> None:
        self.low, self.high, self.what = low, high, what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value).strip().lstrip("#")
            try:
                number = int(text)
            except ValueError:
                self.fail(f"{value!r} is not {self.what} (a whole number)", param, ctx)
        if not self.low <= number <= self.high:
            self.fail(
                f"{value!r} is not {self.what}: it must be between {self.low} and {self.high}",
                param,
                ctx,
            )
        return number


class Percent(_ParamType):
    """A percentage: '2', '2%' or '0.5 %' (→ 0.02, 0.02, 0.005), from 0 up to 100."""

    name = "percent"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float) and math.isfinite(value):
            return value
        text = str(value).strip().rstrip("%").strip()
        try:
            number = float(text)
        except ValueError:
            self.fail(f"{value!r} is not a percentage (e.g. 2 or 2%)", param, ctx)
        if not math.isfinite(number) or not 0.0 <= number < 100.0:
            self.fail(f"{value!r} is not between 0 and 100 %", param, ctx)
        return number / 100.0


def seconds(*, zero: bool = True) -> Number:
    """A duration in seconds: finite, from 0 (or above 0) up to a year."""
    return Number(0.0, MAX_SECONDS, low_open=not zero, what="a duration in seconds")


ID = Integer(what="an id")
THROUGHPUT = Number(0.0, low_open=True, what="a throughput above 0")
TOKENS_PER_STEP = Number(0.0, 1e15, low_open=True, what="a number of tokens per step")
ALPHA = Number(
    0.0, 1.0, low_open=True, high_open=True,
    message="alpha is a probability between 0 and 1 (0.01 by default), not {value}",
)  # fmt: skip
EXIT_CODE = Integer(-MAX_EXIT_CODE, MAX_EXIT_CODE, what="an exit status")
NUMBER = Integer(1, INT64_MAX, what="a pattern number")
