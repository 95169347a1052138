"""Learned templates: the fast path of reading step lines.

When a line is read the slow way (ledger.logs.shapes) and turns out to be a step line, a
template is learned from it: a regex of the line's own literal text with one group per
value, and a converter written out for that template (one expression, no loop). The next
lines of the same shape cost one regex match and a few conversions; a whole block of them
costs one `finditer` (`Template.block`, which also matches the line's prefix).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ledger.logs.keys import (
    EPOCH,
    GPU_TIME,
    LOSS,
    MEM_ALLOC,
    MEM_RESERVED,
    METRIC,
    POSITION,
    RANK,
    STEP,
    STEP_TIME,
    THROUGHPUT,
    TOKENS,
    TOTAL,
    WALL,
    Value,
)
from ledger.logs.numbers import int64
from ledger.logs.pairs import wall_time

# A step line as a flat tuple: rank, step, total, position, epoch, then the row's columns
# (wall, step time, gpu time, tokens, throughput, loss, alloc, reserved), then the metrics.
Flat = tuple[Any, ...]
FLAT_RANK, FLAT_STEP, FLAT_TOTAL, FLAT_POSITION, FLAT_EPOCH = range(5)
FLAT_ROW = slice(5, 13)
FLAT_STEP_TIME, FLAT_THROUGHPUT = 6, 9
FLAT_METRICS = 13
_FLAT_OF = {WALL: 5, STEP_TIME: 6, GPU_TIME: 7, TOKENS: 8, THROUGHPUT: 9, LOSS: 10,
            MEM_ALLOC: 11, MEM_RESERVED: 12}  # fmt: skip
_LEAN = (RANK, STEP, TOTAL, POSITION, EPOCH, THROUGHPUT, STEP_TIME)
_LEAN_RATED = (RANK, STEP, TOTAL, POSITION, EPOCH, THROUGHPUT)

# Value patterns: looser than a number (float() checks; an inf it was not written as is
# caught by the reader), and possessive, so that a line of another shape fails fast.
_NUM = r"(?:[-+.\deE,]++|[nN]a[nN]|-?[iI]nf(?:inity)?)"
_INT = r"\d[\d,]*+"
_WALL = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d++)?+"
_LITERAL = re.compile(r"(?P<ws>[ \t]+)|(?P<num>\d+(?:[.,:]\d+)*)")


@dataclass
class Template:
    """One learned line shape."""

    regex: re.Pattern[str]  # fullmatch on a line's body (its prefix taken off)
    block: re.Pattern[str]  # finditer over a block of raw lines, prefix included
    convert: Callable[..., Flat]  # body groups (and the prefix's rank) → Flat
    convert_block: Callable[..., Flat]  # block groups → Flat
    convert_many: Callable[..., list[Flat]]  # block groups (any iterable of them) → Flats
    names: tuple[str, ...]  # the metrics' names, in the order of Flat's last item
    unit: str | None
    shape: str  # the line shape it was learned from
    summary: bool  # only evaluation figures: it repeats a step, it is not one


def learn(
    body: str,
    values: list[Value],
    unit: str | None,
    *,
    prefix: str,
    shape: str,
    summary: bool,
    lean: bool,
) -> Template | None:
    """A template for lines like `body` (read as `values`), behind prefix pattern `prefix`
    (whose first group, if any, is the rank); None when no regex can be made."""
    parts = []
    at = 0
    groups: list[Value] = []
    lean_targets: tuple[int, ...] = _LEAN
    if lean and any(v.target == THROUGHPUT for v in values):
        lean_targets = _LEAN_RATED  # the step time only stands in for a throughput not said
    for v in values:
        if v.start < at:
            continue
        parts.append(_literal(body[at : v.start]))
        capture = not lean or v.target in lean_targets
        parts.append(("(" if capture else "(?:") + _group(v) + ")")
        v.commas = "," in body[v.start : v.end]
        if capture:
            groups.append(v)
        at = v.end
    parts.append(_literal(body[at:]))
    pattern = "".join(parts) + "[ \\t]*+"
    try:
        regex = re.compile(pattern)
        prefix_groups = re.compile(prefix).groups if prefix else 0
        # No `^`: it would cost a test at every character. The reader skips matches that
        # do not begin a line.
        block = re.compile(f"(?m){prefix}{pattern}$")
    except re.error:
        return None
    if prefix_groups > 1:
        return None
    convert, _many, names = _compile(groups, 0, None)
    convert_block, convert_many, _ = _compile(groups, prefix_groups, 0 if prefix_groups else None)
    return Template(regex, block, convert, convert_block, convert_many, names, unit, shape, summary)


def _group(v: Value) -> str:
    if v.kind == "wall":
        return _WALL
    if v.kind == "int":
        return _INT
    return _NUM


def _literal(text: str) -> str:
    """The pattern for literal text between values: spacing and stray numbers may vary."""
    out = []
    at = 0
    for m in _LITERAL.finditer(text):
        out.append(re.escape(text[at : m.start()]))
        out.append("[ \\t]*+" if m.group("ws") else r"\d++(?:[.,:]\d++)*+")
        at = m.end()
    out.append(re.escape(text[at:]))
    return "".join(out)


def _compile(
    groups: list[Value], offset: int, rank_group: int | None
) -> tuple[Callable[..., Flat], Callable[..., list[Flat]], tuple[str, ...]]:
    """A converter written out for one template: `convert(g, rank=None)` → Flat, where `g`
    is the match's groups. A value it cannot read (`1,234` where the first line had `999`,
    an integer of thousands of digits) raises ValueError; the caller then reads the line
    the slow way. Steps and ranks are checked against 64 bits by the caller. Returns the
    function, one that converts a list of matches' groups at once (the hot path: no call
    per line), and the metrics' names."""
    slots = ["None"] * 13
    metrics: list[str] = []
    names: list[str] = []
    for i, v in enumerate(groups):
        t = f"g[{i + offset}]"
        if v.target in (RANK, STEP, TOTAL, POSITION):
            index = {RANK: 0, STEP: 1, TOTAL: 2, POSITION: 3}[v.target]
            slots[index] = f"int({t}.replace(',', ''))" if v.commas else f"int({t})"
            continue
        if v.target == WALL:
            slots[5] = f"_wall({t})"
            continue
        text = f"{t}.replace(',', '')" if v.commas else t
        num = f"float({text})"
        value = f"{num} * {v.scale!r}" if v.scale != 1.0 else num
        if v.kind == "memory":
            value = f"_mem({num})"
        if v.target == TOKENS:
            value = f"_tok({value})"
        if v.target == EPOCH:
            slots[4] = value
            metrics.append(value)
            names.append("epoch")
        elif v.target == METRIC:
            metrics.append(value)
            names.append(v.name)
        elif v.target in _FLAT_OF:
            slots[_FLAT_OF[v.target]] = value
    if rank_group is not None:
        slots[0] = f"int(g[{rank_group}])"
    elif slots[0] == "None":
        slots[0] = "rank"
    tail = f"({', '.join(metrics)},)" if metrics else "()"
    flat = f"({', '.join(slots)}, {tail})"
    body = (
        f"def convert(g, rank=None):\n return {flat}\n"
        f"def convert_many(gs, rank=None):\n return [{flat} for g in gs]\n"
    )
    scope: dict[str, Any] = {"_wall": wall_time, "_mem": _memory_auto, "_tok": _tokens}
    exec(compile(body, "<ledger.logs template>", "exec"), scope)
    return scope["convert"], scope["convert_many"], tuple(names)


def _tokens(x: float) -> int:
    if not math.isfinite(x):
        raise ValueError("tokens")
    return int64(int(x), "tokens")


def _memory_auto(x: float) -> float:
    return x * 1024.0 if abs(x) < 1024 else x  # a bare number: GiB if small, else MiB
