"""No input makes the reader raise or hang: random bytes, and real shapes mutated."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.db.models import FATES
from ledger.logs.parser import LogParser
from ledger.logs.reader import read_blocks

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
SAMPLES = [p.read_bytes()[:4000] for p in sorted(FIXTURES.iterdir())]


def _read(data: bytes, chunk: int) -> dict[str, object]:
    parser = LogParser(keep_rows=True)
    for text, _end, complete in read_blocks(io.BytesIO(data), chunk_size=chunk, max_line=64):
        parser.feed(text)
        if complete:
            restored = LogParser(keep_rows=True)
            assert restored.restore(parser.snapshot())
    parser.finish()
    parser.take()
    return parser.summary().to_dict()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
                     b"step: ", b"nan", b"1,234,567", b"\x1b[2K", b"^M", b"|", b", ", b"]", b"/"]
                )
            )  # fmt: skip
        else:
            del data[at : at + draw(st.integers(min_value=1, max_value=50))]
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(), st.integers(min_value=1, max_value=4096))
def test_mutated_logs_never_raise(data: bytes, chunk: int) -> None:
    _read(data, chunk)
