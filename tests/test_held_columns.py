"""launch.held_columns (revision 0008): every step writer sets the bit of each column it
writes a value in, so that readers read those columns without counting them over every
row first — and a reader given the bits says exactly what one that counts says.

Every test runs against SQLite and, in the PostgreSQL pass, a real server.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import event, select, update

import ledger
from ledger.db import models as m
from ledger.model.terms import STEP_COLUMNS
from ledger.store import analysed, frames, meter, steps


def run_id(lg: Any, name: str) -> int:
    with lg._read() as (s, _):
        found = s.scalar(select(m.Run.id).where(m.Run.name == name))
    assert found is not None
    return int(found)


def held(lg: Any, name: str, launch: int = 1) -> frozenset[str] | None:
    with lg._read() as (s, _):
        return steps.held_columns(s.connection(), run_id(lg, name), launch)


def counted(lg: Any, name: str, launch: int = 1) -> frozenset[str]:
    """What a count over the launch's rows says is held (the reader's fallback)."""
    with lg._read() as (s, _):
        conn = s.connection()
        mark = steps.placeholder(conn.dialect.name)
        where = f"FROM step WHERE run_id = {mark} AND launch = {mark}"
        found = steps.column_counts(conn, where, (run_id(lg, name), launch), STEP_COLUMNS)[0]
    return frozenset(found)


def forget(lg: Any, name: str, launch: int = 1) -> None:
    """Make the ledger not know the launch's held columns (as before revision 0008)."""
    with lg._write() as (s, _):
        s.execute(
            update(m.Launch)
            .where(m.Launch.run_id == run_id(lg, name), m.Launch.number == launch)
            .values(held_columns=None)
        )


def test_the_order_is_the_migrations_and_covers_every_step_column() -> None:
    import importlib.util

    path = Path(__file__).parents[1] / "migrations" / "versions" / "0008_held_columns.py"
    spec = importlib.util.spec_from_file_location("m0008", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert steps.HELD_ORDER == module.HELD_ORDER  # the stored bits mean what they meant
    assert set(steps.HELD_ORDER) == set(STEP_COLUMNS)


def test_a_new_run_holds_nothing_and_the_api_sets_what_it_writes(lg: Any) -> None:
    lg.add_steps("a", [{"step": 0, "throughput": 1.0}])
    assert held(lg, "a") == {"throughput"}
    lg.add_steps("a", [{"step": 1, "throughput": 1.0, "loss": 2.0, "wait_s": None}])
    assert held(lg, "a") == {"throughput", "loss"}
    lg.add_steps("a", [{"step": 2, "tokens": 4096, "elsewhere": 3.0}])  # a metric: no bit
    assert held(lg, "a") == {"throughput", "loss", "tokens"} == counted(lg, "a")


def test_a_read_log_sets_the_columns_it_read(lg: Any, tmp_path: Path) -> None:
    log = tmp_path / "train_eager_fixed.log"
    lines = [f"step {i:05d}/00200 | loss: 2.5 | dt: 500.0ms | tok/sec: 14,000" for i in range(200)]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    lg.ingest(log)
    assert held(lg, "eager_fixed") == counted(lg, "eager_fixed")
    assert {"throughput", "loss", "step_time_s"} <= (held(lg, "eager_fixed") or set())


def test_removing_a_logs_rows_counts_them_again(lg: Any, tmp_path: Path) -> None:
    """A log read again from its start (its rows removed first): the bits only its rows
    set go with them; those of rows another writer made stay."""
    lg.add_steps("b", [{"step": i, "throughput": 1.0} for i in range(10)])
    rid = run_id(lg, "b")
    with lg._write() as (s, _):
        writer = steps.StepWriter(s.connection(), rid, log_file_id=7, columns=("loss", "wait_s"))
        writer.write([(0, 10 + i, 2.0, 0.1) for i in range(5)])
    assert held(lg, "b") == {"throughput", "loss", "wait_s"}
    with lg._write() as (s, _):
        steps.forget_log_rows(s.connection(), rid, 7)
    assert held(lg, "b") == {"throughput"} == counted(lg, "b")
    log = tmp_path / "train_c.log"  # and through ingest: a relaunch into the same log
    rich = [f"step {i:05d}/00300 | loss: 2.5 | dt: 500.0ms | tok/sec: 14,000" for i in range(300)]
    log.write_text("\n".join(rich) + "\n", encoding="utf-8")
    lg.ingest(log)
    plain = [f"step {i:05d}/00300 | tok/sec: 13,000" for i in range(100)]
    log.write_text("\n".join(plain) + "\n", encoding="utf-8")  # truncated, rewritten
    lg.ingest(log)
    for launch in (1, 2):
        assert held(lg, "c", launch) == counted(lg, "c", launch)
    assert "loss" not in (held(lg, "c", 2) or {"loss"})


def test_the_hook_and_fill_set_theirs(lg: Any) -> None:
    lg.add_steps("h", [{"step": 0, "throughput": 1.0}])
    rid = run_id(lg, "h")
    with lg._write() as (s, _):
        meter.write_batch(
            s.connection(), rid, [{"step": 1, "throughput": 2.0, "gpu_time_s": 0.002}],
            metrics=[], dropped=0, cost_us=None, fates=[],
        )  # fmt: skip
    assert held(lg, "h") == {"throughput", "gpu_time_s"}
    with lg._write() as (s, _):
        steps.StepWriter(s.connection(), rid, columns=("loss",)).fill([(0, 0, 3.0)])
    assert held(lg, "h") == {"throughput", "gpu_time_s", "loss"} == counted(lg, "h")


def test_a_write_rolled_back_sets_no_bit(lg: Any) -> None:
    lg.add_steps("r", [{"step": 0, "throughput": 1.0}])
    rid = run_id(lg, "r")
    with pytest.raises(RuntimeError), lg._write() as (s, _):
        steps.StepWriter(s.connection(), rid).write_mappings([{"step": 1, "loss": 1.0}])
        raise RuntimeError("the transaction fails after the write")
    assert held(lg, "r") == {"throughput"} == counted(lg, "r")


def test_unknown_stays_unknown_and_readers_count(lg: Any) -> None:
    """A launch whose bits the ledger does not know: writing more does not make a partial
    set of them, and the readers count the columns."""
    lg.add_steps("u", [{"step": i, "throughput": 100.0 + i, "tokens": 64} for i in range(50)])
    forget(lg, "u")
    lg.add_steps("u", [{"step": 50, "throughput": 150.0, "loss": 1.0}])
    assert held(lg, "u") is None
    columns = lg.step_columns("u")
    assert columns.tokens is not None and len(columns.step) == 51
    assert "loss" in lg.steps_frame("u").columns


def test_an_upgrade_counts_each_existing_launch(tmp_path: Path) -> None:
    from ledger.db import schema
    from ledger.db.engine import make_engine
    from ledger.store.admin import upgrade

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    schema.upgrade(engine, "0007")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO investigation (id, name, created_at) VALUES (1, 'default', '2026-01-01')"
        )
        for rid, name in ((1, "old"), (2, "empty")):
            conn.exec_driver_sql(
                "INSERT INTO run (id, investigation_id, name, fate, created_at) "
                f"VALUES ({rid}, 1, '{name}', 'unknown', '2026-01-01')"
            )
            conn.exec_driver_sql(
                "INSERT INTO launch (run_id, number, fate, started_at) "
                f"VALUES ({rid}, 1, 'unknown', '2026-01-01')"
            )
        conn.exec_driver_sql(
            "INSERT INTO step (run_id, launch, rank, step, throughput, wait_s) VALUES "
            + ", ".join(f"(1, 1, 0, {i}, {1000 + i % 5}, 0.01)" for i in range(100))
        )
    engine.dispose()
    upgrade(url)
    lg = ledger.open(url)
    try:
        assert held(lg, "old") == {"throughput", "wait_s"}
        assert held(lg, "empty") == frozenset()
        assert lg.analyze("old").n_steps == 100
    finally:
        lg.close()


class Statements:
    """The SQL a ledger's engine ran, while listening."""

    def __init__(self, lg: Any) -> None:
        self.engine = lg.engine
        self.seen: list[str] = []
        event.listen(self.engine, "before_cursor_execute", self._one)

    def _one(self, conn: Any, cursor: Any, sql: str, *args: Any) -> None:
        self.seen.append(sql)

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._one)


def test_a_known_launch_is_read_without_counting_its_columns(lg: Any) -> None:
    """The bench's shape: throughput and tokens only, so that on SQLite the early-rows test
    fails and the reader used to count every analysed column over every row."""
    lg.add_steps("k", [{"step": i, "throughput": 100.0 + i % 7, "tokens": 64} for i in range(500)])
    listening = Statements(lg)
    try:
        known = lg.step_columns("k")
    finally:
        listening.close()
    assert not [q for q in listening.seen if "count(throughput)" in q.replace('"', "")]
    forget(lg, "k")
    counted_columns = lg.step_columns("k")
    for name in ("step", "throughput", "tokens", "step_time_s", "wait_s", "wall_time", "rank"):
        a, b = getattr(known, name), getattr(counted_columns, name)
        assert (a is None) == (b is None), name
        if a is not None:
            assert np.array_equal(a, b, equal_nan=True), name


def test_a_bit_outliving_its_values_reads_as_nothing(lg: Any) -> None:
    """A bit set by a row ON CONFLICT skipped (a step written twice) only costs a read."""
    lg.add_steps("s", [{"step": i, "throughput": 100.0 + i} for i in range(40)])
    lg.add_steps("s", [{"step": 3, "throughput": 5.0, "wait_s": 0.5}])  # step 3 is stored
    assert held(lg, "s") == {"throughput", "wait_s"} and counted(lg, "s") == {"throughput"}
    columns = lg.step_columns("s")
    assert columns.wait_s is None and columns.throughput[3] == 103.0


def test_wide_frame_reads_the_known_columns(lg: Any) -> None:
    lg.add_steps("w", [{"step": i, "throughput": 1.0, "loss": 2.0, "extra": 3.0} for i in range(9)])
    with lg._read() as (s, _):
        frame = frames.wide_frame(s.connection(), run_id(lg, "w"), 1)
    assert list(frame.columns) == ["rank", "step", "throughput", "loss", "extra"]


NAMES = itertools.count()

# A step's values: each column None, a number, or NaN; several ranks and steps out of order.
VALUE = st.one_of(st.none(), st.floats(-1e6, 1e6), st.just(math.nan))
ROW = st.fixed_dictionaries(
    {"rank": st.integers(0, 2), "step": st.integers(0, 30)},
    optional={c: VALUE for c in ("throughput", "tokens", "step_time_s", "wait_s", "wall_time")},
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=st.lists(st.lists(ROW, min_size=1, max_size=12), min_size=1, max_size=4))
def test_the_bits_and_the_arrays_are_what_counting_says(lg: Any, batches: list[Any]) -> None:
    """Any writes: the bits hold at least what a count finds, only a value's column a row
    ON CONFLICT skipped beyond it; and the arrays read with them are the counted ones."""
    name = f"p{next(NAMES)}"  # a run of its own for each example, in the one ledger
    for batch in batches:
        rows = [{k: (int(v) if k == "tokens" and v == v and v is not None else v)
                 for k, v in r.items()} for r in batch]  # fmt: skip
        lg.add_steps(name, rows)
    known = held(lg, name)
    assert known is not None and counted(lg, name) <= known
    via_bits = lg.step_columns(name)
    forget(lg, name)
    with lg._read() as (s, _):
        counted_columns = analysed.step_columns(s, run_id(lg, name), None, 1)
    for column in ("step", "rank", "throughput"):
        a, b = getattr(via_bits, column), getattr(counted_columns, column)
        assert (a is None) == (b is None), column
        if a is not None:
            assert np.array_equal(a, b, equal_nan=True), column


@pytest.mark.parametrize("known", [True, False])
@pytest.mark.parametrize("timed", [None, "step_time_s", "wall_time"])
def test_compare_reads_tokens_only_where_the_analysis_uses_them(
    lg: Any, timed: str | None, known: bool
) -> None:
    """Tokens with nothing but a throughput change no figure (every step counts as the same
    work), so compare's read leaves them out; beside a step time or a wall clock they are
    the work, and are read. Tokens vary here: had they counted, the analyses would differ."""
    from ledger.analyze import analyze_run
    from ledger.model.kept import encode

    def row(i: int) -> dict[str, Any]:
        found: dict[str, Any] = {
            "step": i,
            "throughput": 100.0 + (i * 37) % 11,
            "tokens": 60 + i % 9,
        }
        if timed == "step_time_s":
            found[timed] = 0.5 + (i % 4) / 10
        elif timed == "wall_time":
            found[timed] = 1000.0 + 0.6 * i + (5.0 if i % 50 == 49 else 0.0)
        return found

    lg.add_steps("t", [row(i) for i in range(400)])
    if not known:
        forget(lg, "t")
    with lg._read() as (s, _):
        (read,) = analysed.many(s, [(run_id(lg, "t"), 1)])
    whole = lg.step_columns("t")
    assert whole.tokens is not None
    assert (read.tokens is None) == (timed is None)
    assert encode(analyze_run("t", read, unit="tok/s")) == encode(
        analyze_run("t", whole, unit="tok/s")
    )
