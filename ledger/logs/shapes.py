"""Step-line shapes, as data: one table of (name, pattern, fields, unit).

A shape's pattern finds where the line says *which step* it is (its named groups are the
fields: `step`, `total`, `epoch`, `position`, or any value); the key/value reader
(ledger.logs.pairs) then reads what the line measures around them. The table is tried in
order and the first shape that finds a step line wins; `pairs`, the last, is the generic
reader. Your own shapes (`--pattern`, `ledger pattern add`) go first, through the same
path, and read only their own groups. Each shape has a fixture in tests/fixtures/logs/.

After one line of a shape is read, a template learned from it (ledger.logs.templates)
reads the next lines like it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ledger.logs import keys as k
from ledger.logs.keys import Value, normalize
from ledger.logs.pairs import HEAD, MAX_LINE, StepLine, convert, find, texts_of
from ledger.logs.runstate import RunState
from ledger.logs.templates import FLAT_METRICS, Flat, Template, learn


@dataclass(frozen=True)
class Shape:
    """A step-line shape. `needle` is a cheap test (a substring) before the pattern."""

    name: str
    pattern: str | None  # None: the key/value reader alone
    unit: str | None = None  # the unit of a `throughput` field
    needle: str = ""
    pairs: bool = True  # read the line's other key/value pairs too
    examples: str = ""


SHAPES: tuple[Shape, ...] = (
    Shape(
        "deepspeed timer",
        r"\bepoch=(?P<epoch>\d+)/micro_step=(?P<micro_step>\d+)/global_step=(?P<step>\d+)",
        needle="global_step=",
        examples="DeepSpeed's throughput timer",
    ),
    Shape(
        "iteration of total",
        r"\biteration\s+(?P<step>\d+)\s*/\s*(?P<total>\d+)\b",
        needle="iteration",
        examples="Megatron-LM, Megatron-DeepSpeed",
    ),
    Shape(
        "epoch and step of both",
        r"\b[Ee]poch\s*\[?\s*(?P<epoch>\d+)\s*/\s*(?P<epochs>\d+)\s*\]?[\s,|:;-]*"
        r"(?:[Ss]tep|[Bb]atch|[Ii]ter(?:ation)?)\s*\[?\s*(?P<position>\d+)\s*/\s*(?P<total>\d+)",
        needle="poch",
        examples="PyTorch tutorials and scripts (`Epoch [1/10], Step [100/600], Loss: 0.23`)",
    ),
    Shape(
        "epoch and position in brackets",
        r"\b[Ee]poch(?:\(\w+\))?\s*\[\s*(?P<epoch>\d+)\s*\]\s*\[\s*(?P<position>\d+)\s*/\s*"
        r"(?P<total>\d+)\s*\]",
        needle="poch",
        examples="mmengine and mmcv (`Epoch(train) [1][ 50/500]  lr: … loss: 1.9`)",
    ),
    Shape(
        "epoch and position",
        r"\b[Ee]poch\s*[:=]?\s*(?P<epoch>\d+)\s*[|,;:\]]?\s*"
        r"(?:(?:[Ss]tep|[Bb]atch|[Ii]ter(?:ation)?)\s*[:=]?\s*\[?\s*)?"
        r"(?P<position>\d+)\s*/\s*(?P<total>\d+)\b",
        needle="poch",
        examples="fairseq (`| epoch 003 | 100 / 400 …`; num_updates, when shown, is the step), "
        "`Epoch 3 | Batch 100/500 | Loss …`",
    ),
    Shape(
        "step of total",
        r"\b[Ss]tep[: ]\s*(?P<step>\d+)\s*/\s*(?P<total>\d+)\b",
        needle="tep",
        examples="OpenNMT (`Step 100/1000;`), modded-nanogpt (`step:100/1000`), nanochat",
    ),
    Shape(
        "keras progress",
        r"^\s*(?P<position>\d+)/(?P<total>\d+)\s+(?:\[[=>.]*\]|[━─]+)",
        needle="/",
        examples="Keras (`391/391 [====] - 20s - loss: 0.5`, `32/32 ━━━━ 0s 4ms/step - loss: 0.5`)",
    ),
    Shape(
        "leading step",
        "^" + HEAD.pattern + r"(?P<step>\d+)(?:\s*/\s*(?P<total>\d+))?\s*[|,;:](?!\d)",
        examples="llama2.c (`100 | loss 2.1 | …`), DeepSpeed (`6/6, SamplesPerSec=…`)",
    ),
    Shape(
        "pairs",
        None,
        examples="torchtitan, torchtune, nanoGPT, Hugging Face dicts, JSON lines, "
        "structured loggers, `key=value` / `key: value` / `key value` of any kind",
    ),
)

# Field names a shape's groups may use (any other name is a metric of that name).
FIELDS = {
    "step": k.STEP, "rank": k.RANK, "total": k.TOTAL, "epoch": k.EPOCH,
    "position": k.POSITION, "loss": k.LOSS, "throughput": k.THROUGHPUT,
    "tokens": k.TOKENS, "step_time": k.STEP_TIME, "step_time_s": k.STEP_TIME,
    "step_time_ms": k.STEP_TIME, "gpu_time_s": k.GPU_TIME,
    "memory_allocated_mib": k.MEM_ALLOC, "memory_reserved_mib": k.MEM_RESERVED,
}  # fmt: skip
_INTS = {"step", "rank", "total", "position"}
_INF = float("inf")
_EVALUATION = re.compile(
    r"\b(?:valid(?:ation)?|eval(?:uation)?|test(?:ing)?|Validation|Evaluation|Test)\b"
    r"(?! *[:=] *\d)|\((?:val|test)\)"
)
MAX_TEMPLATES = 24


def compile_patterns(patterns: list[str] | tuple[str, ...]) -> tuple[Shape, ...]:
    """Your own shapes: regexes whose named groups name the values (step, loss,
    throughput…). Raises ValueError with a readable message for a regex that is not valid
    or names no value."""
    out = []
    for i, text in enumerate(patterns, 1):
        try:
            regex = re.compile(text)
        except re.error as exc:
            raise ValueError(f"--pattern {text!r} is not a valid regex: {exc}") from exc
        if not set(regex.groupindex) - {"unit"}:
            raise ValueError(
                f"--pattern {text!r} has no named group; name the values, "
                r"e.g. 'it (?P<step>\d+) loss (?P<loss>[\d.]+)'"
            )
        out.append(Shape(f"pattern {i}", text, pairs=False))
    return tuple(out)


@dataclass
class Read:
    """A step line as the reader takes it."""

    flat: Flat
    names: tuple[str, ...]
    unit: str | None
    shape: str
    summary: bool  # repeats a step (evaluation figures): not a new step
    dropped: tuple[str, ...] = ()  # values no float holds (`grad_norm=1e400`): not read


class LineShapes:
    """Reads step lines: learned templates first, then the shape table."""

    def __init__(
        self, state: RunState, user: tuple[Shape, ...] = (), *, lean: bool = False
    ) -> None:
        self.state = state  # holds the log's throughput unit, fixed by its first step line
        self.shapes = (*user, *SHAPES)
        self.compiled = [(s, re.compile(s.pattern) if s.pattern else None) for s in self.shapes]
        self.templates: list[Template] = []
        self.last: Template | None = None  # the template that read the last line
        self.lean = lean

    def match(self, body: str, rank: int | None) -> Read | None:
        """A line read by a learned template, or None."""
        templates = self.templates
        for i, tpl in enumerate(templates):
            m = tpl.regex.fullmatch(body)
            if m is not None:
                if i > 2:  # keep the busy shapes first
                    templates.insert(0, templates.pop(i))
                self.last = tpl
                try:
                    flat = tpl.convert(m.groups(), rank)
                except ValueError:
                    return None  # the slow path reads it (and says why it cannot)
                if _INF in flat or -_INF in flat or _INF in flat[-1] or -_INF in flat[-1]:
                    return None  # an inf the line may not say: the slow path looks closer
                return Read(flat, tpl.names, tpl.unit, tpl.shape, tpl.summary)
        return None

    def read(
        self, body: str, rank: int | None, prefix: str, *, learn_it: bool = True
    ) -> Read | None:
        """Read a line the slow way, through the shape table; learn a template from it."""
        if len(body) > MAX_LINE:
            return None
        for shape, regex in self.compiled:
            if shape.needle and shape.needle not in body:
                continue
            m = regex.search(body) if regex is not None else None
            if regex is not None and m is None:
                continue
            found = self._read(body, shape, m)
            if found is None:
                if not shape.pairs:
                    return None  # the user's own shape matched: nothing else reads it
                continue
            values, unit, line = found
            self.state.unit = self.state.unit or unit
            summary = line.eval_only
            tpl = None
            if learn_it:
                tpl = learn(body, values, unit, prefix=prefix, shape=shape.name,
                            summary=summary, lean=self.lean)  # fmt: skip
            if tpl is not None:
                if len(self.templates) >= MAX_TEMPLATES:
                    self.templates.pop()
                self.templates.insert(0, tpl)
            return Read(_flat(line, rank), tuple(n for n, _x in line.metrics), unit, shape.name,
                        summary, tuple(line.dropped))  # fmt: skip
        return None

    def _read(
        self, body: str, shape: Shape, m: re.Match[str] | None
    ) -> tuple[list[Value], str | None, StepLine] | None:
        given = _given(m) if m is not None else []
        unit = self.state.unit
        if m is not None and "unit" in m.groupdict() and m.group("unit"):
            unit = k.rate_unit(m.group("unit")) or m.group("unit")
        if shape.pairs:
            values, unit = find(body, given, unit)
        else:
            values = sorted(given, key=lambda v: v.start)
            if any(v.target == k.THROUGHPUT for v in values):
                unit = unit or shape.unit or "tok/s"
        if not values:
            return None
        line = convert(texts_of(body, values), values, unit)
        if shape.pairs and _EVALUATION.search(body):
            line.eval_only = True  # `| valid on 'valid' subset | loss …`: a summary
        measured = sum(1 for t in line.values if t != k.WALL)
        if not measured and len(line.metrics) < 2 and not line.eval_only:
            return None  # `saving checkpoint at step 100`: a step number and nothing measured
        unnumbered = line.step is None and line.position is None and not line.eval_only
        if unnumbered and k.LOSS not in line.values and k.THROUGHPUT not in line.values:
            return None  # nothing says this is a training step
        return values, unit, line


def _given(m: re.Match[str]) -> list[Value]:
    out = []
    for name, text in m.groupdict().items():
        if text is None or name == "unit":
            continue
        start, end = m.span(name)
        target = FIELDS.get(name, k.METRIC)
        kind = "int" if name in _INTS else "float"
        scale = 1e-3 if name == "step_time_ms" else 1.0
        out.append(Value(start, end, target, name=normalize(name), scale=scale, kind=kind,
                         unit="tok/s" if target == k.THROUGHPUT else "", priority=-1))  # fmt: skip
    return out


def _flat(line: StepLine, rank: int | None) -> Flat:
    v = line.values
    tokens = v.get(k.TOKENS)
    flat = (
        rank if rank is not None else line.rank, line.step, line.total, line.position,
        line.epoch, v.get(k.WALL), v.get(k.STEP_TIME), v.get(k.GPU_TIME),
        int(tokens) if tokens is not None else None, v.get(k.THROUGHPUT), v.get(k.LOSS),
        v.get(k.MEM_ALLOC), v.get(k.MEM_RESERVED), tuple(x for _n, x in line.metrics),
    )  # fmt: skip
    assert len(flat) == FLAT_METRICS + 1
    return flat


def shape_table() -> str:
    """The built-in shapes as a Markdown table, for docs/logs.md."""
    rows = ["| # | shape | the line says | seen in |", "|---|---|---|---|"]
    for i, shape in enumerate(SHAPES, 1):
        groups = re.compile(shape.pattern).groupindex if shape.pattern else {}
        fields = ", ".join(f"`{g}`" for g in groups) or "key/value pairs"
        seen = shape.examples.replace("|", "\\|")  # a table cell: its pipes escaped
        rows.append(f"| {i} | {shape.name} | {fields} | {seen} |")
    return "\n".join(rows)
