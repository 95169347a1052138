"""A run's analysis to JSON and back, to be kept in the ledger (revision 0007).

Every field is kept except the arrays a run carries for plots (internal fields whose
default is None: steps, values, outlier masks, stall steps): the scalars compare needs
beside what `--json` shows (standard errors, batch counts) are internal too, and kept.
Floats go through `repr`, so an analysis read back compares exactly as the one made;
NaN and infinities are written as JSON's usual extensions (NaN, Infinity).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from functools import cache
from typing import Any, TypeVar, Union

from ledger.model.analysis import RunAnalysis

T = TypeVar("T")


def _kept(field: dataclasses.Field[Any]) -> bool:
    return not (field.metadata.get("internal") and field.default is None)


def encode(analysis: RunAnalysis) -> str:
    """The analysis as JSON, without its arrays."""
    return json.dumps(_plain(analysis), separators=(",", ":"))


def decode(text: str, run: str | None = None) -> RunAnalysis:
    """The analysis `encode` wrote (named `run` when given: the label it is compared
    under); ValueError when the text is not one."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not a kept analysis: {e}") from None
    analysis = _build(RunAnalysis, data)
    return dataclasses.replace(analysis, run=run) if run is not None else analysis


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if _kept(f)
        }
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str | bool | int | float) or value is None:
        return value
    if hasattr(value, "item"):  # a numpy scalar
        return value.item()
    raise TypeError(f"cannot keep a {type(value).__name__} in an analysis")


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(cls: type[T], data: Any) -> T:
    if not isinstance(data, dict):
        raise ValueError(f"not a kept analysis: {cls.__name__} is not an object")
    hints = _hints(typing.cast(type, cls))
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    missing = [n for n, f in fields.items() if _kept(f) and n not in data and _required(f)]
    if missing:
        raise ValueError(f"not a kept analysis: {cls.__name__} lacks {', '.join(missing)}")
    values = {name: _value(hints[name], data[name]) for name in fields if name in data}
    return cls(**values)


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def _value(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _value(options[0], value) if len(options) == 1 else value
    if origin is list:
        (item,) = typing.get_args(hint)
        return [_value(item, v) for v in _list(value)]
    if origin is tuple:
        return tuple(_value(a, v) for a, v in zip(typing.get_args(hint), _list(value), strict=True))
    if dataclasses.is_dataclass(hint):
        return _build(hint, value)  # type: ignore[arg-type]
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if hint in (int, str, bool) and not isinstance(value, hint):
        raise ValueError(f"not a kept analysis: {value!r} is not a {hint.__name__}")
    return value


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"not a kept analysis: {value!r} is not a list")
    return value
