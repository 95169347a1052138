"""The streaming reader: chunks, \\r and \\n, ANSI, invalid UTF-8, bounded memory."""

from __future__ import annotations

import io

from ledger.logs.parser import LogParser
from ledger.logs.reader import MAX_LINE, read_blocks


def _segments(data: bytes, chunk: int = 7) -> list[str]:
    out: list[str] = []
    for text, _end, _complete in read_blocks(io.BytesIO(data), chunk_size=chunk):
        out.extend(s for part in text.split("\n") for s in part.split("\r") if s)
    return out


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
    p = LogParser()
    p.feed('a\rb\rTraceback (most recent call last):\n  File "x", line 1\nValueError: bad\n')
    p.finish()
    s = p.summary()
    assert s.last_event["line"] == 1 and s.lines == 3


def test_snapshot_resume_equals_one_pass() -> None:
    text = "".join(f"step {i} | loss {1 / i:.4f} | tok/s {1000 + i}\n" for i in range(1, 200))
    whole = LogParser()
    whole.feed(text)
    whole.finish()
    first = LogParser()
    cut = text.index("step 100 ")
    first.feed(text[:cut])
    second = LogParser()
    assert second.restore(first.snapshot())
    second.feed(text[cut:])
    second.finish()
    a, b = whole.summary().to_dict(), second.summary().to_dict()
    assert (a["fate"], a["last_step"], a["throughput"]["last"]) == (
        b["fate"],
        b["last_step"],
        b["throughput"]["last"],
    )
    assert not LogParser().restore({"version": -1})


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
}


def test_adversarial_lines_finish_quickly() -> None:
    import time

    for name, text in ADVERSARIAL.items():
        parser = LogParser(keep_rows=True)
        started = time.perf_counter()
        for block, _end, _complete in read_blocks(io.BytesIO((text + "\n").encode())):
            parser.feed(block)
        parser.finish()
        assert time.perf_counter() - started < 5, name
