"""No input makes the reader raise or hang: random bytes, and real shapes mutated, read in
strict mode (an internal exception fails the test instead of becoming an unread line).
The last tests plant a bug in a line handler and show that these tests then fail."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.logs.reader import LogReader
from ledger.logs.source import read_blocks
from ledger.model.logs import INT64_MAX
from ledger.model.terms import EVENT_KINDS, FATES

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
SAMPLES = [p.read_bytes()[:4000] for p in sorted(FIXTURES.iterdir()) if p.suffix != ".gz"]
SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def _read(data: bytes, chunk: int) -> dict[str, object]:
    """Read `data` in `chunk`-byte pieces, strict, saving and resuming at every block, and
    check what comes out is in range."""
    reader = LogReader(rows=True, strict=True)
    for text, _end, complete in read_blocks(io.BytesIO(data), chunk_size=chunk, max_line=64):
        found = reader.feed(text)
        for row in found.steps:
            assert 0 <= row[0] <= INT64_MAX and abs(row[1]) <= INT64_MAX
            assert row[5] is None or abs(row[5]) <= INT64_MAX  # tokens
        assert all(e.kind in EVENT_KINDS for e in found.events)
        if complete:
            saved = json.loads(json.dumps(reader.save(), allow_nan=False))
            resumed = LogReader.resume(saved, rows=True, strict=True)
            assert resumed is not None
            reader = resumed
    reader.finish()
    summary = reader.summary().to_dict()
    json.dumps(summary, allow_nan=False)
    return summary


@SETTINGS
@given(st.binary(max_size=3000), st.integers(min_value=1, max_value=97))
def test_random_bytes_never_raise(data: bytes, chunk: int) -> None:
    summary = _read(data, chunk)
    assert summary["fate"] in set(FATES) - {"stalled"}  # a file read once cannot be stalled


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SAMPLES)))
    for _ in range(draw(st.integers(min_value=0, max_value=12))):
        if not data:
            break
        at = draw(st.integers(min_value=0, max_value=len(data) - 1))
        action = draw(st.sampled_from(["flip", "cut", "dup", "insert", "delete"]))
        if action == "flip":
            data[at] = draw(st.integers(min_value=0, max_value=255))
        elif action == "cut":
            del data[at:]
        elif action == "dup":
            data[at:at] = data[at : at + draw(st.integers(min_value=1, max_value=200))]
        elif action == "insert":
            data[at:at] = draw(
                st.sampled_from(
                    [b"\r", b"\n", b"%|", b"[rank3]:", b"Traceback (most recent call last):\n",
                     b"step: ", b"nan", b"1,234,567", b"\x1b[2K", b"^M", b"|", b", ", b"]", b"/",
                     b"9223372036854775808", b"1e308", b"1e400", b"[rank99999999999999999999]:",
                     b"Namespace(", b"TrainingArguments(\n", b"[batch=3/10]:\n", b"\t loss: 1\n",
                     b"Epoch 3/5\n", b"WorkNCCL(", b"*** JOB 1 ON x CANCELLED AT y ***",
                     b"0: ", b"# ", b"[0042] ", b"{\"step\": ", b"loss=", b"\x00"]
                )
            )  # fmt: skip
        else:
            del data[at : at + draw(st.integers(min_value=1, max_value=50))]
    return bytes(data)


@SETTINGS
@given(mutated(), st.integers(min_value=1, max_value=4096))
def test_mutated_logs_never_raise(data: bytes, chunk: int) -> None:
    _read(data, chunk)


# -- the tests above can fail -------------------------------------------------------------


def _plant(monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    """Make a line handler of the reader raise on lines that mention a step."""
    original = getattr(LogReader, method)

    def broken(self: LogReader, *args: object) -> object:
        if any(isinstance(a, str) and "step" in a for a in args):
            raise RuntimeError("planted bug")
        return original(self, *args)

    monkeypatch.setattr(LogReader, method, broken)


def test_a_planted_bug_fails_the_property_test(monkeypatch: pytest.MonkeyPatch) -> None:
    _plant(monkeypatch, "_body")
    with pytest.raises(RuntimeError, match="planted bug"):
        test_mutated_logs_never_raise()


def test_a_planted_bug_is_counted_when_not_strict(monkeypatch: pytest.MonkeyPatch) -> None:
    _plant(monkeypatch, "_body")
    reader = LogReader(rows=True, strict=False)
    found = reader.feed("hello\nstep 1 loss 2.0 tok/s 3\nstep 2 loss 2.0 tok/s 3\nbye\n")
    assert [(u.line, u.reason) for u in found.unread] == [(2, "RuntimeError"), (3, "RuntimeError")]
    summary = reader.summary()
    assert summary.unread_lines == 2 and summary.unread[0].reason == "RuntimeError"
    with pytest.raises(RuntimeError):
        LogReader(strict=True).feed("step 1 loss 2.0 tok/s 3\n")


def test_strict_is_the_default_under_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_LOGS_STRICT", "1")
    assert LogReader().strict
    monkeypatch.setenv("LEDGER_LOGS_STRICT", "0")
    assert not LogReader().strict
