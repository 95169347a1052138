"""Output redacted as it is written (ledger.redact.stream): however a command's output is cut
into chunks, no secret reaches the sink, and ordinary output passes unchanged."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from secret_shapes import PEM_BODY, SHAPES, Shape, leaks

from ledger.redact import redact, strip_ansi
from ledger.redact.stream import MAX_LINE_BYTES, StreamRedactor

ORDINARY = (
    "Loading checkpoint shards:  40%|████      | 2/5 [00:03<00:04,  1.52s/it]\r"
    "Loading checkpoint shards: 100%|██████████| 5/5 [00:07<00:00,  1.48s/it]\n"
    "step 10 | loss 2.3412 | lr 3.0e-04 | tokens/s 14,203 | grad_norm 1.02\n"
    "step 20 | loss 2.2110 | lr 3.0e-04 | tokens/s 14,188 | grad_norm 0.98\n"
    "[rank0]: token budget 49152, max_tokens 4096, key_value_heads 8\n"
)


def _through(data: bytes, cuts: list[int]) -> bytes:
    out: list[bytes] = []
    redactor = StreamRedactor(out.append)
    last = 0
    for cut in sorted(set(cuts)):
        redactor.write(data[last:cut])
        last = cut
    redactor.write(data[last:])
    redactor.close()
    assert redactor.bytes_in == len(data)
    return b"".join(out)


@settings(max_examples=150, deadline=None)
@given(
    shape=st.sampled_from(SHAPES),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    pieces=st.integers(min_value=1, max_value=40),
)
def test_no_shape_survives_any_chunking(shape: Shape, seed: int, pieces: int) -> None:
    data = (ORDINARY + shape.text + "\n" + ORDINARY).encode()
    rng = random.Random(seed)
    cuts = [rng.randrange(len(data) + 1) for _ in range(pieces)]
    out = _through(data, cuts).decode()
    assert leaks(shape.secret, out) == [], out
    assert out.endswith(ORDINARY)


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096])
def test_ordinary_output_passes_unchanged(chunk: int) -> None:
    data = (ORDINARY * 50).encode()
    out = _through(data, list(range(0, len(data), chunk)))
    assert out == data


def test_a_secret_named_in_one_chunk_loses_its_value_in_the_next() -> None:
    out: list[bytes] = []
    redactor = StreamRedactor(out.append)
    redactor.write(b"step 1 loss 2.0\nexport HF_TOKEN=")
    assert b"".join(out) == b"step 1 loss 2.0\n"  # the unfinished line waits
    redactor.write(b"FakeStreamTokenValue0042\nstep 2 loss 1.9\n")
    redactor.close()
    assert b"".join(out) == b"step 1 loss 2.0\nexport HF_TOKEN=***\nstep 2 loss 1.9\n"


def test_a_private_key_without_its_begin_is_held_until_its_end() -> None:
    # A viewer (`tail -n 3`) can cut a key block's BEGIN off: its body is known only at END.
    body = PEM_BODY.encode() + b"\n"
    out = _through(body + b"-----END PRIVATE KEY-----\nok\n", [len(body) // 2, len(body)])
    assert leaks(PEM_BODY, out.decode()) == []
    assert out.endswith(b"-----END PRIVATE KEY-----\nok\n")


def test_ansi_codes_are_removed_as_redaction_reads_without_them() -> None:
    data = b"\x1b[32mstep 5 loss 1.5\x1b[0m\n"
    assert _through(data, [3, 9]) == strip_ansi(data.decode()).encode()


def test_a_line_that_never_ends_is_passed_on_at_its_limit() -> None:
    out: list[bytes] = []
    redactor = StreamRedactor(out.append)
    redactor.write(b"x" * (MAX_LINE_BYTES + 10))
    assert sum(map(len, out)) == MAX_LINE_BYTES + 10  # nothing held past the limit
    redactor.close()


def test_the_stream_equals_the_whole_redacted_at_once() -> None:
    text = ORDINARY + "".join(shape.text + "\n" for shape in SHAPES[:20]) + ORDINARY
    data = text.encode()
    assert _through(data, list(range(0, len(data), 333))).decode() == redact(text)
