"""`ledger why`: one planted cause per pair of runs, written through the public API and the
log reader, must come out ranked first with its evidence; twins with realistic noise must
give no finding at all. On SQLite and (make test-pg) PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from why_data import (
    OOM_TAIL,
    hook_rows,
    nvidia_smi_csv,
    recompile_limit,
    recompile_warning,
    titan_log,
)

KINDS = {
    "recompiles", "graph_breaks", "oom", "memory_growth", "memory_pressure", "data_wait",
    "step_spikes", "gpu_idle", "throttling", "straggler", "config_change", "version_change",
    "patch", "throughput_drop", "warmup",
}  # fmt: skip


def _check_shape(result: Any) -> dict[str, Any]:
    out = result.to_dict()
    for f in out["findings"]:
        assert f["kind"] in KINDS
        assert 0.0 <= f["score"] <= 1.0 and f["claim"] and f["next"]
        assert f["evidence"], f
        for e in f["evidence"]:
            assert e["table"] and e["text"]
    scores = [f["score"] for f in out["findings"]]
    assert scores == sorted(scores, reverse=True)
    return out


def test_a_recompile_storm_is_ranked_first(lg: Any, tmp_path: Path) -> None:
    ref = titan_log(tmp_path / "train_eager.log", 600, seed=1)
    storm = set(range(60, 440, 40))

    def before(s: int) -> list[str]:
        if s in storm:
            return recompile_warning(s, sorted(storm).index(s) + 1)
        return recompile_limit() if s == 450 else []

    run = titan_log(
        tmp_path / "train_compiled.log",
        600,
        seed=2,
        before=before,
        extra_s=lambda s: 6.0 if s in storm else 0.0,
        rate=lambda s: 0.85 if s > 450 else 1.0,
    )
    lg.ingest(ref)
    lg.ingest(run)
    result = lg.why("compiled", "eager")
    out = _check_shape(result)
    assert result.verdict == "regression" and result.delta_pct < -5
    top = out["findings"][0]
    assert top["kind"] == "recompiles", out["findings"]
    assert "flex_attention_forward" in top["claim"] and "recompile limit" in top["claim"]
    assert any(e["table"] == "log_event" and "id" in e for e in top["evidence"])
    assert any(e["table"] == "step" for e in top["evidence"])  # the slow steps after them


def test_memory_that_grows_until_oom(lg: Any, tmp_path: Path) -> None:
    ref = titan_log(tmp_path / "train_steady.log", 800, seed=3, memory_gib=lambda s: 40.0)
    run = titan_log(
        tmp_path / "train_cache.log",
        800,
        seed=4,
        memory_gib=lambda s: 40.0 + 38.0 * s / 800,
        tail=OOM_TAIL,
    )
    lg.ingest(ref)
    lg.ingest(run)
    assert lg.run_summary("cache").fate == "oom"
    out = _check_shape(lg.why("cache", "steady"))
    kinds = [f["kind"] for f in out["findings"]]
    assert kinds[0] == "memory_growth", out["findings"]
    assert "oom" in kinds
    growth = out["findings"][0]
    assert "until the run ran out of memory" in growth["claim"]
    assert any("Tried to allocate" in e["text"] for e in growth["evidence"])
    oom = next(f for f in out["findings"] if f["kind"] == "oom")
    assert "4.5 GiB" in oom["claim"] and "79.2 GiB" in oom["claim"]
    assert "2.3 GiB reserved but unallocated" in oom["claim"]


def test_an_oom_of_fragmentation_suggests_expandable_segments(lg: Any, tmp_path: Path) -> None:
    line = (
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
        "has a total capacity of 79.19 GiB of which 1.10 GiB is free. Including non-PyTorch "
        "memory, this process has 78.05 GiB memory in use. Of the allocated memory 70.02 GiB is "
        "allocated by PyTorch, and 6.40 GiB is reserved by PyTorch but unallocated. If reserved "
        "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:"
        "True to avoid fragmentation."
    )
    lg.ingest(titan_log(tmp_path / "train_ok.log", 300, seed=13))
    lg.ingest(titan_log(tmp_path / "train_frag.log", 300, seed=14, tail=[line]))
    out = _check_shape(lg.why("frag", "ok"))
    top = out["findings"][0]
    assert top["kind"] == "oom" and "fragmentation" in top["claim"], out["findings"]
    assert "expandable_segments:True" in top["next"]


def test_a_periodic_stall(lg: Any) -> None:
    lg.write_steps("plain", hook_rows(1200, seed=5))
    lg.write_steps(
        "stalls", hook_rows(1200, seed=6, extra_s=lambda s: 4.0 if s % 50 == 25 else 0.0)
    )
    out = _check_shape(lg.why("stalls", "plain"))
    top = out["findings"][0]
    assert top["kind"] == "step_spikes", out["findings"]
    assert "every 50 steps" in top["claim"]
    assert all(e["table"] == "step" for e in top["evidence"])


def test_a_flag_that_differs_in_the_relaunch_command(lg: Any) -> None:
    from helpers import run_cli

    lg.write_steps("budget64k", hook_rows(1000, seed=7, tokens=6000))
    lg.write_steps("budget48k", hook_rows(1000, seed=8, tokens=5300))
    lg.record_deploy(
        "budget64k",
        "relaunch",
        ["torchrun", "--nproc_per_node", "8", "train.py", "--compile-drafter",
         "--token-budget", "65536"],
        exit_code=0,
    )  # fmt: skip
    result = run_cli(
        "deploy", "--run", "budget48k", "--step", "relaunch", "--record-only", "--exit-code",
        "0", "--", "torchrun", "--nproc_per_node", "8", "train.py", "--compile-drafter",
        "--token-budget", "49152",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    out = _check_shape(lg.why("budget48k", "budget64k"))
    top = out["findings"][0]
    assert top["kind"] == "config_change", out["findings"]
    assert "--token-budget 49152" in top["claim"] and "65536" in top["claim"]
    assert "compile-drafter" not in top["claim"]  # the same in both
    assert any(e["table"] == "run_config" and "(deploy)" in e["text"] for e in top["evidence"])


def test_low_gpu_utilisation_in_probes(lg: Any, tmp_path: Path) -> None:
    lg.write_steps("busy", hook_rows(800, seed=9, step_s=0.5))
    lg.write_steps("idle", hook_rows(800, seed=10, step_s=0.65))
    for name, utils in (("busy", [97, 96, 98, 97]), ("idle", [35, 41, 30, 38])):
        for probe in range(2):
            out = nvidia_smi_csv(tmp_path / f"smi_{name}_{probe}.txt", utils)
            lg.probe(name, ["cat", str(out)])
    out = _check_shape(lg.why("idle", "busy"))
    top = out["findings"][0]
    assert top["kind"] == "gpu_idle", out["findings"]
    assert "busy" in top["claim"] and "97 %" in top["claim"]
    assert all(e["table"] == "gpu_sample" and "id" in e for e in top["evidence"])


def test_a_data_loader_wait_measured_by_the_hook(lg: Any) -> None:
    lg.write_steps("fed", hook_rows(1000, seed=11, wait_s=0.002))
    lg.write_steps("starved", hook_rows(1000, seed=12, wait_s=0.06))
    result = lg.why("starved", "fed")
    out = _check_shape(result)
    assert result.verdict == "regression"
    top = out["findings"][0]
    assert top["kind"] == "data_wait", out["findings"]
    assert "wait_s" in top["evidence"][0]["text"]


@pytest.mark.parametrize("seed", [21, 22, 23, 24])
def test_twins_from_the_hook_give_no_finding(lg: Any, seed: int) -> None:
    def checkpoint(s: int) -> float:
        return 3.0 if s % 200 == 150 else 0.0

    for i, name in enumerate(("twin_a", "twin_b")):
        lg.ensure_run(name)
        lg.record_deploy(  # the relaunch, then its steps (a relaunch starts a launch)
            name, "relaunch", ["python", "train.py", "--token-budget", "49152"], exit_code=0
        )
        lg.write_steps(name, hook_rows(1000, seed=seed * 10 + i, extra_s=checkpoint, wait_s=0.01))
    result = lg.why("twin_b", "twin_a")
    assert result.findings == [], [f.to_dict() for f in result.findings]
    assert result.verdict is not None


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_twins_from_logs_give_no_finding(lg: Any, tmp_path: Path, seed: int) -> None:
    def once(s: int) -> list[str]:  # both compile once at the start
        return recompile_warning(s, 1) if s == 3 else []

    for i, name in enumerate(("log_a", "log_b")):
        lg.ingest(titan_log(tmp_path / f"train_{name}.log", 700, seed=seed * 10 + i, before=once))
    result = lg.why("log_b", "log_a")
    assert result.findings == [], [f.to_dict() for f in result.findings]


def test_the_default_reference_is_the_best_other_run(lg: Any) -> None:
    lg.write_steps("fast", hook_rows(600, seed=41, wait_s=0.002))
    lg.write_steps("slow", hook_rows(600, seed=42, wait_s=0.08))
    result = lg.why("slow")
    assert result.against == "fast" and result.against_kind == "run"
    assert result.findings and result.findings[0].kind == "data_wait"


def test_little_data_degrades_to_unknown(lg: Any, tmp_path: Path) -> None:
    lg.write_steps("tiny", [{"step": 0, "throughput": 100.0}, {"step": 1, "throughput": 90.0}])
    lg.ensure_run("empty")
    result = lg.why("tiny", "empty")
    assert result.verdict is None and result.findings == [] and result.notes
    assert result.to_dict()["findings"] == []
    alone = lg.why("empty")  # no other run with steps, no baseline: nothing to compare
    assert alone.against_kind == "none" and alone.verdict is None
    log = tmp_path / "train_died.log"
    log.write_text("\n".join(OOM_TAIL) + "\n")
    lg.ingest(log)
    died = lg.why("died", "tiny")  # no steps at all, but the OOM still tells
    assert [f.kind for f in died.findings] == ["oom"]


def test_against_the_baseline_number(lg: Any) -> None:
    lg.set_baseline(14000.0, "tok/s")
    lg.write_steps("only", hook_rows(600, seed=51, wait_s=0.1), throughput_unit="tok/s")
    result = lg.why("only")
    assert result.against_kind == "baseline" and result.verdict == "regression"
    assert result.findings and result.findings[0].kind == "data_wait"


def _mmengine_log(path: Path, seed: int, data_s: float) -> Path:
    import numpy as np

    rng = np.random.default_rng(seed)
    lines = []
    for i in range(1, 301):
        data = max(0.0, data_s * (1 + 0.1 * rng.standard_normal()))
        step = 0.5 * (1 + 0.02 * rng.standard_normal()) + data
        lines.append(
            f"06/01 12:{i // 60:02d}:{i % 60:02d} - mmengine - INFO - Epoch(train)  "
            f"[1][{10 * i:>4}/3000]  lr: 1.0000e-04  eta: 0:10:00  time: {step:.3f}  "
            f"data_time: {data:.3f}  memory: 12000  loss: {2.0 - i / 1000:.3f}"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_data_wait_from_a_logs_data_time(lg: Any, tmp_path: Path) -> None:
    lg.ingest(_mmengine_log(tmp_path / "train_quick.log", 61, 0.005))
    lg.ingest(_mmengine_log(tmp_path / "train_loader.log", 62, 0.12))
    out = _check_shape(lg.why("loader", "quick"))
    top = out["findings"][0]
    assert top["kind"] == "data_wait" and "data_time" in top["claim"], out["findings"]
    lg.ingest(_mmengine_log(tmp_path / "train_quick2.log", 63, 0.005))
    assert lg.why("quick2", "quick").findings == []


def test_the_flags_of_the_command_the_hook_recorded_are_settings(lg: Any, db_url: str) -> None:
    from helpers import db_rows
    from sqlalchemy import create_engine, text

    lg.write_steps("batch8", hook_rows(800, seed=61, tokens=8192))
    lg.write_steps("batch4", hook_rows(800, seed=62, tokens=4096, step_s=0.3))
    ids = dict((name, id_) for id_, name in db_rows(db_url, "SELECT id, name FROM run"))
    commands = {
        "batch8": "train.py --batch-size 8 --seed 1 --out-dir /runs/a --compile",
        "batch4": "train.py --batch-size 4 --seed 2 --out-dir /runs/b --compile",
    }
    engine = create_engine(db_url)
    with engine.begin() as conn:
        for name, command in commands.items():
            for key, value in (("command", command), ("torch", "2.6.0")):
                conn.execute(
                    text(
                        "INSERT INTO run_config (run_id, source, key, value) "
                        "VALUES (:r, 'hook', :k, :v)"
                    ),
                    {"r": ids[name], "k": key, "v": value},
                )
    engine.dispose()
    out = _check_shape(lg.why("batch4", "batch8"))
    top = out["findings"][0]
    assert top["kind"] == "config_change", out["findings"]
    assert "--batch-size 4" in top["claim"] and "--batch-size 8" in top["claim"]
    assert "seed" not in top["claim"] and "out-dir" not in top["claim"]
    assert "compile" not in top["claim"]  # the same in both
