"""The one writer of a watched command's output file: `python -m ledger.watch.pump FILE`.

`watch -- COMMAND` gives the command a pipe, not the file. This small process reads the pipe
and writes the file, so that

- nothing unredacted is written beside the ledger: every byte passes through
  ledger.redact.stream.StreamRedactor on its way;
- the file is bounded: past `cap` bytes (`LEDGER_STREAM_CAP_MB`, 256 MiB by default) only a
  sample is kept (every SAMPLE_EVERY-th line, and every line that looks like an error), past
  1.25 × cap only the lines that look like an error, past 1.5 × cap nothing; a line says
  so each time;
- a flood cannot outrun it: when more arrives in a second than it can redact
  (`RATE_LIMIT_BYTES`), it keeps a sample for that second instead of falling behind (a
  command blocked on a full pipe would be slowed by ledger), and says so once;
- a trainer that `watch` leaves running (by design: see ledger.watch.roles) still has its
  output read and kept: the pump lives as long as the command's output, and ends with it.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from typing import IO

from ledger.redact.stream import StreamRedactor

DEFAULT_CAP_MB = 256
CAP_ENV = "LEDGER_STREAM_CAP_MB"
RATE_LIMIT_BYTES = 4 << 20  # redacted in full up to this much a second
SAMPLE_EVERY = 100
READ_BYTES = 1 << 16
# What is always kept, sampled or not: the lines a fate is read from.
_MATTERS = re.compile(
    rb"Traceback|Error|error|OOM|out of memory|NCCL|Killed|Terminated|signal|SIG[A-Z]+|"
    rb"exit ?code|exitcode|Segmentation|abort|CANCELLED|Finished|finished|completed",
)


_KEY_LINE = re.compile(rb"[A-Za-z0-9+/]{40,}={0,2}")


def cap_bytes() -> int:
    """The stream file's cap: LEDGER_STREAM_CAP_MB (MiB), else DEFAULT_CAP_MB."""
    raw = os.environ.get(CAP_ENV, "")
    try:
        mb = float(raw) if raw else float(DEFAULT_CAP_MB)
    except ValueError:
        mb = float(DEFAULT_CAP_MB)
    return max(int(mb * (1 << 20)), 1 << 16)


class Sampler:
    """Passes whole lines on: all of them while under the cap and the rate, then every
    SAMPLE_EVERY-th and those that matter; counts what it left out."""

    def __init__(
        self, out: Callable[[bytes], None], cap: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.out, self.cap, self.clock = out, cap, clock
        self.written = 0
        self.dropped_lines = 0
        self._pending = b""
        self._second = clock()
        self._this_second = 0
        self._seen = 0
        self._said: set[str] = set()

    def write(self, chunk: bytes) -> None:
        now = self.clock()
        if now - self._second >= 1.0:
            self._second, self._this_second = now, 0
        self._this_second += len(chunk)
        if self.written >= self.cap * 3 // 2:
            self._say("full", "the file reached 1.5 times its cap: nothing more is kept")
            self._pending = b""
            self.dropped_lines += chunk.count(b"\n")
            return
        sampling = self.written >= self.cap or self._this_second > RATE_LIMIT_BYTES
        if not sampling and not self._pending:
            self._emit(chunk)
            return
        data = self._pending + chunk
        cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        lines, self._pending = data[:cut], data[cut:]
        if len(self._pending) > READ_BYTES:  # a line that does not end is not kept whole
            self._pending = b""
        if not sampling:
            self._emit(lines)
            return
        if self.written >= self.cap:
            self._say("cap", f"the file reached its cap of {self.cap >> 20} MiB")
        else:
            self._say("rate", f"output came faster than {RATE_LIMIT_BYTES >> 20} MiB/s")
        kept = []
        for line in re.split(rb"(?<=[\r\n])", lines):
            if not line:
                continue
            self._seen += 1
            if _KEY_LINE.fullmatch(line.rstrip()):
                self.dropped_lines += 1  # a key's body alone is never kept in a sample
                continue
            sample = self._seen % SAMPLE_EVERY == 0 and self.written < self.cap * 5 // 4
            if sample or _MATTERS.search(line):
                kept.append(line)
            else:
                self.dropped_lines += 1
        if kept:
            self._emit(b"".join(kept))

    def close(self) -> None:
        if self._pending:
            self._emit(self._pending)
            self._pending = b""

    def _say(self, key: str, why: str) -> None:
        if key in self._said:
            return
        self._said.add(key)
        kept = (
            "" if key == "full" else
            f": from here only every {SAMPLE_EVERY}th line and lines that look like an error "
            "are kept"
        )  # fmt: skip
        self._emit(f"\n[ledger: {why}{kept}]\n".encode())

    def _emit(self, data: bytes) -> None:
        self.out(data)
        self.written += len(data)


def pump(source: IO[bytes], target: IO[bytes], cap: int) -> Sampler:
    """Read `source` to its end into `target`: sampled (bounded), then redacted."""

    def written(data: bytes) -> None:
        target.write(data)
        target.flush()  # watch reads the file as it grows

    redactor = StreamRedactor(written)
    sampler = Sampler(redactor.write, cap)
    # read1: what one read of the pipe gives, without waiting to fill the buffer
    read = getattr(source, "read1", source.read)
    while chunk := read(READ_BYTES):
        sampler.write(chunk)
    sampler.close()
    redactor.close()
    return sampler


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m ledger.watch.pump FILE  (the output arrives on stdin)")
        return 2
    with open(argv[0], "ab") as target:
        try:
            pump(sys.stdin.buffer, target, cap_bytes())
        except Exception as exc:  # said where its reader looks: the file (no terminal here)
            target.write(f"\n[ledger: the output stopped being kept: {exc!r}]\n".encode())
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
