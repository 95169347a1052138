"""Redaction costs a training log none of its numbers: every log of the tests' corpus reads
to the same steps, metrics and fate after redaction as before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.logs.reader import LogReader
from ledger.redact import redact

CORPUS = Path(__file__).parent / "fixtures" / "logs"
LOGS = sorted(p for p in CORPUS.iterdir() if p.suffix in (".log", ".txt", ".csv", ".out"))


def _read(text: str) -> tuple[list[object], list[object], str]:
    reader = LogReader(rows=True, strict=False)
    found = reader.feed(text)
    found.extend(reader.finish())
    # NaN != NaN: compare the rows as text
    steps = [repr(row) for row in found.steps]
    metrics = [repr(row) for row in found.metrics]
    return steps, metrics, str(reader.summary().fate)


def test_the_corpus_is_there() -> None:
    assert len(LOGS) >= 40


@pytest.mark.parametrize("log", LOGS, ids=[p.name for p in LOGS])
def test_a_redacted_log_reads_to_the_same_numbers(log: Path) -> None:
    text = log.read_bytes().decode("utf-8", errors="replace")
    redacted = redact(text) or ""
    before, after = _read(text), _read(redacted)
    assert after[0] == before[0], "steps changed"
    assert after[1] == before[1], "metrics changed"
    assert after[2] == before[2], "fate changed"
