"""Every fixture log (tests/fixtures/logs, one per known log shape and per fate)
reads to what a person sees in it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import run_cli

from ledger.logs import parse_file, parse_text
from ledger.logs.reader import LogReader
from ledger.model.logs import Found

FIXTURES = Path(__file__).parent / "fixtures" / "logs"

# file: (fate, distinct steps, ranks, last step, throughput unit, first, last)
EXPECTED = {
    "ansi_invalid_utf8.log": ("running", 3, 1, 3, "tok/s", 1000, 1020),
    "bar_postfix_epochs.log": ("running", 3, 1, 300, "it/s", 9.8, 9.8),
    "bar_postfix_slow.log": ("running", 8, 1, 8, "s/it", 95.2, 95.2),
    "binary.bin": ("unknown", 0, 0, None, None, None, None),
    "blank_lines.log": ("unknown", 0, 0, None, None, None, None),
    "completed_finished.log": ("finished", 2, 1, 2, "tok/s", 100, 100),
    "config_hf_arguments.log": ("loading", 0, 0, None, None, None, None),
    "config_launch.log": ("running", 2, 1, 2, "tok/s", 14200, 14210),
    "config_training_arguments.log": ("running", 1, 1, 1, None, None, None),
    "crashed_traceback.log": ("crashed", 2, 1, 2, "tok/s", 100, 101),
    "cut_nccl_watchdog.log": ("nccl", 5, 1, 5, "tok/s", 12001, 12005),
    "cut_oom.log": ("oom", 3, 1, 3, "tok/s", 14001, 14003),
    "deepspeed_killed.log": ("killed", 8, 1, 8, "samples/s", 31.3, 20.34),
    "empty.log": ("unknown", 0, 0, None, None, None, None),
    "end_of_training.log": ("finished", 5, 1, 5, "tok/s", 14001, 14005),
    "epoch_batch_running.log": ("running", 8, 1, 800, "samples/s", 501, 503),
    "eval_repeat.log": ("running", 6, 1, 6, "tok/s", 14001, 14006),
    "fairseq_no_updates.log": ("running", 4, 1, 400, "words/s", 12345, 12345),
    "fairseq_running.log": ("running", 4, 1, 400, "words/s", 110045, 120045),
    "fairseq_valid.log": ("running", 6, 1, 600, "words/s", 111045, 113045),
    "generic_mixed.log": ("running", 4, 1, 4, "tok/s", 12300, 12500),
    "gzip_torchtitan.log.gz": ("finished", 10, 1, 10, "tok/s", 12001, 12010),
    "header_batch.log": ("running", 5, 1, 5, "tok/s", 12346.6, 12350.6),
    "hf_trainer_finished.log": ("finished", 3, 1, 30, "it/s", 1.9, 1.0),
    "hf_trainer_step_key.log": ("running", 5, 1, 50, None, None, None),
    "huge_numbers.log": ("running", 7, 1, 7, "tok/s", 14001, 14007),
    "init_loading.log": ("loading", 0, 0, None, None, None, None),
    "jsonl_trainer.log": ("finished", 10, 1, 100, None, 1501.25, 1510.25),
    "jupyter_bar_running.log": ("running", 0, 0, None, "it/s", 3.2, 3.2),
    "keras_running.log": ("running", 2, 1, 782, None, None, None),
    "keras_test_summary.log": ("finished", 3, 1, 1173, None, None, None),
    "last_epoch_bar.log": ("finished", 0, 0, None, "it/s", 4.1, 4.2),
    "lightning_finished.log": ("finished", 20, 1, 20, "it/s", 4.1, 4.1),
    "lightning_glued_running.log": ("running", 8, 1, 13, "it/s", 4.1, 4.3),
    "llama2c_running.log": ("running", 20, 1, 20, None, None, None),
    "loading_weights.log": ("loading", 0, 0, None, None, None, None),
    "materializing_loading.log": ("loading", 0, 0, None, None, None, None),
    "maxtext_xla_oom.log": ("oom", 7, 1, 7, "tok/s", 4100.5, 4700.5),
    "megatron_deepspeed_running.log": ("running", 10, 2, 10, "samples/s", 27.4, 28.3),
    "megatron_deepspeed_samples.log": ("running", 7, 1, 7, "samples/s", 12.31, 12.37),
    "megatron_finished.log": ("finished", 10, 1, 100, "TFLOP/s", 181.0, 190.0),
    "metrics_running.csv": ("running", 10, 1, 499, "tok/s", 949, 1399),
    "mmengine_running.log": ("running", 13, 1, 650, None, None, None),
    "modded_nanogpt_finished.log": ("finished", 31, 1, 100, None, None, None),
    "nanochat_finished.log": ("finished", 50, 1, 50, "tok/s", 1148464, 1153364),
    "nanogpt_no_tokens.log": ("running", 5, 1, 4, None, None, None),
    "nanogpt_running.log": ("running", 30, 1, 29, "tok/s", 491520 / 0.4, 491520 / 0.429),
    "nccl_continued.log": ("nccl", 3, 1, 3, None, None, None),
    "nccl_timeout.log": ("nccl", 3, 1, 3, None, None, None),
    "notebook_noise_running.log": ("running", 8, 1, 8, "tok/s", 14001, 14008),
    "nvidia_smi_csv_header.txt": ("unknown", 0, 0, None, None, None, None),
    "nvidia_smi_csv_noheader.txt": ("unknown", 0, 0, None, None, None, None),
    "nvidia_smi_csv_nounits.txt": ("unknown", 0, 0, None, None, None, None),
    "nvidia_smi_table.txt": ("unknown", 0, 0, None, None, None, None),
    "oom_old_runtimeerror.log": ("oom", 1, 1, 1, "tok/s", 100, 100),
    "opennmt_running.log": ("running", 5, 1, 500, "tok/s", 13457, 13461),
    "prefix_bracket_numbers.log": ("crashed", 10, 1, 10, "tok/s", 14001, 14010),
    "prefix_colon_numbers.log": ("crashed", 10, 1, 10, "tok/s", 14001, 14010),
    "prefix_compose.log": ("oom", 8, 1, 8, "tok/s", 3001, 3008),
    "prefix_kubectl.log": ("running", 10, 1, 10, "tok/s", 7001, 7010),
    "prefix_comment.log": ("crashed", 10, 1, 10, "tok/s", 14001, 14010),
    "prefix_piped_numbers.log": ("crashed", 10, 1, 10, "tok/s", 14001, 14010),
    "prefix_rank_traceback.log": ("crashed", 3, 1, 3, "tok/s", 12001, 12003),
    "prefix_ray.log": ("running", 7, 1, 7, "tok/s", 2101.5, 2107.5),
    "prefix_srun_labels.log": ("killed", 5, 4, 5, "tok/s", 14000, 14003),
    "probe_output_loading.txt": ("loading", 0, 0, None, None, None, None),
    "prose.txt": ("unknown", 0, 0, None, None, None, None),
    "pytorch_tutorial_epochs.log": ("finished", 18, 1, 1800, None, None, None),
    "recompile_cache_size_crash.log": ("crashed", 1, 1, 1, None, None, None),
    "recompile_running.log": ("running", 3, 1, 3, "tok/s", 14000, 10400),
    "recompiles_logs.log": ("running", 3, 1, 3, "tok/s", 14100, 10000),
    "restart_crash_relaunch.log": ("running", 40, 1, 40, "tok/s", 14001, 14040),
    "restart_still_loading.log": ("loading", 30, 1, 30, "tok/s", 14001, 14030),
    "saving_final_checkpoint.log": ("finished", 3, 1, 3, "tok/s", 14001, 14003),
    "segfault_crash.log": ("crashed", 1, 1, 1, "tok/s", 100, 100),
    "several_fits.log": ("running", 0, 0, None, "it/s", 4.0, 4.0),
    "shell_killed.log": ("killed", 2, 1, 2, "tok/s", 100, 100),
    "sigterm_killed.log": ("killed", 1, 1, 1, "tok/s", 100, 100),
    "slurm_cancel_traceback.log": ("killed", 5, 1, 5, "tok/s", 14001, 14005),
    "slurm_time_limit_glued.log": ("killed", 3, 1, 3, "tok/s", 14001, 14003),
    "structured_running.log": ("running", 10, 1, 10, "tok/s", 9877, 9886),
    "torchrun_oom.log": ("oom", 5, 1, 5, "tok/s", 9001, 9005),
    "torchtitan_running.log": ("running", 20, 2, 20, "tok/s", 12010, 12201),
    "torchtune_bar.log": ("running", 40, 1, 40, "it/s", 4.1, 4.1),
    "torchtune_running.log": ("running", 10, 1, 10, "tok/s", 1235.5678901234, 1244.5678901234),
    "unknown_shape.log": ("unknown", 0, 0, None, None, None, None),
    "unknown_shapes_planted.log": ("running", 5, 1, 5, "tok/s", 1001, 1005),
    "wandb_summary_finished.log": ("finished", 3, 1, 3, "tok/s", 301, 303),
    "wrapped_megatron.log": ("running", 6, 1, 60, "TFLOP/s", 181.0, 186.0),
    "yolo_epochs_finished.log": ("finished", 3, 1, 3, "it/s", 2.5, 2.7),
    "fastai_table_finished.log": ("finished", 3, 1, 2, None, None, None),
    "jsonl_string_numbers.log": ("running", 6, 1, 60, "samples/s", 311.5, 316.5),
    "record_indented_running.log": ("running", 5, 1, 500, "tok/s", 12001, 12005),
    "xla_devices_running.log": ("running", 3, 4, 60, "samples/s", 121, 126),
    "keras3_fits_finished.log": ("finished", 15, 1, 160, None, None, None),
    "cxx_abort_crashed.log": ("crashed", 3, 1, 3, "tok/s", 14001, 14003),
    "launcher_signal_killed.log": ("killed", 3, 1, 3, "tok/s", 14001, 14003),
    "thread_exception_crashed.log": ("crashed", 4, 1, 4, "tok/s", 14001, 14004),
    "early_stopping_finished.log": ("finished", 5, 1, 5, None, None, None),
}

# Each built-in line shape (ledger.logs.shapes.SHAPES) and the fixtures written in it.
SHAPE_FIXTURES = {
    "deepspeed timer": ["deepspeed_killed.log"],
    "epoch and step of both": ["pytorch_tutorial_epochs.log"],
    "iteration of total": ["megatron_finished.log", "wrapped_megatron.log", "nccl_timeout.log"],
    "epoch and position in brackets": ["mmengine_running.log"],
    "epoch and position": ["fairseq_running.log", "fairseq_no_updates.log", "fairseq_valid.log",
                           "epoch_batch_running.log"],
    "step of total": ["opennmt_running.log", "modded_nanogpt_finished.log",
                      "nanochat_finished.log"],
    "keras progress": ["keras_running.log", "keras_test_summary.log", "keras3_fits_finished.log"],
    "leading step": ["llama2c_running.log"],
    "pairs": ["torchtitan_running.log", "torchtune_running.log", "nanogpt_running.log",
              "hf_trainer_step_key.log", "jsonl_trainer.log", "structured_running.log",
              "prefix_ray.log"],
}  # fmt: skip


def test_every_fixture_is_listed() -> None:
    assert sorted(p.name for p in FIXTURES.iterdir()) == sorted(EXPECTED)


def test_every_fate_has_a_fixture() -> None:
    from ledger.model.terms import FATES

    fates = {v[0] for v in EXPECTED.values()}
    assert set(FATES) - fates == {"stalled"}  # stalled needs time: see test_ingest / test_probe


def test_every_shape_has_fixtures_read_by_it() -> None:
    from ledger.logs.shapes import SHAPES

    assert sorted(SHAPE_FIXTURES) == sorted(s.name for s in SHAPES)
    for shape, names in SHAPE_FIXTURES.items():
        for name in names:
            read = parse_file(FIXTURES / name, strict=True).shapes
            assert read.get(shape, 0) >= 2, (name, shape, read)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-6)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name: str) -> None:
    fate, steps, ranks, last, unit, first, last_tp = EXPECTED[name]
    s = parse_file(FIXTURES / name, strict=True)
    assert (s.fate, s.steps, s.ranks, s.last_step) == (fate, steps, ranks, last), s.fate_reason
    assert s.throughput.unit == unit
    assert _close(s.throughput.first, first)
    assert _close(s.throughput.last, last_tp)
    assert s.unread_lines == UNREAD.get(name, 0), s.unread


# Lines of the corpus that look like metrics and that the reader does not read, counted by
# hand: numbers out of range, and 20 lines in 10 shapes no stage knows, planted between
# step lines (`ep#0 :: loss≈2.0`, `LOSS->2.0 ACC->0.91`, `%loss% 2.0 %acc% 0.91`…).
UNREAD = {"huge_numbers.log": 3, "unknown_shapes_planted.log": 20}


def test_parse_json_on_every_fixture_counts_what_it_did_not_read() -> None:
    for path in sorted(FIXTURES.iterdir()):
        result = run_cli("parse", str(path), "--json")
        assert result.exit_code == 0, (path.name, result.stderr)
        data = json.loads(result.stdout)
        assert data["unread_lines"] == UNREAD.get(path.name, 0), (path.name, data["unread"])
        assert len(data["unread"]) == min(20, data["unread_lines"] + data["unread_values"])


def test_planted_shapes_are_counted_and_shown() -> None:
    s = parse_file(FIXTURES / "unknown_shapes_planted.log", strict=True)
    assert [u.line for u in s.unread] == list(range(4, 24))  # every one, none hidden
    text = (FIXTURES / "unknown_shapes_planted.log").read_text().splitlines()
    assert [u.text for u in s.unread] == text[3:23]
    assert {u.reason for u in s.unread} == {"metrics in a shape the reader does not know"}
    result = run_cli("parse", str(FIXTURES / "unknown_shapes_planted.log"))
    shown = [ln for ln in result.stdout.splitlines() if ln.startswith("    line ")]
    assert shown == [f"    line {i}: {text[i - 1]}" for i in range(4, 9)]  # five of them
    assert "20 lines could not be read" in result.stdout
    assert "ledger pattern add '" in result.stdout
    data = json.loads(run_cli("parse", str(FIXTURES / "unknown_shapes_planted.log"),
                              "--json").stdout)  # fmt: skip
    assert data["unread_lines"] == 20 and len(data["unread"]) == 20


def test_the_hint_teaches_a_shape_that_reads_the_line() -> None:
    import shlex

    text = (FIXTURES / "unknown_shapes_planted.log").read_text()
    out = run_cli("parse", str(FIXTURES / "unknown_shapes_planted.log")).stdout
    hint = next(ln for ln in out.splitlines() if "ledger pattern add" in ln)
    regex = shlex.split(hint.split("ledger pattern add ", 1)[1])[0]
    taught = parse_text(text, patterns=[regex], strict=True)
    assert taught.unread_lines == 18  # the two lines of that shape are steps now
    assert taught.shapes.get("pattern 1") == 2


def _found(name: str) -> Found:
    """Everything a reader keeping rows finds in a fixture."""
    reader = LogReader(rows=True, strict=True)
    found = reader.feed((FIXTURES / name).read_text(encoding="utf-8", errors="replace"))
    found.extend(reader.finish())
    return found


def test_events_and_last_event() -> None:
    s = parse_file(FIXTURES / "torchrun_oom.log", strict=True)
    assert s.events["oom"] == 1 and s.events["traceback"] == 2
    assert "error" not in s.events  # a traceback's exception line is not a second event
    oom = parse_file(FIXTURES / "oom_old_runtimeerror.log", strict=True)
    assert oom.last_event is not None and oom.last_event.kind == "oom"
    assert "Tried to allocate 20.00 MiB" in oom.last_event.text
    rec = parse_file(FIXTURES / "recompile_running.log", strict=True)
    assert rec.events == {"recompile": 1}
    assert rec.last_event is not None and rec.last_event.kind == "recompile"
    assert "recompile_limit (8)" in rec.last_event.text
    assert "function 'forward'" in rec.last_event.text
    assert "last reason: 0/0: tensor" in rec.last_event.text
    assert rec.last_event.step == 1  # the last step before it: where it falls on the curve
    killed = parse_file(FIXTURES / "deepspeed_killed.log", strict=True)
    assert killed.events["signal"] == 1  # exitcode -9 and Signal 9 of one PID: one event
    nccl = parse_file(FIXTURES / "nccl_timeout.log", strict=True)
    assert nccl.events["nccl"] == 4  # watchdog, its exception, "have failed", terminate


def test_progress_and_glued_output() -> None:
    s = parse_file(FIXTURES / "loading_weights.log", strict=True)
    assert s.progress is not None and s.progress.desc == "Loading weights"
    assert (s.progress.n, s.progress.total) == (81, 851)
    glued = parse_file(FIXTURES / "lightning_glued_running.log", strict=True)
    assert glued.progress is not None
    assert (glued.progress.desc, glued.progress.n) == ("Epoch 1", 3)
    hf = parse_file(FIXTURES / "hf_trainer_finished.log", strict=True)
    # the loss dicts glued after bar states are step lines, numbered by the bar's count
    assert (hf.steps, hf.last_step) == (3, 30)


def test_metric_values_and_units() -> None:
    found = _found("torchtitan_running.log")
    first = found.steps[0]
    assert first[:2] == (0, 1)
    assert math.isclose(first[9], 61.23 * 1024)  # memory: 61.23GiB → MiB
    names = {m[2] for m in found.metrics}
    assert {"grad_norm", "tflops", "mfu", "memory_pct"} <= names
    row = _found("megatron_finished.log").steps[0]
    assert math.isclose(row[3], 1.2445)  # elapsed time per iteration (ms) → seconds
    assert math.isclose(row[7], 6.4)  # lm loss in E-notation
    generic = _found("generic_mixed.log")
    rows = generic.steps
    assert math.isnan(rows[2][7]) and math.isinf(rows[3][7]) and generic.has_nan
    assert math.isclose(rows[2][3], 0.98944) and math.isclose(rows[3][3], 0.99)
    assert math.isclose(rows[0][9], 61.2 * 1024)


def test_nvidia_smi() -> None:
    header = parse_file(FIXTURES / "nvidia_smi_csv_header.txt", strict=True).gpus
    assert [g.index for g in header] == [0, 1, 2]
    assert header[0].name == "NVIDIA H100 80GB HBM3"
    assert header[2].memory_used_mib is None and header[2].utilization_pct is None
    noheader = parse_file(FIXTURES / "nvidia_smi_csv_noheader.txt", strict=True).gpus
    assert len(noheader) == 8 and noheader[7].memory_used_mib == 61241
    nounits = parse_file(FIXTURES / "nvidia_smi_csv_nounits.txt", strict=True).gpus
    assert [g.utilization_pct for g in nounits] == [0, 1, 2, 3]
    table = parse_file(FIXTURES / "nvidia_smi_table.txt", strict=True).gpus
    assert [(g.index, g.memory_used_mib, g.utilization_pct) for g in table] == [
        (0, 61234, 0),
        (1, 70000, 97),
    ]
    # Columns from the probe's own query when there is no header.
    s = parse_text(
        "0, 97 %, 1000 MiB\n1, 50 %, 2000 MiB\n",
        gpu_query=("index", "utilization.gpu", "memory.used"),
        strict=True,
    )
    assert [(g.utilization_pct, g.memory_used_mib) for g in s.gpus] == [(97, 1000), (50, 2000)]


def test_user_pattern_goes_through_the_shape_table() -> None:
    text = "it=7 L=2.5 speed=1234 tok/s\nit=8 L=2.4 speed=1300 tok/s\n"
    pattern = r"it=(?P<step>\d+) L=(?P<loss>[\d.]+) speed=(?P<throughput>\d+)"
    s = parse_text(text, patterns=[pattern], strict=True)
    assert (s.steps, s.last_step, s.throughput.last) == (2, 8, 1300)
    assert s.shapes == {"pattern 1": 2}  # the user's shape read both lines
    reader = LogReader(patterns=[pattern], rows=True, strict=True)
    assert [r[:2] for r in reader.feed(text).steps] == [(0, 7), (0, 8)]
    with pytest.raises(ValueError):
        parse_text("x", patterns=["(unclosed"])
    with pytest.raises(ValueError):
        parse_text("x", patterns=["no groups"])


def test_fate_rule_table_and_shape_table_are_documented() -> None:
    from ledger.logs.fate import RULES, rule_table
    from ledger.logs.lines import PREFIXES
    from ledger.logs.shapes import shape_table

    docs = (Path(__file__).parent.parent / "docs" / "logs.md").read_text()
    assert rule_table() in docs
    assert shape_table() in docs
    assert all(f"| {p.name} |" in docs for p in PREFIXES)
    assert [r[0] for r in RULES][-1] == "unknown"


def test_parse_cli_json_needs_no_ledger(tmp_path: Path) -> None:
    result = run_cli("parse", str(FIXTURES / "probe_output_loading.txt"), "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) >= {
        "fate",
        "steps",
        "ranks",
        "throughput",
        "progress",
        "events",
        "last_event",
        "gpus",
    }
    assert data["fate"] == "loading" and len(data["gpus"]) == 8
    assert not (tmp_path / ".ledger").exists()
    text = run_cli("parse", str(FIXTURES / "torchrun_oom.log"))
    assert text.exit_code == 0 and text.stdout.startswith("torchrun_oom.log: oom")
    missing = run_cli("parse", str(tmp_path / "nope.log"))
    assert missing.exit_code == 2 and missing.stderr.startswith("Error:")  # a usage error


# Shapes no fixture family covers: read as far as they go, never a crash.
UNLISTED = {
    "maxtext": (
        "".join(
            f"completed step: {i}, seconds: 1.234, TFLOP/s/device: 123.4, "
            f"Tokens/s/device: {4567 + i}.8, total_weights: 12345, loss: {5.6 - i / 100:.3f}\n"
            for i in range(5)
        ),
        ("running", 5, "tok/s"),
    ),
    "json lines": (
        "".join(
            f'{{"step": {i}, "loss": {2 - i / 10:.3f}, "tokens_per_sec": {1000 + i}}}\n'
            for i in range(1, 6)
        ),
        ("running", 5, "tok/s"),
    ),
    "glog prefix": (
        "".join(
            f"I0301 10:00:0{i}.123456 140000 train.py:123] step {i} loss 2.0 "
            f"throughput {1000 + i} tokens/s\n"
            for i in range(1, 4)
        ),
        ("running", 3, "tok/s"),
    ),
    "slurm time limit": (
        "step 1 loss 2.0 tok/s 100\nslurmstepd: error: *** JOB 1234 ON node1 CANCELLED AT "
        "2024-01-01T12:00:00 DUE TO TIME LIMIT ***\n",
        ("killed", 1, "tok/s"),
    ),
    "exception without traceback": (
        "step 1 loss 2.0 tok/s 100\nRuntimeError: CUDA error: an illegal memory access was "
        "encountered\n",
        ("crashed", 1, "tok/s"),
    ),
    "host oom killer": (
        "step 1 loss 2.0 tok/s 100\nOut of memory: Killed process 1234 (python)\n",
        ("killed", 1, "tok/s"),
    ),
    "eight ranks without prefixes": (
        "".join(f"step {i} | loss 2.0 | tok/s {14000 + r}\n" for i in (1, 2, 3) for r in range(8)),
        ("running", 3, "tok/s"),
    ),
}


@pytest.mark.parametrize("name", sorted(UNLISTED))
def test_unlisted_shapes(name: str) -> None:
    text, (fate, steps, unit) = UNLISTED[name]
    s = parse_text(text, strict=True)
    assert (s.fate, s.steps, s.throughput.unit) == (fate, steps, unit)
