"""Kept analyses (ledger.store.kept): compare reads a launch's analysis instead of its steps
while they stay as they were, and only then.

Every test runs against SQLite and, in the PostgreSQL pass, a real server. "Read again"
is counted on the function that reads a launch's steps for compare.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, select, update

import ledger
from ledger.db import models as m
from ledger.demo import traces as syn
from ledger.model.kept import decode, encode
from ledger.store import analysed, kept, steps
from tests.helpers import run_cli

STEPS = 1200
RUNS = ["eager_unpadded", "eager_dynamiccopy"]


def add_run(lg: Any, name: str, level: float, seed: int, *, start: int = 0, **kw: Any) -> None:
    values, _ = syn.trace(STEPS, level=level, noise=0.02, phi=0.5, warmup=60, seed=seed, **kw)
    rows = [{**r, "step": r["step"] + start} for r in syn.step_rows(values)]
    lg.add_steps(name, rows, throughput_unit="tok/s")


@pytest.fixture
def two(lg: Any) -> Any:
    add_run(lg, "eager_unpadded", 10_800.0, 1)
    add_run(lg, "eager_dynamiccopy", 14_100.0, 2, change_points=[(800, 0.95)])
    return lg


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    """How many times compare read each run's steps (by run id)."""
    counted: Counter[int] = Counter()
    real = analysed.plan  # every read of a launch's steps is planned first

    def counting(conn: Any, run_id: int, *args: Any, **kwargs: Any) -> Any:
        counted[run_id] += 1
        return real(conn, run_id, *args, **kwargs)

    monkeypatch.setattr(analysed, "plan", counting)
    return counted


def run_ids(lg: Any) -> dict[str, int]:
    with lg._read() as (s, _):
        return {name: i for name, i in s.execute(select(m.Run.name, m.Run.id))}


def as_json(report: Any) -> str:
    return json.dumps(report.to_dict(), sort_keys=True, default=str)


def fresh(lg: Any, runs: list[str], **kw: Any) -> Any:
    """The comparison made from the steps: every kept analysis dropped first."""
    with lg._write() as (s, _):
        s.execute(delete(m.KeptAnalysis))
    return lg.compare(runs, **kw)


def test_a_second_compare_reads_no_steps_and_says_the_same(two: Any, reads: Counter[int]) -> None:
    first = two.compare(RUNS)
    assert sum(reads.values()) == 2
    reads.clear()
    again = two.compare(RUNS)
    assert sum(reads.values()) == 0, "the steps were read again"
    assert as_json(again) == as_json(first)
    # the intervals and the p-value come from the standard errors, which are kept too
    assert again.comparisons[0].p_value == first.comparisons[0].p_value
    assert again.comparisons[0].ci95_pct == first.comparisons[0].ci95_pct
    assert again.comparisons[0].verdict == "improvement"


def test_a_slower_run_kept_still_gets_its_top_why_finding(lg: Any, reads: Counter[int]) -> None:
    """`why` reads the steps of a slower run (and of the first) that compare did not."""
    add_run(lg, "fast", 14_100.0, 1)
    add_run(lg, "slow", 10_800.0, 2, stalls=12)
    first = lg.compare(["fast", "slow"])
    assert first.comparisons[0].verdict == "regression" and "slow" in first.why
    reads.clear()
    again = lg.compare(["fast", "slow"])
    assert sorted(reads.values()) == [1, 1]  # by why alone: once each, as before
    assert as_json(again) == as_json(first)


def test_a_run_that_got_steps_is_analysed_again_and_only_it(two: Any, reads: Counter[int]) -> None:
    two.compare(RUNS)
    add_run(two, "eager_dynamiccopy", 12_000.0, 7, start=STEPS)  # the run went on, slower
    reads.clear()
    report = two.compare(RUNS)
    ids = run_ids(two)
    assert reads == Counter({ids["eager_dynamiccopy"]: 1})
    assert report.run("eager_dynamiccopy").last_step == 2 * STEPS - 1
    assert as_json(report) == as_json(fresh(two, RUNS))


def test_a_new_baseline_or_threshold_is_applied_to_a_kept_analysis(two: Any) -> None:
    two.compare(RUNS)
    two.set_baseline(14_200.0, "tok/s")
    with_baseline = two.compare(RUNS)
    assert with_baseline.run("eager_unpadded").vs_baseline_pct == pytest.approx(
        100 * 10_800 / 14_200, abs=1.0
    )
    assert with_baseline.run("eager_unpadded").recovered is False
    assert as_json(with_baseline) == as_json(fresh(two, RUNS))
    two.compare(RUNS)
    wider = two.compare(RUNS, threshold=0.5)  # made with another threshold: analysed again
    assert wider.comparisons[0].verdict == "no-change"
    assert as_json(wider) == as_json(fresh(two, RUNS, threshold=0.5))


def test_a_kept_analysis_is_shown_under_the_name_it_is_compared_by(lg: Any) -> None:
    add_run(lg, "eager_b", 10_800.0, 1)
    lg.begin_launch("eager_b", "api")
    add_run(lg, "eager_b", 14_100.0, 2)
    runs = ["eager_b@1", "eager_b"]
    first = lg.compare(runs)
    again = lg.compare(runs)
    assert [r.run for r in again.runs] == runs
    assert as_json(again) == as_json(first)
    assert again.comparisons[0].verdict == "improvement"


def test_rewritten_steps_are_never_read_from_a_kept_analysis(two: Any) -> None:
    """Removing a log's rows and filling empty values both change the version even where
    the count stays; adding rows changes the count."""
    run_id = run_ids(two)["eager_unpadded"]
    with two._read() as (s, _):
        before = kept.version(s, run_id, 1)
    with two._write() as (s, _):
        steps.forget_log_rows(s.connection(), run_id, 999)  # no such log: nothing removed
    with two._read() as (s, _):
        after = kept.version(s, run_id, 1)
    assert after.steps == before.steps and after.rewritten == before.rewritten + 1
    with two._write() as (s, _):
        writer = steps.StepWriter(s.connection(), run_id, columns=("loss",))
        writer.fill([(0, 0, 1.0)])
    with two._read() as (s, _):
        filled = kept.version(s, run_id, 1)
    assert filled.rewritten == after.rewritten + 1
    add_run(two, "eager_unpadded", 14_100.0, 3, start=STEPS)
    with two._read() as (s, _):
        assert kept.version(s, run_id, 1).steps == before.steps + STEPS


def test_a_re_read_log_with_other_values_is_analysed_again(lg: Any, tmp_path: Path) -> None:
    """The loop: a log read, compared, then rewritten in place with the same steps but other
    figures (the file replaced by a rerun's) and read again."""

    def write(path: Path, rate: float) -> None:
        shown = [f"{rate + (i % 7) * 30:,.0f}" for i in range(600)]
        lines = [
            f"step {i:05d}/00600 | loss: 2.5 | dt: 500.0ms | tok/sec: {t}"
            for i, t in enumerate(shown)
        ]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    a, b = tmp_path / "train_a.log", tmp_path / "train_b.log"
    write(a, 14_000)
    write(b, 14_010)
    lg.ingest(a)
    lg.ingest(b)
    assert lg.compare(["a", "b"]).comparisons[0].verdict == "no-change"
    write(b, 10_000)  # same steps, same size class, other figures
    lg.ingest(b)
    report = lg.compare(["a", "b"])
    assert report.run("b").median < 11_000
    assert report.comparisons[0].verdict == "regression"


def test_a_busy_ledger_costs_compare_a_moment_and_no_answer(
    two: Any, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    if not db_url.startswith("sqlite"):
        pytest.skip("SQLite's write lock")
    first = two.compare(RUNS)
    fresh(two, RUNS)  # made and kept again
    with two._write() as (s, _):
        s.execute(delete(m.KeptAnalysis))
    path = db_url.removeprefix("sqlite:///")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the lock (an ingest --follow)
    try:
        started = time.monotonic()
        with caplog.at_level(logging.INFO, logger="ledger.store"):
            report = two.compare(RUNS)
        took = time.monotonic() - started
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert as_json(report) == as_json(first)
    assert took < 10, took  # not the 30 s busy timeout
    assert "kept no analysis" in caplog.text
    with two._read() as (s, _):
        assert s.query(m.KeptAnalysis).count() == 0


def test_an_unreadable_kept_analysis_is_said_and_analysed_again(
    two: Any, caplog: pytest.LogCaptureFixture
) -> None:
    first = two.compare(RUNS)
    with two._write() as (s, _):
        s.execute(update(m.KeptAnalysis).values(body='{"run": 1}'))
    with caplog.at_level(logging.WARNING, logger="ledger.compare"):
        again = two.compare(RUNS)
    assert "is unreadable" in caplog.text
    assert as_json(again) == as_json(first)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ledger.compare"):
        assert as_json(two.compare(RUNS)) == as_json(first)
    assert caplog.text == "", "the analysis made instead was not kept"


def test_the_codec_keeps_every_field_but_the_arrays(lg: Any) -> None:
    rows = []
    for rank in range(4):
        values, _ = syn.trace(STEPS, level=10_000 - 300 * rank, noise=0.02, phi=0.5, warmup=60,
                              seed=rank, change_points=[(700, 0.9)], stalls=6)  # fmt: skip
        rows += [{**r, "rank": rank} for r in syn.step_rows(values)]
    lg.add_steps("ranked", rows, throughput_unit="tok/s")
    analysis = lg.compare(["ranked"]).runs[0]
    assert analysis.ranks is not None and analysis.regime is not None
    back = decode(encode(analysis))
    assert back == analysis
    for f in dataclasses.fields(analysis):
        if f.metadata.get("internal") and f.default is None:
            assert getattr(back, f.name) is None, f.name  # the arrays stay out
        elif not f.compare:
            assert getattr(back, f.name) == getattr(analysis, f.name), f.name
    assert back.regime is not None and analysis.regime is not None
    assert back.regime.effective_se_log == analysis.regime.effective_se_log
    assert decode(encode(analysis), run="other").run == "other"
    for bad in ("not json", "[]", '{"run": "x"}', json.dumps({**json.loads(encode(analysis)),
                                                             "change_points": 3})):  # fmt: skip
        with pytest.raises(ValueError, match="not a kept analysis"):
            decode(bad)


def test_a_plot_reads_the_steps_and_the_cli_says_the_same_twice(
    two: Any, db_url: str, tmp_path: Path, reads: Counter[int]
) -> None:
    two.compare(RUNS)
    reads.clear()
    report = two.compare(RUNS, plot=tmp_path / "cmp.png")
    assert sum(reads.values()) == 2 and Path(report.plot or "").exists()
    once = run_cli("--db", db_url, "compare", *RUNS, "--json")
    twice = run_cli("--db", db_url, "compare", *RUNS, "--json")
    assert once.exit_code == 0 and twice.exit_code == 0
    assert once.output == twice.output


def test_deleting_a_run_deletes_its_kept_analysis(two: Any) -> None:
    two.compare(RUNS)
    with two._read() as (s, _):
        assert s.query(m.KeptAnalysis).count() == 2
    doomed = run_ids(two)[RUNS[0]]
    with two._write() as (s, _):
        s.delete(s.get(m.Run, doomed))
    with two._read() as (s, _):
        assert s.query(m.KeptAnalysis).count() == 1


def test_an_upgraded_ledger_keeps_analyses(tmp_path: Path) -> None:
    from ledger.db import schema
    from ledger.db.engine import make_engine
    from ledger.store.admin import upgrade

    url = f"sqlite:///{tmp_path / 'old.db'}"
    schema.upgrade(make_engine(url), "0006")
    upgrade(url)
    lg = ledger.open(url)
    try:
        add_run(lg, "a", 10_000.0, 1)
        add_run(lg, "b", 10_000.0, 2)
        assert lg.compare(["a", "b"]).comparisons[0].verdict == "no-change"
        with lg._read() as (s, _):
            assert s.query(m.KeptAnalysis).count() == 2
    finally:
        lg.close()


def test_the_cli_keeps_analyses_where_it_may_write_and_reads_only_where_not(
    two: Any, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def count() -> int:
        with two._read() as (s, _):
            return s.query(m.KeptAnalysis).count()

    monkeypatch.setattr(ledger.Ledger, "writable", staticmethod(lambda db=None: False))
    unwritable = run_cli("--db", db_url, "compare", *RUNS, "--json")
    assert unwritable.exit_code == 0 and count() == 0 and unwritable.stderr == ""
    monkeypatch.undo()
    kept_now = run_cli("--db", db_url, "compare", *RUNS, "--json")
    assert kept_now.exit_code == 0 and count() == 2
    assert kept_now.output == unwritable.output


def test_runs_analysed_side_by_side_say_what_one_after_the_other_says(
    two: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import ledger.analyze as analyze
    from ledger.usecases import compare as use_compare

    monkeypatch.setattr(use_compare, "SIDE_BY_SIDE_STEPS", 10**12)  # never side by side
    alone = as_json(fresh(two, RUNS))
    threads: list[str] = []
    real = analyze.analyze_run

    def noting(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(analyze, "analyze_run", noting)
    monkeypatch.setattr(use_compare, "SIDE_BY_SIDE_STEPS", 0)
    monkeypatch.setattr(use_compare.os, "cpu_count", lambda: 2)
    together = as_json(fresh(two, RUNS))
    assert together == alone
    assert len(threads) == 2 and all(t.startswith("ledger-analysis") for t in threads)


def test_a_compare_counts_a_launchs_steps_only_to_tell_a_kept_analysis_stale(
    two: Any, reads: Counter[int]
) -> None:
    """A count walks the key's index (0.04 s a million steps). With no analysis kept there
    is nothing to tell, and consecutive steps are read from the ends of the key and a few
    seeks (store.steps.probed_ends): no count. Where a kept analysis is stale (steps were
    added) the count that tells it is the one the read takes: one a launch. The analysis
    kept either way stands for the next compare."""
    from sqlalchemy import event

    counts: list[str] = []

    def noting(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "step IN (" not in statement:  # the seeks' own count is of a few probed keys
            counts.extend(["count"] * statement.count("count(*)"))

    event.listen(two.engine, "before_cursor_execute", noting)
    try:
        first = as_json(fresh(two, RUNS))
        assert counts == [], "counted with nothing kept to tell"
        reads.clear()
        assert as_json(two.compare(RUNS)) == first
        assert sum(reads.values()) == 0, (
            "the analysis kept from rows read, not counted, was not used"
        )
        assert len(counts) == len(RUNS)  # telling each kept analysis stands
        add_run(two, "eager_unpadded", 10_800.0, 3, start=STEPS)  # steps added: stale
        counts.clear()
        reads.clear()
        stale = as_json(two.compare(RUNS))
        assert len(counts) == len(RUNS), counts  # one a launch: the read took it
        assert sum(reads.values()) == 1
    finally:
        event.remove(two.engine, "before_cursor_execute", noting)
    assert stale == as_json(fresh(two, RUNS)) != first
