"""The families of shapes real logs come in, beyond one fixture each: prefixes, cut last
lines, loading, the many ways a run ends, bar states and JSON lines as steps, records over
several lines, several runs in one log, Slurm, summary lines, what a file is, config
items, and the texts a person reads (fate reasons, last events)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.logs import parse_file, parse_text
from ledger.logs.reader import LogReader
from ledger.model.logs import INT64_MAX, Found, LogSummary

FIXTURES = Path(__file__).parent / "fixtures" / "logs"


def _parse(name: str) -> LogSummary:
    return parse_file(FIXTURES / name, strict=True)


def _found(text: str) -> Found:
    reader = LogReader(rows=True, strict=True)
    found = reader.feed(text)
    found.extend(reader.finish())
    return found


STEPS = "".join(f"step {i} | loss {2 - i / 100:.2f} | tok/s {14000 + i}\n" for i in range(1, 11))


# -- prefixes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prefix",
    ["[{n:04d}] ", "{n:5d}| ", "{n}:", "{n}: ", "# ", "2024-06-01T10:00:{s:02d}.123456789Z "],
)
def test_a_prefix_most_lines_share_is_read_through(prefix: str) -> None:
    lines = [*STEPS.splitlines(), "Traceback (most recent call last):", '  File "t.py", line 3',
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]  # fmt: skip
    text = "".join(prefix.format(n=400 + i, s=i % 60) + line + "\n" for i, line in enumerate(lines))
    s = parse_text(text, strict=True)
    assert (s.fate, s.steps, s.last_step, s.throughput.last) == ("oom", 10, 10, 14010)
    assert "Tried to allocate 2.00 GiB" in s.fate_reason


def test_a_prefix_only_a_few_lines_have_is_left_alone() -> None:
    text = "# the run\n" + STEPS
    s = parse_text(text, strict=True)
    assert (s.steps, s.last_step) == (10, 10)
    reader = LogReader(rows=True, strict=True)
    reader.feed(text)
    assert reader.state.lines.shared is None


def test_rank_prefixes_give_the_rank() -> None:
    s = _parse("prefix_srun_labels.log")
    assert (s.ranks, s.steps) == (4, 5)  # `0: ` … `3: ` are Slurm's rank labels
    numbered = _parse("prefix_colon_numbers.log")
    assert numbered.ranks == 1  # `400:`, `401:` … count lines
    found = _found(
        "[rank3]: step 1 | loss 2.0 | tok/s 10\n[1,2]<stdout>: step 1 | loss 2 | tok/s 9\n"
    )
    assert [row[0] for row in found.steps] == [3, 1]
    ray = _parse("prefix_ray.log")
    assert ray.throughput.last == 2107.5 and ray.steps == 7


def test_launcher_and_collector_tags() -> None:
    compose = _parse("prefix_compose.log")
    assert (compose.fate, compose.steps) == ("oom", 8)  # `trainer-1  | ` on every line
    kubectl = _parse("prefix_kubectl.log")
    assert (kubectl.steps, kubectl.throughput.last) == (10, 7010)


def test_a_rank_prefixed_traceback_names_its_exception() -> None:
    s = _parse("prefix_rank_traceback.log")
    assert s.fate == "crashed"
    assert s.fate_reason.startswith("ValueError: Expected input batch_size (8)")
    found = _found((FIXTURES / "prefix_rank_traceback.log").read_text())
    tracebacks = [e for e in found.events if e.kind == "traceback"]
    assert len(tracebacks) == 1 and tracebacks[0].rank == 3
    assert "without its exception line" not in tracebacks[0].text
    assert "line 1736" in tracebacks[0].text  # its last frame


# -- the last line cut short ---------------------------------------------------------------


def test_a_cut_watchdog_line_is_still_an_nccl_failure() -> None:
    s = _parse("cut_nccl_watchdog.log")
    assert s.fate == "nccl" and "cut short" in s.fate_reason
    assert not s.fate_reason.startswith("[rank2]")  # the prefix is not part of what it said


def test_a_cut_oom_line_is_still_an_oom() -> None:
    s = _parse("cut_oom.log")
    assert s.fate == "oom" and "CUDA out of me" in s.fate_reason


def test_a_line_cut_in_an_ordinary_place_says_nothing() -> None:
    s = parse_text(STEPS + "step 11 | loss 1.8", strict=True)
    assert s.fate == "running" and s.events == {}


# -- loading -------------------------------------------------------------------------------


def test_initialisation_without_a_bar_is_loading() -> None:
    s = _parse("init_loading.log")
    assert s.fate == "loading" and s.content == "log"
    assert s.config["arg.token_budget"] == "49152"
    for line in (
        "Patching SDPA attention",
        "Building dataset from /data (64 files)",
        "Total params: 7,000,000,000",
        "Namespace(lr=0.1, epochs=3)",
        "Loading tokenizer from /models/llama",
        "number of parameters: 123.65M",
    ):
        assert parse_text(line + "\n", strict=True).fate == "loading", line


def test_loading_chatter_after_training_began_changes_nothing() -> None:
    s = parse_text(STEPS + "Loading data shard 4 of 10\n", strict=True)
    assert s.fate == "running"


# -- how runs end --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ending",
    [
        "End of training",
        "Training completed. Do not forget to share your model on huggingface.co/models =)",
        "saving final checkpoint to /ckpt/final",
        "{'train_runtime': 31.2, 'train_samples_per_second': 7.7, 'train_loss': 2.3, 'epoch': 3.0}",
        "Training complete in 1h 2m",
        "`Trainer.fit` stopped: `max_steps=10` reached.",
    ],
)
def test_the_end_of_training_said_in_words(ending: str) -> None:
    s = parse_text(STEPS + ending + "\n", strict=True)
    assert s.fate == "finished", s.fate_reason
    assert s.steps == 10  # a final summary is not a step


def test_without_an_end_a_run_that_stops_printing_is_running() -> None:
    s = _parse("notebook_noise_running.log")
    assert s.fate == "running" and s.steps == 8
    assert parse_text(STEPS, stalled=True, strict=True).fate == "stalled"


def test_the_last_epoch_and_a_test_summary_after_it() -> None:
    assert _parse("last_epoch_bar.log").fate == "finished"
    assert _parse("keras_test_summary.log").fate == "finished"
    assert _parse("keras_running.log").fate == "running"
    # a test summary before the last epoch ends nothing
    early = parse_text(
        "Epoch 1/3\n10/10 [====] - 1s - loss: 0.5\nTest accuracy: 0.8\n", strict=True
    )
    assert early.fate == "running"


def test_the_last_step_equal_to_the_announced_total() -> None:
    done = parse_text("step 9/10 | loss 1.0 | tok/s 5\nstep 10/10 | loss 1.0 | tok/s 5\n")
    assert done.fate == "finished" and done.total_steps == 10
    assert _parse("config_hf_arguments.log").total_steps == 30  # `Total optimization steps`


# -- steps that are bar states, JSON lines ---------------------------------------------------


def test_bar_states_with_metrics_are_steps() -> None:
    epochs = _parse("bar_postfix_epochs.log")
    assert (epochs.steps, epochs.last_step, epochs.fate) == (3, 300, "running")
    slow = _found((FIXTURES / "bar_postfix_slow.log").read_text())
    assert [row[1] for row in slow.steps] == list(range(1, 9))
    assert [row[7] for row in slow.steps][:2] == [2.9, 2.8]  # the loss of each state
    assert {m[2] for m in slow.metrics} == {"lr"}
    plain = parse_text("Training:  50%|█████     | 5/10 [00:05<00:05, 1.0it/s]\n", strict=True)
    assert plain.steps == 0  # a bar without metrics counts no steps


def test_a_bar_whose_description_carries_the_step_and_loss() -> None:
    found = _found((FIXTURES / "torchtune_bar.log").read_text())
    assert [row[1] for row in found.steps][:3] == [1, 2, 3]  # `1|<step>|Loss: …`
    assert found.steps[0][7] == 1.999


def test_epochs_and_steps_of_both() -> None:
    s = _parse("pytorch_tutorial_epochs.log")
    assert (s.steps, s.last_step, s.total_steps, s.fate) == (18, 1800, 1800, "finished")
    cut = "".join((FIXTURES / "pytorch_tutorial_epochs.log").read_text().splitlines(True)[:10])
    assert parse_text(cut, strict=True).fate == "running"


def test_exit_codes_past_128_are_signals() -> None:
    s = parse_text(STEPS + "Process finished with exit code 137 (interrupted by signal 9)\n")
    assert s.fate == "killed"
    assert parse_text(STEPS + "Process finished with exit code 0\n").fate == "finished"
    assert parse_text(STEPS + "exited with code 1\n").fate == "crashed"


def test_a_metrics_csv_is_step_lines() -> None:
    s = _parse("metrics_running.csv")  # Lightning's CSVLogger, or a script's own
    assert (s.steps, s.last_step, s.throughput.last) == (10, 499, 1399)
    found = _found((FIXTURES / "metrics_running.csv").read_text())
    assert {m[2] for m in found.metrics if m[1] == 499} >= {"val_loss"}  # a repeat: a metric


def test_tools_that_repeat_figures_after_a_run() -> None:
    s = _parse("wandb_summary_finished.log")
    assert (s.steps, s.fate) == (3, "finished")  # W&B's summary is neither steps nor noise


def test_out_of_memory_said_by_other_stacks() -> None:
    assert _parse("maxtext_xla_oom.log").fate == "oom"
    tf = parse_text(STEPS + "ResourceExhaustedError: OOM when allocating tensor with shape[8]\n")
    assert tf.fate == "oom"
    host = parse_text(STEPS + "Out of memory: Killed process 4242 (python)\n")
    assert host.fate == "killed"  # the host's OOM killer: a kill, not a CUDA OOM


def test_json_lines_are_step_lines() -> None:
    s = _parse("jsonl_trainer.log")
    assert (s.steps, s.last_step, s.total_steps, s.fate) == (10, 100, 100, "finished")
    assert s.throughput.last == 1510.25


# -- records over several lines ------------------------------------------------------------


def test_hard_wrapped_records_are_joined() -> None:
    s = _parse("wrapped_megatron.log")
    assert (s.steps, s.last_step, s.throughput.unit, s.throughput.last) == (6, 60, "TFLOP/s", 186)
    found = _found((FIXTURES / "wrapped_megatron.log").read_text())
    assert all(row[7] is not None for row in found.steps)  # the loss, from the third piece


def test_lines_all_of_one_width_are_not_taken_for_wrapped_ones() -> None:
    for name in ("nvidia_smi_table.txt", "keras_test_summary.log", "torchtitan_running.log"):
        reader = LogReader(rows=False, strict=True)
        reader.feed((FIXTURES / name).read_text())
        assert reader.state.lines.wrap == 0, name


def test_a_step_header_with_its_values_below() -> None:
    s = _parse("header_batch.log")
    assert (s.steps, s.last_step, s.total_steps) == (5, 5, 4000)
    assert s.throughput.last == 12350.6
    found = _found((FIXTURES / "header_batch.log").read_text())
    assert [round(row[7], 2) for row in found.steps] == [7.4, 7.3, 7.2, 7.1, 7.0]


def test_an_nccl_message_continued_on_the_next_line() -> None:
    s = _parse("nccl_continued.log")
    assert s.fate == "nccl"
    assert "_ALLGATHER_BASE" in s.fate_reason and "timeout 1800000 ms" in s.fate_reason


# -- several runs in one log ---------------------------------------------------------------


def test_the_last_run_decides_and_a_restart_is_an_event() -> None:
    s = _parse("restart_crash_relaunch.log")
    assert (s.fate, s.runs, s.steps, s.last_step) == ("running", 2, 40, 40)
    found = _found((FIXTURES / "restart_crash_relaunch.log").read_text())
    restarts = [e for e in found.events if e.kind == "restart"]
    assert len(restarts) == 1 and restarts[0].step == 30 and "OMP_NUM_THREADS" in restarts[0].text
    loading = _parse("restart_still_loading.log")
    assert (loading.fate, loading.runs) == ("loading", 2)  # not the first run's traceback
    fits = _parse("several_fits.log")
    assert (fits.fate, fits.runs) == ("running", 2)


def test_a_step_counter_that_starts_over_after_a_failure_is_a_new_run() -> None:
    text = STEPS + "RuntimeError: CUDA error: an illegal memory access\n" + STEPS[:60]
    s = parse_text(text, strict=True)
    assert (s.fate, s.runs) == ("running", 2)
    interleaved = "".join(f"step {i} | loss 1 | tok/s 9\n" for i in (1, 3, 2, 5, 4, 6))
    assert parse_text(interleaved, strict=True).runs == 1  # ranks out of step are one run


# -- Slurm ---------------------------------------------------------------------------------


def test_slurm_cancellations_are_kills() -> None:
    glued = _parse("slurm_time_limit_glued.log")
    assert glued.fate == "killed" and "TIME LIMIT" in glued.fate_reason
    assert glued.progress is not None and glued.progress.desc == "Training"
    s = _parse("slurm_cancel_traceback.log")
    assert s.fate == "killed" and "CANCELLED" in s.fate_reason  # the traceback after it follows


# -- summary lines that repeat a step --------------------------------------------------------


def test_evaluation_lines_are_not_new_steps() -> None:
    s = _parse("fairseq_valid.log")
    assert (s.steps, s.last_step) == (6, 600)
    assert s.throughput.last == 113045  # not the validation's wps
    ev = _found((FIXTURES / "eval_repeat.log").read_text())
    assert [row[1] for row in ev.steps] == [1, 2, 3, 4, 5, 6]
    assert {m[1] for m in ev.metrics if m[2] == "eval_loss"} == {3, 6}  # at the steps they repeat
    hf = parse_text(
        "{'loss': 2.0, 'epoch': 0.5}\n{'eval_loss': 1.9, 'eval_runtime': 3.1, 'epoch': 0.5}\n"
        "{'loss': 1.8, 'epoch': 1.0}\n",
        strict=True,
    )
    assert hf.steps == 2


# -- what a file is ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content"),
    [("empty.log", "empty"), ("blank_lines.log", "empty"), ("binary.bin", "binary"),
     ("prose.txt", "prose"), ("unknown_shape.log", "prose"), ("torchtitan_running.log", "log"),
     ("nvidia_smi_table.txt", "log"), ("gzip_torchtitan.log.gz", "log")],
)  # fmt: skip
def test_the_summary_says_what_the_file_is(name: str, content: str) -> None:
    s = _parse(name)
    assert s.content == content
    if content != "log":
        assert s.fate == "unknown" and content in s.fate_reason


# -- numbers no column can hold ------------------------------------------------------------


def test_numbers_out_of_range_make_their_line_unread() -> None:
    s = _parse("huge_numbers.log")
    assert s.unread_lines == 3 and (s.steps, s.last_step) == (7, 7)
    assert s.unread_values == 1  # `loss 1e400` costs the loss, not step 4
    assert [u.line for u in s.unread] == [4, 5, 6, 7]
    assert {u.reason for u in s.unread} == {
        "step out of range", "rank out of range", "value out of range: loss",
    }  # fmt: skip
    found = _found((FIXTURES / "huge_numbers.log").read_text())
    assert all(abs(row[1]) <= INT64_MAX and row[0] <= INT64_MAX for row in found.steps)
    assert all(row[7] is None or row[7] < 1e300 for row in found.steps)
    # the same lines read by a learned template (the fast path) say the same
    fast = _found(STEPS + "step 9223372036854775808 | loss 1.0 | tok/s 100\n"
                  "step 11 | loss 1e400 | tok/s 14011\n")  # fmt: skip
    assert [u.reason for u in fast.unread] == ["step out of range", "value out of range: loss"]
    assert [row[1] for row in fast.steps][-1] == 11 and fast.steps[-1][7] is None
    assert parse_text("inf and nan as written: step 1 | loss nan | tok/s inf\n").steps == 1


# -- config items --------------------------------------------------------------------------


def test_config_items_from_banners_dumps_and_version_lines() -> None:
    launch = _found((FIXTURES / "config_launch.log").read_text())
    items = {c.key: c.value for c in launch.config}
    assert items["nproc_per_node"] == "8" and items["world_size"] == "8"
    assert (items["torch"], items["cuda"], items["nccl"]) == ("2.5.1+cu124", "12.4", "2.21.5")
    assert items["gpu.name"] == "NVIDIA H100 80GB HBM3"
    assert (items["arg.lr"], items["arg.token_budget"]) == ("0.0003", "49152")
    assert items["arg.compile_drafter"] == "True"
    hf = _parse("config_training_arguments.log").config
    assert hf["arg.learning_rate"] == "2e-05" and hf["arg.output_dir"] == "/out/run1"
    assert (hf["transformers"], hf["python"], hf["torch"]) == ("4.44.2", "3.10.12", "2.4.0+cu121")
    banner = _parse("config_hf_arguments.log").config
    assert banner["num_epochs"] == "3" and banner["total_steps"] == "30"
    smi = _parse("nvidia_smi_table.txt").config
    assert smi["gpu.name"] == "NVIDIA H100 80GB HBM3" and smi["gpu.count"] == "2"
    assert smi["driver"] == "550.54.15"


def test_a_config_item_is_found_once_and_again_when_it_changes() -> None:
    found = _found("torch version: 2.1.0\ntorch version: 2.1.0\ntorch version: 2.2.0\n")
    assert [(c.key, c.value, c.line) for c in found.config] == [
        ("torch", "2.1.0", 1), ("torch", "2.2.0", 3),
    ]  # fmt: skip
    assert not _found("path /usr/lib/python3.10/site-packages and cuda:0 device\n").config


# -- texts a person reads --------------------------------------------------------------------


def test_the_nccl_reason_names_the_operation_and_its_timeout() -> None:
    s = _parse("nccl_timeout.log")
    assert "ALLREDUCE" in s.fate_reason and "timeout 600000 ms" in s.fate_reason
    assert "terminate called" not in s.fate_reason
    assert s.last_event is not None and s.last_event.kind == "nccl"
    assert "ALLREDUCE" in s.last_event.text


def test_long_oom_lines_are_cut_with_an_ellipsis() -> None:
    detail = " ".join(f"block{i} of 123.45 MiB" for i in range(80))
    line = f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. {detail}\n"
    s = parse_text(STEPS + line, strict=True)
    assert s.fate == "oom" and "tried to allocate 2.00 GiB" in s.fate_reason
    assert s.last_event is not None
    text = s.last_event.text
    assert text.endswith("…") and len(text) <= 400
    assert not any(text[:-1].endswith(part) for part in ("123.", "12", "123.4"))


def test_recompiles_and_graph_breaks_are_the_story() -> None:
    s = _parse("recompile_running.log")
    assert s.last_event is not None and s.last_event.kind == "recompile"
    assert "recompile_limit (8)" in s.last_event.text and "last reason:" in s.last_event.text
    warnings = parse_text(
        (FIXTURES / "recompile_running.log").read_text() + "UserWarning: something minor\n",
        strict=True,
    )
    assert warnings.last_event is not None and warnings.last_event.kind == "recompile"
    logs = _found((FIXTURES / "recompiles_logs.log").read_text())
    kinds = [(e.kind, e.step) for e in logs.events]
    assert kinds == [("recompile", 1), ("graph_break", 2)]
    assert "seq_lengths[0] == 4096" in logs.events[0].text
    assert "Unsupported: call_method" in logs.events[1].text


def test_every_event_carries_the_step_before_it() -> None:
    found = _found((FIXTURES / "torchrun_oom.log").read_text())
    assert {e.step for e in found.events if e.kind in ("oom", "traceback")} == {5}
