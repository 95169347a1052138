"""Column types that make SQLite and PostgreSQL hold the same values.

- `UTCDateTime`: times are stored as naive UTC and come back timezone-aware (UTC), so a
  ledger written on one host and read on another agrees about when things happened.
- `Real`: a float that survives NaN. SQLite turns a bound NaN into NULL, which would make a
  diverged loss look like a missing one; on SQLite NaN is stored as the text 'NaN'.
  PostgreSQL's double precision holds NaN natively.
- `Word`: a column of one vocabulary (a fate, an event kind…): stored as its word, as
  before, and read back as the enum's member (the table's CHECK constraint holds it to
  the enum's words).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Generic, TypeVar

from sqlalchemy import BigInteger, DateTime, Float, Integer, String
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

NAN_TEXT = "NaN"

# 64-bit integers on both backends: SQLite's INTEGER already is; PostgreSQL's integer is
# 32-bit, which a 2 GB log's byte offset or a step counter past 2^31 would overflow.
BigInt = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value.replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        when = datetime.fromisoformat(value) if isinstance(value, str) else value
        assert isinstance(when, datetime)  # a str only from a row written by hand with sqlite3
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


class Real(TypeDecorator[float]):
    impl = Float
    cache_ok = True

    def process_bind_param(self, value: float | None, dialect: Dialect) -> Any:
        return sqlite_float(value) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> float | None:
        return read_float(value)


W = TypeVar("W", bound=StrEnum)


class Word(TypeDecorator[W], Generic[W]):
    impl = String
    cache_ok = True

    def __init__(self, enum: type[W], length: int) -> None:
        super().__init__(length)
        # both are in the statement cache's key: two vocabularies never share a processor
        self.enum = enum
        self.length = length

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else str(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> W | None:
        return None if value is None else self.enum(value)


def sqlite_float(value: Any) -> Any:
    """What to bind for a float in SQLite: the value, or 'NaN' so NaN is not lost as NULL."""
    if isinstance(value, float) and math.isnan(value):
        return NAN_TEXT
    return value


def read_float(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        return float(value)  # 'NaN' (and any number a person stored as text)
    return float(value)


def utcnow() -> datetime:
    return datetime.now(UTC)


def driver_time(dialect: str, when: datetime) -> datetime | str:
    """A naive UTC datetime as a raw (driver-level) statement binds it. On SQLite the text
    Python's sqlite3 wrote by itself until 3.12 deprecated that adapter (`isoformat(" ")`,
    which the DateTime type reads back); other drivers take the datetime."""
    return when.isoformat(" ") if dialect == "sqlite" else when
