"""`ledger demo`: the whole example investigation, seeded and deterministic."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli

import ledger
from ledger.demo import FAKE_TOKEN, run_demo

FATES = {
    "baseline": "finished",
    "compiled": "killed",
    "eager_restored": "killed",
    "eager_unpadded": "killed",
    "eager_bufcache": "oom",
    "eager_dynamiccopy": "finished",
}


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_demo_builds_the_whole_investigation(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = run_cli("demo", "--out", str(out))
    assert result.exit_code == 0, result.stderr
    db = out / ".ledger" / "ledger.db"
    assert str(out / "report.html") in result.stdout and (out / "report.html").is_file()
    with ledger.open(db, create=False) as lg:
        assert {r.run: r.fate for r in lg.runs()} == FATES
        copies = [s for s in lg.deploy_steps("eager_dynamiccopy") if s.name == "copy"]
        assert [(s.drift, s.held) for s in copies] == [(True, True), (False, False)]
        assert lg.run_summary("eager_dynamiccopy").drift is False  # the patch shipped after
        assert (out / "box" / "train.py").read_text() == (out / "train.py").read_text()
        assert [h.status for h in lg.hypotheses()] == ["confirmed", "refuted", "confirmed"]
        assert lg.investigation().baseline_value == 14200
        final = lg.compare(["eager_unpadded", "eager_dynamiccopy"])
        assert final.comparisons[0].verdict == "improvement"
        assert final.run("eager_dynamiccopy").recovered
        oom = lg.show("eager_bufcache")
        assert "Tried to allocate" in oom.fate_reason or "tried to allocate" in oom.fate_reason
        assert any(p.fate == "loading" and p.gpus for p in lg.show("eager_dynamiccopy").probes)
    stored = b"".join(p.read_bytes() for p in db.parent.glob("ledger.db*"))
    assert FAKE_TOKEN.encode() not in stored


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_demo_is_deterministic_and_starts_fresh(tmp_path: Path) -> None:
    medians = []
    for _ in range(2):
        result = run_demo(tmp_path, say=lambda _: None)
        with ledger.open(result.db, create=False) as lg:
            assert len(lg.hypotheses()) == 3
            medians.append([lg.analyze(name).median for name in result.runs])
    assert medians[0] == medians[1]
