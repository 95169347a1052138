"""Frames between a training process and its writer process: a 4-byte length, then one
`marshal`-ed list of plain values (ints, floats, strings, None, tuples, dicts).

marshal is the cheapest serialiser Python has and the two ends are always the same
interpreter (the writer is started with `sys.executable`), so its version never differs.
An int of any size, NaN, a lone surrogate or a NUL in a string all travel as they are:
what cannot be stored is the writer's business, one value at a time.
"""

from __future__ import annotations

import logging
import marshal
import os
import struct
from typing import Any

HEADER = struct.Struct("<I")
PIPE_BYTES = 1 << 20  # asked of the kernel for each pipe; it may grant less
_F_SETPIPE_SZ = 1031  # Linux's fcntl command; absent elsewhere

log = logging.getLogger("ledger.hook")


def widen(fd: int) -> None:
    """Ask for a 1 MiB pipe buffer: a second of 1 ms steps fits while the reader sleeps."""
    try:
        import fcntl

        fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, OSError) as exc:  # the default buffer: slower, never wrong
        log.debug("ledger.hook: the pipe keeps its default buffer (%r)", exc)


def encode(items: list[Any]) -> bytes:
    body = marshal.dumps(items)
    return HEADER.pack(len(body)) + body


def send(fd: int, items: list[Any]) -> None:
    """Write one frame, whole (a pipe write may be partial past its buffer size)."""
    view = memoryview(encode(items))
    while view:
        written = os.write(fd, view)
        view = view[written:]


class Reader:
    """Reads frames from a file descriptor; `read()` returns None at end of file."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = bytearray()

    def _fill(self, size: int) -> bool:
        while len(self._buffer) < size:
            chunk = os.read(self.fd, max(65536, size - len(self._buffer)))
            if not chunk:
                return False
            self._buffer += chunk
        return True

    def read(self) -> list[Any] | None:
        if not self._fill(HEADER.size):
            return None
        (size,) = HEADER.unpack_from(self._buffer)
        if not self._fill(HEADER.size + size):
            return None  # a frame cut short: the sender died while writing it
        body = bytes(self._buffer[HEADER.size : HEADER.size + size])
        del self._buffer[: HEADER.size + size]
        items = marshal.loads(body)
        return items if isinstance(items, list) else []


def close(fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError as exc:  # closed already (the other side's end, a fork's copy)
            log.debug("ledger.hook: closing pipe %d: %r", fd, exc)
