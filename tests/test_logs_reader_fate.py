"""The reader answers its own fate: the tail read and the input ended on its own state, no
second reader built, and everything put back so that reading goes on as if never asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.logs.reader import LogReader
from ledger.logs.summary import build
from ledger.model.logs import Found, LogSummary

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
HEAD = (
    "step 1 | loss 1.990 | tok/s 14001\n"
    "step 2 | loss 1.980 | tok/s 14002\n"
    "Traceback (most recent call last):\n"
    '  File "train.py", line 88, in <module>\n'
)
TAIL = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
REST = "\nstep 3 | loss 1.970 | tok/s 14003\nstep 4 | loss 1.960 | tok/s 14004\n"


def _rebuilt(reader: LogReader, tail: str, stalled: bool = False) -> LogSummary:
    """How the fate was answered before: a second reader, from a copy of the state."""
    copy = LogReader(
        patterns=reader.patterns, gpu_query=reader.gpu_query, rows=False, strict=reader.strict,
        state=reader.state.copy(),
    )  # fmt: skip
    copy.shapes.templates = list(reader.shapes.templates)
    copy.tail = reader.tail
    if tail:
        copy.feed(tail)
    copy.finish()
    return build(copy.state, stalled=stalled)


def test_fate_is_answered_without_a_second_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = LogReader(rows=True, strict=True)
    reader.feed(HEAD)
    expected = _rebuilt(reader, TAIL)
    built = []
    original = LogReader.__init__

    def counting(self: LogReader, **options: object) -> None:
        built.append(options)
        original(self, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(LogReader, "__init__", counting)
    assert reader.fate(tail=TAIL) == ("oom", expected.fate_reason)
    assert "Tried to allocate" in expected.fate_reason
    assert reader.summary(tail=TAIL) == expected
    assert built == []  # no reader was made to answer


@pytest.mark.parametrize("stalled", [False, True])
def test_fate_matches_the_rebuilt_reader_on_every_fixture(stalled: bool) -> None:
    """Each fixture cut in the middle: the lines before read, the next one the tail."""
    logs = sorted(FIXTURES.glob("*.log"))
    assert len(logs) > 20
    for log in logs:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        half = len(lines) // 2
        for tail in ("", lines[half].rstrip("\n") if half < len(lines) else ""):
            reader = LogReader(rows=True, strict=False)
            reader.feed("".join(lines[:half]))
            expected = _rebuilt(reader, tail, stalled)
            assert reader.summary(tail=tail, stalled=stalled) == expected, log.name


def test_asking_leaves_the_reader_as_it_was() -> None:
    asked, never = LogReader(rows=True, strict=True), LogReader(rows=True, strict=True)
    found_asked, found_never = Found(), Found()
    found_asked.extend(asked.feed(HEAD))
    found_never.extend(never.feed(HEAD))
    before = json.dumps(asked.save(), sort_keys=True)
    lines, templates = asked.state.lines, list(asked.shapes.templates)
    assert asked.fate(tail=TAIL)[0] == "oom"
    assert asked.fate()[0] != "oom"  # the tail asked about was not kept
    assert json.dumps(asked.save(), sort_keys=True) == before
    assert asked.state.lines is lines and asked.splitter.state is lines  # put back in place
    assert asked.shapes.templates == templates and asked.rows and asked.steps.rows
    # Reading on gives what a reader never asked gives: rows, events, the summary.
    found_asked.extend(asked.feed(TAIL + REST))
    found_never.extend(never.feed(TAIL + REST))
    found_asked.extend(asked.finish())
    found_never.extend(never.finish())
    assert found_asked == found_never
    assert [row[1] for row in found_asked.steps] == [1, 2, 3, 4]
    assert asked.summary() == never.summary()
    assert asked.save() == never.save()


def test_a_failure_while_answering_puts_the_reader_back(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = LogReader(rows=True, strict=True)
    reader.feed(HEAD)
    before = reader.save()

    def broken(self: object) -> Found:
        raise RuntimeError("planted")

    monkeypatch.setattr(LogReader, "finish", broken)
    with pytest.raises(RuntimeError, match="planted"):
        reader.fate(tail=TAIL)
    monkeypatch.undo()
    assert reader.save() == before and reader.rows and not reader.shapes.lean
    assert reader.fate(tail=TAIL)[0] == "oom"


def test_a_new_run_in_the_log_splits_what_was_found_where_it_begins() -> None:
    """The reader marks where a new run begins (Found.restarts), with the fate the run
    before it ended with; fed in any pieces, the parts are the same: each run's rows."""
    first = "".join(f"step {i} | loss 2.0 | tok/s {14000 + i}\n" for i in range(1, 41))
    crash = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    second = "".join(f"step {i} | loss 2.0 | tok/s {11000 + i}\n" for i in range(1, 31))
    text = first + crash + second
    whole = LogReader().feed(text)
    lines = text.splitlines(keepends=True)
    pieces = Found()
    reader = LogReader()
    for at in range(0, len(lines), 7):  # seven whole lines a feed, as ingest's blocks come
        pieces.extend(reader.feed("".join(lines[at : at + 7])))
    for found in (whole, pieces):
        parts = found.parts()
        assert [len(p.steps) for p, _ in parts] == [40, 30]
        (before, restart), (after, last) = parts
        assert restart is not None and restart.fate == "oom" and last is None
        assert before.steps[-1][1] == 40 and after.steps[0][1] == 1
        assert {e.kind for e in before.events} >= {"oom"}
        assert [e.kind for e in after.events][:1] == ["restart"]
