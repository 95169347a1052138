"""The reader's hot paths read what the slow path reads: a redrawn bar's repeated postfix
is read once and still gives every state its step row."""

from __future__ import annotations

import pytest

from ledger.logs import pairs
from ledger.logs.reader import LogReader
from ledger.model.logs import Found


def _state(n: int, k: int, loss: str) -> str:
    return f"\rTraining: {n}%|#| {n}/100 [01:0{k}<99:00, 2.{k}it/s, loss={loss}, lr=3.0e-04]"


def _read(text: str) -> Found:
    reader = LogReader(rows=True)
    found = reader.feed(text)
    found.extend(reader.finish())
    return found


LOG = (
    "".join(_state(5, k, "2.5") for k in range(3))
    + "\n"
    + "".join(_state(6, k, "2.5") for k in range(2))
    + _state(7, 0, "2.25")
    + "\n"
)


def test_repeated_postfix_gives_every_state_its_row() -> None:
    found = _read(LOG)
    assert [(s[1], s[6], s[7]) for s in found.steps] == [
        (5, 2.0, 2.5), (5, 2.1, 2.5), (5, 2.2, 2.5), (6, 2.0, 2.5), (6, 2.1, 2.5), (7, 2.0, 2.25),
    ]  # fmt: skip
    assert [(m[1], m[2], m[3]) for m in found.metrics] == [
        (5, "lr", 3e-4), (5, "lr", 3e-4), (5, "lr", 3e-4), (6, "lr", 3e-4), (6, "lr", 3e-4),
        (7, "lr", 3e-4),
    ]  # fmt: skip


def test_repeated_postfix_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    texts: list[str] = []
    find = pairs.find

    def counted(line: str, *a: object) -> object:
        texts.append(line)
        return find(line, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(pairs, "find", counted)
    _read(LOG)
    assert texts == ["loss=2.5, lr=3.0e-04", "loss=2.25, lr=3.0e-04"]


def test_postfix_that_raises_is_not_kept() -> None:
    # A step counter out of int64's range makes the state unread, each time it is drawn.
    big = "9" * 30
    text = "".join(
        f"\rTraining: 5%|#| 5/100 [01:0{k}<99:00, 2.0it/s, step={big}, loss=2.5]" for k in range(2)
    ) + "\n"  # fmt: skip
    found = _read(text)
    assert found.steps == []
    assert len(found.unread) == 2


STEP = (
    "[rank{r}]: step {s:07d}/0100000 (0.01%) | loss: {loss:.6f} | lrm: 1.00 | dt: 456.70ms"
    " | tok/sec: 12,000 | mfu: 45.67 | total time: 0.01m\n"
)
FIRST_BLOCK = "".join(STEP.format(r=r, s=s, loss=2 + 1 / s) for s in range(1, 2501) for r in (0, 1))


def test_first_block_goes_to_the_fast_path_early(monkeypatch: pytest.MonkeyPatch) -> None:
    slow: list[int] = []
    classify = LogReader._classify

    def counted(self: LogReader, raw: str, line: int) -> None:
        slow.append(line)
        classify(self, raw, line)

    monkeypatch.setattr(LogReader, "_classify", counted)
    found = _read(FIRST_BLOCK)  # 5,000 lines, about 700 KB: one block, no template yet
    assert len(found.steps) == 5000
    assert 0 < len(slow) < 100  # the first slice, not the whole block


def test_first_block_reads_as_its_lines_one_by_one() -> None:
    whole = _read(FIRST_BLOCK)
    reader = LogReader(rows=True)
    each = Found()
    for line in FIRST_BLOCK.splitlines(keepends=True):
        each.extend(reader.feed(line))
    each.extend(reader.finish())
    assert whole.steps == each.steps
    assert whole.metrics == each.metrics
    assert whole.unread == each.unread == []
