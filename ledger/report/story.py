"""What the report says, in pieces every format renders its own way: the headline
verdicts, each attempt's events, its median with its fate.

A line is a tuple of `Piece`s. Text from the ledger (run names, reasons, event text) is
kept in pieces of its own, so the HTML isolates it (`<bdi>`) and figures shorten it,
and a run's fate always travels beside its name.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ledger.analyze.wording import short_value
from ledger.model.report import Attempt, ReportData, RunEvent
from ledger.model.terms import FAULT_FATES, EventKind, Fate
from ledger.report.numbers import grouped

# A throughput this many times above or below the baseline is not a regression or a
# recovery but a different unit or scale (per GPU against per job, samples against tokens).
IMPLAUSIBLE_FACTOR = 10.0

PLAIN, NAME, USER, OK, BAD, FATE = "plain", "name", "user", "ok", "bad", "fate"


@dataclass(frozen=True)
class Piece:
    text: str
    kind: str = PLAIN  # PLAIN, NAME (a run name), USER (other text from the ledger), OK, BAD, FATE


Line = tuple[Piece, ...]


def implausible(attempt: Attempt) -> bool:
    """True when the run's throughput is absurd against the baseline (see
    IMPLAUSIBLE_FACTOR), or its effective figure against its own steps (wall times that
    contradict the step times)."""
    a = attempt.analysis
    if a is None:
        return False
    if implausible_ratio(a.judged_effective, a.median):
        return True
    if a.vs_baseline_pct is None or not math.isfinite(a.vs_baseline_pct):
        return False
    return implausible_ratio(a.vs_baseline_pct / 100, 1.0)


DEATHS: dict[str, str] = {
    Fate.OOM: "the OOM",
    Fate.CRASHED: "the crash",
    Fate.NCCL: "the NCCL failure",
}


def death(attempt: Attempt) -> str:
    """What the run died of, in words: 'the OOM'."""
    return DEATHS.get(attempt.fate, attempt.fate)


def died(attempt: Attempt) -> bool:
    """The run died of something in itself (killed runs are often stopped on purpose)."""
    return attempt.fate in FAULT_FATES


def named(attempt: Attempt) -> list[Piece]:
    """The run's name with its fate beside it."""
    return [Piece(attempt.name, NAME), Piece(" "), Piece(attempt.fate, FATE)]


def figure_words(attempt: Attempt) -> str:
    """What the figure is: 'throughput', or 'throughput before the OOM'."""
    if died(attempt):
        return f"throughput before {DEATHS.get(attempt.fate, attempt.fate)}"
    return "throughput"


def figure_pieces(attempt: Attempt) -> list[Piece]:
    """' at 12.8K tok/s effective (typical step 14.2K)': the figure the verdict uses, with
    the median beside it when the two differ."""
    from ledger.report.plots import TYPICAL_APART, judged, typical

    a = attempt.analysis
    assert a is not None
    unit = f" {a.unit}" if a.unit else ""
    value, _ = judged(a)
    median = typical(a)
    if not math.isfinite(value):
        return [Piece(f" at {short_value(median)}{unit} (typical step)")]
    words = f" at {short_value(value)}{unit} effective"
    if math.isfinite(median) and abs(median / value - 1.0) > TYPICAL_APART:
        words += f" (typical step {short_value(median)})"
    return [Piece(words)]


def recovery(attempt: Attempt) -> Piece:
    """'recovered' (good) only for a finished or running launch at the baseline; a run
    that died says its fate instead."""
    from ledger.analyze.wording import recovery_word

    a = attempt.analysis
    word, good = recovery_word(a.recovered if a is not None else None, attempt.fate)
    return Piece(word, OK if good else BAD)


def against_baseline(attempt: Attempt) -> list[Piece]:
    """'NAME fate at 10.9K tok/s effective…, 76.8 % of the baseline (not recovered).'"""
    a = attempt.analysis
    assert a is not None and a.vs_baseline_pct is not None
    pieces = [*named(attempt), *figure_pieces(attempt)]
    if died(attempt):
        pieces.append(Piece(f" (from its steps before {death(attempt)})"))
    pct = a.vs_baseline_pct
    if implausible(attempt):
        return [
            *pieces,
            Piece(f", {grouped(pct)} % of the baseline: "),
            Piece("not comparable", BAD),
            Piece(
                f" — {_times(pct / 100)} the baseline is not a change in speed; the run and "
                "the baseline likely count in different units or scales (check the unit, "
                "per GPU or per job, tokens or samples)."
            ),
        ]
    return [*pieces, Piece(f", {grouped(pct)} % of the baseline ("), recovery(attempt), Piece(").")]


def _times(ratio: float) -> str:
    if ratio >= 1:
        return f"{grouped(ratio)}×"
    return f"1/{grouped(1 / ratio)} of"


def headline(data: ReportData) -> list[Line]:
    """The verdicts a reader meets first: the latest attempt, the best one, each comparison
    with the first attempt, and each attempt that died — every run with its fate."""
    lines: list[Line] = []
    latest = data.attempts[-1] if data.attempts else None
    analysed = data.analysed
    if latest is not None and latest.analysis is None:
        why = latest.why_not_analysed or "no steady window"
        lines.append((Piece("Latest attempt: "), *named(latest), Piece(f": not measured ({why}).")))
    measured = analysed[-1] if analysed else None
    if measured is not None and data.baseline.value is not None:
        label = "Latest attempt: " if measured is latest else "Latest measured attempt: "
        lines.append((Piece(label), *against_baseline(measured)))
        tried = analysed[1:] or analysed  # the first analysed run is the reference
        plausible = [a for a in tried if not implausible(a)]
        if plausible:
            best = max(
                plausible, key=lambda a: a.analysis.judged_effective if a.analysis else -math.inf
            )
            if best is not measured:
                lines.append((Piece("Best attempt: "), *against_baseline(best)))
        for attempt in analysed:
            if attempt is not measured and implausible(attempt):
                lines.append((Piece("Check: "), *against_baseline(attempt)))
    by_name = {a.name: a for a in data.attempts}
    for attempt in data.attempts:
        c = attempt.comparison
        if c is None:
            continue
        reference = by_name.get(c.a)
        lines.append(
            (
                *named(attempt),
                Piece(" against "),
                *(named(reference) if reference else [Piece(c.a, NAME)]),
                Piece(": "),
                *verdict(attempt, reference),
            )
        )
    for attempt in data.attempts:
        if died(attempt):
            reason = attempt.detail.fate_reason
            lines.append(
                (
                    Piece(attempt.name, NAME),
                    Piece(" ended "),
                    Piece(attempt.fate, FATE),
                    *((Piece(": "), Piece(reason, USER)) if reason else ()),
                )
            )
    return lines


def verdict(attempt: Attempt, reference: Attempt | None) -> list[Piece]:
    """The comparison's summary with each name in a piece of its own, and what the reader
    must know beside it: a median from before a run died, runs not comparable."""
    c = attempt.comparison
    if c is None:
        return []
    return [*isolate(c.summary, [c.a, c.b]), *_caveats(attempt, reference)]


def _caveats(attempt: Attempt, reference: Attempt | None) -> list[Piece]:
    notes: list[Piece] = []
    for run in (reference, attempt):
        if run is not None and died(run):
            notes += [
                Piece("; the figures of "),
                Piece(run.name, NAME),
                Piece(f" are from its steps before {DEATHS.get(run.fate, run.fate)}"),
            ]
    if comparison_implausible(attempt):
        notes += [
            Piece(" — "),
            Piece("not comparable", BAD),
            Piece(": the two runs likely count in different units or scales"),
        ]
    return notes


def comparison_implausible(attempt: Attempt) -> bool:
    """True when the run and the first run are too far apart to be the same measure."""
    c = attempt.comparison
    if c is None:
        return False
    a, b = attempt.analysis, c
    return implausible_ratio(b.median_b, b.median_a) or (
        a is not None and implausible_ratio(a.judged_effective, a.median)
    )


def implausible_ratio(value: float, reference: float) -> bool:
    """True when `value` is IMPLAUSIBLE_FACTOR times `reference` or more, either way."""
    if not (math.isfinite(value) and math.isfinite(reference)) or value <= 0 or reference <= 0:
        return False
    ratio = value / reference
    return ratio >= IMPLAUSIBLE_FACTOR or ratio <= 1 / IMPLAUSIBLE_FACTOR


def isolate(text: str, names: list[str]) -> list[Piece]:
    """`text` (a sentence that embeds run names) as pieces with each name in its own."""
    wanted = sorted({n for n in names if n}, key=len, reverse=True)
    if not wanted:
        return [Piece(text)]
    # a name inside a longer word or path (train_baseline.log) is not the run's name there
    alternatives = "|".join(re.escape(n) for n in wanted)
    pattern = re.compile(rf"(?<![\w./-])(?:{alternatives})(?![\w/-])")
    pieces, at = [], 0
    for match in pattern.finditer(text):
        if match.start() > at:
            pieces.append(Piece(text[at : match.start()]))
        pieces.append(Piece(match.group(), NAME))
        at = match.end()
    if at < len(text):
        pieces.append(Piece(text[at:]))
    return pieces


EVENT_WORDS = {
    EventKind.RECOMPILE: ("recompile", "recompiles"),
    EventKind.OOM: ("out-of-memory error", "out-of-memory errors"),
    EventKind.NCCL: ("NCCL failure", "NCCL failures"),
}


def event_lines(attempt: Attempt) -> list[Line]:
    """One line per kind of event: how many, at which steps, and what the last one said
    (a recompile's function and last reason, the OOM's allocation, the NCCL operation)."""
    lines: list[Line] = []
    for kind, (one, many) in EVENT_WORDS.items():
        count = attempt.event_counts.get(kind, 0)
        if not count:
            continue
        events = [e for e in attempt.events if e.kind == kind]
        words = f"{count:,} {one if count == 1 else many}"
        steps = sorted({e.step for e in events if e.step is not None})
        if steps:
            words += (
                f" at step {steps[0]:,}"
                if len(steps) == 1
                else (f" at steps {steps[0]:,}–{steps[-1]:,}")
            )
            unplaced = sum(1 for e in events if e.step is None)
            if unplaced:
                words += f" ({unplaced:,} with no step recorded)"
        pieces = [Piece(words, BAD if kind != EventKind.RECOMPILE else PLAIN)]
        if events:
            last = events[-1]
            label = "last" if count > 1 else "it said"
            pieces += [Piece(f"; {label} ({where(last)}): "), Piece(last.text, USER)]
        lines.append(tuple(pieces))
    return lines


def where(event: RunEvent) -> str:
    """Where an event was read: its step, and which text its line number counts in."""
    bits = []
    if event.step is not None:
        bits.append(f"step {event.step:,}")
    if event.line is not None:
        bits.append(
            f"line {event.line:,} of a probe's output"
            if event.from_probe
            else (f"log line {event.line:,}")
        )
    if event.rank is not None:
        bits.append(f"rank {event.rank}")
    return ", ".join(bits) or "no step or line recorded"


def plain(line: Line, name_limit: int | None = None) -> str:
    """A line as plain text (PDF, PNG): fates in parentheses, long names shortened."""
    from ledger.report.glyphs import isolate
    from ledger.report.text import clean, shorten

    out = []
    for piece in line:
        text = clean(piece.text)
        if piece.kind == NAME and name_limit is not None:
            text = shorten(" ".join(text.split()), name_limit)
        elif piece.kind == FATE:
            text = f"({text})"
        if piece.kind in (NAME, USER):  # a right-to-left name keeps the sentence in order
            text = isolate(text)
        out.append(text)
    return "".join(out)
