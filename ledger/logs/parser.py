"""The log reader's state machine: segments in, steps, events, bars, GPUs and a fate out.

`LogParser.feed(text)` takes decoded blocks that end on a segment boundary (what
`reader.read_blocks` yields); `summary()` says what the log amounts to. The parser can
be saved (`snapshot()`) and resumed (`restore()`), which is how ingestion continues a
file from the byte offset where it stopped. Nothing in a line can make it raise: a
segment the reader cannot make sense of is skipped.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import deque
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from ledger.logs import events as ev
from ledger.logs.fate import Facts, decide
from ledger.logs.metrics import (
    FLAT_METRICS,
    FLAT_ROW,
    GPU_TIME,
    LOSS,
    MEM_ALLOC,
    MEM_RESERVED,
    RANK_PREFIX,
    STEP_TIME,
    THROUGHPUT,
    TOKENS,
    Flat,
    Shapes,
    StepLine,
    flatten,
    normalize,
)
from ledger.logs.nvsmi import Gpu, TableReader, csv_row, header_fields
from ledger.logs.progress import Bar, find_bars

STATE_VERSION = 1
_DIGIT = re.compile(r"\d")
_TOKENS_PER_ITER = re.compile(r"tokens per iteration will be: ([\d,]+)")
_EVENT_RANK = re.compile(r"\[Rank (\d+)\]")
_FATAL = {"oom", "nccl", "crashed", "killed", "exit_error"}
_MAX_BARS = 64
_MAX_KEYS = 512
_RECOVERY = 2  # advances of training after an event that make it a survived one
_MAX_SAMPLE = 1 << 20

# A step row, as ingestion stores it.
StepRow = tuple[int, int, float | None, float | None, float | None, int | None, float | None,
                float | None, float | None, float | None]  # fmt: skip


def compile_patterns(patterns: list[str] | tuple[str, ...]) -> list[re.Pattern[str]]:
    """User shapes: regexes whose named groups name the values (step, loss, throughput…).

    Raises ValueError with a readable message for a regex that is not valid or names
    no value.
    """
    out = []
    for text in patterns:
        try:
            regex = re.compile(text)
        except re.error as exc:
            raise ValueError(f"--pattern {text!r} is not a valid regex: {exc}") from exc
        if not regex.groupindex:
            raise ValueError(
                f"--pattern {text!r} has no named group; name the values, "
                r"e.g. 'it (?P<step>\d+) loss (?P<loss>[\d.]+)'"
            )
        out.append(regex)
    return out


@dataclass
class Summary:
    """What `ledger parse --json` prints."""

    fate: str
    fate_reason: str
    steps: int
    ranks: int
    last_step: int | None
    total_steps: int | None
    throughput: dict[str, Any]
    progress: dict[str, Any] | None
    events: dict[str, int]
    last_event: dict[str, Any] | None
    gpus: list[dict[str, Any]]
    lines: int

    def to_dict(self) -> dict[str, Any]:
        from ledger.model.records import jsonable

        return {
            "fate": self.fate,
            "fate_reason": self.fate_reason,
            "steps": self.steps,
            "ranks": self.ranks,
            "last_step": self.last_step,
            "total_steps": self.total_steps,
            "throughput": jsonable(self.throughput),
            "progress": jsonable(self.progress),
            "events": dict(self.events),
            "last_event": self.last_event,
            "gpus": jsonable(self.gpus),
            "lines": self.lines,
        }


@dataclass
class _Traceback:
    line: int
    frame: str = ""


@dataclass
class _Sample:
    """Throughput values in bounded memory: exact up to 1M values, then every k-th."""

    values: array = field(default_factory=lambda: array("d"))
    stride: int = 1
    skip: int = 0

    def add(self, x: float) -> None:
        if self.skip:
            self.skip -= 1
            return
        self.values.append(x)
        self.skip = self.stride - 1
        if len(self.values) >= _MAX_SAMPLE:
            self.values = self.values[::2]
            self.stride *= 2

    def median(self) -> float | None:
        finite = sorted(v for v in self.values if math.isfinite(v))
        if not finite:
            return None
        mid = len(finite) // 2
        return finite[mid] if len(finite) % 2 else (finite[mid - 1] + finite[mid]) / 2


class LogParser:
    """Reads one log. `keep_rows` keeps step, metric and event rows for `take()`."""

    def __init__(
        self,
        *,
        patterns: list[str] | tuple[str, ...] = (),
        tokens_per_step: float | None = None,
        gpu_query: tuple[str, ...] | None = None,
        keep_rows: bool = False,
    ) -> None:
        self.shapes = Shapes(lean=not keep_rows)
        self.user = compile_patterns(patterns)
        self.keep_rows = keep_rows
        self.tokens_per_step = tokens_per_step
        self.gpu_query = gpu_query
        self.line_no = 1
        # rows not yet taken
        self.rows: list[StepRow] = []
        self.metric_rows: list[tuple[int, int, str, float]] = []
        self.event_rows: list[tuple[int, str, str, int | None]] = []
        self.batch_has_nan = False  # a row taken next may hold NaN (SQLite needs to know)
        self._maybe_nan = False
        # steps
        self.ranks: set[int] = set()
        self.last_by_rank: dict[int, int] = {}
        self.max_step: int | None = None
        self.total: int | None = None
        self.step_lines = 0
        self.epoch_base: int | None = None
        self._bits = bytearray()
        self._big: set[int] = set()
        self.distinct = 0
        # throughput
        self.first_tp: float | None = None
        self.last_tp: float | None = None
        self.sample = _Sample()
        self.bar_unit: str | None = None
        self.bar_sample = _Sample()
        self.bar_first: float | None = None
        self.bar_last_rate: float | None = None
        # events and fate
        self.counts: dict[str, int] = {}
        self.last_event: dict[str, Any] | None = None
        self.effects: deque[tuple[str, str, int, int]] = deque(maxlen=256)
        self.finished: tuple[str, int, int] | None = None
        self.activity = 0
        self.phase: str | None = None  # "loading" or "training"
        self.phase_what = ""
        self.keys: deque[tuple[object, ...]] = deque(maxlen=_MAX_KEYS)
        self._tb: dict[int | None, _Traceback] = {}
        self._recompile: dict[str, Any] | None = None
        # bars
        self.bar: Bar | None = None
        self.bars: dict[str, Bar] = {}
        self.main_bar: tuple[str, float] | None = None
        self._pend: str | None = None
        self._pend_key = ""
        self._pend_line = 0
        # GPUs
        self.gpus: dict[int, Gpu] = {}
        self._csv_fields: tuple[str, ...] | None = None
        self._csv_next = 0
        self._table = TableReader()

    # -- feeding ------------------------------------------------------------------------

    def feed(self, text: str) -> None:
        """Read a block of whole segments (it ends after a `\\n` or `\\r`, or is the end)."""
        parts = text.split("\n")
        last = len(parts) - 1
        line = self.line_no
        for i, part in enumerate(parts):
            if part:
                if "\r" in part:
                    for seg in part.split("\r"):
                        if seg:
                            self._one(line, seg)
                elif "%|" in part:
                    self._one(line, part)
                else:
                    if self._pend is not None:
                        self._flush_bar()
                    try:  # noqa: SIM105 — contextlib.suppress costs more on this hot path
                        self._segment(line, part)
                    except Exception:  # a line that cannot be read is skipped, never fatal
                        pass
            if i < last:
                line += 1
        self.line_no = line

    def _one(self, line: int, seg: str) -> None:
        # A redrawn bar state: only the last state of a run of the same bar is read.
        i = seg.find("%|")
        if i > 0 and seg[-1] == "]" and not self._tb:
            key = seg[: i - 3] if i > 3 else ""
            if self._pend is not None and key != self._pend_key:
                self._flush_bar()
            self._pend = seg
            self._pend_key = key
            self._pend_line = line
            return
        if self._pend is not None:
            self._flush_bar()
        try:
            self._segment(line, seg)
        except Exception:
            return

    def _flush_bar(self) -> None:
        seg, line = self._pend, self._pend_line
        self._pend = None
        if seg is None:
            return
        try:
            bars, rest = find_bars(seg)
            if not bars:
                self._segment(line, seg)
                return
            for bar in bars:
                bar.line = line
                self._bar(bar)
            if rest.strip():
                self._segment(line, rest)
        except Exception:
            return

    def finish(self) -> None:
        """Close what is open at the end of the input: a pending bar, a traceback."""
        if self._pend is not None:
            self._flush_bar()
        for rank, tb in list(self._tb.items()):
            self._end_traceback(rank, tb, "", self.line_no)
        self._tb.clear()
        if self._recompile is not None:
            self._emit_recompile()

    # -- one segment --------------------------------------------------------------------

    def _segment(self, line: int, s: str) -> None:
        if self.keep_rows:
            self._maybe_nan = "nan" in s or "NaN" in s or "NAN" in s
        if self.user:
            for regex in self.user:
                m = regex.search(s)
                if m is not None:
                    self._user_step(line, m)
                    return
        ended_traceback = False
        if self._tb or self._recompile is not None:
            rank, body = self._split_rank(s)
            if self._recompile is not None and self._recompile_detail(rank, body):
                return
            tb = self._tb.get(rank)
            if tb is not None:
                if self._traceback_line(line, rank, tb, body):
                    return
                ended_traceback = True
        templates = self.shapes.templates
        if templates:
            tpl = templates[0]
            m = tpl.regex.fullmatch(s)
            if m is not None and tpl.convert is not None:
                try:
                    self._step(line, tpl.convert(m.groups()), tpl.names, tpl.unit)
                    return
                except (ValueError, TypeError, OverflowError):
                    pass
            found = self.shapes.match(s)
            if found is not None:
                self._step(line, *found)
                return
        if "%" in s or "it/s" in s or "s/it" in s:
            bars, rest = find_bars(s)
            if bars:
                for bar in bars:
                    bar.line = line
                    self._bar(bar)
                if rest.strip():
                    self._segment(line, rest)
                return
        rank, body = self._split_rank(s)
        stripped = body.lstrip()
        if stripped.startswith("Traceback (most recent call last)"):
            self._tb[rank] = _Traceback(line)
            return
        if ev.hint(body):
            found = ev.classify(body)
            if ended_traceback:  # the exception line is the traceback's, not a new error
                found = [f for f in found if f.kind != "error"]
                if not found:
                    return
            if found:
                for f in found:
                    self._event(line, rank, f)
                if not any(f.kind == "warning" for f in found):
                    return
        if self._gpu_line(body):
            return
        if _DIGIT.search(s) is None:
            return
        if self.tokens_per_step is None and "tokens per iteration" in s:
            m = _TOKENS_PER_ITER.search(s)
            if m is not None:
                self.tokens_per_step = float(m.group(1).replace(",", ""))
        found = self.shapes.generic(s)
        if found is not None:
            self._step(line, *found)

    @staticmethod
    def _split_rank(s: str) -> tuple[int | None, str]:
        if s[:1] in ("[", " ", "\t"):
            m = RANK_PREFIX.match(s)
            if m is not None:
                return int(m.group("r1") or m.group("r2")), s[m.end() :].lstrip(" :")
        return None, s

    # -- steps --------------------------------------------------------------------------

    def _step(self, line: int, t: Flat, names: tuple[str, ...], unit: str | None) -> None:
        """Count one step line (a flat tuple, see ledger.logs.metrics.FLAT_*)."""
        rank, step, total, position, epoch = t[0], t[1], t[2], t[3], t[4]
        if step is None:
            if position is not None:
                step = position
                if epoch is not None and total and float(epoch).is_integer():
                    e = int(epoch)
                    if self.epoch_base is None or e < self.epoch_base:
                        self.epoch_base = e
                    step = (e - self.epoch_base) * total + position
                    total = None  # a position inside an epoch: not the run's length
            else:
                step = self.last_by_rank.get(rank, 0) + 1
        if total:
            self.total = total
        self.last_by_rank[rank] = step
        self.step_lines += 1
        throughput = t[9]
        row = t[FLAT_ROW]
        if throughput is None and self.tokens_per_step and t[6] and unit in (None, "tok/s"):
            throughput = self.tokens_per_step / t[6]
            row = (*row[:4], throughput, *row[5:])
            if self.shapes.unit is None:
                self.shapes.unit = "tok/s"
        if throughput is not None:
            if self.first_tp is None:
                self.first_tp = throughput
            self.last_tp = throughput
            sample = self.sample
            if sample.skip:
                sample.skip -= 1
            else:
                sample.add(throughput)
        self.ranks.add(rank)
        bits = self._bits
        byte = step >> 3
        if 0 <= byte < len(bits):
            mask = 1 << (step & 7)
            if not bits[byte] & mask:
                bits[byte] |= mask
                self.distinct += 1
        else:
            self._count_step(step)
        max_step = self.max_step
        if max_step is None or step > max_step:
            self.max_step = step
            self.activity += 1
            if self.phase != "training":
                self.phase = "training"
            self.phase_what = ""  # the last step, spelled out when asked (facts)
            if self.total and step >= self.total:
                self._mark_finished(f"step {step} of {self.total}", line)
        if self.keep_rows:
            if self._maybe_nan:
                self.batch_has_nan = True
            self.rows.append((rank, step, *row))
            values = t[FLAT_METRICS]
            if values:
                self.metric_rows.extend(zip(repeat(rank), repeat(step), names, values))

    def _count_step(self, step: int) -> None:
        if 0 <= step < 1 << 28:
            byte = step >> 3
            bits = self._bits
            if byte >= len(bits):
                bits.extend(bytes(max(byte + 1 - len(bits), len(bits))))
            mask = 1 << (step & 7)
            if not bits[byte] & mask:
                bits[byte] |= mask
                self.distinct += 1
        elif step not in self._big and len(self._big) < 1 << 20:
            self._big.add(step)
            self.distinct += 1

    def _user_step(self, line: int, m: re.Match[str]) -> None:
        from ledger.logs.numbers import to_float, to_int

        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        values: dict[int, float] = {}
        metrics = []
        mapping = {"loss": LOSS, "throughput": THROUGHPUT, "tokens": TOKENS,
                   "memory_allocated_mib": MEM_ALLOC, "memory_reserved_mib": MEM_RESERVED,
                   "gpu_time_s": GPU_TIME, "step_time": STEP_TIME,
                   "step_time_s": STEP_TIME}  # fmt: skip
        for name, text in groups.items():
            if name in ("step", "rank", "total", "unit"):
                continue
            x = to_float(text)
            if x is None:
                continue
            if name == "step_time_ms":
                values[STEP_TIME] = x / 1000.0
            elif name in mapping:
                values[mapping[name]] = x
            else:
                metrics.append((normalize(name), x))
        unit = groups.get("unit") or self.shapes.unit or ("tok/s" if THROUGHPUT in values else None)
        if THROUGHPUT in values and self.shapes.unit is None:
            self.shapes.unit = unit
        step = to_int(groups["step"]) if "step" in groups else None
        total = to_int(groups["total"]) if "total" in groups else None
        rank = to_int(groups.get("rank", "0")) or 0
        self._step(line, *flatten(StepLine(rank, step, total, values, metrics, unit=unit)))

    # -- bars ---------------------------------------------------------------------------

    def _bar(self, bar: Bar) -> None:
        prev = self.bars.get(bar.desc)
        self.bar = bar
        if bar.loading:
            if self.phase != "loading":
                self._event(bar.line, None, ev.Found("loading", bar.describe(), "loading"))
            self.phase = "loading"
            self.phase_what = bar.describe()
        else:
            if prev is None or bar.n > prev.n or (prev.done and not bar.done):
                self.activity += 1
            self.phase = "training"
            self.phase_what = bar.describe()
            if bar.rate is not None and not _evaluation(bar.desc):
                if self.bar_unit is None:
                    self.bar_unit = bar.unit
                if bar.unit == self.bar_unit:
                    if self.bar_first is None:
                        self.bar_first = bar.rate
                    self.bar_last_rate = bar.rate
                    self.bar_sample.add(bar.rate)
            if self.main_bar is None and bar.total and _may_be_main(bar.desc):
                self.main_bar = (bar.desc, bar.total)
        if bar.done and (prev is None or not prev.done):
            self._event(bar.line, None, ev.Found("progress", bar.describe()))
            if not bar.loading and (self.main_bar == (bar.desc, bar.total) or _last_epoch(bar)):
                self._mark_finished(bar.describe(), bar.line)
        if prev is None and len(self.bars) >= _MAX_BARS:
            self.bars.pop(next(iter(self.bars)))
        self.bars[bar.desc] = bar

    # -- events -------------------------------------------------------------------------

    def _event(self, line: int, rank: int | None, found: ev.Found) -> None:
        if found.key is not None:
            if found.key in self.keys:
                return
            self.keys.append(found.key)
        if found.kind == "loading":
            if self.phase == "loading":
                self.phase_what = found.text[:120]
                return
            self.phase = "loading"
            self.phase_what = found.text[:120]
        if rank is None and found.kind in ("nccl", "oom"):
            m = _EVENT_RANK.search(found.text)
            if m is not None:
                rank = int(m.group(1))
        if found.follow:
            if self._recompile is not None:
                self._emit_recompile()
            self._recompile = {"line": line, "rank": rank, "text": found.text, "left": 8}
            return
        text = found.text[: ev.MAX_TEXT]
        self.counts[found.kind] = self.counts.get(found.kind, 0) + 1
        if found.kind != "progress":
            self.last_event = {"kind": found.kind, "line": line, "text": text}
        if self.keep_rows:
            self.event_rows.append((line, found.kind, text, rank))
        effect = found.effect
        if effect in _FATAL:
            self.effects.append((effect, text, line, self.activity))
        elif effect in ("finished", "exit_ok"):
            self._mark_finished(text, line)

    def _mark_finished(self, text: str, line: int) -> None:
        self.finished = (text[:200], line, self.activity)

    def _recompile_detail(self, rank: int | None, body: str) -> bool:
        pending = self._recompile
        assert pending is not None
        if rank != pending["rank"]:
            return False
        detail = ev.recompile_detail(body)
        if detail is None:
            pending["left"] -= 1
            if pending["left"] <= 0:
                self._emit_recompile()
            return False
        pending["text"] += ("; " if detail[0] == "function" else "; last reason: ") + detail[1]
        if detail[0] == "reason":
            self._emit_recompile()
        return True

    def _emit_recompile(self) -> None:
        pending, self._recompile = self._recompile, None
        if pending is not None:
            found = ev.Found("recompile", pending["text"])
            self._event(pending["line"], pending["rank"], found)

    def _traceback_line(self, line: int, rank: int | None, tb: _Traceback, body: str) -> bool:
        """Feed a line to an open traceback; False when the line is not part of it."""
        if not body or body[0] in " \t^~" or body.startswith("+") or body.startswith("|"):
            stripped = body.strip()
            if stripped.startswith("File "):
                tb.frame = stripped[:300]
            return True
        if body.startswith("Traceback (most recent call last)"):
            self._end_traceback(rank, tb, "", line)
            self._tb[rank] = _Traceback(line)
            return True
        self._end_traceback(rank, tb, body, line)
        return False  # the exception line is also read as a line of its own (oom, nccl…)

    def _end_traceback(self, rank: int | None, tb: _Traceback, exc_line: str, line: int) -> None:
        self._tb.pop(rank, None)
        exc_line = exc_line.strip()
        m = ev.EXCEPTION_LINE.fullmatch(exc_line) if exc_line else None
        if m is not None and ("." in m.group("type") or m.group("type")[:1].isupper()):
            effect = ev.exception_effect(m.group("type"), m.group("msg") or "")
            text = exc_line
        else:
            effect = "crashed"
            text = f"traceback without its exception line; last frame: {tb.frame}"
        if tb.frame and len(text) < 600:
            text = f"{text} (at {tb.frame})"
        # The traceback's own effect is left to its exception line when that is an OOM or
        # NCCL error (the line is read as such right after); a crash otherwise.
        found = ev.Found("traceback", text, effect if effect in ("crashed", "killed") else None)
        self._event(tb.line, rank, found)

    # -- nvidia-smi ---------------------------------------------------------------------

    def _gpu_line(self, body: str) -> bool:
        if body.startswith("|"):
            if len(body) > 400:  # table rows are short; long ones are something else
                return False
            table, gpu = self._table.feed(body)
            if gpu is not None:
                self.gpus[gpu.index] = gpu
            return table
        if "," not in body or len(body) > 2000:
            self._csv_next = 0
            self._csv_fields = None
            return False
        if "memory." in body or "utilization." in body or body.startswith("index"):
            fields = header_fields(body)
            if fields is not None:
                self._csv_fields = fields
                self._csv_next = 0
                return True
        if not body[:1].isdigit() and not (self._csv_fields and "name" in self._csv_fields):
            return False
        fields = self._csv_fields or self.gpu_query
        known = fields is not None
        gpu = csv_row(body, fields, None if known else self._csv_next)
        if gpu is None:
            return False
        self.gpus[gpu.index] = gpu
        self._csv_next = gpu.index + 1
        return True

    # -- results ------------------------------------------------------------------------

    def take(self) -> tuple[list[StepRow], list[tuple[int, int, str, float]], list[Any]]:
        """The step, metric and event rows read since the last call (with keep_rows)."""
        out = (self.rows, self.metric_rows, self.event_rows)
        self.rows, self.metric_rows, self.event_rows = [], [], []
        self.batch_has_nan = False
        return out

    def facts(self, *, stalled: bool = False) -> Facts:
        effects = []
        done_at = self.finished[2] if self.finished else -1
        for effect, text, line, mark in self.effects:
            if self.activity - mark >= _RECOVERY or mark < done_at:
                continue
            if self.finished and line < self.finished[1] and mark <= done_at:
                continue
            effects.append((effect, text, line))
        finished = None
        if self.finished and self.activity - self.finished[2] < _RECOVERY:
            finished = (self.finished[0], self.finished[1])
        what = self.phase_what
        if not what and self.max_step is not None:
            what = f"step {self.max_step}" + (f"/{self.total}" if self.total else "")
        return Facts(
            effects=effects,
            finished=finished,
            loading=what if self.phase == "loading" else None,
            training=what if self.phase == "training" or self.step_lines else None,
            stalled=stalled,
        )

    def fate(self, *, stalled: bool = False) -> tuple[str, str]:
        return decide(self.facts(stalled=stalled))

    def throughput(self) -> dict[str, Any]:
        if self.first_tp is not None:
            return {
                "unit": self.shapes.unit,
                "first": self.first_tp,
                "last": self.last_tp,
                "median": self.sample.median(),
            }
        if self.bar_first is not None:
            return {
                "unit": self.bar_unit,
                "first": self.bar_first,
                "last": self.bar_last_rate,
                "median": self.bar_sample.median(),
            }
        return {"unit": None, "first": None, "last": None, "median": None}

    def summary(self, *, stalled: bool = False) -> Summary:
        fate, reason = self.fate(stalled=stalled)
        bar = self.bar
        progress = None
        if bar is not None:
            progress = {**bar.to_dict(), "pct": bar.pct}
        return Summary(
            fate=fate,
            fate_reason=reason,
            steps=self.distinct,
            ranks=len(self.ranks),
            last_step=self.max_step,
            total_steps=self.total,
            throughput=self.throughput(),
            progress=progress,
            events=dict(sorted(self.counts.items())),
            last_event=self.last_event,
            gpus=[
                {
                    "index": g.index,
                    "name": g.name,
                    "memory_used_mib": g.memory_used_mib,
                    "memory_total_mib": g.memory_total_mib,
                    "utilization_pct": g.utilization_pct,
                }
                for g in sorted(self.gpus.values(), key=lambda g: g.index)
            ],
            lines=self.line_no - 1,
        )

    # -- saving and resuming ------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The state needed to go on reading from here, as JSON-able values."""
        return {
            "version": STATE_VERSION,
            "line_no": self.line_no,
            "unit": self.shapes.unit,
            "tokens_per_step": self.tokens_per_step,
            "ranks": sorted(self.ranks),
            "last_by_rank": [[r, s] for r, s in self.last_by_rank.items()],
            "max_step": self.max_step,
            "total": self.total,
            "step_lines": self.step_lines,
            "epoch_base": self.epoch_base,
            "first_tp": _finite(self.first_tp),
            "last_tp": _finite(self.last_tp),
            "bar_unit": self.bar_unit,
            "bar_first": self.bar_first,
            "bar_last_rate": self.bar_last_rate,
            "counts": self.counts,
            "last_event": self.last_event,
            "effects": [list(e) for e in self.effects],
            "finished": list(self.finished) if self.finished else None,
            "activity": self.activity,
            "phase": self.phase,
            "phase_what": self.phase_what,
            "keys": [list(k) for k in self.keys],
            "tb": [[r, tb.line, tb.frame] for r, tb in self._tb.items()],
            "recompile": self._recompile,
            "bar": _bar_state(self.bar),
            "bars": [_bar_state(b) for b in self.bars.values()],
            "main_bar": list(self.main_bar) if self.main_bar else None,
            "pend": [self._pend, self._pend_key, self._pend_line] if self._pend else None,
            "gpus": [g.to_dict() for g in self.gpus.values()],
            "csv_fields": list(self._csv_fields) if self._csv_fields else None,
            "csv_next": self._csv_next,
        }

    def restore(self, state: dict[str, Any]) -> bool:
        """Continue from a snapshot; False (and nothing changed) when it cannot be used."""
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            return False
        try:
            self.line_no = int(state["line_no"])
            self.shapes.unit = state["unit"]
            self.tokens_per_step = self.tokens_per_step or state["tokens_per_step"]
            self.ranks = set(state["ranks"])
            self.last_by_rank = {int(r): int(s) for r, s in state["last_by_rank"]}
            self.max_step = state["max_step"]
            self.total = state["total"]
            self.step_lines = state["step_lines"]
            self.epoch_base = state["epoch_base"]
            self.first_tp = state["first_tp"]
            self.last_tp = state["last_tp"]
            self.bar_unit = state["bar_unit"]
            self.bar_first = state["bar_first"]
            self.bar_last_rate = state["bar_last_rate"]
            self.counts = dict(state["counts"])
            self.last_event = state["last_event"]
            self.effects = deque((tuple(e) for e in state["effects"]), maxlen=256)  # type: ignore[misc]
            self.finished = tuple(state["finished"]) if state["finished"] else None  # type: ignore[assignment]
            self.activity = state["activity"]
            self.phase = state["phase"]
            self.phase_what = state["phase_what"]
            self.keys = deque((tuple(k) for k in state["keys"]), maxlen=_MAX_KEYS)
            self._tb = {r: _Traceback(line, frame) for r, line, frame in state["tb"]}
            self._recompile = state["recompile"]
            self.bar = _bar_from(state["bar"])
            self.bars = {b.desc: b for b in map(_bar_from, state["bars"]) if b is not None}
            self.main_bar = tuple(state["main_bar"]) if state["main_bar"] else None  # type: ignore[assignment]
            pend = state["pend"]
            self._pend, self._pend_key, self._pend_line = pend if pend else (None, "", 0)
            self.gpus = {g["index"]: Gpu(**g) for g in state["gpus"]}
            self._csv_fields = tuple(state["csv_fields"]) if state["csv_fields"] else None
            self._csv_next = state["csv_next"]
        except (KeyError, TypeError, ValueError):
            return False
        return True


def _finite(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def _bar_state(bar: Bar | None) -> list[Any] | None:
    if bar is None:
        return None
    return [bar.desc, bar.n, bar.total, bar.rate, bar.unit, bar.postfix, bar.line]


def _bar_from(state: list[Any] | None) -> Bar | None:
    return Bar(*state) if state else None


_EVAL = re.compile(r"eval|valid|test|predict|sanity", re.I)
_EPOCH_OF = re.compile(r"[Ee]poch\s+(\d+)\s*/\s*(\d+)")


def _evaluation(desc: str) -> bool:
    return bool(_EVAL.search(desc))


def _may_be_main(desc: str) -> bool:
    return not _evaluation(desc) and "epoch" not in desc.lower()


def _last_epoch(bar: Bar) -> bool:
    m = _EPOCH_OF.search(bar.desc)
    return bool(m) and int(m.group(1)) >= int(m.group(2))
