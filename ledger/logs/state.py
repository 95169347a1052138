"""The reader's state: plain dataclasses that turn themselves into JSON-able values and back.

Everything the reader must remember to go on reading a file from where it stopped lives
here, and nowhere else: a field is declared once and `to_dict()` / `from_dict()` follow
the declarations. Every part is bounded, so a copy is cheap (the reader decides a log's
fate by reading the unfinished tail into its own state, then puts back a copy taken before).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

STATE_VERSION = 2
T = TypeVar("T", bound="Serial")

_MAX_RANGES = 4096
_INF = math.inf
_log = math.log
EXACT = 1024  # throughput values kept exactly; beyond, a histogram of 0.1 % bins
BIN = 1000.0  # bins per unit of natural log: 0.1 % wide


class Serial:
    """A dataclass that serialises itself field by field (nested Serials, lists, dicts
    with int keys, non-finite floats included)."""

    def to_dict(self) -> dict[str, Any]:
        fields = dataclasses.fields(self)  # type: ignore[arg-type]  # subclasses are dataclasses
        return {f.name: _encode(getattr(self, f.name)) for f in fields}

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        """Rebuild from `to_dict()`; raises ValueError for data of another shape."""
        if not isinstance(data, dict):
            raise ValueError("state is not an object")
        hints = _hints(cls)
        values = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # subclasses are dataclasses
            if f.name in data:
                values[f.name] = _decode(hints[f.name], data[f.name])
        return cls(**values)

    def copy(self: T) -> T:
        return type(self).from_dict(self.to_dict())

    def assign(self: T, other: T) -> None:
        """Take `other`'s values in place. A nested Serial is kept and filled in turn, so
        that a part of the reader holding a piece of this state (the splitter holds the
        line state) goes on holding the live one."""
        for f in dataclasses.fields(self):  # type: ignore[arg-type]  # subclasses are dataclasses
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, Serial) and type(mine) is type(theirs):
                mine.assign(theirs)
            else:
                setattr(self, f.name, theirs)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _encode(value: Any) -> Any:
    if isinstance(value, Serial):
        return value.to_dict()
    if isinstance(value, StrEnum):  # an effect, a kind: saved as its word
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # 'nan', 'inf', '-inf'
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return [[_encode(k), _encode(v)] for k, v in value.items()]
    return value


def _decode(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _decode(options[0], value)
        for option in options:  # int | float: keep what JSON gave
            if _fits(option, value):
                return _decode(option, value)
        raise ValueError(f"{value!r} fits none of {hint}")
    if isinstance(hint, type) and issubclass(hint, Serial):
        return hint.from_dict(value)
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        if not isinstance(value, str):
            raise ValueError(f"{value!r} is not a {hint.__name__}")
        return hint(value)  # ValueError for a word it does not have
    if origin is list:
        return [_decode(args[0], v) for v in _seq(value)]
    if origin is tuple:
        items = _seq(value)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v) for v in items)
        if len(items) != len(args):
            raise ValueError(f"{value!r} is not a {hint}")
        return tuple(_decode(a, v) for a, v in zip(args, items, strict=True))
    if origin is dict:
        return {_decode(args[0], k): _decode(args[1], v) for k, v in _seq(value)}
    if hint is float:
        if isinstance(value, str):
            return float(value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{value!r} is not a number")
        return float(value)
    if hint is Any:
        return value
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ValueError(f"{value!r} is not a {hint.__name__}")
    return value


def _fits(hint: Any, value: Any) -> bool:
    if hint is float:
        return isinstance(value, float) or (isinstance(value, str) and value in _NONFINITE)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, typing.get_origin(hint) or hint)


_NONFINITE = ("nan", "inf", "-inf")


def _seq(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{value!r} is not a list")
    return value


# -- bounded summaries of the steps and throughput seen -----------------------------------


@dataclass
class StepSet(Serial):
    """Distinct step numbers in bounded memory: sorted runs `[first, last, stride]`, which
    hold contiguous steps, every-10th steps and repeats from other ranks in a few entries."""

    runs: list[list[int]] = field(default_factory=list)
    count: int = 0

    def add(self, step: int) -> bool:
        """Count `step`; True when it is new."""
        runs = self.runs
        if runs:
            last = runs[-1]
            if step == last[1]:  # another rank's line of the same step
                return False
            if step > last[1]:
                if last[2] == 0 and last[0] == last[1]:
                    last[2] = step - last[1]
                if step == last[1] + last[2]:
                    last[1] = step
                else:
                    runs.append([step, step, 0])
                    if len(runs) > _MAX_RANGES:
                        self._squeeze()
                self.count += 1
                return True
            if self._has(step):
                return False
        self._insert(step)
        self.count += 1
        return True

    def _has(self, step: int) -> bool:
        i = bisect.bisect_right(self.runs, [step, math.inf]) - 1
        if i < 0:
            return False
        first, last, stride = self.runs[i]
        return first <= step <= last and (stride == 0 or (step - first) % stride == 0)

    def _insert(self, step: int) -> None:
        bisect.insort(self.runs, [step, step, 0])
        if len(self.runs) > _MAX_RANGES:
            self._squeeze()

    def _squeeze(self) -> None:
        # Too many scattered steps: merge neighbours; `count` stays exact for what was
        # seen, membership of old steps becomes approximate.
        merged = []
        for i in range(0, len(self.runs), 2):
            a = self.runs[i]
            b = self.runs[i + 1] if i + 1 < len(self.runs) else a
            merged.append([a[0], b[1], 1])
        self.runs = merged


@dataclass
class Quantiles(Serial):
    """The median of a stream of values in bounded memory: exact for the first 1,024
    values, then from a histogram of 0.1 %-wide bins (every value is counted)."""

    exact: list[float] = field(default_factory=list)
    bins: dict[int, int] = field(default_factory=dict)
    zeros: int = 0  # values <= 0, which have no log bin
    n: int = 0

    def add(self, x: float) -> None:
        if x != x or x == _INF or x == -_INF:  # NaN, inf: not a throughput figure
            return
        self.n += 1
        if self.n <= EXACT:
            self.exact.append(x)
        if x <= 0:
            self.zeros += 1
            return
        b = int(_log(x) * BIN)
        bins = self.bins
        bins[b] = bins.get(b, 0) + 1

    def median(self) -> float | None:
        if not self.n:
            return None
        if self.n <= EXACT:
            values = sorted(self.exact)
            mid = len(values) // 2
            return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
        half = self.n / 2
        seen = self.zeros
        if seen >= half:
            return 0.0
        for b in sorted(self.bins):
            seen += self.bins[b]
            if seen >= half:
                return math.exp((b + 0.5) / BIN)
        return None  # pragma: no cover — the bins hold every positive value


@dataclass
class Rate(Serial):
    """A rate seen on step lines or bars: its unit, first and last value, and median."""

    unit: str | None = None
    first: float | None = None
    last: float | None = None
    sample: Quantiles = field(default_factory=Quantiles)

    def add(self, x: float) -> None:
        if self.first is None:
            self.first = x
        self.last = x
        self.sample.add(x)
