"""The finding families on plain data (ledger.analyze.diagnose is pure): GPU samples that
throttle, a straggler rank, graph breaks, a long warm-up, versions and patches that
differ, and runs with little data. Each planted cause must come first; its absence must
give nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from why_data import hook_rows

from ledger.analyze import StepColumns
from ledger.analyze.diagnose import diagnose
from ledger.analyze.diagnose.evidence import (
    ChangeRow,
    ConfigRow,
    EventRow,
    GpuRow,
    RunEvidence,
)


def _columns(rows: list[dict[str, Any]]) -> StepColumns:
    def col(name: str) -> np.ndarray:
        return np.array([r[name] for r in rows], dtype=np.float64)

    ranks = np.array([r["rank"] for r in rows], dtype=np.int64)
    return StepColumns(
        step=np.array([r["step"] for r in rows], dtype=np.int64),
        rank=ranks if ranks.max() > 0 else None,
        throughput=col("throughput"),
        tokens=col("tokens"),
        step_time_s=col("step_time_s"),
        wall_time=col("wall_time"),
        wait_s=col("wait_s"),
    )


def _run(name: str, rows: list[dict[str, Any]], **more: Any) -> RunEvidence:
    return RunEvidence(name=name, id=hash(name) % 1000, columns=_columns(rows), **more)


def _samples(count: int, *, throttle: str, clock: float, start: int = 100) -> tuple[GpuRow, ...]:
    return tuple(
        GpuRow(
            id=i + 1,
            gpu_index=0,
            rank=0,
            step=start + 10 * i,
            utilization_pct=99.0,
            sm_clock_mhz=clock,
            max_sm_clock_mhz=1980.0,
            throttle=throttle,
        )
        for i in range(count)
    )


def test_throttling_in_the_hooks_samples() -> None:
    ref = _run("cool", hook_rows(600, seed=1), gpu=_samples(30, throttle="", clock=1980.0))
    run = _run(
        "hot",
        hook_rows(600, seed=2, step_s=0.6),
        gpu=_samples(30, throttle="sw_power_cap,hw_slowdown", clock=1410.0),
    )
    result = diagnose(run, ref)
    assert result.findings[0].kind == "throttling", [f.to_dict() for f in result.findings]
    assert "hw_slowdown" in result.findings[0].claim
    assert diagnose(ref, _run("cool2", hook_rows(600, seed=3), gpu=ref.gpu)).findings == []


def test_a_straggler_rank_is_named() -> None:
    ref = _run("even", hook_rows(600, seed=4, ranks=4))
    run = _run("lagging", hook_rows(600, seed=5, ranks=4, rank_pace=lambda r: 0.9 if r == 2 else 1))
    result = diagnose(run, ref)
    kinds = [f.kind for f in result.findings]
    assert kinds and kinds[0] == "straggler", [f.to_dict() for f in result.findings]
    assert "rank 2" in result.findings[0].claim
    assert diagnose(_run("even2", hook_rows(600, seed=6, ranks=4)), ref).findings == []


def test_graph_breaks_from_the_log() -> None:
    breaks = tuple(
        EventRow(
            id=i,
            kind="graph_break",
            step=50 + 100 * i,
            line=60 + 100 * i,
            text="graph break at /workspace/model.py:230; last reason: Unsupported: call_method "
            "UserDefinedObjectVariable(mask_mod) __call__ [] {}",
        )
        for i in range(4)
    )
    ref = _run("whole", hook_rows(600, seed=7))
    run = _run("broken", hook_rows(600, seed=8), events=breaks, event_counts={"graph_break": 4})
    result = diagnose(run, ref)
    assert result.findings[0].kind == "graph_breaks"
    assert "model.py:230" in result.findings[0].claim
    assert len(result.findings[0].evidence) == 4


def test_a_long_warmup() -> None:
    ref = _run("quick", hook_rows(1000, seed=9, warmup=20))
    run = _run(
        "slowstart", hook_rows(1000, seed=10, warmup=20, extra_s=lambda s: 2.0 if s < 60 else 0)
    )
    result = diagnose(run, ref)
    assert result.findings and result.findings[0].kind == "warmup", [
        f.to_dict() for f in result.findings
    ]


def test_versions_and_a_patch_between_the_runs() -> None:
    config = (ConfigRow("torch", "2.5.1+cu124", "hook"), ConfigRow("env.NCCL_ALGO", "Ring", "hook"))
    newer = (ConfigRow("torch", "2.6.0+cu126", "hook"), ConfigRow("env.NCCL_ALGO", "Ring", "hook"))
    ref = _run("old", hook_rows(600, seed=11), config=config)
    run = _run("new", hook_rows(600, seed=12, step_s=0.55), config=newer)
    changes = [
        ChangeRow("patch", 3, "pad every batch to the token budget"),
        ChangeRow("patch_file", 7, "drafter/data.py"),
    ]
    result = diagnose(run, ref, changes)
    kinds = [f.kind for f in result.findings]
    assert set(kinds) == {"version_change", "patch"}, [f.to_dict() for f in result.findings]
    version = next(f for f in result.findings if f.kind == "version_change")
    assert "2.6.0+cu126" in version.claim and "NCCL_ALGO" not in version.claim
    patch = next(f for f in result.findings if f.kind == "patch")
    assert "patch #3" in patch.claim and "drafter/data.py" in patch.claim
    assert [e.id for e in patch.evidence] == [3, 7]


def test_settings_that_every_launch_changes_are_not_differences() -> None:
    a = (ConfigRow("flag.seed", "1", "deploy"), ConfigRow("flag.output-dir", "/x/a", "deploy"),
         ConfigRow("host", "node1", "hook"), ConfigRow("flag.lr", "1e-4", "deploy"))  # fmt: skip
    b = (ConfigRow("flag.seed", "2", "deploy"), ConfigRow("flag.output-dir", "/x/b", "deploy"),
         ConfigRow("host", "node7", "hook"), ConfigRow("arg.lr", "1e-4", "log"))  # fmt: skip
    ref = _run("a", hook_rows(600, seed=13), config=a)
    run = _run("b", hook_rows(600, seed=14), config=b)
    assert diagnose(run, ref).findings == []


@pytest.mark.parametrize(
    "rows",
    [
        [],
        [
            {
                "step": 0,
                "rank": 0,
                "throughput": 5.0,
                "tokens": np.nan,
                "step_time_s": np.nan,
                "wall_time": np.nan,
                "wait_s": np.nan,
            }
        ],
    ],
)
def test_little_data_never_crashes(rows: list[dict[str, Any]]) -> None:
    run = RunEvidence(name="few", id=1, columns=_columns(rows) if rows else None)
    ref = RunEvidence(name="none", id=2)
    result = diagnose(run, ref)
    assert result.verdict is None and result.findings == [] and result.notes
    assert diagnose(run, None, baseline=100.0).findings == []
