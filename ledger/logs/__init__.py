"""Understanding training logs: a streaming reader, metric-line shapes, progress bars,
events (tracebacks, OOM, NCCL, recompiles, signals), nvidia-smi output and the fate rule
table. Plain Python: nothing here knows about click or the database.

    from ledger.logs import parse_file
    summary = parse_file("train_eager_dynamiccopy.log")
    summary.fate, summary.throughput
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledger.logs.parser import LogParser, Summary

__all__ = ["parse_file", "parse_text"]


def parse_file(
    path: str | os.PathLike[str],
    *,
    patterns: list[str] | tuple[str, ...] = (),
    tokens_per_step: float | None = None,
    gpu_query: tuple[str, ...] | None = None,
) -> Summary:
    """Read a whole log (in bounded memory) and say what it amounts to."""
    from ledger.logs.parser import LogParser
    from ledger.logs.reader import read_blocks

    parser = LogParser(patterns=patterns, tokens_per_step=tokens_per_step, gpu_query=gpu_query)
    with open(path, "rb") as handle:
        for text, _end, _complete in read_blocks(handle):
            parser.feed(text)
    parser.finish()
    return parser.summary()


def parse_text(
    text: str,
    *,
    patterns: list[str] | tuple[str, ...] = (),
    gpu_query: tuple[str, ...] | None = None,
    stalled: bool = False,
) -> tuple[LogParser, Summary]:
    """Read text already in memory (a probe's output); returns the parser and its summary."""
    from ledger.logs.parser import LogParser
    from ledger.logs.reader import clean

    parser = LogParser(patterns=patterns, gpu_query=gpu_query)
    parser.feed(clean(text))
    parser.finish()
    return parser, parser.summary(stalled=stalled)
