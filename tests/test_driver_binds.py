"""What goes to the SQLite driver by hand is never a datetime: Python 3.12 deprecated the
sqlite3 module's own datetime adapter (a DeprecationWarning at every bind, an error under
`-W error`), and a later Python may drop it. Here an adapter that raises stands in for the
missing one, so the check holds on every Python this project supports."""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import ledger
from ledger.db.types import driver_time

pytestmark = pytest.mark.sqlite_only


class _RawDatetime(AssertionError):
    pass


def _refuse(value: object) -> str:
    raise _RawDatetime(f"a {type(value).__name__} reached the sqlite3 driver unconverted")


@pytest.fixture
def no_datetime_adapter() -> Iterator[None]:
    saved = dict(sqlite3.adapters)
    sqlite3.register_adapter(dt.datetime, _refuse)
    sqlite3.register_adapter(dt.date, _refuse)
    try:
        yield
    finally:
        sqlite3.adapters.clear()
        sqlite3.adapters.update(saved)


def test_the_raising_adapter_would_catch_a_raw_datetime(no_datetime_adapter: None) -> None:
    conn = sqlite3.connect(":memory:")
    with pytest.raises(_RawDatetime):
        conn.execute("SELECT ?", (dt.datetime(2026, 1, 1),))
    assert conn.execute("SELECT ?", (driver_time("sqlite", dt.datetime(2026, 1, 1)),)).fetchone()


def test_ingest_with_events_binds_no_raw_datetime(
    tmp_path: Path, no_datetime_adapter: None
) -> None:
    log = tmp_path / "train_events.log"
    log.write_text(
        "".join(f"step {i} | loss 2.{i:02d} | 14200 tokens/s\n" for i in range(1, 40))
        + 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    with ledger.open(tmp_path / "l.db") as lg:
        result = lg.ingest(log)
        events = lg.log_events("events")  # a run is named without "train_"
    assert result.steps == 39
    assert any("OutOfMemoryError" in str(e) for e in events), events


def test_driver_time_is_what_sqlite3_wrote_before_3_12() -> None:
    when = dt.datetime(2026, 12, 2, 4, 40, 0, 123456)
    assert driver_time("sqlite", when) == "2026-12-02 04:40:00.123456"
    assert driver_time("sqlite", when.replace(microsecond=0)) == "2026-12-02 04:40:00"
    assert driver_time("postgresql", when) is when
