"""The line splitter: text blocks to lines, what surrounds the program's output taken off.

- `clean()`: ANSI escapes go, a literal `^M` (a pasted carriage return) is one, `\\r\\n` is
  `\\n`. Lines are cut on `\\n`; a `\\r` inside a line separates redraws of a bar.
- Prefixes (`PREFIXES`): rank tags (`[rank3]:`, `[default3]:`, `[1,0]<stdout>:`,
  `(main_task pid=123)`) are taken off wherever they are, and give the line's rank;
  line numbers (`[0412] `, `  412| `, `412:`), comment markers (`# `), Slurm's `0: `
  labels and collectors' timestamps only when most lines share one.
- Hard-wrapped records: when lines are cut at a fixed width, a line of that width and the
  continuation after it are read as one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import pairwise

from ledger.logs.numbers import Unreadable, int64
from ledger.logs.state import Serial

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[@-Z\\-_])")


def clean(text: str) -> str:
    """ANSI escapes removed, `^M` and `\\r\\n` made plain. (One-character tests first: a
    two-character search of a block of redraws costs as much as reading it.)"""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "^" in text and "^M" in text:
        text = text.replace("^M", "\r")
    # A file of CRLF lines says so at once; a `\r` before `\n` elsewhere still reads right
    # (it ends a redraw), only without the fast path.
    if "\r\n" in text[:4096]:
        text = text.replace("\r\n", "\n")
    return text


@dataclass(frozen=True)
class Prefix:
    """Text a launcher, a collector or a paste puts before each line of output."""

    name: str
    pattern: str  # matched at the start of a line; group 1 is the rank when `rank`
    always: bool  # unmistakable: taken off wherever it appears
    rank: bool = False
    example: str = ""


PREFIXES: tuple[Prefix, ...] = (
    Prefix("rank tag", r"\[(?:rank|Rank|RANK|default)[ ]?(\d+)\]: ?", True, True,
           "`[rank3]:`, `[default3]:` (torchrun)"),
    Prefix("mpirun tag", r"\[(\d+),\d+\]<std(?:out|err)>: ?", True, True, "`[1,0]<stdout>:`"),
    Prefix("ray tag", r"\((?:[\w.]+ )?pid=\d+(?:, ip=[\d.]+)?\) ", True, False,
           "`(main_task pid=123) `"),
    Prefix("kubectl tag", r"\[pod/[^\]\s]{1,200}\] ", True, False,
           "`[pod/trainer-0/main] ` (kubectl logs --prefix)"),
    Prefix("bracketed line number", r"\[\d+\] ", False, False, "`[0412] `"),
    Prefix("piped line number", r" *\d+\| ", False, False, "`  412| `"),
    Prefix("line number", r"\d+:(?!\d) ?", False, False, "`412:`"),
    Prefix("rank label", r" *(\d+): ", False, True, "`0: ` (srun --label)"),
    Prefix("comment", r"# ?", False, False, "`# ` (output kept in a script)"),
    Prefix("compose service", r"[A-Za-z][\w.\-]{0,40} +\| ", False, False,
           "`trainer-1  | ` (docker compose)"),
    Prefix(
        "collector timestamp",
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) ",
        False, False, "`2024-06-01T10:00:00.123Z ` (CI, kubectl --timestamps)",
    ),
)  # fmt: skip
_BY_NAME = {p.name: p for p in PREFIXES}
_TAGS = tuple(p for p in PREFIXES if p.always)
_TAG_RX = [(re.compile(p.pattern), p) for p in _TAGS]
_SHARED = tuple(p for p in PREFIXES if not p.always and p.name != "rank label")
_SHARED_RX = {p.name: re.compile(p.pattern) for p in PREFIXES if not p.always}
_COLON_NUMBER = re.compile(r" *(\d+): ?")
_DECIDE_AFTER = 8  # non-empty lines seen before a shared prefix is decided for good
_SHARE = 0.6  # "most lines"
_SCAN = 64


@dataclass
class LineState(Serial):
    """What the splitter has learned about a log's lines."""

    seen: int = 0  # non-empty lines looked at to decide the shared prefix
    votes: dict[str, int] = field(default_factory=dict)
    numbers: list[int] = field(default_factory=list)  # the `412:` numbers seen, to tell labels
    shared: str | None = None  # the shared prefix decided on
    decided: bool = False
    wrap: int = 0  # the width records are hard-wrapped at (0: they are not)


class Splitter:
    """Takes prefixes off lines, and joins hard-wrapped records, over a LineState."""

    def __init__(self, state: LineState) -> None:
        self.state = state
        self.shared_rx: re.Pattern[str] | None = None
        self.shared: Prefix | None = None
        self._use(state.shared)

    def _use(self, name: str | None) -> None:
        self.shared = _BY_NAME.get(name) if name else None
        self.shared_rx = _SHARED_RX[name] if name else None

    # -- deciding --------------------------------------------------------------------------

    def look(self, text: str) -> None:
        """Learn the shared prefix and the wrap width from the first lines of `text`; with
        fewer than a few lines seen, decide for these lines only."""
        st = self.state
        if st.decided:
            return
        lines = [ln for ln in text[: 1 << 16].split("\n")[:_SCAN] if ln.strip()]
        for line in lines:
            if st.seen >= _SCAN:
                break
            st.seen += 1
            try:
                body = self._tag(line)[1]
            except Unreadable:
                body = line
            for p in _SHARED:
                if _SHARED_RX[p.name].match(body):
                    st.votes[p.name] = st.votes.get(p.name, 0) + 1
            m = _COLON_NUMBER.match(body)
            if m is not None and len(st.numbers) < _SCAN and len(m.group(1)) < 12:
                st.numbers.append(int(m.group(1)))
        final = st.seen >= _DECIDE_AFTER
        choice = self._choose() if st.seen >= 2 else None
        st.shared = choice
        self._use(choice)
        if final:
            st.decided = True
            st.wrap = _wrap_width(lines)

    def _choose(self) -> str | None:
        st = self.state
        best, votes = None, 0
        for p in _SHARED:
            n = st.votes.get(p.name, 0)
            if n > votes:
                best, votes = p.name, n
        if best is None or votes < _SHARE * st.seen:
            return None
        if best == "line number" and not _counting(st.numbers):
            return "rank label"  # `0: ` … `7: ` repeating: srun's rank labels
        return best

    # -- splitting -------------------------------------------------------------------------

    def split(self, line: str) -> tuple[str, int | None, str]:
        """(the prefix pattern taken off, the rank it names or None, what follows)."""
        pattern = ""
        rank = None
        rx, shared = self.shared_rx, self.shared
        if rx is not None and shared is not None:
            m = rx.match(line)
            if m is not None:
                pattern = shared.pattern
                if shared.rank:
                    rank = int64(int(m.group(1)), "rank")
                line = line[m.end() :]
        c = line[:1]
        if c == "[" or c == "(":
            tag, body, tag_rank = self._tag(line)
            if tag is not None:
                pattern += tag.pattern
                return pattern, tag_rank if tag_rank is not None else rank, body
        return pattern, rank, line

    @staticmethod
    def _tag(line: str) -> tuple[Prefix | None, str, int | None]:
        c = line[:1]
        if c != "[" and c != "(":
            return None, line, None
        for rx, p in _TAG_RX:
            m = rx.match(line)
            if m is not None:
                rank = int64(int(m.group(1)), "rank") if p.rank else None
                return p, line[m.end() :], rank
        return None, line, None

    # -- wrapped records ---------------------------------------------------------------------

    def join(self, lines: list[str]) -> list[str]:
        """`lines` with each hard-wrapped record joined into its first line; the lines it
        took are left empty, so that every line keeps its number. (A record cut where a
        block ends is read as two lines: once a MiB at most.)"""
        width = self.state.wrap
        out = list(lines)
        i = 0
        while i < len(out) - 1:
            piece = out[i]
            j = i
            while (
                len(piece) == width and j + 1 < len(out) and _continues(out[i], out[j + 1])
                and "\r" not in piece
            ):  # fmt: skip
                j += 1
                piece = out[j]
                out[i] += piece
                out[j] = ""
            i = j + 1
        return out


def _counting(numbers: list[int]) -> bool:
    """True when the numbers go up by one, line after line: line numbers, not ranks."""
    if len(numbers) < 2:
        return bool(numbers) and numbers[0] > 64
    if len(set(numbers)) < 0.9 * len(numbers):
        return False  # numbers that come back are ranks
    steps = sum(1 for a, b in pairwise(numbers) if b == a + 1)
    return steps >= 0.6 * (len(numbers) - 1)


def _head(line: str) -> str:
    """How a line begins, digits made alike: `[2024-01-01 1` and `[2025-03-09 2` agree."""
    return re.sub(r"\d", "0", line.lstrip()[:6])


def _continues(line: str, nxt: str) -> bool:
    """`nxt` carries on `line` (cut at the wrap width) rather than starting a record: it
    does not begin as the record did, nor as records do (a capital, a bracket)."""
    if not nxt.strip() or _head(nxt) == _head(line):
        return False
    c = nxt[0]
    if c == " ":  # cut before a space: a word of the record follows
        d = nxt[1:2]
        return d.islower() or d.isdigit()
    return c.islower() or c.isdigit() or c in ".,;:)]}/_%"


def _wrap_width(lines: list[str]) -> int:
    """The width lines are hard-wrapped at: the longest length (50 or more), held by at
    least two lines each followed by a line that does not begin like it."""
    lines = [ln for ln in lines if "\r" not in ln]  # bar redraws are long, not wrapped
    if len(lines) < 3:
        return 0
    width = max(len(ln) for ln in lines)
    if not 50 <= width <= 512:  # terminals and wrapping editors
        return 0
    at = [i for i, ln in enumerate(lines) if len(ln) == width]
    wrapped = sum(1 for i in at if i + 1 < len(lines) and _continues(lines[i], lines[i + 1]))
    if wrapped >= 2 and wrapped >= _SHARE * len(at):
        return width
    return 0
