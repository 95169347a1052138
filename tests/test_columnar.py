"""Bulk column reads (ledger.store.columnar) give what the row-by-row cursor gives.

On SQLite through ADBC, on PostgreSQL through binary COPY: NULL and NaN as NaN, integers
as floats, the query's order kept, a leading NULL stretch (which trips ADBC's type guess)
read as it is.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import ledger
from ledger.store import columnar


def _rows(n: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for i in range(n):
        rows.append(
            {
                "step": i,
                "rank": i % 3,
                # no throughput for the first 3,000 steps: the driver's guess sees only NULL
                "throughput": None if i < 3000 else 12_000.0 + i % 17,
                "tokens": 4096 + i % 5,
                "loss": math.nan if i % 11 == 0 else 2.0 + 1.0 / (i + 1),
                "wall_time": 1.7e9 + i * 0.25,
            }
        )
    return rows


@pytest.fixture
def filled(lg: ledger.Ledger) -> ledger.Ledger:
    lg.add_steps("bulk", _rows(9000), throughput_unit="tok/s")
    return lg


def _both(lg: ledger.Ledger, columns: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    mark = "?" if lg.engine.dialect.name == "sqlite" else "%s"
    with lg.engine.connect() as conn:
        (run_id,) = conn.exec_driver_sql(f"SELECT id FROM run WHERE name = {mark}", ("bulk",)).one()
        tail = f"FROM step WHERE run_id = {mark} ORDER BY rank, step"
        bulk = columnar.fetch_floats(conn, columns, tail, (run_id,))
        rowwise = columnar._cursor(conn, columns, tail, (run_id,))
    return bulk, rowwise


def test_bulk_read_equals_the_cursor_read(filled: ledger.Ledger) -> None:
    columns = ("rank", "step", "throughput", "tokens", "loss", "wall_time", "wait_s")
    before = columnar.fallbacks
    bulk, rowwise = _both(filled, columns)
    assert bulk.shape == rowwise.shape == (9000, len(columns))
    assert np.array_equal(bulk, rowwise, equal_nan=True)
    assert columnar.fallbacks == before  # the bulk path itself was taken
    # NaN (stored as text on SQLite) and NULL are both NaN; a column of only NULL too
    assert np.isnan(bulk[:, 4]).sum() == sum(1 for i in range(9000) if i % 11 == 0)
    assert np.isnan(bulk[:, 6]).all()
    # ordered as asked: by rank, then step
    assert np.all(np.diff(bulk[:, 0]) >= 0)


def test_reads_side_by_side_give_each_its_own_rows(
    filled: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fetch_floats_many: each read's table is the one fetch_floats gives, in order (on
    SQLite they run at once, in threads); one the driver refuses is read by the cursor and
    counted, the others stay bulk reads."""
    mark = "?" if filled.engine.dialect.name == "sqlite" else "%s"
    reads = [
        columnar.Read(
            ("step", "throughput"), f"FROM step WHERE rank = {mark} ORDER BY step", (rank,)
        )
        for rank in (2, 0, 1)
    ]
    reads.append(columnar.Read(("step",), f"FROM step WHERE rank = {mark}", (0,), bulk=False))
    with filled.engine.connect() as conn:
        alone = [columnar.fetch_floats(conn, r.columns, r.tail, r.params) for r in reads]
        together = columnar.fetch_floats_many(conn, reads)
        assert [t.shape for t in together] == [(3000, 2)] * 3 + [(3000, 1)]
        for a, b in zip(alone, together, strict=True):
            assert np.array_equal(a, b, equal_nan=True)
        assert together[1][0, 0] == 0 and together[0][0, 0] == 2
        if filled.engine.dialect.name != "sqlite":
            return
        real = columnar._adbc_sqlite

        def refusing(path: str, columns: tuple[str, ...], tail: str, params: tuple) -> object:
            if params == (0,):
                raise OSError("the driver refused a value")
            return real(path, columns, tail, params)

        monkeypatch.setattr(columnar, "_adbc_sqlite", refusing)
        before = columnar.fallbacks
        again = columnar.fetch_floats_many(conn, reads)
        assert columnar.fallbacks == before + 1
        for a, b in zip(alone, again, strict=True):
            assert np.array_equal(a, b, equal_nan=True)

        def broken(path: str, columns: tuple[str, ...], tail: str, params: tuple) -> object:
            raise ZeroDivisionError("a bug, not the driver")

        monkeypatch.setattr(columnar, "_adbc_sqlite", broken)
        with pytest.raises(ZeroDivisionError):
            columnar.fetch_floats_many(conn, reads)


def test_steps_frame_and_step_columns_read_every_value(filled: ledger.Ledger) -> None:
    frame = filled.steps_frame("bulk", ["throughput", "tokens", "loss"])
    assert list(frame["step"]) == list(range(9000))  # by step, then rank
    assert frame["tokens"].tolist() == [4096 + i % 5 for i in range(9000)]
    assert frame["throughput"].isna().sum() == 3000
    cols = filled.step_columns("bulk")
    assert cols.rank is not None and len(cols.step) == 9000
    assert float(np.nansum(cols.throughput)) == pytest.approx(
        sum(12_000.0 + i % 17 for i in range(3000, 9000))
    )


@pytest.mark.sqlite_only
def test_reads_side_by_side_are_bulk_reads_every_time(filled: ledger.Ledger) -> None:
    """Read-only connections opened at once find the WAL index busy now and then: they wait
    for it (a busy timeout) instead of failing and falling back to the cursor (they did one
    time in three)."""
    reads = [
        columnar.Read(("step", "throughput"), "FROM step WHERE rank = ? ORDER BY step", (rank,))
        for rank in (0, 1, 2)
    ]
    before = columnar.fallbacks
    with filled.engine.connect() as conn:
        for _ in range(20):
            tables = columnar.fetch_floats_many(conn, reads)
            assert [t.shape for t in tables] == [(3000, 2)] * 3
    assert columnar.fallbacks == before


def test_an_empty_result_is_an_empty_array(lg: ledger.Ledger) -> None:
    lg.add_steps("bulk", [{"step": 1, "throughput": 1.0}])
    mark = "?" if lg.engine.dialect.name == "sqlite" else "%s"
    with lg.engine.connect() as conn:
        table = columnar.fetch_floats(
            conn, ("step", "throughput"), f"FROM step WHERE run_id = {mark}", (-1,)
        )
    assert table.shape == (0, 2)


def test_labelled_read_agrees_with_the_sql_mapping(
    lg: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # names that sort differently by case and accent, a name seen only late in the run
    rows = [{"step": s, "b_norm": s * 1.0, "A_lr": 0.1, "é": -1.0} for s in range(1, 3001)]
    rows[-1]["zz_late"] = 5.0
    lg.add_steps("labels", rows)
    direct = lg.metrics_frame("labels")
    monkeypatch.setattr(columnar, "_sqlite_file", lambda conn: "")  # as an in-memory ledger
    mapped = lg.metrics_frame("labels")
    assert direct.equals(mapped)
    assert sorted(set(direct["name"])) == ["A_lr", "b_norm", "zz_late", "é"]
    assert len(direct) == 3 * 3000 + 1


@pytest.mark.parametrize("held", ["all", "some"])
def test_step_columns_read_the_same_whichever_way_sqlite_takes(
    lg: ledger.Ledger, held: str
) -> None:
    # every analysed column held from the first step: one scan of all of them; a column
    # empty early on: a count of the columns, then a read of those that hold something
    # (without the steps, which are consecutive) — a later value must still be found
    rows: list[dict[str, object]] = []
    for i in range(12_000):
        row: dict[str, object] = {"step": 5 + i, "throughput": 1000.0 + i % 7, "tokens": 64}
        if held == "all" or i >= 11_000:
            row.update(step_time_s=0.064, wait_s=0.001 * (i % 3), wall_time=1.7e9 + i * 0.07)
        rows.append(row)
    lg.add_steps("r", rows, throughput_unit="tok/s")
    cols = lg.step_columns("r")
    assert cols.step.tolist() == list(range(5, 12_005))
    assert cols.throughput is not None and cols.throughput.tolist() == [
        1000.0 + i % 7 for i in range(12_000)
    ]
    assert cols.wall_time is not None and cols.wait_s is not None
    assert np.isnan(cols.wall_time).sum() == (0 if held == "all" else 11_000)
    assert cols.wall_time[-1] == pytest.approx(1.7e9 + 11_999 * 0.07)
    assert np.nansum(cols.wait_s) == pytest.approx(
        sum(0.001 * (i % 3) for i in range(12_000) if held == "all" or i >= 11_000)
    )
    if lg.engine.dialect.name == "sqlite":
        from ledger.store.analysed import _all_held_early

        with lg.engine.connect() as conn:
            (run_id,) = conn.exec_driver_sql("SELECT id FROM run WHERE name = 'r'").one()
            where = "FROM step WHERE run_id = ? AND launch = ?"
            assert _all_held_early(conn, where, (run_id, 1)) is (held == "all")


def test_the_bulk_reader_maps_the_file_and_waits_for_locks(tmp_path: Any) -> None:
    """Its connection's settings, as a query on it sees them: the file read through a
    mapping, not a pread a page, and a busy timeout."""
    path = tmp_path / "l.db"
    ledger.open(path).close()
    assert columnar._adbc_query(str(path), "PRAGMA mmap_size", ()).to_pylist() == [
        {"mmap_size": 1 << 30}
    ]
    assert columnar._adbc_query(str(path), "PRAGMA busy_timeout", ()).to_pylist() == [
        {"timeout": 30_000}
    ]
