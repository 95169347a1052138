"""Reading the values of a metric line the slow way: `key: value`, `key=value`, `key value`
pairs (keys may be several words before a colon, or quoted as in a Python dict or JSON),
bare rates (`12345/13456 tok/s`, `123.4ms`), a timestamp at the head, and `n/total`
fractions. Shapes (ledger.logs.shapes) call it; templates make the next lines cheap.
"""

from __future__ import annotations

import calendar
import math
import re
from dataclasses import dataclass, field

from ledger.logs.keys import (
    EPOCH,
    LOSS,
    MEM_ALLOC,
    MEM_RESERVED,
    METRIC,
    POSITION,
    RANK,
    RATE_UNITS,
    SPACED_UNITS,
    STEP,
    STEP_KEYS,
    STEP_TIME,
    THROUGHPUT,
    TOKENS,
    TOTAL,
    UNIT_RANK,
    WALL,
    Value,
    is_eval,
    normalize,
    target,
)
from ledger.logs.numbers import NUM, Unreadable, int64, suffix_scale, to_int, written_float

_WORD = r"[A-Za-z_][\w./\-]*"
_KV = re.compile(
    rf"""(?<![\w./\-'"])['"]?
    (?:(?P<mkey>{_WORD}(?:[ ](?:{_WORD}|\([^()\n]{{1,24}}\))){{1,6}})['"]?[ \t]*[:=]
      |(?P<key>{_WORD})['"]?(?:[ \t]*[:=]|[ \t]))
    [ \t]*\[?(?P<val>{NUM})
    (?:(?P<total>[ \t]*/[ \t]*\d[\d,]*)
      |(?P<unit>%|[A-Za-z]+(?:/[A-Za-z]+)*(?![\w]))?
       (?P<sunit>[ ](?:{SPACED_UNITS})(?![\w/])(?![ \t]*[:=]?[ \t]*[-+]?\.?\d))?)
    (?:\((?P<pct>{NUM})%\))?""",
    re.VERBOSE,
)
_BARE = re.compile(
    r"(?<![\w./:\-])(?P<val>\d[\d,]*(?:\.\d+)?)(?:[ \t]*/[ \t]*(?P<val2>\d[\d,]*(?:\.\d+)?))?"
    r"[ \t]?(?P<unit>tok/s|tokens/s|tok/sec|samples/s|samples/sec|it/s|s/it|ms/step|s/step"
    r"|us/step|ms|sec)(?![\w/])"
)
# A device named on the line (`Device=xla:0/3`, `device: cuda:5`): the rank it is.
_DEVICE = re.compile(
    r"\b[Dd]evice[=:][ \t]*(?:(?:xla|cuda|gpu|tpu|npu|hpu|xpu):)?(?P<a>\d{1,6})"
    r"(?:/(?P<b>\d{1,6}))?\b"
)
_FRACTION = re.compile(r"(?<![\w./:\-])(?P<n>\d+)[ \t]*/[ \t]*(?P<total>\d+)(?![\w./])")
HEAD = re.compile(
    r"(?:[ \t]*(?:\[[^\]\n]{0,100}\]|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\]\n]{1,120}\]"
    r"|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
    r"|(?:\d{4}/)?\d\d/\d\d(?:/\d{2,4})? \d\d:\d\d:\d\d(?:[.,]\d+)?"
    r"|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|-|\|)[:,]?)*[ \t]*"
)
TIMESTAMP = re.compile(
    r"(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?:Z|[+-]\d\d:?\d\d)?"
)
_TS_PARTS = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")
MAX_LINE = 16384  # longer lines are not read for values; one that looks like metrics is unread

_ts_cache: dict[str, float] = {}


def wall_time(text: str) -> float | None:
    """A log timestamp as seconds since the epoch, read as UTC (logs rarely say their zone)."""
    second = text[:19]
    base = _ts_cache.get(second)
    if base is None:
        m = _TS_PARTS.match(text)
        if not m:
            return None
        y, mo, d, h, mi, sec = (int(m.group(i)) for i in range(1, 7))
        try:
            base = float(calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0)))
        except (ValueError, OverflowError):
            return None
        if len(_ts_cache) > 4096:
            _ts_cache.clear()
        _ts_cache[second] = base
    if len(text) > 20:
        return base + float("0." + text[20:])
    return base


@dataclass(slots=True)
class StepLine:
    """A step line's values."""

    rank: int | None
    step: int | None
    total: int | None
    values: dict[int, float]
    metrics: list[tuple[str, float]]
    epoch: float | None = None
    position: int | None = None
    unit: str | None = None
    eval_only: bool = False  # only evaluation figures: a summary, not a step
    dropped: list[str] = field(default_factory=list)  # values no float holds (`1e400`)


def find(line: str, given: list[Value], unit: str | None) -> tuple[list[Value], str | None]:
    """The values of `line`: those `given` by a shape, then the head's timestamp, pairs and
    bare rates around them. Returns the values (in line order) and the log's unit, chosen
    from this line when the log has none yet."""
    values = list(given)
    taken = [(v.start, v.end) for v in given]
    head = HEAD.match(line)
    head_end = head.end() if head else 0
    tm = TIMESTAMP.search(line, 0, head_end) if head_end else None
    if tm is not None and not _overlaps(tm.start(), tm.end(), taken):
        values.append(Value(tm.start("ts"), tm.end("ts"), WALL, kind="wall"))
    if "evice" in line and not any(v.target == RANK for v in values):
        d = _DEVICE.search(line)
        if d is not None:
            group = "b" if d.group("b") else "a"
            values.append(Value(d.start(group), d.end(group), RANK, kind="int"))
            taken.append((d.start(), d.end()))
    for m in _KV.finditer(line, head_end):
        if _overlaps(m.start("val"), m.end("val"), taken):
            continue
        found = _pair(m.group("mkey") or m.group("key"), m)
        if found:
            values.extend(found)
            taken.append((m.start(), m.end()))
    for m in _BARE.finditer(line, head_end):
        if not _overlaps(m.start(), m.end(), taken):
            values.extend(_bare(m))
            taken.append((m.start(), m.end()))
    if not any(v.target in (STEP, POSITION) for v in values):
        for m in _FRACTION.finditer(line, head_end):
            if not _overlaps(m.start(), m.end(), taken):
                values.append(Value(m.start("n"), m.end("n"), POSITION, kind="int"))
                values.append(Value(m.start("total"), m.end("total"), TOTAL, kind="int"))
                break
    values = _best_per_target(values)
    unit = _choose_unit(values, unit)
    values.sort(key=lambda v: v.start)
    return values, unit


def convert(texts: list[str | None], values: list[Value], unit: str | None) -> StepLine:
    """A StepLine from the texts of `values` (as found, or as a template matched them)."""
    out: dict[int, float] = {}
    metrics: list[tuple[str, float]] = []
    rank = step = total = position = None
    epoch = None
    measured = False
    evaluated = False
    dropped: list[str] = []
    for text, v in zip(texts, values, strict=True):
        if text is None:
            continue
        t = v.target
        if t in (RANK, STEP, TOTAL, POSITION):
            n = _int(text, "rank" if t == RANK else "step")
            if n is None:
                continue
            if t == RANK:
                rank = n
            elif t == STEP:
                step = n
            elif t == TOTAL:
                total = n
            else:
                position = n
        elif t == WALL:
            w = wall_time(text)
            if w is not None:
                out[WALL] = w
        else:
            try:
                x = written_float(text)
            except Unreadable:  # `grad_norm=1e400`: that value is lost, not the line
                dropped.append(v.name or _COLUMN_NAMES.get(t, "value"))
                continue
            if x is None:
                continue
            if v.kind == "memory":
                x = x * 1024.0 if abs(x) < 1024 else x  # a bare number: GiB if small, else MiB
            elif v.scale != 1.0:
                x *= v.scale
            if t == TOKENS:
                if not math.isfinite(x):
                    continue
                out[TOKENS] = float(int64(int(x), "tokens"))
            elif t == METRIC:
                metrics.append((v.name, x))
                if is_eval(v.name):
                    evaluated = True
                else:
                    measured = True
            elif t == EPOCH:
                epoch = x
                metrics.append(("epoch", x))
            else:
                out[t] = x
                measured = True
    return StepLine(
        rank,
        step,
        total,
        out,
        metrics,
        epoch,
        position,
        unit,
        evaluated and not measured,
        dropped,
    )


def _int(text: str, what: str) -> int | None:
    """A step or rank: an int within 64 bits, or the line is unread (`1e308`, 2**63)."""
    cleaned = text.replace(",", "")
    if cleaned.isdigit():
        if len(cleaned) > 19:
            raise Unreadable(f"{what} out of range")
        return int64(int(cleaned), what)
    return to_int(cleaned, what)


def _overlaps(start: int, end: int, taken: list[tuple[int, int]]) -> bool:
    return any(start < e and s < end for s, e in taken)


def _best_per_target(values: list[Value]) -> list[Value]:
    """One value per step column (the best-priority one); the rest become metrics."""
    best: dict[int, Value] = {}
    for v in values:
        if v.target in (METRIC, THROUGHPUT):
            continue
        cur = best.get(v.target)
        if cur is None or v.priority < cur.priority:
            best[v.target] = v
    out = []
    for v in values:
        if v.target in (METRIC, THROUGHPUT) or best.get(v.target) is v:
            out.append(v)
        elif v.target in (STEP, TOTAL, RANK, WALL, POSITION, EPOCH):
            continue
        else:
            v.name = v.name or _COLUMN_NAMES.get(v.target, "value")
            v.target = METRIC
            out.append(v)
    return out


_COLUMN_NAMES = {
    LOSS: "loss",
    STEP_TIME: "step_time_s",
    TOKENS: "tokens",
    MEM_ALLOC: "memory_allocated_mib",
    MEM_RESERVED: "memory_reserved_mib",
}


def _choose_unit(values: list[Value], unit: str | None) -> str | None:
    candidates = [v for v in values if v.target == THROUGHPUT]
    if not candidates:
        return unit
    if unit is None:
        best = min(candidates, key=lambda v: (UNIT_RANK.get(v.unit, 9), v.priority, v.start))
        unit = best.unit or None
    chosen = [v for v in candidates if (v.unit or None) == unit]
    keep = min(chosen, key=lambda v: (v.priority, v.start)) if chosen else None
    for v in candidates:
        if v is not keep:
            v.target = METRIC
    return unit


def _pair(key: str, m: re.Match[str]) -> list[Value] | None:
    from ledger.logs.keys import IGNORED_KEYS

    name = normalize(key)
    if not name or name in IGNORED_KEYS or name[0].isdigit():
        return None
    if ("/" in key and "." in key) or name.endswith("_py"):
        return None  # a source location (`convert_frame.py:844`), not a measurement
    vs, ve = m.start("val"), m.end("val")
    raw_unit = (m.group("unit") or "").strip()
    spaced = (m.group("sunit") or "").strip()
    if spaced:
        if raw_unit and suffix_scale(raw_unit) and spaced.lower() in RATE_UNITS:
            scale = suffix_scale(raw_unit) or 1.0
            rate = RATE_UNITS[spaced.lower()]
            return [Value(vs, ve, THROUGHPUT, name=name, scale=scale, unit=rate, priority=1)]
        raw_unit = raw_unit or spaced
    total = m.group("total")
    if total and name in STEP_KEYS:
        out = [Value(vs, ve, STEP, kind="int", priority=STEP_KEYS[name])]
        digits = m.start("total") + total.index("/") + 1
        while m.string[digits] in " \t":
            digits += 1
        out.append(Value(digits, m.end("total"), TOTAL, kind="int"))
        return out
    if total:
        return None  # `key a/b` that is not a step: nothing to keep
    value = target(name, raw_unit, vs, ve)
    out = [value]
    if m.group("pct") is not None:
        out.append(Value(m.start("pct"), m.end("pct"), METRIC, name=f"{name}_pct"))
    return out


def _bare(m: re.Match[str]) -> list[Value]:
    unit = m.group("unit")
    vs, ve = m.start("val"), m.end("val")
    if unit in ("ms", "ms/step", "s/step", "us/step"):  # Keras' `4ms/step`: the step time
        scale = {"ms": 1e-3, "ms/step": 1e-3, "s/step": 1.0, "us/step": 1e-6}[unit]
        return [Value(vs, ve, STEP_TIME, scale=scale, priority=2)]
    if unit == "sec":
        return [Value(vs, ve, METRIC, name="time_s")]
    rate = RATE_UNITS.get(unit.lower(), unit)
    if m.group("val2") is None:
        return [Value(vs, ve, THROUGHPUT, name="rate", unit=rate, priority=3)]
    # Two rates (OpenNMT's source/target tok/s): the target side is the headline figure.
    return [
        Value(vs, ve, METRIC, name="src_tok_s"),
        Value(m.start("val2"), m.end("val2"), THROUGHPUT, name="tgt_tok_s", unit=rate, priority=3),
    ]


def texts_of(line: str, values: list[Value]) -> list[str | None]:
    return [line[v.start : v.end] for v in values]


__all__ = ["MAX_LINE", "StepLine", "convert", "find", "texts_of", "wall_time"]
