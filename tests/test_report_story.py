"""What the report says about each attempt: in the order they ran, with their events, and
with the fate beside every verdict (issue 15, items 8, 9, 10)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers import run_cli, run_json
from test_report_fixtures import add_events, set_deploy_time, set_run_times, steps


def _log(path: Path, day: int, level: float, n: int = 300) -> Path:
    """A timestamped training log (the structured shape), a step a second from 10:00."""
    import numpy as np

    rng = np.random.default_rng(day)
    lines = []
    for i in range(n):
        value = level * (1 + rng.normal(0, 0.01)) * (0.4 if i < 10 else 1.0)
        stamp = f"2024-01-{day:02d} 10:{i // 60:02d}:{i % 60:02d}"
        lines.append(f"{stamp} | INFO | __main__ | step={i + 1} tokens_per_sec={value:.0f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_attempts_follow_when_they_ran_not_when_their_row_was_made(tmp_path: Path) -> None:
    """The README's order: record-fix --run X first, then ingest the older logs."""
    from ledger.model.report import RAN_FIRST_STEP

    assert run_cli("init", "--baseline", "14200", "--unit", "tok/s").exit_code == 0
    assert run_cli("hypothesis", "add", "mask closures recompile").exit_code == 0
    fix = ["record-fix", "--hypothesis", "1", "--summary", "gate the cache", "--run", "eager_new"]
    assert run_cli(*fix).exit_code == 0  # eager_new's row is made first
    old_a = _log(tmp_path / "train_eager_a.log", 1, 10000)
    old_b = _log(tmp_path / "train_eager_b.log", 2, 11000)
    new = _log(tmp_path / "train_eager_new.log", 3, 14100)
    assert run_cli("ingest", str(old_a), str(old_b)).exit_code == 0
    assert run_cli("ingest", str(new), "--run", "eager_new").exit_code == 0
    import ledger

    with ledger.open(create=False) as lg:
        data = lg.report_data()
        page = lg.write_report(tmp_path / "r.html").read_text()
    assert [a.name for a in data.attempts] == ["eager_a", "eager_b", "eager_new"]
    assert all(a.ran_from == RAN_FIRST_STEP for a in data.attempts)
    assert data.attempts[0].ran_at == datetime(2024, 1, 1, 10, 0, 0, tzinfo=UTC)
    new_attempt = data.attempts[-1]
    assert new_attempt.comparison is not None and new_attempt.comparison.a == "eager_a"
    headline = page.split('<div class="verdict">')[1].split("</div>")[0]
    assert re.search(r"Latest attempt: <b><bdi>eager_new</bdi></b>", headline)
    table = page.split("<h2>Attempts")[1].split("</table>")[0].replace("<wbr>", "")
    assert table.index("eager_a") < table.index("eager_b") < table.index("eager_new")


def test_without_step_times_the_run_start_then_the_row(lg) -> None:
    from ledger.model.report import RAN_CREATED, RAN_STARTED

    made = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    lg.ensure_run("relaunched")  # made first, relaunched late: its launch starts the run
    lg.deploy("relaunched", "relaunch", ["true"])
    relaunched_at = datetime(2025, 3, 1, 14, 0, tzinfo=UTC)
    set_run_times(lg, "relaunched", created_at=made, started_at=relaunched_at)
    set_deploy_time(lg, "relaunched", relaunched_at)
    lg.add_steps("started", steps(14000, n=50), throughput_unit="tok/s")
    set_run_times(lg, "started", created_at=made, started_at=datetime(2025, 3, 1, 13, 0))
    # a wall time that is no clock reading (seconds since launch) is not a time it ran
    lg.add_steps("counter_clock", [{"step": 1, "throughput": 1.0, "wall_time": 5.0}])
    set_run_times(lg, "counter_clock", created_at=datetime(2025, 3, 1, 15, 0, tzinfo=UTC))
    lg.ensure_run("plain")
    set_run_times(lg, "plain", created_at=datetime(2025, 3, 1, 11, 0, tzinfo=UTC))
    data = lg.report_data()
    assert [(a.name, a.ran_from) for a in data.attempts] == [
        ("plain", RAN_CREATED),
        ("started", RAN_STARTED),
        ("relaunched", RAN_STARTED),
        ("counter_clock", RAN_CREATED),
    ]


RECOMPILE = (
    "recompile_limit (8) hit; function 'forward' (model.py:12); "
    "last reason: ___check_obj_id(L['mask'], 1234)"
)


@pytest.fixture
def eventful(lg) -> object:
    lg.set_baseline(14200, "tok/s")
    lg.add_steps("reference", steps(14200, seed=1), throughput_unit="tok/s")
    lg.add_steps("dies", steps(11000, seed=2), throughput_unit="tok/s")
    lg.set_fate("dies", "oom", "CUDA out of memory. Tried to allocate 4.50 GiB")
    add_events(
        lg,
        "dies",
        [{"kind": "recompile", "text": RECOMPILE, "step": s, "line": 10 + s, "rank": 0}
         for s in (50, 120, 260)]
        + [
            {"kind": "oom", "text": "CUDA out of memory. Tried to allocate 4.50 GiB",
             "step": 390, "line": 900, "rank": 3},
            {"kind": "nccl", "text": "Watchdog caught collective operation timeout",
             "step": None, "line": 901, "rank": 1},
            {"kind": "warning", "text": "not a story event", "step": 5, "line": 2},
        ],
    )  # fmt: skip
    return lg


def test_events_are_gathered_per_attempt(eventful) -> None:
    dies = {a.name: a for a in eventful.report_data().attempts}["dies"]
    assert dies.event_counts == {"recompile": 3, "oom": 1, "nccl": 1}
    assert [e.kind for e in dies.events] == ["recompile"] * 3 + ["oom", "nccl"]
    assert [e.step for e in dies.events] == [50, 120, 260, 390, None]


def test_events_on_the_card_and_on_the_throughput_plot(eventful, tmp_path: Path) -> None:
    from ledger.report.canvas import Look
    from ledger.report.panels import throughput_panels

    data = eventful.report_data()
    page = eventful.write_report(tmp_path / "r.html").read_text()
    card = page.split("<h2>Hypothesis")[1]
    assert "3 recompiles at steps 50–260" in card
    assert "function &#x27;forward&#x27; (model.py:12); last reason: ___check_obj_id" in card
    assert "1 out-of-memory error at step 390" in card and "log line 900, rank 3" in card
    assert "1 NCCL failure" in card and "Watchdog caught" in card
    assert "not a story event" not in page
    figure = throughput_panels(data, data.analysed, Look(data))
    marks = {
        c.get_gid(): sorted(c.get_offsets()[:, 0].tolist())
        for ax in figure.axes
        for c in ax.collections
        if (c.get_gid() or "").startswith("event:")
    }
    # the NCCL failure has no step: it is on the card, not on the plot
    assert marks == {"event:recompile": [50, 120, 260], "event:oom": [390]}


def test_a_run_keeps_the_latest_events_and_counts_them_all(lg) -> None:
    from ledger.store.report import EVENTS_KEPT

    lg.add_steps("busy", steps(14000, n=50), throughput_unit="tok/s")
    many = [{"kind": "recompile", "text": f"recompile {i}", "step": i, "line": i}
            for i in range(EVENTS_KEPT + 50)]  # fmt: skip
    add_events(lg, "busy", many)
    busy = lg.report_data().attempts[0]
    assert busy.event_counts == {"recompile": EVENTS_KEPT + 50}
    assert (
        len(busy.events) == EVENTS_KEPT and busy.events[-1].text == f"recompile {EVENTS_KEPT + 49}"
    )


def test_the_fate_stands_beside_every_verdict(eventful, tmp_path: Path) -> None:
    page = eventful.write_report(tmp_path / "r.html").read_text()
    headline = page.split('<div class="verdict">')[1].split("</div>")[0]
    for line in re.findall(r"<li>(.*?)</li>", headline):
        if "dies" in line:
            assert ">oom</span>" in line, line
    latest = re.search(r"Latest attempt: (.*?)</li>", headline)
    assert latest and "before the OOM" in latest.group(1)
    compared = re.search(r"<bdi>dies</bdi></b> <span[^>]*>oom</span> against (.*?)</li>", headline)
    assert compared and "are from its steps before the OOM" in compared.group(1)
    table = page.split("<h2>Attempts")[1].split("</table>")[0]
    assert "before the OOM" in table


def test_an_absurd_throughput_is_flagged_not_recovered(lg, tmp_path: Path) -> None:
    lg.set_baseline(14200, "tok/s")
    lg.add_steps("reference", steps(14200, seed=1), throughput_unit="tok/s")
    lg.add_steps("per_job", steps(14200 * 11879.6, seed=2), throughput_unit="tok/s")
    page = lg.write_report(tmp_path / "r.html").read_text()
    headline = page.split('<div class="verdict">')[1].split("</div>")[0]
    line = re.search(r"<li>Latest attempt: (.*?)</li>", headline)
    assert line and "per_job" in line.group(1)
    assert "not comparable" in line.group(1) and "recovered" not in line.group(1)
    assert re.search(r"1,18\d,\d{3} % of", line.group(1))  # the percentage, grouped
    compared = re.search(r"<li><b><bdi>per_job</bdi>.*? against (.*?)</li>", headline)
    assert compared and "not comparable" in compared.group(1)
    json_out = run_json("report", "--out", str(tmp_path / "r2.png"))
    assert Path(json_out["out"]).is_file()
