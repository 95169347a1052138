"""Per-step metric lines, in the shapes of the common trainers (torchtitan, Megatron,
DeepSpeed, the Hugging Face Trainer…) and the generic ones.

A line is read slowly once, by `generic()`: rank prefix, timestamp, `key: value` /
`key=value` / `key value` pairs (keys may be several words before a colon, quoted as in a
Python dict), a bare leading step (`100 | loss …`, `10/100, SamplesPerSec=…`), bare rates
(`12345/13456 tok/s`, `123.4ms`). When it is a step line, a *template* is learned from it:
a regex with the line's own literal text and one group per value, so the next lines of
the same shape cost one `fullmatch` and a few conversions. Keys are mapped to step
columns through small tables; every other named scalar becomes a metric.
"""

from __future__ import annotations

import calendar
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ledger.logs.numbers import (
    INT_FAST,
    NUM,
    NUM_FAST,
    memory_scale,
    suffix_scale,
    time_scale,
    to_float,
    to_int,
)

# What a value found on a line is (its "target"): a step column, a metric, or bookkeeping.
RANK, STEP, TOTAL, WALL, STEP_TIME, GPU_TIME, TOKENS, THROUGHPUT, LOSS = range(9)
MEM_ALLOC, MEM_RESERVED, METRIC, EPOCH, POSITION = range(9, 14)

# Throughput units, best first: a log's unit is the best one its first step line offers.
UNIT_RANK = {"tok/s": 0, "words/s": 1, "samples/s": 2, "it/s": 3, "s/it": 4, "TFLOP/s": 5}

_STEP_KEYS = {
    "step": 0, "steps": 1, "iter": 0, "iteration": 0, "iters": 1, "it": 2, "global_step": 0,
    "globalstep": 0, "update": 1, "updates": 1, "num_updates": 0, "train_step": 0,
    "step_num": 0, "batch": 3,
}  # fmt: skip
_LOSS_KEYS = {
    "loss": 0, "lm_loss": 0, "train_loss": 0, "train_loss_step": 1, "training_loss": 0,
    "loss_train": 0, "train_lm_loss": 0, "avg_loss": 2, "total_loss": 1,
    "xent": 3, "nll_loss": 2, "loss_avg": 2,
}  # fmt: skip
_TIME_KEYS = {  # seconds unless the key or a glued unit says otherwise
    "dt": 0, "time": 1, "step_time": 0, "iter_time": 0, "iteration_time": 0, "batch_time": 1,
    "time_per_step": 0, "time_per_iteration": 0, "elapsed_time_per_iteration": 0,
    "t_step": 0, "step_avg": 3, "train_step_time": 0, "time_per_iter": 0,
}  # fmt: skip
_MS_KEYS = {"dt_ms", "step_time_ms", "iter_time_ms", "elapsed_time_per_iteration_ms", "time_ms"}
_TOKEN_KEYS = {"tokens", "ntokens", "num_tokens", "tokens_per_step", "tokens_per_batch"}
_THROUGHPUT_KEYS = {
    "tps": ("tok/s", 0), "tok_s": ("tok/s", 0), "tok_sec": ("tok/s", 0), "tokens_s": ("tok/s", 0),
    "tokens_sec": ("tok/s", 0), "tokens_per_second": ("tok/s", 0),
    "tokens_per_sec": ("tok/s", 0), "tokens_per_second_per_gpu": ("tok/s", 0),
    "tok_s_gpu": ("tok/s", 1), "tokens_s_gpu": ("tok/s", 1), "tgs": ("tok/s", 1),
    "throughput_tokens": ("tok/s", 0), "tokens_per_s": ("tok/s", 0), "toks": ("tok/s", 2),
    "wps": ("words/s", 0), "words_s": ("words/s", 0), "words_per_second": ("words/s", 0),
    "samples_per_second": ("samples/s", 0), "samples_per_sec": ("samples/s", 0),
    "samples_sec": ("samples/s", 0), "samples_s": ("samples/s", 0),
    "samplespersec": ("samples/s", 0), "currsamplespersec": ("samples/s", 0),
    "runningavgsamplespersec": ("samples/s", 1), "sps": ("samples/s", 1),
    "samples_second": ("samples/s", 0), "it_s": ("it/s", 0), "s_it": ("s/it", 0),
    "tflops": ("TFLOP/s", 0), "tflop_s": ("TFLOP/s", 0), "tflops_per_gpu": ("TFLOP/s", 0),
    "throughput_per_gpu_tflop_s_gpu": ("TFLOP/s", 0), "approx_flops_per_gpu": ("TFLOP/s", 1),
    "model_tflops": ("TFLOP/s", 1), "tflop_s_gpu": ("TFLOP/s", 0),
}  # fmt: skip
_ALLOC_KEYS = {"memory_allocated", "mem_allocated", "memallocated", "allocated", "mem_alloc",
               "memory_alloc", "alloc", "allocated_memory", "mem_allocated_gb"}  # fmt: skip
_RESERVED_KEYS = {"memory", "mem", "memory_reserved", "mem_reserved", "reserved",
                  "max_memory_reserved", "max_reserved", "gpu_mem", "gpu_memory",
                  "memory_gib", "mem_gb", "peak_memory", "max_mem", "mem_gib"}  # fmt: skip
_IGNORED_KEYS = {"rank", "local_rank", "pid", "line", "total", "of", "at", "in", "v_num"}

# Units that may stand after a space (`45.2 ms`, `1234 tok/s`); others must be glued.
_SPACED_UNITS = (
    r"tok/s|tokens/s|tok/sec|tokens/sec|samples/s|samples/sec|it/s|s/it|words/s"
    r"|TFLOP/s|TFLOPs|TFLOPS|GiB|GB|MiB|MB|ms|sec|s"
)
_RATE_UNITS = {
    "tok/s": "tok/s", "tokens/s": "tok/s", "tok/sec": "tok/s", "tokens/sec": "tok/s",
    "tps": "tok/s", "samples/s": "samples/s", "samples/sec": "samples/s", "it/s": "it/s",
    "s/it": "s/it", "words/s": "words/s", "wps": "words/s", "tflop/s": "TFLOP/s",
    "tflops": "TFLOP/s", "tflop/s/gpu": "TFLOP/s",
}  # fmt: skip

_WORD = r"[A-Za-z_][\w./\-]*"
_KV = re.compile(
    rf"""(?<![\w./\-'"])['"]?
    (?:(?P<mkey>{_WORD}(?:[ ](?:{_WORD}|\([^()\n]{{1,24}}\))){{1,6}})['"]?[ \t]*[:=]
      |(?P<key>{_WORD})['"]?(?:[ \t]*[:=]|[ \t]))
    [ \t]*\[?(?P<val>{NUM})
    (?:(?P<total>[ \t]*/[ \t]*\d[\d,]*)
      |(?P<unit>%|[A-Za-z]+(?:/[A-Za-z]+)*(?![\w]))?
       (?P<sunit>[ ](?:{_SPACED_UNITS})(?![\w/])(?![ \t]*[:=]?[ \t]*[-+]?\.?\d))?)
    (?:\((?P<pct>{NUM})%\))?""",
    re.VERBOSE,
)
_BARE = re.compile(
    r"(?<![\w./:\-])(?P<val>\d[\d,]*(?:\.\d+)?)(?:[ \t]*/[ \t]*(?P<val2>\d[\d,]*(?:\.\d+)?))?"
    r"[ \t]?(?P<unit>tok/s|tokens/s|tok/sec|samples/s|samples/sec|it/s|s/it|ms|sec)(?![\w/])"
)
_FRACTION = re.compile(r"(?<![\w./:\-])(?P<n>\d+)[ \t]*/[ \t]*(?P<total>\d+)(?![\w./])")
_HEAD = re.compile(
    r"(?:[ \t]*(?:\[[^\]\n]{0,100}\]|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\]\n]{1,120}\]"
    r"|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?"
    r"(?:Z|[+-]\d\d:?\d\d)?|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|-|\|)[:,]?)*[ \t]*"
)
_LEAD_STEP = re.compile(r"(?P<n>\d+)(?:[ \t]*/[ \t]*(?P<total>\d+))?[ \t]*[|,;:](?![\d])")
RANK_PREFIX = re.compile(
    r"[ \t]*(?:\[(?:rank|Rank|RANK|default)[ ]?(?P<r1>\d+)\]:?"
    r"|\[(?P<r2>\d+),\d+\]<std(?:out|err)>:)"
)
TIMESTAMP = re.compile(
    r"(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?:Z|[+-]\d\d:?\d\d)?"
)
_TS_PARTS = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")
_NORMAL = re.compile(r"[^a-z0-9]+")
_LITERAL = re.compile(r"(?P<ws>[ \t]+)|(?P<num>\d+(?:[.,:]\d+)*)")

_norm_cache: dict[str, str] = {}


def normalize(key: str) -> str:
    """`Elapsed time per iteration (ms)` → `elapsed_time_per_iteration_ms`."""
    name = _norm_cache.get(key)
    if name is None:
        name = _NORMAL.sub("_", key.lower()).strip("_")[:100]
        if len(_norm_cache) < 4096:
            _norm_cache[key] = name
    return name


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


@dataclass
class Value:
    """One value found on a line: where it is, what it means and how to convert it."""

    commas: bool = field(default=False, init=False)  # the learning line had `12,345` here

    start: int
    end: int
    target: int
    name: str = ""
    scale: float = 1.0
    unit: str = ""  # the throughput unit, for THROUGHPUT candidates
    priority: int = 0
    kind: str = "float"  # float, int, memory (MiB or GiB by size), wall


@dataclass(slots=True)
class StepLine:
    """A step line's values: the parser's output for one metric line."""

    rank: int
    step: int | None
    total: int | None
    values: dict[int, float]
    metrics: list[tuple[str, float]]
    epoch: float | None = None
    position: int | None = None
    unit: str | None = None


# A step line as the parser takes it: a flat tuple (see FLAT_*), its metric names, its unit.
Flat = tuple[Any, ...]
FLAT_RANK, FLAT_STEP, FLAT_TOTAL, FLAT_POSITION, FLAT_EPOCH = range(5)
FLAT_ROW = slice(5, 13)  # wall, step time, gpu time, tokens, throughput, loss, alloc, reserved
FLAT_METRICS = 13
_FLAT_OF = {WALL: 5, STEP_TIME: 6, GPU_TIME: 7, TOKENS: 8, THROUGHPUT: 9, LOSS: 10,
            MEM_ALLOC: 11, MEM_RESERVED: 12}  # fmt: skip


def flatten(sl: StepLine) -> tuple[Flat, tuple[str, ...], str | None]:
    """A StepLine (the general path) in the shape learned templates produce."""
    v = sl.values
    tokens = v.get(TOKENS)
    if tokens is not None:
        tokens = int(tokens) if math.isfinite(tokens) else None
    flat = (
        sl.rank, sl.step, sl.total, sl.position, sl.epoch,
        v.get(WALL), v.get(STEP_TIME), v.get(GPU_TIME), tokens, v.get(THROUGHPUT),
        v.get(LOSS), v.get(MEM_ALLOC), v.get(MEM_RESERVED),
        tuple(x for _n, x in sl.metrics),
    )  # fmt: skip
    return flat, tuple(n for n, _x in sl.metrics), sl.unit


@dataclass
class Template:
    regex: re.Pattern[str]
    groups: list[Value]
    unit: str | None
    convert: Callable[[tuple[str | None, ...]], Flat] | None = None
    names: tuple[str, ...] = ()


@dataclass
class Shapes:
    """Reads metric lines; learns one template per line shape it meets."""

    unit: str | None = None  # the log's throughput unit, fixed by its first step line
    lean: bool = False  # convert only what a summary needs (step, rank, throughput, time)
    templates: list[Template] = field(default_factory=list)
    max_templates: int = 24

    def match(self, line: str) -> tuple[Flat, tuple[str, ...], str | None] | None:
        """A step line read by a learned template, or None (then call `generic`)."""
        templates = self.templates
        for i, tpl in enumerate(templates):
            m = tpl.regex.fullmatch(line)
            if m is not None:
                if i > 2:  # keep the busy shapes first
                    templates.insert(0, templates.pop(i))
                if tpl.convert is not None:
                    try:
                        return tpl.convert(m.groups()), tpl.names, tpl.unit
                    except (ValueError, TypeError, OverflowError):
                        pass
                return flatten(_convert(m.groups(), tpl.groups, tpl.unit, lean=self.lean))
        return None

    def generic(self, line: str) -> tuple[Flat, tuple[str, ...], str | None] | None:
        """Read a line the slow way; learn a template when it is a step line."""
        sl = self.generic_line(line)
        return flatten(sl) if sl is not None else None

    def generic_line(self, line: str) -> StepLine | None:
        """Read a line the slow way; learn a template when it is a step line."""
        found = self._find(line)
        if found is None:
            return None
        values, unit = found
        result = _convert(tuple(line[v.start : v.end] for v in values), values, unit)
        known = sum(1 for t in result.values if t != WALL)
        if not known and len(result.metrics) < 2:
            return None  # `saving checkpoint at step 100`: a step number and nothing measured
        if result.step is None and result.position is None and not _auto_numbered(result):
            return None
        self._learn(line, values, unit)
        return result

    def _find(self, line: str) -> tuple[list[Value], str | None] | None:
        if len(line) > 2000:
            return None
        values: list[Value] = []
        rm = RANK_PREFIX.match(line)
        pos = 0
        if rm is not None:
            g = "r1" if rm.group("r1") is not None else "r2"
            values.append(Value(rm.start(g), rm.end(g), RANK, kind="int"))
            pos = rm.end()
        head = _HEAD.match(line, pos)
        head_end = head.end() if head else pos
        tm = TIMESTAMP.search(line, pos, head_end) if head_end > pos else None
        if tm is not None:
            values.append(Value(tm.start("ts"), tm.end("ts"), WALL, kind="wall"))
        lead = _LEAD_STEP.match(line, head_end)
        taken: list[tuple[int, int]] = []
        if lead is not None:
            values.append(Value(lead.start("n"), lead.end("n"), STEP, kind="int", priority=5))
            if lead.group("total"):
                values.append(Value(lead.start("total"), lead.end("total"), TOTAL, kind="int"))
            taken.append((lead.start(), lead.end()))
        pairs = 0
        for m in _KV.finditer(line, head_end):
            key = m.group("mkey") or m.group("key")
            value = _classify(key, m)
            if value is None:
                continue
            values.extend(value)
            taken.append((m.start(), m.end()))
            pairs += 1
        for m in _BARE.finditer(line, head_end):
            if _overlaps(m.start(), m.end(), taken):
                continue
            values.extend(_bare(m))
            taken.append((m.start(), m.end()))
            pairs += 1
        if not pairs:
            return None
        if not any(v.target in (STEP, POSITION) for v in values):
            for m in _FRACTION.finditer(line, head_end):
                if not _overlaps(m.start(), m.end(), taken):
                    values.append(Value(m.start("n"), m.end("n"), POSITION, kind="int"))
                    values.append(Value(m.start("total"), m.end("total"), TOTAL, kind="int"))
                    break
        values = _best_per_target(values)
        unit = self._choose_unit(values)
        values.sort(key=lambda v: v.start)
        return values, unit

    def _choose_unit(self, values: list[Value]) -> str | None:
        candidates = [v for v in values if v.target == THROUGHPUT]
        if not candidates:
            return self.unit
        if self.unit is None:
            best = min(candidates, key=lambda v: (UNIT_RANK.get(v.unit, 9), v.priority, v.start))
            self.unit = best.unit
        chosen = [v for v in candidates if v.unit == self.unit]
        keep = min(chosen, key=lambda v: (v.priority, v.start)) if chosen else None
        for v in candidates:
            if v is not keep:
                v.target = METRIC
        return self.unit

    def _learn(self, line: str, values: list[Value], unit: str | None) -> None:
        parts = ["[ \\t]*+"]
        at = 0
        groups: list[Value] = []
        for v in values:
            if v.start < at:
                continue
            parts.append(_literal(line[at : v.start]))
            parts.append(f"({_group(v)})")
            v.commas = "," in line[v.start : v.end]
            groups.append(v)
            at = v.end
        parts.append(_literal(line[at:]))
        parts.append("[ \\t]*+")
        try:
            regex = re.compile("".join(parts))
        except re.error:
            return
        if len(self.templates) >= self.max_templates:
            self.templates.pop()
        convert, names = _compile_converter(groups, unit, lean=self.lean)
        self.templates.insert(0, Template(regex, groups, unit, convert, names))


def _group(v: Value) -> str:
    if v.kind == "wall":
        return r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d++)?+"
    if v.kind == "int":
        return INT_FAST
    return NUM_FAST


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


def _overlaps(start: int, end: int, taken: list[tuple[int, int]]) -> bool:
    return any(start < e and s < end for s, e in taken)


def _auto_numbered(result: StepLine) -> bool:
    """A line without a step number is a step line when it has a loss or a throughput."""
    return LOSS in result.values or THROUGHPUT in result.values


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
            v.target = METRIC
            out.append(v)
    return out


def _classify(key: str, m: re.Match[str]) -> list[Value] | None:
    name = normalize(key)
    if not name or name in _IGNORED_KEYS or name[0].isdigit():
        return None
    if ("/" in key and "." in key) or name.endswith("_py"):
        return None  # a source location (`convert_frame.py:844`), not a measurement
    vs, ve = m.start("val"), m.end("val")
    raw_unit = (m.group("unit") or "").strip()
    spaced = (m.group("sunit") or "").strip()
    if spaced:
        if raw_unit and suffix_scale(raw_unit) and spaced.lower() in _RATE_UNITS:
            return [_rate(name, spaced, vs, ve, suffix_scale(raw_unit) or 1.0)]
        raw_unit = raw_unit or spaced
    out: list[Value] = []
    total = m.group("total")
    if total and name in _STEP_KEYS:
        out.append(Value(vs, ve, STEP, kind="int", priority=_STEP_KEYS[name]))
        digits = m.start("total") + total.index("/") + 1
        while m.string[digits] in " \t":
            digits += 1
        out.append(Value(digits, m.end("total"), TOTAL, kind="int"))
        return out
    if total:
        return None  # `key a/b` that is not a step: nothing to keep
    value = _target(name, raw_unit, vs, ve)
    if value is None:
        return None
    out.append(value)
    if m.group("pct") is not None:
        out.append(Value(m.start("pct"), m.end("pct"), METRIC, name=f"{name}_pct"))
    return out


def _target(name: str, unit: str, vs: int, ve: int) -> Value | None:
    lower = unit.lower()
    if name in _STEP_KEYS and not unit:
        return Value(vs, ve, STEP, kind="int", priority=_STEP_KEYS[name])
    if name == "epoch":
        return Value(vs, ve, EPOCH, name="epoch")
    if name in _LOSS_KEYS:
        return Value(vs, ve, LOSS, priority=_LOSS_KEYS[name])
    if name in _TIME_KEYS or name in _MS_KEYS:
        scale = time_scale(unit) if unit else (1e-3 if name in _MS_KEYS else 1.0)
        if scale is None:
            return Value(vs, ve, METRIC, name=name)
        return Value(vs, ve, STEP_TIME, scale=scale, priority=_TIME_KEYS.get(name, 0))
    if name in _THROUGHPUT_KEYS:
        rate, priority = _THROUGHPUT_KEYS[name]
        scale = suffix_scale(unit) or 1.0
        if lower in ("tflops", "tflop/s"):
            rate = "TFLOP/s"
        return Value(vs, ve, THROUGHPUT, name=name, scale=scale, unit=rate, priority=priority)
    guessed = _rate_of_name(name)
    if guessed is not None:
        return Value(vs, ve, THROUGHPUT, name=name, scale=suffix_scale(unit) or 1.0,
                     unit=guessed, priority=2)  # fmt: skip
    if name == "throughput" or name.startswith("throughput_"):
        rate = _RATE_UNITS.get(lower)
        if rate is not None:
            return Value(vs, ve, THROUGHPUT, name=name, unit=rate, priority=1)
    if name in _TOKEN_KEYS:
        return Value(vs, ve, TOKENS, kind="int", scale=suffix_scale(unit) or 1.0)
    if name in _ALLOC_KEYS or name in _RESERVED_KEYS:
        target = MEM_ALLOC if name in _ALLOC_KEYS else MEM_RESERVED
        scale = memory_scale(unit) if unit else _memory_hint(name)
        if scale is None and unit:
            return Value(vs, ve, METRIC, name=name)
        return Value(vs, ve, target, scale=scale or 1.0, kind="float" if scale else "memory")
    if unit and unit != "%":
        scale = suffix_scale(unit)
        if scale is not None:
            return Value(vs, ve, METRIC, name=name, scale=scale)
        if memory_scale(unit) is not None and ("mem" in name or "alloc" in name):
            return Value(vs, ve, METRIC, name=f"{name}_mib", scale=memory_scale(unit) or 1.0)
        rate = _RATE_UNITS.get(lower)
        if rate is not None:
            return Value(vs, ve, THROUGHPUT, name=name, unit=rate, priority=2)
        if lower in ("ms", "s", "sec"):
            return Value(vs, ve, METRIC, name=f"{name}_s", scale=time_scale(unit) or 1.0)
    return Value(vs, ve, METRIC, name=name)


_RATE_NAME = re.compile(
    r"^(?:train_)?(?P<what>tokens|token|tok|samples|sample|tflops|tflop|words)"
    r"_(?:per_)?(?:s|sec|second)(?:_|$)"
)
_RATE_OF = {"token": "tok/s", "tokens": "tok/s", "tok": "tok/s", "sample": "samples/s",
            "samples": "samples/s", "tflop": "TFLOP/s", "tflops": "TFLOP/s",
            "words": "words/s"}  # fmt: skip


def _rate_of_name(name: str) -> str | None:
    """Rates named in ways the table does not list: `tokens_s_device`, `samples_per_sec_gpu`."""
    m = _RATE_NAME.match(name)
    return _RATE_OF[m.group("what")] if m else None


def _rate(name: str, unit: str, vs: int, ve: int, scale: float) -> Value:
    rate = _RATE_UNITS[unit.lower()]
    return Value(vs, ve, THROUGHPUT, name=name, scale=scale, unit=rate, priority=1)


def _memory_hint(name: str) -> float | None:
    if "gib" in name or "gb" in name:
        return 1024.0
    if "mib" in name or "mb" in name:
        return 1.0
    return None


def _bare(m: re.Match[str]) -> list[Value]:
    unit = m.group("unit")
    vs, ve = m.start("val"), m.end("val")
    if unit == "ms":
        return [Value(vs, ve, STEP_TIME, scale=1e-3, priority=2)]
    if unit == "sec":
        return [Value(vs, ve, METRIC, name="time_s")]
    rate = _RATE_UNITS.get(unit.lower(), unit)
    if m.group("val2") is None:
        return [Value(vs, ve, THROUGHPUT, name="rate", unit=rate, priority=3)]
    # Two rates (OpenNMT's source/target tok/s): the target side is the headline figure.
    return [
        Value(vs, ve, METRIC, name="src_tok_s"),
        Value(m.start("val2"), m.end("val2"), THROUGHPUT, name="tgt_tok_s", unit=rate, priority=3),
    ]


_LEAN = (RANK, STEP, TOTAL, POSITION, EPOCH, THROUGHPUT, STEP_TIME)


def _compile_converter(
    groups: list[Value], unit: str | None, *, lean: bool = False
) -> tuple[Callable[[tuple[str | None, ...]], Flat] | None, tuple[str, ...]]:
    """A function that turns a template's groups into a flat step tuple, written out for
    this template (one expression, no loop, no dispatch): the hot path of reading step
    lines. A lean one converts only what a summary needs. A value the written-out code
    cannot read (`1,234` where the first line had `999`) raises, and the caller falls
    back to the general conversion. Returns the function and its metrics' names."""
    slots = ["None"] * 13
    metrics: list[str] = []
    names: list[str] = []
    for i, v in enumerate(groups):
        if lean and v.target not in _LEAN:
            continue
        t = f"g[{i}]"
        num = f"_f({t}.replace(',', ''))" if v.commas else f"_f({t})"
        if v.target in (RANK, STEP, TOTAL, POSITION):
            index = {RANK: 0, STEP: 1, TOTAL: 2, POSITION: 3}[v.target]
            slots[index] = f"int({t}.replace(',', ''))" if v.commas else f"int({t})"
            continue
        if v.target == WALL:
            slots[5] = f"_wall({t})"
            continue
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
    if slots[0] == "None":
        slots[0] = "0"
    tail = f"({', '.join(metrics)},)" if metrics else "()"
    body = f"def convert(g):\n return ({', '.join(slots)}, {tail})\n"
    scope = {"_f": float, "_wall": wall_time, "_mem": _memory_auto, "_tok": _tokens}
    try:
        exec(compile(body, "<ledger.logs template>", "exec"), scope)
    except SyntaxError:  # pragma: no cover — names are repr()'d; kept as a safety net
        return None, tuple(names)
    return scope["convert"], tuple(names)  # type: ignore[return-value]


def _tokens(x: float) -> int:
    return int(x)


def _memory_auto(x: float) -> float:
    return x * 1024.0 if abs(x) < 1024 else x  # a bare number: GiB if small, else MiB


def _convert(
    texts: tuple[str | None, ...], groups: list[Value], unit: str | None, *, lean: bool = False
) -> StepLine:
    values: dict[int, float] = {}
    metrics: list[tuple[str, float]] = []
    rank = 0
    step = total = position = None
    epoch = None
    for text, v in zip(texts, groups, strict=True):
        if text is None:
            continue
        target = v.target
        if lean and target not in _LEAN:
            continue
        if target == RANK:
            rank = int(text)
        elif target in (STEP, TOTAL, POSITION):
            n = to_int(text)
            if target == STEP:
                step = n
            elif target == TOTAL:
                total = n
            else:
                position = n
        elif target == WALL:
            w = wall_time(text)
            if w is not None:
                values[WALL] = w
        else:
            x = to_float(text)
            if x is None:
                continue
            if v.kind == "memory":
                x = x * 1024.0 if abs(x) < 1024 else x  # a bare number: GiB if small, else MiB
            elif v.scale != 1.0:
                x *= v.scale
            if target == METRIC:
                metrics.append((v.name, x))
            elif target == EPOCH:
                epoch = x
                metrics.append(("epoch", x))
            else:
                values[target] = x
    return StepLine(rank, step, total, values, metrics, epoch, position, unit)
