"""Records that span lines: tracebacks (one per rank), warnings whose details follow
(a recompile's function and last reason, a graph break's reason, an NCCL message continued
on the next line), a step header with its values indented below (`[batch=12/4000]:`), and
argument dumps printed one `name=value,` a line."""

from __future__ import annotations

import re

from ledger.logs import events as ev
from ledger.logs import runconfig
from ledger.logs.record import Recorder
from ledger.logs.runstate import Pending, RunState
from ledger.logs.shapes import LineShapes
from ledger.logs.steps import Steps
from ledger.model.terms import EventKind as K
from ledger.model.terms import LogEffect, OpenRecord

_HEADER = re.compile(
    r"^\s*(?:\[epoch=(?P<epoch>\d+)\])?\[batch=(?P<step>\d+)(?:/(?P<total>\d+))?\]:\s*$"
    # a step alone on its line (`Step 100/1000`, `=== iteration 100 ===`, `[step 100]:`),
    # its values on the indented lines below
    r"|^[ \t]*(?:[\[(=#*>\-]+[ \t]*)?(?:[Gg]lobal[ _])?(?:[Ss]tep|STEP|[Ii]ter(?:ation)?|ITER"
    r"|[Uu]pdate)[ \t]*[:=#]?[ \t]*(?P<step2>\d{1,18})(?:[ \t]*(?:/|of)[ \t]*(?P<total2>\d{1,18}))?"
    r"[ \t]*[\])=#*<\-]*[ \t]*:?[ \t]*$"
)
_FRESH = re.compile(r"^(?:\[|\d{4}-\d\d-\d\d|[IWEF]\d{4} |[A-Z][a-z]+ \d|\w+:\s)")
_MAX_BLOCK = 64
_MAX_ARGS = 400


class Blocks:
    """Opens, feeds and closes the records that span lines."""

    def __init__(self, state: RunState, rec: Recorder, steps: Steps, shapes: LineShapes) -> None:
        self.state = state
        self.rec = rec
        self.steps = steps
        self.shapes = shapes

    @property
    def open(self) -> bool:
        st = self.state
        return bool(st.tracebacks) or st.follow is not None or st.block is not None

    def consume(self, line: int, rank: int | None, body: str) -> tuple[bool, bool]:
        """Feed `body` to what is open: (whether it took the line, whether a traceback
        ended on it, making the line its exception line)."""
        st = self.state
        if st.block is not None and self._block(line, rank, body):
            return True, False
        if st.follow is not None and self._follow(rank, body):
            return True, False
        tb = st.tracebacks.get(rank)
        if tb is not None:
            if self._traceback(line, rank, tb, body):
                return True, False
            return False, True
        return False, False

    # -- tracebacks --------------------------------------------------------------------------

    def open_traceback(self, line: int, rank: int | None) -> None:
        st = self.state
        old = st.tracebacks.get(rank)
        if old is not None:
            self._end_traceback(rank, old, "")
        st.tracebacks[rank] = Pending(OpenRecord.TRACEBACK, line, rank, step=st.last_step)

    def _traceback(self, line: int, rank: int | None, tb: Pending, body: str) -> bool:
        """Feed a line to an open traceback; False when the line is not part of it."""
        if not body or body[0] in " \t^~+|" or body.startswith("During handling"):
            stripped = body.strip()
            if stripped.startswith("File "):
                tb.frame = ev.clip(stripped, 300)
            return True
        if body.startswith("Traceback (most recent call last)"):
            self._end_traceback(rank, tb, "")
            self.open_traceback(line, rank)
            return True
        self._end_traceback(rank, tb, body)
        return False  # the exception line is also read as a line of its own (oom, nccl…)

    def _end_traceback(self, rank: int | None, tb: Pending, exc_line: str) -> None:
        self.state.tracebacks.pop(rank, None)
        exc_line = exc_line.strip()
        m = ev.EXCEPTION_LINE.fullmatch(exc_line) if exc_line else None
        if m is not None and ("." in m.group("type") or m.group("type")[:1].isupper()):
            effect = ev.exception_effect(m.group("type"), m.group("msg") or "")
            text = exc_line
        elif tb.frame:
            effect = LogEffect.CRASHED
            text = f"a traceback without its exception line; last frame: {tb.frame}"
        else:
            effect = LogEffect.CRASHED
            text = "a traceback cut off before its first frame"
        text = ev.clip(text, 700)
        if tb.frame:
            text = f"{text} (at {tb.frame})"
        # An OOM or NCCL exception line decides as such when it is read next; a crash
        # otherwise.
        found = ev.Found(
            K.TRACEBACK, text, effect if effect in (LogEffect.CRASHED, LogEffect.KILLED) else None
        )
        saved, self.state.last_step = self.state.last_step, tb.step
        try:
            self.rec.event(tb.line, rank, found)
        finally:
            self.state.last_step = saved

    # -- warnings whose details follow -------------------------------------------------------

    def _follow(self, rank: int | None, body: str) -> bool:
        st = self.state
        pending = st.follow
        assert pending is not None
        if rank != pending.rank:
            return False
        if pending.kind == OpenRecord.NCCL:
            if body and not _FRESH.match(body) and not body[0].isspace():
                pending.text = ev.nccl_more(pending.text, body)
                self.rec.close_follow()
                return True
            self.rec.close_follow()
            return False
        found = ev.detail(pending.kind, body)
        if found is None:
            pending.left -= 1
            if pending.left <= 0:
                self.rec.close_follow()
            return False
        what, text = found
        if what == "skip":
            return True
        if what == "function":
            pending.text += f"; {text}"
            return True
        pending.text += f"; last reason: {text}"
        self.rec.close_follow()
        return True

    # -- a step header with its values below, an argument dump -----------------------------

    def opens_block(self, line: int, rank: int | None, body: str) -> bool:
        m = _HEADER.match(body)
        if m is None:
            return False
        self._close_block()
        step, total = m.group("step") or m.group("step2"), m.group("total") or m.group("total2")
        head = f"step {step}" + (f"/{total}" if total else "")
        if m.group("epoch"):
            head += f" | epoch {m.group('epoch')}"
        self.state.block = Pending(OpenRecord.HEADER, line, rank, head)
        return True

    def opens_args(self, line: int, rank: int | None, body: str) -> bool:
        found = runconfig.opens_args(body)
        if found is None:
            return False
        items, more = found
        for key, value in items:
            self.rec.config(key, value, line)
        self.rec.start(line, body, strong=True)
        self.rec.loading(line, body)
        if more:
            self._close_block()
            self.state.block = Pending(OpenRecord.ARGS, line, rank, left=_MAX_ARGS)
        return True

    def _block(self, line: int, rank: int | None, body: str) -> bool:
        block = self.state.block
        assert block is not None
        if block.kind == OpenRecord.ARGS:
            if body.strip().startswith(")"):
                self.state.block = None
                return True
            item = runconfig.arg_line(body)
            block.left -= 1
            if item is None or block.left <= 0:
                self.state.block = None
                return item is not None
            self.rec.config(item[0], item[1], line)
            return True
        if body[:1] in " \t" and body.strip() and len(block.extra) < _MAX_BLOCK:
            block.extra.append(body.strip())
            return True
        self._close_block()
        return False

    def _close_block(self) -> None:
        block, self.state.block = self.state.block, None
        if block is None or block.kind != OpenRecord.HEADER or not block.extra:
            return
        text = " | ".join([block.text, *block.extra])
        read = self.shapes.read(text, block.rank, "", learn_it=False)
        if read is not None:
            read.shape = "record over lines"
            self.steps.take_read(block.line, read)
        else:
            self.rec.unread(block.line, "a record over lines the reader could not read", text)

    def close_all(self) -> None:
        """The input ended: close what is open."""
        st = self.state
        self._close_block()
        for rank, tb in list(st.tracebacks.items()):
            self._end_traceback(rank, tb, "")
        self.rec.close_follow()
