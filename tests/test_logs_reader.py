"""The streaming reader: chunks, \\r and \\n, ANSI, invalid UTF-8, bounded memory, gzip and
streams; feed() returning what it found; saving and resuming; the summary on a copy."""

from __future__ import annotations

import gzip
import io
import json
import time
from pathlib import Path

import pytest

from ledger.logs import parse_file, parse_stream, parse_text
from ledger.logs.reader import LogReader
from ledger.logs.source import MAX_LINE, read_blocks
from ledger.model.logs import Found

FIXTURES = Path(__file__).parent / "fixtures" / "logs"


def _segments(data: bytes, chunk: int = 7) -> list[str]:
    from ledger.logs.lines import clean

    out: list[str] = []
    for text, _end, _complete in read_blocks(io.BytesIO(data), chunk_size=chunk):
        out.extend(s for part in clean(text).split("\n") for s in part.split("\r") if s)
    return out


def _read_all(text: str, *, cut: int | None = None, **options: object) -> tuple[Found, LogReader]:
    """Feed `text` (in two pieces, with a save and resume between them, when `cut`)."""
    reader = LogReader(rows=True, strict=True, **options)  # type: ignore[arg-type]
    found = Found()
    if cut is None:
        found.extend(reader.feed(text))
    else:
        found.extend(reader.feed(text[:cut]))
        saved = json.loads(json.dumps(reader.save(), allow_nan=False))
        resumed = LogReader.resume(saved, rows=True, strict=True, **options)
        assert resumed is not None
        reader = resumed
        found.extend(reader.feed(text[cut:]))
    found.extend(reader.finish())
    return found, reader


def test_splits_on_newline_and_carriage_return_across_chunks() -> None:
    data = b"a 1\r\nb 2\rc 3\nd"
    assert _segments(data, chunk=1) == ["a 1", "b 2", "c 3", "d"]
    assert _segments(data, chunk=1000) == ["a 1", "b 2", "c 3", "d"]


def test_offsets_are_resume_points_and_the_tail_is_marked() -> None:
    data = b"one\ntwo\rthree"
    items = list(read_blocks(io.BytesIO(data), chunk_size=4))
    assert items[-1] == ("three", len(data), False)
    assert all(complete for _t, _e, complete in items[:-1])
    assert items[-2][1] == len(b"one\ntwo\r")


def test_ansi_invalid_utf8_and_literal_caret_m() -> None:
    data = b"\x1b[31mred\x1b[0m \xff\xfe end\nx^My\n"
    assert _segments(data) == ["red \ufffd\ufffd end", "x", "y"]


def test_a_100_mb_line_without_newline_stays_bounded() -> None:
    class Endless(io.RawIOBase):
        def __init__(self, size: int) -> None:
            self.left = size

        def readable(self) -> bool:
            return True

        def readinto(self, b: bytearray) -> int:  # type: ignore[override]
            n = min(len(b), self.left)
            b[:n] = b"x" * n
            self.left -= n
            return n

    handle = io.BufferedReader(Endless(100 * 1024 * 1024), buffer_size=1 << 20)
    longest = 0
    total = 0
    for text, _end, _complete in read_blocks(handle):
        longest = max(longest, len(text))
        total += len(text.rstrip("\r"))
    assert total == 100 * 1024 * 1024
    assert longest <= MAX_LINE + 1


def test_line_numbers_count_newlines_not_redraws() -> None:
    s = parse_text(
        'a\rb\rTraceback (most recent call last):\n  File "x", line 1\nValueError: bad\n',
        strict=True,
    )
    assert s.last_event is not None and s.last_event.line == 1 and s.lines == 3


def test_feed_returns_rows_events_and_config_in_order() -> None:
    text = (
        "torch version: 2.5.1\n"
        "step 1 | loss 2.0 | tok/s 100\n"
        "step 2 | loss 1.9 | tok/s 110\n"
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    found, _ = _read_all(text)
    assert [r[:2] for r in found.steps] == [(0, 1), (0, 2)]
    assert [(r[6], r[7]) for r in found.steps] == [(100.0, 2.0), (110.0, 1.9)]
    assert [(c.key, c.value, c.line) for c in found.config] == [("torch", "2.5.1", 1)]
    assert [(e.kind, e.line, e.step) for e in found.events] == [("oom", 4, 2)]
    assert found.unread == [] and not found.has_nan


def test_rows_false_reads_the_summary_only() -> None:
    reader = LogReader(rows=False, strict=True)
    found = reader.feed("step 1 | loss 2.0 | tok/s 100\n")
    assert found.steps == [] and found.metrics == []
    assert reader.summary().steps == 1


def test_save_and_resume_reads_like_one_pass() -> None:
    text = (FIXTURES / "torchrun_oom.log").read_text()
    text += "".join(f"step {i} | loss 1.0 | tok/s {1000 + i}\n" for i in range(6, 40))
    whole, one = _read_all(text)
    places = (1, 100, text.index("[rank1]:     main()"), text.index("step 20 "), len(text) - 3)
    for place in places:
        cut = text.index("\n", place) + 1  # feed() takes whole lines
        split, two = _read_all(text, cut=cut)
        assert split.steps == whole.steps, cut
        assert split.metrics == whole.metrics, cut
        assert [e.to_dict() for e in split.events] == [e.to_dict() for e in whole.events], cut
        assert two.summary().to_dict() == one.summary().to_dict(), cut
    assert LogReader.resume({"version": -1}) is None
    assert LogReader.resume({"version": one.state.version, "steps": "junk"}) is None
    assert LogReader.resume("not a state") is None


def test_state_round_trips_through_json_with_nan_and_inf() -> None:
    reader = LogReader(rows=True, strict=True)
    reader.feed("step 1 | loss nan | tok/s inf\nstep 2 | loss 1.0 | tok/s 5\n")
    saved = reader.save()
    text = json.dumps(saved, allow_nan=False)  # what ingest stores in log_file.state
    again = LogReader.resume(json.loads(text))
    assert again is not None and again.save() == saved


def test_summary_reads_the_tail_on_a_copy() -> None:
    reader = LogReader(rows=True, strict=True)
    reader.feed("step 1 | loss 2.0 | tok/s 100\n")
    before = reader.save()
    s = reader.summary(tail="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB")
    assert s.fate == "oom" and "Tried to allocate" in s.fate_reason
    assert reader.save() == before  # the reader itself is unchanged
    assert reader.summary().fate == "running"
    assert reader.summary(stalled=True).fate == "stalled"


def test_summary_holds_the_position_and_what_was_read() -> None:
    s = parse_file(FIXTURES / "loading_weights.log", strict=True)
    assert (s.position.bar_desc, s.position.bar_n, s.position.last_step) == (
        "Loading weights",
        81,
        None,
    )
    data = s.to_dict()
    assert data["unread_lines"] == 0 and data["unread"] == []
    assert data["content"] == "log" and data["runs"] == 1
    assert data["position"] == {"last_step": None, "bar_desc": "Loading weights", "bar_n": 81}
    json.dumps(data, allow_nan=False)


def test_gzip_files_and_streams(tmp_path: Path) -> None:
    plain = parse_file(FIXTURES / "torchtitan_running.log", strict=True)
    packed = tmp_path / "train.log"  # gzip whatever the name says
    packed.write_bytes(gzip.compress((FIXTURES / "torchtitan_running.log").read_bytes()))
    assert parse_file(packed, strict=True).to_dict() == plain.to_dict()
    stream = io.BufferedReader(io.BytesIO(packed.read_bytes()))  # has peek(): stdin does
    assert parse_stream(stream, strict=True).to_dict() == plain.to_dict()

    class Pipe(io.RawIOBase):  # no peek(), no seek(): a pipe
        def __init__(self, data: bytes) -> None:
            self.data = data

        def readable(self) -> bool:
            return True

        def readinto(self, b: bytearray) -> int:  # type: ignore[override]
            n = min(len(b), len(self.data), 5)
            b[:n] = self.data[:n]
            self.data = self.data[n:]
            return n

    assert parse_stream(Pipe(packed.read_bytes()), strict=True).steps == plain.steps  # type: ignore[arg-type]
    raw = (FIXTURES / "torchtitan_running.log").read_bytes()
    assert parse_stream(Pipe(raw), strict=True).to_dict() == plain.to_dict()  # type: ignore[arg-type]


def test_a_gzip_cut_short_is_read_as_far_as_it_goes(tmp_path: Path) -> None:
    data = gzip.compress((FIXTURES / "torchtitan_running.log").read_bytes())
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    s = parse_file(cut, strict=True)
    assert 0 < s.steps < 20
    assert s.unread_lines == 1 and "cut short" in s.unread[0].reason


ADVERSARIAL = {
    "words": " ".join(["word"] * 390) + ": x 5",
    "table": "|  0 " + " " * 60000,
    "digits": "1" * 60000,
    "percent bars": "5%|" * 20000,
    "pairs": "a=1 " * 15000,
    "brackets": "[" * 60000,
    "exit codes": "exitcode: 1 " * 5000,
    "csv": ",".join(["1"] * 30000),
    "fractions": "1/2 tok/s " * 6000,
    "open bar": "50%|x| 1/2 [" + "0" * 60000,
    "frames": "Traceback (most recent call last):\n" + '  File "x", line 1\n' * 20000,
    "namespace": "Namespace(" + "a=1, " * 20000 + ")",
    "wrapped": ("x" * 99 + "\n" + "y" * 99 + "\n") * 3000,
    "prefixes": "[rank1]:" * 8000,
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_lines_finish_quickly(name: str) -> None:
    text = ADVERSARIAL[name]
    reader = LogReader(rows=True, strict=True)
    # This process's CPU time, not the clock's: a loaded machine stretches the wall time
    # (2 s of it for 'wrapped' beside other work), never the work a backtracking pattern does.
    started = time.process_time()
    for block, _end, _complete in read_blocks(io.BytesIO((text + "\n").encode())):
        reader.feed(block)
    reader.finish()
    reader.summary()
    assert time.process_time() - started < 5, name


@pytest.mark.parametrize(
    "name",
    ["torchtitan_running.log", "megatron_finished.log", "hf_trainer_finished.log",
     "generic_mixed.log", "huge_numbers.log", "restart_crash_relaunch.log",
     "fairseq_valid.log", "nanogpt_running.log", "prefix_srun_labels.log"],
)  # fmt: skip
def test_the_fast_path_reads_what_the_slow_path_reads(name: str) -> None:
    """Templates and a block's finditer (the fast path) against every line read the slow
    way, through the shape table, with nothing learned."""
    text = (FIXTURES / name).read_text()
    fast, fast_reader = _read_all(text)
    slow_reader = LogReader(rows=True, strict=True)
    slow_reader.splitter.look(text)  # the shared prefix is decided on the first lines
    slow = Found()
    for line in text.splitlines(keepends=True):
        slow_reader.shapes.templates.clear()
        slow_reader.shapes.last = None
        slow.extend(slow_reader.feed(line))
    slow.extend(slow_reader.finish())
    assert repr(fast.steps) == repr(slow.steps)  # repr: NaN is not equal to itself
    assert repr(fast.metrics) == repr(slow.metrics)
    assert [e.to_dict() for e in fast.events] == [e.to_dict() for e in slow.events]
    assert [u.to_dict() for u in fast.unread] == [u.to_dict() for u in slow.unread]
    assert fast_reader.summary().to_dict() == slow_reader.summary().to_dict()
