"""Bytes to text blocks, in bounded memory: files (plain or gzip) and streams (`-`).

A log is read in chunks and cut only after a `\\n` or a `\\r` (a carriage return ends one
state of a redrawn progress bar), so every block handed on holds whole lines and the byte
offset after it is a safe place to resume. Invalid UTF-8 becomes U+FFFD. A run of more
than `max_line` bytes with neither terminator is cut into pieces of that size, so a 100 MB
line with no newline costs no more memory than a short one.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections.abc import Iterator
from typing import BinaryIO, cast

CHUNK = 1 << 20
MAX_LINE = 1 << 16
GZIP_MAGIC = b"\x1f\x8b"
# What a damaged gzip stream raises part way: the blocks before it are read.
STREAM_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)


def is_gzip(path: str | os.PathLike[str]) -> bool:
    with open(path, "rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def open_log(path: str | os.PathLike[str]) -> BinaryIO:
    """A log file for reading, decompressed when it is gzip (whatever its name)."""
    if is_gzip(path):
        return cast(BinaryIO, gzip.open(path, "rb"))
    return open(path, "rb")


def open_stream(handle: BinaryIO) -> BinaryIO:
    """A binary stream (standard input) for reading, decompressed when it is gzip."""
    peek = getattr(handle, "peek", None)
    head = peek(2)[:2] if peek is not None else b""
    if peek is None:
        head = handle.read(2)
        handle = cast(BinaryIO, io.BufferedReader(_Prepend(head, handle)))
    if head == GZIP_MAGIC:
        return cast(BinaryIO, gzip.GzipFile(fileobj=handle, mode="rb"))
    return handle


class _Prepend(io.RawIOBase):
    """A stream whose first bytes were already read."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self.head = head
        self.rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]  # io's buffer type
        if self.head:
            n = min(len(b), len(self.head))
            b[:n] = self.head[:n]
            self.head = self.head[n:]
            return n
        data = self.rest.read(len(b))
        b[: len(data)] = data
        return len(data)


def decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


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
    # read1: a gzip stream cut short raises in read() and loses what it had decompressed
    read = getattr(handle, "read1", None) or handle.read
    while True:
        try:
            chunk = read(chunk_size)
        except STREAM_ERRORS:
            if carry:
                yield decode(carry), pos + len(carry), False
            raise
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
