"""Redacting output as it is written: what `watch -- COMMAND` and `ingest -` keep beside the
ledger passes here on its way to the file, so no unredacted byte is ever written there.

Output arrives in chunks cut anywhere. The redactor passes on whole lines only (a line ends
at `\\n` or at a bar's `\\r`), each batch redacted together with the tail of what came before
it (never written again, only read), so a secret's name at the end of one chunk still masks
its value at the start of the next, and a private key's body is masked however its lines
were cut. A line that never ends is held up to `MAX_LINE_BYTES`, then passed on in one piece,
redacted like any other.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable

from ledger.redact import redact_after

CONTEXT_CHARS = 16 * 1024  # longer than a private key block (a 4096-bit RSA key is ~3.2 KiB)
MAX_LINE_BYTES = 1 << 20


class StreamRedactor:
    """Takes bytes as a command prints them; hands `sink` redacted UTF-8 bytes, whole lines
    at a time. `close()` passes on what is left (a last line with no newline)."""

    def __init__(self, sink: Callable[[bytes], None]) -> None:
        self.sink = sink
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""  # text after the last line end, not yet passed on
        self._context = ""  # the original text just before `_pending`, for redaction only
        self.bytes_in = 0
        self.bytes_out = 0

    def write(self, chunk: bytes) -> None:
        self.bytes_in += len(chunk)
        self._pending += self._decoder.decode(chunk)
        cut = max(self._pending.rfind("\n"), self._pending.rfind("\r")) + 1
        if cut == 0 and len(self._pending) < MAX_LINE_BYTES:
            return
        self._pass_on(cut or len(self._pending))

    def close(self) -> None:
        self._pending += self._decoder.decode(b"", final=True)
        if self._pending:
            self._pass_on(len(self._pending), final=True)

    def _pass_on(self, cut: int, *, final: bool = False) -> None:
        lines = self._pending[:cut]
        if not final:
            # Lines shaped like a private key's body wait for the line that follows them: a
            # block whose BEGIN a viewer cut off is known for one only at its END.
            held = _key_lines_at_end(lines)
            if held and len(self._pending) < CONTEXT_CHARS:
                cut -= held
                lines = lines[: len(lines) - held]
        self._pending = self._pending[cut:]
        if not lines:
            return
        data = redact_after(self._context, lines).encode("utf-8", errors="surrogatepass")
        self.bytes_out += len(data)
        self.sink(data)
        self._context = (self._context + lines)[-CONTEXT_CHARS:]


_KEY_LINE = re.compile(r"(?:^|\n)(?:[A-Za-z0-9+/]{40,}={0,2}[ \t]*\r?\n)+\Z")


def _key_lines_at_end(lines: str) -> int:
    """How many characters at the end of `lines` are lines of base64 (a key's body)."""
    m = _KEY_LINE.search(lines)
    if m is None:
        return 0
    return len(lines) - m.start() - (1 if m.group().startswith("\n") else 0)
