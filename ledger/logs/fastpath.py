"""The reader's fast path: the step lines of the busiest learned template, found a block
at a time (one finditer) and read a run of consecutive lines at a time (one converter call
for the run, Steps.take_many for its bookkeeping); the lines between them go to the reader
one by one (bars, events, other shapes). A match glued inside a line (a step line after a
bar state that lost its newline) is not taken: that line is read whole by the slow path.
When another template reads most lines between the matches, it becomes the busy one.
Until a template is learned, the block is read a slice of lines at a time, so that the
fast path takes over within a few KB of the first step line rather than at the next block.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ledger.logs.numbers import Unreadable
from ledger.logs.templates import Template

if TYPE_CHECKING:
    from ledger.logs.reader import LogReader

_INF = float("inf")
_NINF = -_INF
_GROUPS = re.Match.groups  # mapped over a run of matches in C: no Python loop of its own
SWITCH_AFTER = 16  # gap lines another template read before the fast path takes it
UNLEARNED_SLICE = 4096  # characters read line by line before looking for a template again


class FastPath:
    """Reads blocks of text for a LogReader."""

    def __init__(self, reader: LogReader) -> None:
        self.r = reader

    def read(self, text: str) -> None:
        r = self.r
        n = len(text)
        pos = 0
        while pos < n:
            tpl = r.hot()
            if tpl is None:
                if r.state.lines.wrap:  # wrapped lines are joined across the whole block
                    r.lines(text, pos, n)
                    return
                # No template yet: a slice of lines, then look again, so that the rest of
                # the block (a first read is a whole chunk, 1 MiB) is not all read slowly.
                cut = text.find("\n", pos + UNLEARNED_SLICE) + 1 or n
                r.lines(text, pos, cut)
                pos = cut
                continue
            r.gap_hits = 0
            done = self._iterate(text, pos, tpl)
            if done >= n:
                return
            pos = done

    # -- a block, match by match --------------------------------------------------------------

    def _iterate(self, text: str, pos: int, tpl: Template) -> int:
        """Read text[pos:]; returns where another template takes over, else its length."""
        r = self.r
        n = len(text)
        batch: list[re.Match[str]] = []
        slow = r.blocks.open
        end = pos
        for m in tpl.block.finditer(text, pos):
            start, end = m.span()
            if start != pos:
                if start and text[start - 1] != "\n":
                    continue  # the shape glued inside a line: the line is read as a whole
                if batch:
                    self._take(batch, tpl, False)
                    batch = []
                r.lines(text, pos, start)
                if r.gap_hits > SWITCH_AFTER and r.shapes.last is not tpl:
                    return start  # another shape is the busy one now
                slow = r.blocks.open
            if slow:  # a traceback or a record over lines is open: it may take this line
                if batch:
                    self._take(batch, tpl, False)
                    batch = []
                r.lines(text, start, end + 1)
                pos = end + 1
                slow = r.blocks.open
                continue
            batch.append(m)
            pos = end + 1  # past its newline (past the end, on the text's last line)
        if batch:
            self._take(batch, tpl, batch[-1].end() == n)
        pos = min(pos, n)
        if pos < n:
            r.lines(text, pos, n)
        return n

    # -- a run of step lines ------------------------------------------------------------------

    def _take(self, batch: list[re.Match[str]], tpl: Template, ends_open: bool) -> None:
        """Lines a template matched, one after the other from st.line: converted at once,
        counted by Steps.take_many; a line that cannot be is read on its own. `ends_open`:
        the last one is the text's last line, without its newline yet."""
        r = self.r
        st = r.state
        first = st.line
        try:
            flats = tpl.convert_many(map(_GROUPS, batch))
            if r.rows:
                for flat in flats:
                    if _INF in flat or _NINF in flat or _INF in flat[-1] or _NINF in flat[-1]:
                        raise ValueError("inf")  # 1e400 is not inf as written: look closer
        except (ValueError, OverflowError):
            self._each(first, batch, tpl)
        else:
            try:
                r.steps.take_many(first, flats, tpl.names, tpl.unit, tpl.shape, tpl.summary)
            except Unreadable:
                self._each(first, batch, tpl)  # again, one by one, to count the bad one
            except Exception as exc:
                if r.strict:
                    raise
                r.rec.unread(first, type(exc).__name__)
        st.line = first + len(batch) - (1 if ends_open else 0)

    def _each(self, first: int, batch: list[re.Match[str]], tpl: Template) -> None:
        st = self.r.state
        for i, m in enumerate(batch):
            st.line = first + i
            self._one(m, tpl)

    def _one(self, m: re.Match[str], tpl: Template) -> None:
        r = self.r
        try:
            flat = tpl.convert_block(m.groups())
            if _INF in flat or _NINF in flat or _INF in flat[-1] or _NINF in flat[-1]:
                raise ValueError("inf")
        except (ValueError, OverflowError):
            r.segment(m.group(0))  # the slow path reads it or says why not
            return
        r.guard(r.steps.take, r.state.line, flat, tpl.names, tpl.unit, tpl.shape, tpl.summary)


__all__ = ["SWITCH_AFTER", "UNLEARNED_SLICE", "FastPath"]
