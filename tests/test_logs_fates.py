"""Fates by kind, one test each, from hand-written endings: C++ aborts, launchers' signal
lines, exceptions in worker threads, early stopping and end-of-training summaries. Each
says which rule and which line decided (`decided_by`), and the last decisive line wins:
training that went on after an ending makes it no longer the fate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

from ledger.logs import parse_text
from ledger.logs.fate import RULES

STEPS = "".join(f"step {i} | loss {2 - i / 100:.2f} | tok/s {14000 + i}\n" for i in range(1, 4))
LATER = "".join(f"step {i} | loss 1.90 | tok/s {14000 + i}\n" for i in range(4, 8))
RULE = {fate: i for i, (fate, _doc, _t) in reversed(list(enumerate(RULES, 1)))}

# ending: (fate, the line that decides, counted from the ending's first line)
ENDINGS = {
    "c++ abort after a cuda error": (
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: an illegal memory access was encountered\n"
        "Exception raised from c10_cuda_check_implementation at CUDAException.cpp:43\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57\n"
        "Aborted (core dumped)\n",
        "crashed", 2,
    ),
    "c10 error alone": ("c10::Error: unexpected tensor layout in the kernel\n", "crashed", 1),
    "device-side assert": (
        "../aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [0,0,0] "
        "Assertion `srcIndex < srcSelectDimSize` failed.\n"
        "CUDA error: device-side assert triggered\n",
        "crashed", 2,
    ),
    "terminate without an exception": (
        "terminate called without an active exception\n", "crashed", 1,
    ),
    "received signal 15": ("launcher: worker 1234 received signal 15, exiting\n", "killed", 1),
    "elastic death signal": (
        "WARNING:torch.distributed.elastic.agent.server.api:Received Signals.SIGTERM death "
        "signal, shutting down workers\n",
        "killed", 1,
    ),
    "elastic signal exception": (
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 4321 got "
        "signal: 15\n",
        "killed", 1,
    ),
    "mpirun": (
        "mpirun noticed that process rank 0 with PID 4321 on node n1 exited on signal 9 "
        "(Killed).\n",
        "killed", 1,
    ),
    "srun task terminated": ("srun: error: node17: task 0: Terminated\n", "killed", 1),
    "slurm step cancelled": (
        "slurmstepd: error: *** STEP 1234.0 ON node17 CANCELLED AT 2024-05-01T10:00:00 ***\n",
        "killed", 1,
    ),
    "lightning sigterm": ("[rank: 0] Received SIGTERM: 15\n", "killed", 1),
    "exception in a worker thread": (
        "Exception in thread Thread-3 (_worker_loop):\n"
        "Traceback (most recent call last):\n"
        '  File "loader.py", line 12, in _worker_loop\n'
        "ValueError: a batch of the wrong size\n",
        "crashed", 1,
    ),
    "uncaught exception reported": (
        "ERROR trainer: Uncaught exception in data worker: RuntimeError('boom')\n", "crashed", 1,
    ),
    "early stopping": ("Epoch 00012: early stopping\n", "finished", 1),
    "lightning early stopping": (
        "Monitored metric val_loss did not improve in the last 3 records. Best score: 0.412. "
        "Signaling Trainer to stop.\n",
        "finished", 1,
    ),
    "total time summary": ("Total time: 0:12:34\n", "finished", 1),
    "epochs completed in": ("10 epochs completed in 0.123 hours.\n", "finished", 1),
    "training complete in": ("Training complete in 12m 34s\n", "finished", 1),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ENDINGS))
def test_each_kind_of_ending_decides_the_fate_and_says_its_line(name: str) -> None:
    ending, fate, decides = ENDINGS[name]
    s = parse_text(STEPS + ending, strict=True)
    assert s.fate == fate, s.fate_reason
    assert s.decided_by is not None
    assert s.decided_by.rule == RULE[s.fate]
    assert s.decided_by.line == 3 + decides
    said = ending.splitlines()[decides - 1].strip()
    assert s.decided_by.text == said and f"(line {3 + decides})" in s.fate_reason


@pytest.mark.parametrize("name", sorted(ENDINGS))
def test_training_that_goes_on_after_an_ending_is_running(name: str) -> None:
    ending, _fate, _line = ENDINGS[name]
    s = parse_text(STEPS + ending + LATER, strict=True)
    assert s.fate == "running", (name, s.fate_reason)  # the last decisive line wins


def test_an_epoch_table_then_a_total_time_summary_is_finished() -> None:
    table = (
        "epoch     train_loss  valid_loss  accuracy  time\n"
        + "".join(
            f"{e:<9} {1 - e / 10:.6f}    {1.1 - e / 10:.6f}    0.{80 + e}      00:12\n"
            for e in range(4)
        )
        + "Total time: 0:00:48\n"
    )
    s = parse_text(table, strict=True)
    assert (s.fate, s.steps, s.last_step) == ("finished", 4, 3)
    assert s.decided_by is not None and s.decided_by.line == 6


def test_a_step_line_that_says_total_time_is_not_an_end() -> None:
    nanochat = "".join(
        f"step {i:05d}/00100 ({i}.00%) | loss: 2.5 | lrm: 1.00 | dt: 412.1ms | "
        f"tok/sec: 1,148,464 | mfu: 41.2 | total time: {i / 10:.2f}m\n"
        for i in range(1, 6)
    )
    s = parse_text(nanochat, strict=True)
    assert (s.fate, s.steps) == ("running", 5)


def test_config_lines_naming_early_stopping_end_nothing() -> None:
    s = parse_text("Using EarlyStopping callback with patience 3\n" + STEPS, strict=True)
    assert s.fate == "running"
    s = parse_text(STEPS + "early_stopping_patience: 3\n", strict=True)
    assert s.fate == "running"


def test_parse_json_says_which_rule_and_line_decided(tmp_path: Path) -> None:
    log = tmp_path / "abort.log"
    log.write_text(STEPS + ENDINGS["c++ abort after a cuda error"][0])
    data = json.loads(run_cli("parse", str(log), "--json").stdout)
    assert data["fate"] == "crashed"
    assert data["decided_by"] == {
        "rule": RULE["crashed"], "line": 5,
        "text": "what():  CUDA error: an illegal memory access was encountered",
    }  # fmt: skip
    running = tmp_path / "running.log"
    running.write_text(STEPS)
    data = json.loads(run_cli("parse", str(running), "--json").stdout)
    assert data["decided_by"] == {"rule": RULE["running"], "line": None, "text": ""}
