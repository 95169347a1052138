"""The use-case layer: each use case is a function over the persistence store, the public
`Ledger` is the store with them on top, and it keeps every method it had."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest

from ledger.demo import traces as syn
from ledger.store import Store
from ledger.usecases import analyze, compare, report, why
from ledger.usecases.ledger import Ledger

# Every public method the Ledger had before the use cases were split out of the store.
PUBLIC_METHODS = {
    "add_event", "add_hypothesis", "add_log_pattern", "add_steps", "analyze", "baseline",
    "begin_launch", "check_artifact", "close", "compare", "comparisons", "deploy",
    "deploy_steps", "end_launch", "ensure_run", "hypotheses", "hypothesis", "import_runs",
    "ingest", "investigation", "launch_fate", "launches", "live_reads", "log_events",
    "log_patterns", "meter_summary", "metrics_frame", "open", "patch", "probe", "record_deploy",
    "record_fix", "record_watch", "remove_log_pattern", "report_data", "resolve_hypothesis",
    "run_id", "run_names", "run_summary", "runs", "runs_frame", "set_baseline",
    "set_baseline_from_run", "set_config", "set_fate", "show", "start_metered_run",
    "step_columns", "steps_frame", "timeline", "why", "wide_frame", "write_meter_batch",
    "write_report", "write_steps",
}  # fmt: skip
# What analyses, draws or imports: the use cases' (the Store has none of it).
USE_CASES = {
    "analyze", "compare", "why", "report_data", "write_report", "set_baseline_from_run",
    "import_runs", "runs_frame", "deploy", "probe",
}  # fmt: skip


def test_the_ledger_keeps_every_public_method() -> None:
    public = {name for name, _ in inspect.getmembers(Ledger, callable) if not name.startswith("_")}
    assert PUBLIC_METHODS - public == set()


def test_the_store_analyses_nothing() -> None:
    assert not {name for name in USE_CASES if hasattr(Store, name)}
    assert {name for name in USE_CASES if name in vars(Ledger)} == USE_CASES


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """A plain Store (no use cases) with two runs and a baseline."""
    found = Store.open(db_url)
    for name, level, seed in (("slow", 10_800.0, 1), ("fast", 14_100.0, 2)):
        values, _ = syn.trace(1200, level=level, noise=0.02, phi=0.5, warmup=60, seed=seed)
        found.add_steps(name, syn.step_rows(values), throughput_unit="tok/s")
    found.set_baseline(14_200.0, "tok/s")
    yield found
    found.close()


def test_the_use_cases_run_on_the_store_as_the_ledger_runs_them(store: Store) -> None:
    lg = Ledger(store.location, store.engine, store.investigation_name)
    direct = compare.compare(store, ["slow", "fast"])
    assert direct.comparisons[0].verdict == "improvement"
    assert direct.to_dict() == lg.compare(["slow", "fast"]).to_dict()
    assert analyze.analyze(store, "fast").median == lg.analyze("fast").median
    assert why.why(store, "slow", "fast").to_dict() == lg.why("slow", "fast").to_dict()
    drawn = report.report_data(store)
    assert [a.detail.run for a in drawn.attempts] == ["slow", "fast"]
    assert (
        analyze.show(store, "fast", figures=True).effective
        == lg.show("fast", figures=True).effective
    )
