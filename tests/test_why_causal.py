"""Causes before symptoms (ledger.analyze.diagnose.causal), compile time counted wherever
it falls, and logs that print the mean of every N steps.

A compile storm that leaves the GPUs idle is one finding, recompiles, that says the GPUs
waited; a slow data loader with idle GPUs is one finding, data_wait; compiling inside the
warm-up is the recompiles' cost, and the warm-up is a finding only for what no compile
explains; a Megatron log that prints the mean of every 10 iterations, with a checkpoint
every 50, is a stall every 50 steps, not a throughput drop."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_why_findings import _run
from why_data import hook_rows, megatron_log, utilisation_along

from ledger.analyze.diagnose import diagnose
from ledger.analyze.diagnose.evidence import GpuRow

BUSY, IDLE = 97.0, 4.0


def _gpu(samples: list[tuple[int | None, float]]) -> tuple[GpuRow, ...]:
    return tuple(
        GpuRow(id=i + 1, gpu_index=0, rank=0, step=step, utilization_pct=util)
        for i, (step, util) in enumerate(samples)
    )


def _counter(at: list[int]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The hook's dynamo_recompiles, cumulative, recorded on the step after each compile."""
    steps = np.array([s + 1 for s in at], dtype=np.int64)
    return {"dynamo_recompiles": (steps, np.arange(1, len(at) + 1, dtype=np.float64))}


def _eager(seed: int, steps: int = 600) -> Any:
    rows = hook_rows(steps, seed=seed)
    return _run("eager", rows, gpu=_gpu(utilisation_along(rows, lambda s: BUSY)))


def test_a_compile_storm_with_idle_gpus_is_one_finding_that_says_they_waited() -> None:
    storm = list(range(40, 560, 52))  # ten recompiles spread over the run, 60 s each
    rows = hook_rows(600, seed=2, extra_s=lambda s: 60.0 if s in storm else 0.0)
    samples = utilisation_along(rows, lambda s: IDLE if s in storm else BUSY)
    run = _run("compiled", rows, gpu=_gpu(samples), metrics=_counter(storm))
    result = diagnose(run, _eager(1))
    assert [f.kind for f in result.findings] == ["recompiles"], [
        f.to_dict() for f in result.findings
    ]
    top = result.findings[0]
    assert "gpu_idle" in top.explains
    assert top.claim.startswith("the GPUs waited, busy 4 % of the time (eager: 97 %), because ")
    assert "torch.compile recompiled" in top.claim and "10 times" in top.claim
    assert any(e.table == "gpu_sample" and e.text.startswith("gpu_idle: ") for e in top.evidence)
    assert top.to_dict()["explains"] == top.explains
    # without the compiles the same idle samples are a symptom of their own, said as one
    alone = diagnose(_run("compiled", rows, gpu=_gpu(samples)), _eager(1))
    kinds = [f.kind for f in alone.findings]
    assert "gpu_idle" in kinds and "recompiles" not in kinds, [f.to_dict() for f in alone.findings]
    assert "explains" not in alone.findings[0].to_dict()


def test_compiling_inside_the_warmup_is_the_recompiles_cost() -> None:
    compiles = list(range(1, 10))  # a new shape each of the first nine steps: 20 s each
    rows = hook_rows(600, seed=4, extra_s=lambda s: 20.0 if s in compiles else 0.0)
    run = _run("compiled", rows, metrics=_counter(compiles))
    result = diagnose(run, _eager(3))
    kinds = [f.kind for f in result.findings]
    assert kinds[0] == "recompiles" and "warmup" not in kinds, [
        f.to_dict() for f in result.findings
    ]
    top = result.findings[0]
    assert "warmup" in top.explains and "warm-up included" in top.claim
    assert top.claim.startswith("the warm-up took ")
    # 9 × 20 s of about 480 s of wall time: the share the finding accounts for
    share = float(re.search(r"took [\d,.]+ s, (\d+) % of the run's wall time", top.claim)[1])  # type: ignore[index]  # asserted by the search
    assert 30 <= share <= 45, top.claim
    assert top.score >= 0.8  # it accounts for the whole run's slowdown, warm-up included


def test_the_warmup_is_reported_for_the_part_no_compile_explains() -> None:
    compiles = list(range(1, 10))

    def extra(s: int) -> float:  # compiling, then 50 slow steps that are not compiling
        return 20.0 if s in compiles else 2.0 if 10 <= s < 60 else 0.0

    run = _run("compiled", hook_rows(600, seed=6, extra_s=extra), metrics=_counter(compiles))
    result = diagnose(run, _eager(5))
    kinds = [f.kind for f in result.findings]
    assert kinds[0] == "recompiles" and "warmup" in kinds, [f.to_dict() for f in result.findings]
    warm = next(f for f in result.findings if f.kind == "warmup")
    excess = float(re.search(r"([\d,.]+) s beyond a steady pace", warm.claim)[1].replace(",", ""))  # type: ignore[index]  # asserted by the search
    assert 70 <= excess <= 130, warm.claim  # the 50 × 2 s, not the 180 s of compiling
    assert "compiling steps" in warm.claim
    assert "warmup" not in result.findings[0].explains


def test_a_slow_loader_with_idle_gpus_is_one_finding() -> None:
    rows = hook_rows(600, seed=8, wait_s=0.45)
    run = _run("starved", rows, gpu=_gpu(utilisation_along(rows, lambda s: 51.0)))
    result = diagnose(run, _eager(7))
    assert [f.kind for f in result.findings] == ["data_wait"], [
        f.to_dict() for f in result.findings
    ]
    assert result.findings[0].explains == ["gpu_idle"]
    assert result.findings[0].claim.startswith("the GPUs waited")


def test_twins_with_gpu_samples_and_a_compile_at_start_give_nothing() -> None:
    def twin(name: str, seed: int) -> Any:
        rows = hook_rows(600, seed=seed)
        samples = utilisation_along(rows, lambda s: BUSY)
        return _run(name, rows, gpu=_gpu(samples), metrics=_counter([0]))

    for seed in range(3):
        assert diagnose(twin("b", 200 + seed), twin("a", 100 + seed)).findings == []


@pytest.mark.parametrize("seed", [1, 2])
def test_an_averaged_log_with_a_checkpoint_every_50_steps(
    lg: Any, tmp_path: Path, seed: int
) -> None:
    def save(s: int) -> float:
        return 0.25 if s % 50 == 0 else 0.0

    lg.ingest(megatron_log(tmp_path / "train_mean.log", 1200, seed=seed))
    lg.ingest(megatron_log(tmp_path / "train_saving.log", 1200, seed=seed + 10, extra_s=save))
    lg.ingest(megatron_log(tmp_path / "train_again.log", 1200, seed=seed + 20))
    assert lg.run_summary("saving").steps == 120  # one row a line, a line every 10 steps
    out = lg.why("saving", "mean").to_dict()
    kinds = [f["kind"] for f in out["findings"]]
    assert kinds == ["step_spikes"], out["findings"]
    top = out["findings"][0]
    assert "every 50 steps" in top["claim"] and "every 5 lines" in top["claim"], top["claim"]
    stalls = int(re.search(r"^(\d+) stalls", top["claim"])[1])  # type: ignore[index]  # asserted by the search
    assert 20 <= stalls <= 24  # one a line that rose: 1,200 / 50, less those in the warm-up
    added = float(re.search(r"adds about ([\d.]+) typical steps", top["claim"])[1])  # type: ignore[index]  # asserted by the search
    assert 2.0 <= added <= 3.0  # 250 ms of a 100 ms step
    assert lg.why("again", "mean").findings == []


def _synchronous(seed: int, late_s: float) -> list[dict[str, Any]]:
    """Two ranks of synchronous training: rank 1 waits `late_s` longer for each batch, and
    rank 0 waits as long inside the step, at the collective; their intervals are equal."""
    rows = hook_rows(600, seed=seed, ranks=2, step_s=0.1)
    rng = np.random.default_rng(seed)
    late = {}
    for r in rows:
        late.setdefault(r["step"], late_s * (1 + 0.3 * rng.standard_normal()))
        if r["rank"] == 1:
            r["wait_s"] += late[r["step"]]
        else:
            r["step_time_s"] += late[r["step"]] + abs(0.001 * rng.standard_normal())
        r["throughput"] = r["tokens"] / (r["step_time_s"] + r["wait_s"])
    return rows


def test_a_straggler_of_synchronous_training_is_the_rank_the_others_wait_for() -> None:
    ref = _run("even", _synchronous(11, 0.0))
    result = diagnose(_run("late", _synchronous(12, 0.03)), ref)
    kinds = [f.kind for f in result.findings]
    assert kinds and kinds[0] == "straggler" and "data_wait" not in kinds, [
        f.to_dict() for f in result.findings
    ]
    assert re.search(r"^rank 1 waited (29|30|31)[.\d]* ms longer", result.findings[0].claim)
    assert diagnose(_run("even2", _synchronous(13, 0.0)), ref).findings == []
