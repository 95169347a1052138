"""Understanding training logs: a streaming reader in stages (line splitter, line
classifier, run state), step-line shapes as data, progress bars, events (tracebacks, OOM,
NCCL, recompiles, signals, restarts), config items, nvidia-smi output and the fate rule
table. Plain Python: nothing here knows about click or the database.

    from ledger.logs import parse_file
    summary = parse_file("train_eager_dynamiccopy.log")     # plain or gzip
    summary.fate, summary.throughput.last, summary.unread_lines

Incremental reading (what ingest and watch do) goes through ledger.logs.reader.LogReader.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from ledger.logs.reader import LogReader
    from ledger.model.logs import LogSummary

__all__ = ["parse_file", "parse_stream", "parse_text", "read_text"]


def parse_file(
    path: str | os.PathLike[str],
    *,
    patterns: list[str] | tuple[str, ...] = (),
    tokens_per_step: float | None = None,
    gpu_query: tuple[str, ...] | None = None,
    strict: bool | None = None,
) -> LogSummary:
    """Read a whole log (in bounded memory; gzip is read as what it holds)."""
    from ledger.logs.source import open_log

    with open_log(path) as handle:
        return parse_stream(
            handle, patterns=patterns, tokens_per_step=tokens_per_step, gpu_query=gpu_query,
            strict=strict,
        )  # fmt: skip


def parse_stream(
    handle: BinaryIO,
    *,
    patterns: list[str] | tuple[str, ...] = (),
    tokens_per_step: float | None = None,
    gpu_query: tuple[str, ...] | None = None,
    strict: bool | None = None,
) -> LogSummary:
    """Read a binary stream to its end (standard input: `ledger parse -`)."""
    from ledger.logs.reader import LogReader
    from ledger.logs.source import STREAM_ERRORS, open_stream, read_blocks

    reader = LogReader(
        patterns=patterns, tokens_per_step=tokens_per_step, gpu_query=gpu_query, rows=False,
        strict=strict,
    )  # fmt: skip
    try:
        for text, _end, _complete in read_blocks(open_stream(handle)):
            reader.feed(text)
    except STREAM_ERRORS as exc:  # a gzip cut short: what came before it is read
        reader.rec.unread(reader.state.line, f"compressed stream cut short ({type(exc).__name__})")
    return reader.summary()


def read_text(
    text: str,
    *,
    patterns: list[str] | tuple[str, ...] = (),
    gpu_query: tuple[str, ...] | None = None,
    strict: bool | None = None,
) -> LogReader:
    """A reader that has read `text` (a probe's output): ask it for `summary(stalled=…)`."""
    from ledger.logs.reader import LogReader

    reader = LogReader(patterns=patterns, gpu_query=gpu_query, rows=False, strict=strict)
    reader.feed(text)
    return reader


def parse_text(
    text: str,
    *,
    patterns: list[str] | tuple[str, ...] = (),
    gpu_query: tuple[str, ...] | None = None,
    stalled: bool = False,
    strict: bool | None = None,
) -> LogSummary:
    """What text already in memory amounts to, its position included."""
    reader = read_text(text, patterns=patterns, gpu_query=gpu_query, strict=strict)
    return reader.summary(stalled=stalled)
