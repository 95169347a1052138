"""Bytes to text segments, in bounded memory.

A log is read in chunks and cut only after a `\\n` or a `\\r` (a carriage return ends one
state of a redrawn progress bar), so every block handed on holds whole segments and the
byte offset after it is a safe place to resume. Invalid UTF-8 becomes U+FFFD, ANSI
escapes go, and a literal `^M` (a pasted carriage return) counts as one. A run of more
than `max_line` bytes with neither terminator is cut into pieces of that size, so a
100 MB line with no newline costs no more memory than a short one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

CHUNK = 1 << 20
MAX_LINE = 1 << 16

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[@-Z\\-_])")


def clean(text: str) -> str:
    """Strip ANSI escapes and turn a literal `^M` into the carriage return it stood for."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "^M" in text:
        text = text.replace("^M", "\r")
    return text


def decode(data: bytes) -> str:
    return clean(data.decode("utf-8", "replace"))


def read_blocks(
    handle: BinaryIO,
    *,
    offset: int = 0,
    chunk_size: int = CHUNK,
    max_line: int = MAX_LINE,
    digest: object | None = None,
) -> Iterator[tuple[str, int, bool]]:
    """Yield `(text, end_offset, complete)` from `handle`, which is positioned at `offset`.

    `complete` is False only for the last item: the bytes after the last terminator
    (an unfinished line, or a bar still being redrawn). A piece cut from an overlong
    run ends with `\\r`, so that it is a segment of its own on the same physical line.
    `digest` (a hashlib object) is updated with every byte consumed by complete blocks.
    """
    carry = b""
    pos = offset  # the offset of carry's first byte
    update = getattr(digest, "update", None)
    while True:
        chunk = handle.read(chunk_size)
        if not chunk:
            break
        data = carry + chunk if carry else chunk
        cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        if cut:
            block = data[:cut]
            if update is not None:
                update(block)
            pos += cut
            yield decode(block), pos, True
            data = data[cut:]
        while len(data) > max_line:
            piece = _utf8_boundary(data, max_line)
            if update is not None:
                update(data[:piece])
            pos += piece
            yield decode(data[:piece]) + "\r", pos, True
            data = data[piece:]
        carry = data
    if carry:
        yield decode(carry), pos + len(carry), False


def _utf8_boundary(data: bytes, at: int) -> int:
    """`at`, moved back (at most three bytes) so that it does not split a UTF-8 character."""
    for back in range(4):
        i = at - back
        if i <= 0:
            break
        if (data[i] & 0xC0) != 0x80:
            return i
    return at
