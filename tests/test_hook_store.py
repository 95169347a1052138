"""The store side of the hook: how ranks of one launch, and launches of one run name, meet
in the run row (ledger.store.meter)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import ledger
from ledger.model.records import FateChange


def _start(lg: ledger.Ledger, launched_at: datetime):
    return lg.start_metered_run("r", host="h", command="train.py", launched_at=launched_at)


def test_a_peer_ranks_failure_stands_for_a_late_starting_rank(lg: ledger.Ledger) -> None:
    launch = datetime.now(UTC) - timedelta(seconds=5)
    first = _start(lg, launch)
    lg.write_meter_batch(first.id, [{"step": 0, "rank": 0}], cost_us=2.0)
    lg.write_meter_batch(first.id, [], fates=[FateChange("crashed", "RuntimeError", True)])
    late = _start(lg, launch)  # rank 7 of the same launch opens its ledger only now
    assert (late.id, late.fate, late.earlier_steps) == (first.id, "crashed", False)
    lg.write_meter_batch(late.id, [], cost_us=1.0, fates=[FateChange("finished", None, True)])
    summary = lg.meter_summary("r")
    assert (summary.fate, summary.fate_reason) == ("crashed", "RuntimeError")
    assert summary.hook_cost_us == 2.0  # the largest of the ranks'


def test_a_peer_that_finished_first_leaves_the_run_running(lg: ledger.Ledger) -> None:
    launch = datetime.now(UTC) - timedelta(seconds=5)
    first = _start(lg, launch)
    lg.write_meter_batch(first.id, [], cost_us=3.0, fates=[FateChange("finished", None, True)])
    late = _start(lg, launch)
    assert (late.fate, late.earlier_steps) == ("running", False)
    assert lg.meter_summary("r").hook_cost_us == 3.0  # kept: it is this launch's


def test_a_new_launch_under_an_ended_name_starts_afresh(lg: ledger.Ledger) -> None:
    first = _start(lg, datetime.now(UTC) - timedelta(seconds=5))
    lg.write_meter_batch(first.id, [{"step": 0, "rank": 0}], cost_us=9.0)
    lg.write_meter_batch(first.id, [], fates=[FateChange("crashed", "OOM", True)])
    again = _start(lg, datetime.now(UTC) + timedelta(seconds=1))
    assert (again.id, again.fate, again.earlier_steps) == (first.id, "running", True)
    summary = lg.meter_summary("r")
    assert (summary.fate, summary.fate_reason, summary.hook_cost_us) == ("running", None, None)


def test_fates_replace_only_what_they_outrank(lg: ledger.Ledger) -> None:
    run = _start(lg, datetime.now(UTC))
    for change, expected in [
        (FateChange("finished", None, True), "finished"),
        (FateChange("killed", "SIGTERM", True), "killed"),  # a rank killed after one finished
        (FateChange("crashed", "ValueError", True), "killed"),  # the first failure stands
        (FateChange("finished", None, True), "killed"),
        (FateChange("running", None, False), "running"),  # a rank that caught it trains on
    ]:
        lg.write_meter_batch(run.id, [], fates=[change])
        assert lg.meter_summary("r").fate == expected, change


def test_dropped_counts_add_up_over_ranks(lg: ledger.Ledger) -> None:
    run = _start(lg, datetime.now(UTC))
    lg.write_meter_batch(run.id, [], dropped=3)
    lg.write_meter_batch(run.id, [{"step": 1, "rank": 1}], dropped=4)
    assert lg.meter_summary("r").dropped_steps == 7
