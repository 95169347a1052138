"""The log reader: text in, what it found out (ledger.model.logs), its state kept.

    reader = LogReader(rows=True)
    for text in blocks:                  # whole lines (ledger.logs.source.read_blocks)
        found = reader.feed(text)        # step rows, metric rows, events, config items
    saved = reader.save()                # JSON-able; LogReader.resume(saved) reads on
    summary = reader.summary(tail=rest)  # the fate, with an unfinished tail; reader unchanged

The stages: the splitter (ledger.logs.lines) takes prefixes off and joins wrapped records;
the classifier (`_classify`) names each line's shape: a step line (a learned template or
the shape table), bar states, a traceback and what follows it, an event, nvidia-smi rows,
config items, the chatter of a run loading; the run state (ledger.logs.runstate) keeps what
they add up to. A line that makes a stage raise is counted as unread, with the exception's
type; in strict mode (tests, `LEDGER_LOGS_STRICT=1`) the exception goes on up.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ledger.logs import events as ev
from ledger.logs import jsonlines, metriclike, nvsmi, runconfig
from ledger.logs.blocks import Blocks
from ledger.logs.fastpath import FastPath
from ledger.logs.keys import normalize
from ledger.logs.lines import Splitter, clean
from ledger.logs.numbers import Unreadable
from ledger.logs.progress import find_bars
from ledger.logs.record import Recorder
from ledger.logs.runstate import RunState
from ledger.logs.shapes import LineShapes, compile_patterns
from ledger.logs.state import STATE_VERSION
from ledger.logs.steps import Steps
from ledger.logs.tables import Tables
from ledger.logs.templates import Template
from ledger.model.logs import Found, LogSummary
from ledger.model.terms import EventKind as K
from ledger.model.terms import LogEffect

_DIGIT = re.compile(r"\d")
_TOKENS_PER_ITER = re.compile(r"tokens per iteration will be: ([\d,]{1,20})")
_EPOCH_LINE = re.compile(r"^\s*Epoch[: ]\s*(\d{1,9})\s*/\s*(\d{1,9})\s*$")
_LOGLIKE = re.compile(
    r"\d\d:\d\d|\b(?:INFO|WARN|WARNING|ERROR|DEBUG|CRITICAL)\b|\[[^\]]{0,200}\]"
    r"|\w[=:]\s*[-+]?\.?\d|\d/\d|\d%|[{}|]|^\s+\S|\d\.\d"
)
_COLUMN = re.compile(r"[A-Za-z_][\w./\-]{0,80}")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|NaN|-inf")
_TABLE_KEYS = {"step", "global_step", "iteration", "iter", "loss", "train_loss", "epoch"}
# Lines of tools that repeat a run's figures after it: W&B's run summary and history.
_NOT_STEPS = ("wandb:", "wandb: ")
_SNIFF_CHARS = 1 << 16
_SNIFF_LINES = 400
UNKNOWN_SHAPE = "metrics in a shape the reader does not know"


def strict_default() -> bool:
    """Strict unless told otherwise by LEDGER_LOGS_STRICT (tests set it)."""
    return os.environ.get("LEDGER_LOGS_STRICT", "") not in ("", "0")


class LogReader:
    """Reads one log, incrementally. `rows=False` reads only what a summary needs."""

    def __init__(
        self,
        *,
        patterns: list[str] | tuple[str, ...] = (),
        tokens_per_step: float | None = None,
        gpu_query: tuple[str, ...] | None = None,
        rows: bool = True,
        strict: bool | None = None,
        state: RunState | None = None,
    ) -> None:
        self.patterns = tuple(patterns)
        self.user = compile_patterns(self.patterns)
        self.rows = rows
        self.strict = strict_default() if strict is None else strict
        self.gpu_query = gpu_query
        self.state = state if state is not None else RunState()
        if tokens_per_step:
            self.state.tokens_per_step = tokens_per_step
        st = self.state
        self.splitter = Splitter(st.lines)
        self.shapes = LineShapes(st, self.user, lean=not rows)
        self.rec = Recorder(st)
        self.steps = Steps(st, self.rec, rows=rows, flush_bar=self._flush_bar)
        self.blocks = Blocks(st, self.rec, self.steps, self.shapes)
        self.tables = Tables(st, self.rec, self.steps, self.shapes)
        self.tail = ""  # the last line fed, when it had no end yet
        self.fast = FastPath(self)
        self.gap_hits = 0

    # -- saving and resuming ---------------------------------------------------------------

    def save(self) -> dict[str, object]:
        """The state to go on reading from here, as JSON-able values."""
        return self.state.to_dict()

    @classmethod
    def resume(
        cls,
        saved: object,
        *,
        patterns: list[str] | tuple[str, ...] = (),
        tokens_per_step: float | None = None,
        gpu_query: tuple[str, ...] | None = None,
        rows: bool = True,
        strict: bool | None = None,
    ) -> LogReader | None:
        """A reader that goes on from `save()`'s output; None when it cannot be used (it
        was written by another version of the reader, or is damaged)."""
        if not isinstance(saved, dict) or saved.get("version") != STATE_VERSION:
            return None
        try:
            state = RunState.from_dict(saved)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        return cls(
            patterns=patterns, tokens_per_step=tokens_per_step, gpu_query=gpu_query, rows=rows,
            strict=strict, state=state,
        )  # fmt: skip

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, text: str) -> Found:
        """Read a block of whole lines (it ends after a `\\n` or `\\r`, or is the end of the
        input); returns what it found, in the log's order."""
        out = Found()
        self.rec.out = out
        text = clean(text)
        if not text:
            return out
        st = self.state
        if self.rows:  # SQLite stores NaN as NULL: the store looks closer when this is set
            out.has_nan = "nan" in text or "NaN" in text or "NAN" in text
        if st.content.chars < _SNIFF_CHARS:
            self._sniff(text)
        if not st.lines.decided:
            self.splitter.look(text)
        self._read(text)
        self.tail = "" if text[-1] in "\n\r" else text[text.rfind("\n") + 1 :][-4096:]
        return out

    def finish(self) -> Found:
        """The input ended: read a pending bar state, close open tracebacks and warnings,
        and read a last line cut short for the event it still names."""
        out = Found()
        self.rec.out = out
        st = self.state
        self.guard(self._flush_bar)
        if self.tail:
            found = ev.cut_event(self._untagged(self.tail))
            last = st.last_event
            if found is not None and not (
                last and last.line == st.line and last.kind == found.kind
            ):
                self.rec.event(st.line, None, found)
            self.tail = ""
        self.guard(self.blocks.close_all)
        return out

    def summary(self, *, tail: str = "", stalled: bool = False) -> LogSummary:
        """What the log amounts to if it ended here (after `tail`, the bytes after the last
        complete line, when there are any). This reader answers it itself, and is left as
        it was: it reads `tail` and closes what is open, then puts its state back."""
        from ledger.logs.summary import build

        with self._as_if_ended(tail):
            return build(self.state, stalled=stalled)

    def fate(self, *, tail: str = "", stalled: bool = False) -> tuple[str, str]:
        """The log's fate and its reason if it ended here (`summary`'s), the reader unchanged."""
        summary = self.summary(tail=tail, stalled=stalled)
        return summary.fate, summary.fate_reason

    @contextmanager
    def _as_if_ended(self, tail: str) -> Iterator[None]:
        """Read `tail` and end the input, as a reader resumed from `save()` and reading
        only what a summary needs would; then put back the state (in place: the parts
        hold it) and the parts' own memory, so reading goes on as if this never ran."""
        st, shapes, steps = self.state, self.shapes, self.steps
        kept = copy.deepcopy(st)  # exact: no round trip through JSON-able values
        parts = (
            self.tail, self.rec.out, self.rows, self.gap_hits, shapes.templates, shapes.last,
            shapes.lean, steps.rows, steps.ranks, self.splitter.shared, self.splitter.shared_rx,
        )  # fmt: skip
        # What a resumed reader starts with: the templates learned so far, no hot one yet.
        self.rows = steps.rows = False
        shapes.lean = True
        shapes.templates, shapes.last = list(shapes.templates), None
        steps.ranks = set(st.ranks)
        self.gap_hits = 0
        try:
            if tail:
                self.feed(tail)
            self.finish()
            yield
        finally:
            st.assign(kept)
            (
                self.tail, self.rec.out, self.rows, self.gap_hits, shapes.templates, shapes.last,
                shapes.lean, steps.rows, steps.ranks, self.splitter.shared,
                self.splitter.shared_rx,
            ) = parts  # fmt: skip

    def _untagged(self, raw: str) -> str:
        try:
            return self.splitter.split(raw)[2]
        except Unreadable:
            return raw

    # -- lines -----------------------------------------------------------------------------

    def _read(self, text: str) -> None:
        self.fast.read(text)  # ledger.logs.fastpath: step lines a block at a time

    def hot(self) -> Template | None:
        if self.state.lines.wrap or not self.shapes.templates:
            return None
        return self.shapes.last or self.shapes.templates[0]

    def lines(self, text: str, start: int, end: int) -> None:
        """Read text[start:end], whole lines (the last one may be the unfinished end)."""
        st = self.state
        parts = text[start:end].split("\n")
        if st.lines.wrap:
            parts = self.splitter.join(parts)
        last = len(parts) - 1
        for i, part in enumerate(parts):
            if part:
                if "\r" in part:
                    segs = [seg for seg in part.split("\r") if seg]
                    head = segs[-1][:8] if segs else ""
                    if (
                        len(segs) > 2 and "=" not in segs[-1] and "%|" in segs[-1]
                        and all(seg.startswith(head) for seg in segs)
                    ):  # fmt: skip
                        segs = segs[-1:]  # redraws of one bar: the last state says it all
                    for seg in segs:
                        self._redraw(seg)
                elif "%|" in part:
                    self._redraw(part)
                else:
                    if st.pend is not None:
                        self.guard(self._flush_bar)
                    self.segment(part)
            if i < last:
                st.line += 1

    def _redraw(self, seg: str) -> None:
        """A state of a redrawn bar: only the last of a run of states of one bar is read
        (all of them when they carry metrics, `loss=…`: each is a step)."""
        st = self.state
        i = seg.find("%|")
        if i > 0 and seg[-1] == "]" and not st.tracebacks and "=" not in seg[i:]:
            key = seg[:i].rstrip("0123456789. ")
            if st.pend is not None and key != st.pend_key:
                self.guard(self._flush_bar)
            st.pend, st.pend_key, st.pend_line = seg, key, st.line
            return
        if st.pend is not None:
            self.guard(self._flush_bar)
        self.segment(seg)

    def _flush_bar(self) -> None:
        st = self.state
        seg, line = st.pend, st.pend_line
        st.pend = None
        if seg is not None:
            self.segment(seg, line)

    def segment(self, raw: str, line: int | None = None) -> None:
        """One segment of a line (a line, or one redraw of it), read in a guard."""
        self.guard(self._classify, raw, self.state.line if line is None else line)

    def guard(self, fn: Callable[..., object], *args: object) -> None:
        """Run a stage; what raises makes the line unread (re-raised in strict mode)."""
        try:
            fn(*args)
        except Unreadable as exc:
            self.rec.unread(self.state.line, str(exc))
        except Exception as exc:
            if self.strict:
                raise
            self.rec.unread(self.state.line, type(exc).__name__)

    # -- the classifier --------------------------------------------------------------------

    def _classify(self, raw: str, line: int) -> None:
        prefix, rank, body = self.splitter.split(raw)
        st = self.state
        if st.content.lines < _SNIFF_LINES and body.strip():
            st.content.lines += 1
            if _LOGLIKE.search(body, 0, 400):
                st.content.loglike += 1
        ended = False
        if self.blocks.open:
            took, ended = self.blocks.consume(line, rank, body)
            if took:
                return
        if self.shapes.templates:
            read = self.shapes.match(body, rank)
            if read is not None:
                self.gap_hits += 1
                self.steps.take_read(line, read)
                return
        if "%" in body or "it/s" in body or "s/it" in body:
            bars, before, rest = find_bars(body)
            if bars and before.strip() and self.tables.could_head(before):
                row = before + bars[0].desc  # a table row ending in its epoch's bar (YOLO)
                if self.tables.take(line, rank, row, bars[0]):
                    if rest.strip():
                        self._body(line, rank, prefix, rest, False)
                    return
            elif bars and not before.strip():
                desc = bars[0].desc  # an evaluation's header ending in its own bar (YOLO)
                if (
                    len(desc.split()) >= 3 and self.tables.could_head(desc)
                    and self.tables.take(line, rank, desc, bars[0])
                ):  # fmt: skip
                    return
            if bars:
                if before.strip():
                    self._body(line, rank, prefix, before, ended)
                for bar in bars:
                    bar.line = line
                    self.steps.bar(bar)
                if rest.strip():
                    self._body(line, rank, prefix, rest, False)
                return
        self._body(line, rank, prefix, body, ended)

    def _body(self, line: int, rank: int | None, prefix: str, body: str, ended: bool) -> None:
        """A line that is not a bar state nor a known step shape: what is it?"""
        st = self.state
        if body.lstrip().startswith("Traceback (most recent call last)"):
            self.blocks.open_traceback(line, rank)
            st.content.evidence = True
            return
        if self.blocks.opens_block(line, rank, body):
            return
        if ev.hint(body) and self._events(line, rank, body, ended):
            return
        if runconfig.hint(body) and self._config(line, rank, body):
            return
        if "," in body and self._table(line, rank, body):
            return
        if self.tables.could_head(body) and self.tables.take(line, rank, body):
            return
        if self._gpu(body):
            return
        if ev.init_hint(body):
            self.rec.start(line, body, strong=False)
            self.rec.loading(line, body)
            return
        if body.startswith(_NOT_STEPS):
            return
        if _DIGIT.search(body) is None:
            if st.header_width or len(body) < 400:
                st.header_width = metriclike.header_width(body)  # a table's header, or not
            return
        m = _EPOCH_LINE.match(body)
        if m is not None:  # Keras' `Epoch 3/10` before the epoch's step line
            epoch = int(m.group(1))
            if st.epoch is not None and epoch < st.epoch and st.epoch_base is not None:
                # another fit() in the same log: its steps go on after the last fit's
                st.epoch_base -= st.epoch - epoch + 1
                st.total = None  # this fit's end, counted on from the last fit's
            st.epoch, st.epochs = epoch, int(m.group(2))
            st.epoch_zero = st.epoch_zero or st.epoch == 0
            return
        if st.tokens_per_step is None and "tokens per iteration" in body:
            t = _TOKENS_PER_ITER.search(body)
            if t is not None:
                st.tokens_per_step = float(t.group(1).replace(",", "")) or None
        if ev.test_summary(body) and self._last_epoch_done():
            self.rec.finished(ev.clip(body, 200), line)
        read = self.shapes.read(body, rank, prefix)
        if read is None and jsonlines.looks_like_json(body):
            pairs = jsonlines.as_pairs(body)  # numbers as strings, nested objects
            read = self.shapes.read(pairs, rank, "", learn_it=False) if pairs else None
            if read is not None:
                read.shape = "json lines"
        if read is not None:
            self.steps.take_read(line, read)
            return
        self._not_read(line, body)

    def _not_read(self, line: int, body: str) -> None:
        """A line no stage read: counted as unread when it looks like metrics (a shape the
        reader does not know: it must not say it read everything when it did not)."""
        st = self.state
        if metriclike.looks_like_metrics(body) or (
            st.header_width and metriclike.is_row(body, st.header_width)
        ):
            self.rec.unread(line, UNKNOWN_SHAPE, body)
            return
        if len(body) < 400:
            st.header_width = metriclike.header_width(body) or st.header_width

    def _events(self, line: int, rank: int | None, body: str, ended: bool) -> bool:
        """Events on the line; True when nothing else is to be read from it."""
        found = ev.classify(body)
        if ended:  # the exception line is the traceback's, not an error of its own
            found = [f for f in found if f.kind != K.ERROR]
            if not found:
                return True
        if not found:
            return False
        for f in found:
            if f.effect == LogEffect.RESTART:
                if not self.rec.start(line, body, strong=True):
                    self.rec.loading(line, body)
                continue
            self.rec.event(line, rank, f)
        return not all(f.kind == K.WARNING for f in found)

    def _config(self, line: int, rank: int | None, body: str) -> bool:
        if self.blocks.opens_args(line, rank, body):
            return True
        items = runconfig.read(body)
        st = self.state
        for key, value in items:
            self.rec.config(key, value, line)
            if key == "total_steps" and value.isdigit() and not st.total:
                st.total = int(value) or None
            elif key == "num_epochs" and value.isdigit():
                st.epochs = int(value) or None
        return bool(items)

    def _last_epoch_done(self) -> bool:
        st = self.state
        if not st.run.trained or not st.epochs or st.epoch is None:
            bar = st.bar
            return bool(bar and bar.done and self.steps._last_epoch(bar))
        return st.epoch >= st.epochs - (1 if st.epoch_zero else 0)

    # -- a metrics CSV (`step,loss,tokens_per_sec` then rows of numbers) ---------------------

    def _table(self, line: int, rank: int | None, body: str) -> bool:
        st = self.state
        cells = [c.strip() for c in body.split(",")]
        columns = st.table_columns
        if columns is not None:
            if len(cells) == len(columns) and all(not c or _NUMBER.fullmatch(c) for c in cells):
                text = " | ".join(f"{k}={v}" for k, v in zip(columns, cells, strict=True) if v)
                read = self.shapes.read(text, rank, "", learn_it=False)
                if read is not None:
                    self.steps.take_read(line, read)
                else:
                    self.rec.unread(line, UNKNOWN_SHAPE, body)
                return True
            st.table_columns = None  # the table ended
        if 2 <= len(cells) <= 64 and all(_COLUMN.fullmatch(c) for c in cells):
            names = {normalize(c) for c in cells}
            if names & _TABLE_KEYS:
                st.table_columns = cells
                st.content.evidence = True
                return True
        return False

    # -- nvidia-smi ------------------------------------------------------------------------

    def _gpu(self, body: str) -> bool:
        st = self.state
        if body.startswith("|"):
            if len(body) > 400:  # table rows are short; long ones are something else
                return False
            table, st.table_gpu, gpu = nvsmi.table_row(body, st.table_gpu)
            if gpu is not None:
                self._gpu_seen(gpu)
            return table
        if "," not in body or len(body) > 2000:
            st.csv_next = 0
            st.csv_fields = None
            return False
        if "memory." in body or "utilization." in body or body.startswith("index"):
            fields = nvsmi.header_fields(body)
            if fields is not None:
                st.csv_fields = list(fields)
                st.csv_next = 0
                return True
        if not body[:1].isdigit() and not (st.csv_fields and "name" in st.csv_fields):
            return False
        fields_ = tuple(st.csv_fields) if st.csv_fields else self.gpu_query
        gpu = nvsmi.csv_row(body, fields_, None if fields_ is not None else st.csv_next)
        if gpu is None:
            return False
        self._gpu_seen(gpu)
        st.csv_next = gpu.index + 1
        return True

    def _gpu_seen(self, gpu: nvsmi.Gpu) -> None:
        st = self.state
        if gpu.index < 0 or gpu.index > 4096:
            return
        st.gpus[gpu.index] = gpu
        st.content.evidence = True
        if gpu.name:
            self.rec.config("gpu.name", gpu.name, st.line)
        self.rec.config("gpu.count", str(len(st.gpus)), st.line)

    # -- what kind of text -----------------------------------------------------------------

    def _sniff(self, text: str) -> None:
        c = self.state.content
        sample = text[: _SNIFF_CHARS - c.chars]
        c.chars += len(sample)
        printable = sum(1 for ch in sample if ch >= " " or ch in "\t\n\r\x1b\x0c\x08")
        c.bad += len(sample) - printable + sample.count("\ufffd")
