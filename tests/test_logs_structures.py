"""The generic structures of the reader, each from hand-written examples: tables, JSON
lines with numbers as strings, records over lines, one step printed per device, number
suffixes, units named by the field, Keras progress lines over several fits — and the
test of what looks like metrics, which says what the reader must count when it cannot
read a line."""

from __future__ import annotations

import math

import pytest

from ledger.logs import parse_text
from ledger.logs.metriclike import header_width, is_row, looks_like_metrics, suggest
from ledger.logs.reader import LogReader
from ledger.model.logs import Found


def _found(text: str) -> Found:
    reader = LogReader(rows=True, strict=True)
    found = reader.feed(text)
    found.extend(reader.finish())
    return found


def _metrics(found: Found, step: int) -> dict[str, float]:
    return {name: value for _r, s, name, value in found.metrics if s == step}


# -- tables ----------------------------------------------------------------------------------

EPOCHS = (
    "epoch     train_loss  valid_loss  accuracy  time\n"
    "0         0.912345    0.801234    0.720000  00:12\n"
    "1         0.612345    0.551234    0.810000  00:11\n"
    "2         0.500000                0.820000  01:02\n"
)


def test_a_table_is_one_step_a_row_numbered_by_its_epoch() -> None:
    s = parse_text(EPOCHS, strict=True)
    assert (s.steps, s.last_step, s.shapes, s.unread_lines) == (3, 2, {"table": 3}, 0)
    found = _found(EPOCHS)
    assert [row[:2] for row in found.steps] == [(0, 0), (0, 1), (0, 2)]
    assert [row[7] for row in found.steps] == [0.912345, 0.612345, 0.5]  # train_loss
    assert _metrics(found, 0)["valid_loss"] == 0.801234
    assert [row[3] for row in found.steps] == [12, 11, 62]  # time, mm:ss, in seconds


def test_a_cell_left_empty_in_an_aligned_table_leaves_its_column_out() -> None:
    last = _metrics(_found(EPOCHS), 2)
    assert "valid_loss" not in last and last["accuracy"] == 0.82


def test_a_repeated_header_goes_on_with_the_same_columns() -> None:
    header = "step   loss    lr        tok/s\n"
    text = "".join(
        header + f"{i:<6} {2 - i / 10:.2f}    3.0e-04   {1000 + i}\n" for i in range(1, 5)
    )
    s = parse_text(text, strict=True)
    assert (s.steps, s.last_step, s.throughput.unit, s.throughput.last) == (4, 4, "tok/s", 1004)


def test_a_markdown_table() -> None:
    text = (
        "| step | loss | grad_norm |\n|------|------|-----------|\n"
        "| 10 | 2.50 | 0.9 |\n| 20 | 2.40 | 0.8 |\n"
    )
    found = _found(text)
    assert [(row[1], row[7]) for row in found.steps] == [(10, 2.5), (20, 2.4)]
    assert _metrics(found, 20) == {"grad_norm": 0.8}


YOLO = (
    "      Epoch    GPU_mem   box_loss   cls_loss  Instances       Size\n"
    "        1/2      2.51G      1.234      2.345         45        640: 100%|██████████| "
    "8/8 [00:03<00:00,  2.51it/s]\n"
    "                 Class     Images  Instances      Box(P          R      mAP50  "
    "mAP50-95): 100%|██████████| 2/2 [00:06<00:00,  3.21s/it]\n"
    "                   all        128        929      0.640      0.537      0.602      0.446\n"
)


def test_an_epoch_table_whose_rows_end_in_their_bar() -> None:
    text = YOLO + YOLO.replace("1/2", "2/2").replace("2.51it/s", "2.61it/s")
    s = parse_text(text, strict=True)
    assert (s.steps, s.last_step, s.total_steps, s.fate) == (2, 2, 2, "finished")
    # the training bar's rate is the throughput; the validation bar's 3.21 s/it is a trap
    assert (s.throughput.unit, s.throughput.first, s.throughput.last) == ("it/s", 2.51, 2.61)
    found = _found(text)
    row = found.steps[0]
    assert math.isclose(row[9], 2.51 * 1024)  # GPU_mem 2.51G, in MiB
    # the validation table's figures go to the epoch they follow, as metrics
    assert _metrics(found, 1)["val_map50_95"] == 0.446
    assert _metrics(found, 1)["cls_loss"] == 2.345


def test_a_row_the_reader_cannot_read_is_counted() -> None:
    text = "epoch   batch   iter\n1       20      20\n1       40      40\n"  # nothing measured
    s = parse_text(text, strict=True)
    assert (s.steps, s.unread_lines) == (0, 2)
    assert (s.unread[0].line, s.unread[0].reason, s.unread[0].text) == (
        2, "a table row the reader could not read", "1 20 20",
    )  # fmt: skip


def test_words_that_are_not_a_header() -> None:
    s = parse_text("the loss went down at each epoch\n1 2 3\n", strict=True)
    assert s.shapes == {} and s.steps == 0


# -- JSON lines ------------------------------------------------------------------------------


def test_json_lines_with_numbers_as_strings_and_nested_objects() -> None:
    text = "".join(
        f'{{"step": "{i}", "loss": "{2 - i / 10:.2f}", "lr": "3e-4", '
        f'"perf": {{"tokens_per_sec": "{1000 + i}.5"}}, "note": "warm", "done": false}}\n'
        for i in range(1, 4)
    )
    s = parse_text(text, strict=True)
    assert (s.steps, s.last_step, s.shapes) == (3, 3, {"json lines": 3})
    assert (s.throughput.unit, s.throughput.last) == ("tok/s", 1003.5)
    found = _found(text)
    assert [row[7] for row in found.steps] == [1.9, 1.8, 1.7]
    assert _metrics(found, 1)["lr"] == 3e-4


def test_json_that_is_not_metrics_is_not_a_step() -> None:
    s = parse_text('{"event": "checkpoint", "path": "/tmp/x"}\n', strict=True)
    assert (s.steps, s.unread_lines) == (0, 0)


# -- records over lines -------------------------------------------------------------------


@pytest.mark.parametrize(
    "header", ["Step {i}/100", "=== iteration {i} ===", "[step {i}]:", "global step {i}:"]
)
def test_a_step_line_then_its_fields_indented_below(header: str) -> None:
    text = "".join(
        header.format(i=i) + f"\n    loss = {2 - i / 10:.2f}\n    lr: 3e-4\n"
        f"    tok/s = {1000 + i}\n"
        for i in range(1, 5)
    )
    s = parse_text(text, strict=True)
    assert (s.steps, s.last_step, s.shapes) == (4, 4, {"record over lines": 4})
    found = _found(text)
    assert found.steps[0][1:2] + found.steps[0][6:8] == (1, 1001, 1.9)
    assert _metrics(found, 4) == {"lr": 3e-4}


# -- one step, several devices ------------------------------------------------------------


def test_a_step_printed_once_per_device_is_one_step_on_several_ranks() -> None:
    text = "".join(
        f"| Training Device=xla:0/{d} Epoch=1 Step={i * 20} Loss={2 - i / 10:.5f} "
        f"Rate={120 + d:.2f} GlobalRate={118 + i:.2f} Time=10:00:0{i}\n"
        for i in range(1, 4)
        for d in range(4)
    )
    s = parse_text(text, strict=True)
    assert (s.steps, s.ranks, s.last_step) == (3, 4, 60)
    assert s.throughput.unit == "samples/s"  # Rate: examples a second, per device
    found = _found(text)
    assert sorted({row[0] for row in found.steps}) == [0, 1, 2, 3]
    assert {name for *_x, name, _v in found.metrics} >= {"globalrate"}
    cuda = parse_text("step 1 device: cuda:5 loss 2.0 tok/s 100\n", strict=True)
    assert cuda.ranks == 1
    assert _found("step 1 device: cuda:5 loss 2.0 tok/s 100\n").steps[0][0] == 5


# -- numbers and units ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "unit", "value"),
    [
        ("step {i} | loss 2.0 | tok/s: 54.4K", "tok/s", 54_400),
        ("step {i} | loss 2.0 | throughput 1.2M tokens/s", "tok/s", 1_200_000),
        ("step {i} | loss 2.0 | tps 3.5G", "tok/s", 3.5e9),
        ("step {i} | loss 2.0 | tflops: 0.4T", "TFLOP/s", 4e11),
        ("| epoch 001 | {i}00 / 400 loss=2.1, wps=54.4K, ups=1.2", "words/s", 54_400),
        ("iter {i} loss 2.0 312 samples/sec", "samples/s", 312),
        ("it {i} loss=2.0 imgs/sec=301", "samples/s", 301),
        ("it {i} loss=2.0 examples_per_sec: 64.5", "samples/s", 64.5),
        ("step {i} loss 2.0 Rate=120.5", "samples/s", 120.5),
    ],
)
def test_suffixes_and_units_named_by_the_field(line: str, unit: str, value: float) -> None:
    text = "".join(line.format(i=i) + "\n" for i in range(1, 4))
    s = parse_text(text, strict=True)
    assert s.steps == 3 and s.throughput.unit == unit
    assert s.throughput.last is not None and math.isclose(s.throughput.last, value)


def test_ms_per_step_is_the_step_time() -> None:
    found = _found("".join(f"step {i} - loss: 2.0 - 45ms/step\n" for i in range(1, 4)))
    assert [row[3] for row in found.steps] == [0.045] * 3


# -- Keras progress lines, several fits --------------------------------------------------------


def _fit(epochs: int, per_epoch: int = 32) -> str:
    out = []
    for e in range(1, epochs + 1):
        states = [
            f"{n}/{per_epoch} ━━━━━━━━━━━━━━━━━━━━ 0s 4ms/step - accuracy: 0.5 - loss: 0.{70 - e}"
            for n in (1, per_epoch // 2, per_epoch)
        ]
        out.append(f"Epoch {e}/{epochs}\n" + "\r".join(states) + " - val_loss: 0.6\n")
    return "".join(out)


def test_keras_progress_lines_with_the_new_bar() -> None:
    s = parse_text(_fit(3), strict=True)
    assert (s.steps, s.last_step, s.total_steps, s.fate) == (9, 96, 96, "finished")
    assert s.shapes == {"keras progress": 9}
    assert _found(_fit(1)).steps[0][3] == 0.004  # 4ms/step


def test_several_fits_go_on_counting() -> None:
    s = parse_text(_fit(3) + _fit(2), strict=True)
    assert (s.steps, s.last_step, s.total_steps) == (15, 160, 160)
    running = parse_text(_fit(3) + _fit(2)[: len(_fit(1))], strict=True)
    assert running.fate == "running"  # the second fit's first epoch of two


# -- what looks like metrics --------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "ep#3 :: loss≈2.31 :: lr≈3e-4",
        '{"iteration": "12", "loss": "2.3"}',
        "2.31 loss / 0.91 acc @ep3",
        "LOSS->2.31 ACC->0.91",
        "epoch 3 step 100 grad 0.5",
        "1234 tok/s at iter 40",
    ],
)
def test_lines_that_look_like_metrics(line: str) -> None:
    assert looks_like_metrics(line)


@pytest.mark.parametrize(
    "line",
    [
        "saving checkpoint at step 100",
        "lr: 0.0003",
        "Epoch 3/10",
        "Downloading shard 3 of 12 (1.2 GB)",
        "torch version 2.5.1",
        "this document explains how to train a model in 3 steps",
    ],
)
def test_lines_that_do_not(line: str) -> None:
    assert not looks_like_metrics(line)


def test_rows_under_a_header_look_like_metrics() -> None:
    width = header_width("Ep   Loss   Acc   LR")
    assert width == 4
    assert is_row("3    2.31   0.91  3e-4", width)
    assert not is_row("hello world", width)
    assert header_width("the quick brown fox") == 0


def test_a_table_in_a_shape_the_stage_does_not_take_is_counted() -> None:
    # a header of two names is no table for the table stage, but its rows look like metrics
    text = "Loss  Acc\n2.31  0.91\n2.20  0.92\n"
    s = parse_text(text, strict=True)
    assert (s.steps, s.unread_lines) == (0, 2)


def test_the_suggested_pattern_reads_the_line() -> None:
    line = "ep#3 :: loss≈2.31 :: lr≈3e-4"
    pattern = suggest(line)
    assert "(?P<loss>" in pattern and "(?P<epoch>" in pattern
    s = parse_text(line + "\n", patterns=[pattern], strict=True)
    assert (s.steps, s.unread_lines) == (1, 0)


# -- long lines ---------------------------------------------------------------------------------


def test_a_long_step_line_is_read_and_a_longer_one_counted() -> None:
    many = " | ".join(f"metric_{k}: {k}.5" for k in range(200))  # about 3,600 characters
    text = "".join(f"step {i} | loss 2.0 | tok/s {1000 + i} | {many}\n" for i in range(1, 4))
    assert len(text.splitlines()[0]) > 2000
    s = parse_text(text, strict=True)
    assert (s.steps, s.unread_lines) == (3, 0)
    assert _metrics(_found(text), 2)["metric_199"] == 199.5
    huge = " | ".join(f"metric_{k}: {k}.5" for k in range(1500))  # past 16 KiB
    s = parse_text(STEP + f"step 2 | loss 2.0 | tok/s 1002 | {huge}\n", strict=True)
    assert (s.steps, s.unread_lines) == (1, 1)


def test_one_value_too_large_costs_that_value_not_the_line() -> None:
    text = STEP + "step 2 | loss 1.9 | grad_norm=1e400 | tok/s 1002\n"
    s = parse_text(text, strict=True)
    assert (s.steps, s.last_step, s.unread_lines, s.unread_values) == (2, 2, 0, 1)
    assert [(u.line, u.reason) for u in s.unread] == [(2, "value out of range: grad_norm")]
    found = _found(text)
    assert found.steps[1][6:8] == (1002, 1.9)
    assert "grad_norm" not in _metrics(found, 2)


STEP = "step 1 | loss 2.0 | tok/s 1001\n"
