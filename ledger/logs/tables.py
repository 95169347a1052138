"""Tables of metrics: a header row of names, then one row of numbers per epoch or step.

    epoch     train_loss  valid_loss  accuracy  time          (fastai)
    0         1.000000    1.100000    0.80      00:12

          Epoch    GPU_mem   box_loss   cls_loss       Size   (YOLO, then its bar)
           1/10      2.51G      1.234      2.345        640: 100%|███| 8/8 [00:03, 2.51it/s]
                     Class     Images      mAP50  mAP50-95): 100%|███| 1/1 [00:00, 3.21s/it]
                       all        128      0.602      0.446

A header is three or more names, one of them a metric word (loss, acc, epoch, step, lr,
ppl, mAP…), with no number among them; cells are split on runs of spaces or on `|`. A
row's cells go to the header's columns by position (a column left empty in an aligned
table leaves its cell out), so the values are named by their column. The table's own
step column (step, iter) numbers the rows, else its epoch column: one row, one step.

A row may end in the bar of its epoch (YOLO): the bar's rate is the row's throughput, and
the bar is not a training bar of its own. A table whose rows begin with a label (`all`, a
class name) or whose header names classes or mAP is an evaluation: its figures go to the
step they follow, as metrics, and its bar's `s/it` is never the run's throughput. A row
the key/value reader cannot read is unread, never silently passed over.
"""

from __future__ import annotations

import re

from ledger.logs.keys import normalize, rate_unit
from ledger.logs.progress import Bar
from ledger.logs.record import Recorder
from ledger.logs.runstate import RunState
from ledger.logs.shapes import LineShapes, Read
from ledger.logs.steps import Steps
from ledger.logs.templates import FLAT_THROUGHPUT

_WORD = re.compile(r"loss|acc|epoch|step|iter|ppl|perplexity|map\d*|\blr\b|f1|bleu", re.I)
_CELL = re.compile(r"[A-Za-z_(][\w./()%\-]*")
_NUMBER = re.compile(
    r"[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?[kKMGTB%]?|nan|inf|-inf|\d+/\d+", re.I
)
_CLOCK = re.compile(r"(?:(\d+):)?(\d{1,2}):(\d\d(?:\.\d+)?)")
_PROSE = {"the", "a", "an", "and", "of", "to", "is", "was", "in", "for", "with", "on", "at"}
_EVAL_HEADER = re.compile(r"^(?:class|images|box_p|mask_p|map\d*(?:_\d+)?)$", re.I)
_STEP_NAMES = ("step", "global_step", "iter", "iteration", "it", "steps")
_SEPARATOR = re.compile(r"^[\s|:+\-=]+$")
MAX_CELLS = 40
MAX_HEADER_CHARS = 400


class Tables:
    """Reads headers and rows of metric tables into steps (or evaluation metrics)."""

    def __init__(self, state: RunState, rec: Recorder, steps: Steps, shapes: LineShapes) -> None:
        self.state = state
        self.rec = rec
        self.steps = steps
        self.shapes = shapes

    def could_head(self, text: str) -> bool:
        """A cheap test: may `text` be a header (or is a table open)?"""
        return self.state.table_header is not None or (
            len(text) < MAX_HEADER_CHARS and _WORD.search(text) is not None
        )

    def take(self, line: int, rank: int | None, text: str, bar: Bar | None = None) -> bool:
        """True when `text` is a header or a row of the table it opens."""
        st = self.state
        if st.table_header is not None:
            if _SEPARATOR.match(text):
                return True  # `|---|---|` under a Markdown header
            cells = _cells(text)
            if self._row(line, rank, cells, bar):
                return True
        if len(text) < MAX_HEADER_CHARS and _WORD.search(text) is not None:
            header = _header(text)
            if header is not None:
                names, spans = header
                st.table_header, st.table_spans = names, spans
                st.header_width = len(names)  # rows left when the table is dropped: unread
                st.table_eval = bar is not None or any(_EVAL_HEADER.search(n) for n in names)
                st.content.evidence = True
                return True
        st.table_header = None
        return False

    def _row(self, line: int, rank: int | None, cells: list[tuple[int, int, str]],
             bar: Bar | None) -> bool:  # fmt: skip
        st = self.state
        header = st.table_header
        assert header is not None
        numbers = sum(1 for _s, _e, c in cells if _NUMBER.fullmatch(c.rstrip(":")))
        if numbers < 2 or numbers * 2 < len(cells) or abs(len(cells) - len(header)) > 2:
            return False
        labelled = not _NUMBER.fullmatch(cells[0][2].rstrip(":"))
        columns = _align(cells, st.table_spans, len(header))
        evaluation = st.table_eval or labelled
        names = list(header)
        if not evaluation and not any(n in _STEP_NAMES for n in names) and "epoch" in names:
            names[names.index("epoch")] = "step"  # one row an epoch: the epoch numbers it
        pairs = []
        for i, cell in columns:
            value = _value(cell)
            if value is None:
                continue
            name = names[i]
            if evaluation and not name.startswith(("val", "eval", "test")):
                name = f"val_{name}"
            pairs.append(f"{name}={value}")
        read = self.shapes.read(" | ".join(pairs), rank, "", learn_it=False) if pairs else None
        text = " ".join(c for _s, _e, c in cells)
        if read is None:
            self.rec.unread(line, "a table row the reader could not read", text)
            return True
        read.shape = "table"
        if bar is not None and bar.rate is not None and not evaluation:
            read = _with_rate(read, bar)
            st.unit = st.unit or read.unit
        self.steps.take_read(line, read)
        return True


def _header(text: str) -> tuple[list[str], list[tuple[int, int]]] | None:
    cells = _cells(text)
    if not 3 <= len(cells) <= MAX_CELLS:
        return None
    words = [c.rstrip(":") for _s, _e, c in cells]
    if any(not _CELL.fullmatch(w) or _NUMBER.fullmatch(w) for w in words):
        return None
    if any(w.lower() in _PROSE for w in words) or not any(_WORD.search(w) for w in words):
        return None
    names = [normalize(w) or f"column_{i}" for i, w in enumerate(words)]
    return names, [(s, e) for s, e, _c in cells]


def _cells(text: str) -> list[tuple[int, int, str]]:
    """The cells of a line with their spans: split on `|` when it has them, else on runs of
    whitespace."""
    if "|" in text:
        out = []
        pos = 0
        for part in text.split("|"):
            stripped = part.strip()
            if stripped:
                start = pos + part.index(stripped)
                out.append((start, start + len(stripped), stripped))
            pos += len(part) + 1
        return out
    return [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", text)]


def _align(
    cells: list[tuple[int, int, str]], spans: list[tuple[int, int]], width: int
) -> list[tuple[int, str]]:
    """Each cell's column: by order when the counts agree, else the header column it lines
    up with (most overlap, else the nearest right edge, as numbers are right-aligned)."""
    if len(cells) == width:
        return [(i, c) for i, (_s, _e, c) in enumerate(cells)]
    out: dict[int, str] = {}
    for s, e, c in cells:
        best = max(range(width), key=lambda i: (_overlap(s, e, spans[i]), -abs(e - spans[i][1])))
        out.setdefault(best, c)
    return sorted(out.items())


def _overlap(s: int, e: int, span: tuple[int, int]) -> int:
    return max(0, min(e, span[1]) - max(s, span[0]))


def _value(cell: str) -> str | None:
    cell = cell.rstrip(":")
    clock = _CLOCK.fullmatch(cell)
    if clock is not None:  # `00:12`, `1:02:03`: seconds
        hours = int(clock.group(1) or 0)
        return f"{hours * 3600 + int(clock.group(2)) * 60 + float(clock.group(3)):g}"
    return cell if _NUMBER.fullmatch(cell) else None


def _with_rate(read: Read, bar: Bar) -> Read:
    flat = read.flat
    if flat[FLAT_THROUGHPUT] is not None:
        return read
    unit = rate_unit(bar.unit or "") or bar.unit
    flat = (*flat[:FLAT_THROUGHPUT], bar.rate, *flat[FLAT_THROUGHPUT + 1 :])
    return Read(flat, read.names, unit, read.shape, read.summary, read.dropped)
