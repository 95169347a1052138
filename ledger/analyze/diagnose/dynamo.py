"""torch.compile findings: `recompiles` and `graph_breaks`.

Evidence: dynamo's warnings in the log (log_event rows of kind recompile / graph_break,
with the function and the last reason the reader joined to them) or the hook's counters
(the metrics dynamo_recompiles, dynamo_graph_breaks, cumulative), and the steps right
after a recompile that cost far more than a typical step (compilation time).
"""

from __future__ import annotations

import re

import numpy as np

from ledger.analyze.diagnose.evidence import EventRow, Pair, Side, pct, score
from ledger.model.terms import EventKind, FindingKind
from ledger.model.why import Evidence, Finding

STORM = 2  # recompiles from which they are a finding (a limit hit counts at once)
AFTER = 2  # steps after an event in which its compilation shows
SLOW = 2.0  # a step costing this many typical steps is a compile spike
SHOWN = 4  # events quoted as evidence
LAG = 8  # rows before a step where a hook counter rose in which its compilation may be

_FUNCTION = re.compile(r"function '(?P<fn>[^']+)'|recompiling (?P<fn2>\S+)")
_REASON = re.compile(r"last reason: (?P<reason>.*)")
_AT = re.compile(r"graph break at (?P<at>\S+)")


def findings(pair: Pair) -> list[Finding]:
    found = [_recompiles(pair), _graph_breaks(pair)]
    return [f for f in found if f is not None]


def counted(side: Side | None, kind: str, metric: str) -> int:
    """How many the log told (events) or the hook counted (the counter's last value)."""
    if side is None:
        return 0
    told = side.ev.count(kind)
    steps_values = side.ev.metrics.get(metric)
    hook = 0
    if steps_values is not None and len(steps_values[1]):
        values = steps_values[1][np.isfinite(steps_values[1])]
        hook = int(values.max()) if len(values) else 0
    return max(told, hook)


def compile_spikes(
    side: Side | None, kinds: tuple[str, ...], metrics: tuple[str, ...]
) -> list[tuple[int, float, float]]:
    """(step, cost, typical cost) of the steps that compiled, warm-up included: the steps
    within AFTER rows after a warning of `kinds` in the log, or around a step where one of
    the hook's counters `metrics` rose (it is read while the step compiles, or up to a
    flush later: LAG rows before it), that cost at least SLOW typical steady steps."""
    if side is None or side.trace is None or side.costs is None:
        return []
    trace, costs = side.trace, side.costs
    steady = costs.cost[side.start :]
    finite = steady[np.isfinite(steady)]
    if len(finite) < 5:
        return []
    typical = float(np.median(finite))
    n = len(trace.steps)
    windows: list[tuple[int, int]] = []
    for e in side.ev.events_of(*kinds):
        if e.step is None:
            continue
        lo = int(np.searchsorted(trace.steps, e.step, side="left"))
        hi = lo + AFTER
        while hi >= lo and hi < n and trace.steps[hi] > e.step + AFTER * side.spacing:
            hi -= 1
        windows.append((lo, hi))
    for name in metrics:
        found = side.ev.metrics.get(name)
        if found is None:
            continue
        at, values = found
        ok = np.isfinite(values)
        at, values = at[ok], values[ok]
        rose = np.flatnonzero(np.diff(np.concatenate([[0.0], values])) > 0)
        last = -1
        for k in rose:
            i = int(np.searchsorted(trace.steps, at[k], side="right")) - 1
            # read while step i + 1 compiled, or up to a flush after the step that did
            windows.append((max(last + 1, i - LAG, 0), i + 1))
            last = i
    out: list[tuple[int, float, float]] = []
    seen: set[int] = set()
    for lo, hi in windows:
        for i in range(max(lo, 0), min(hi, n - 1) + 1):
            c = float(costs.cost[i])
            if i not in seen and np.isfinite(c) and c >= SLOW * typical:
                seen.add(i)
                out.append((int(trace.steps[i]), c, typical))
    out.sort()
    return out


RECOMPILES = ((EventKind.RECOMPILE,), ("dynamo_recompiles",))
GRAPH_BREAKS = ((EventKind.GRAPH_BREAK,), ("dynamo_graph_breaks",))
# every compilation, the first included: what a warm-up spent compiling
COMPILES = (
    (EventKind.RECOMPILE, EventKind.GRAPH_BREAK),
    ("dynamo_frames_compiled", *RECOMPILES[1], *GRAPH_BREAKS[1]),
)


def compile_share(side: Side | None, spikes: list[tuple[int, float, float]]) -> float | None:
    """The share of the run's wall time (warm-up included) its compiling steps took beyond
    a typical step; None without spikes."""
    if side is None or not spikes:
        return None
    total = side.total_cost()
    extra = sum(c - t for _, c, t in spikes)
    return extra / total if total > 0 else None


def _spike_evidence(spikes: list[tuple[int, float, float]], seconds: bool) -> list[Evidence]:
    unit = " s" if seconds else " (relative)"
    return [
        Evidence("step", f"step {s:,} cost {c:.3g}{unit}, a typical step {t:.3g}{unit}", line=s)
        for s, c, t in spikes[:SHOWN]
    ]


def _compiled_claim(
    pair: Pair, spikes: list[tuple[int, float, float]], share: float | None, ref_share: float
) -> str:
    if not spikes or share is None:
        return ""
    seconds = sum(c - t for _, c, t in spikes)
    took = f"{seconds:,.3g} s, " if pair.run.costs is not None and pair.run.costs.in_seconds else ""
    warm = pair.run.steady_from
    inside = warm is not None and any(s < warm for s, _, _ in spikes)
    than = f"; {pair.ref_name}: {pct(ref_share)}" if pair.ref is not None else ""
    return (
        f"; the {len(spikes)} steps that compiled took {took}{pct(share)} of the run's wall time"
        f"{' (warm-up included)' if inside else ''} beyond a typical step{than}"
    )


def _quoted(events: list[EventRow]) -> list[EventRow]:
    if len(events) <= SHOWN:
        return events
    return [*events[: SHOWN - 1], events[-1]]


def _function(events: list[EventRow]) -> str | None:
    for e in reversed(events):
        m = _FUNCTION.search(e.text)
        if m is not None:
            return m.group("fn") or m.group("fn2")
    return None


def _reason(events: list[EventRow]) -> str | None:
    for e in reversed(events):
        m = _REASON.search(e.text)
        if m is not None:
            return m.group("reason").strip()
    return None


def _recompiles(pair: Pair) -> Finding | None:
    run, ref = pair.run, pair.ref
    n = counted(run, EventKind.RECOMPILE, "dynamo_recompiles")
    n_ref = counted(ref, EventKind.RECOMPILE, "dynamo_recompiles")
    events = run.ev.events_of(EventKind.RECOMPILE)
    limit = [e for e in events if "limit" in e.text or "FailOnRecompile" in e.text]
    limit_ref = ref is not None and any(
        "limit" in e.text for e in ref.ev.events_of(EventKind.RECOMPILE)
    )
    storm = n >= STORM and n >= 2 * n_ref + 2
    if not (storm or (limit and not limit_ref)):
        return None
    at = [e.step for e in events if e.step is not None]
    spikes = compile_spikes(run, *RECOMPILES)
    share = compile_share(run, spikes)
    ref_share = compile_share(ref, compile_spikes(ref, *RECOMPILES)) or 0.0
    strength = 0.6 + (0.15 if limit else 0.0) + (0.1 if n >= 8 else 0.0)
    if spikes:
        strength += 0.15 * min(1.0, len(spikes) / max(1, len(at) or n))
    fn, reason = _function(events), _reason(events)
    what = f"{fn}" if fn else "a compiled function"
    claim = f"torch.compile recompiled {what} {n} times ({pair.ref_name}: {n_ref})"
    if limit:
        claim += " and hit its recompile limit, after which the function runs uncompiled"
    if reason:
        claim += f"; last reason: {reason[:160]}"
    claim += _compiled_claim(pair, spikes, share, ref_share)
    evidence = [e.evidence() for e in _quoted(events)]
    if not events:
        evidence.append(Evidence("metric", f"the hook counted {n} recompilations"))
    seconds = run.costs is not None and run.costs.in_seconds
    evidence += _spike_evidence(spikes, seconds)
    # compile time is the recompiles' cost wherever it falls, the warm-up included
    return Finding(
        kind=FindingKind.RECOMPILES,
        claim=claim + ".",
        score=score(pair, strength, None if share is None else share - ref_share, whole=True),
        evidence=evidence,
        next=(
            "Find what the last reason's guard watches (a closure or mask object made anew "
            "each step, a Python number, a shape) and keep it stable: build it once, mark "
            "the dimension dynamic (torch._dynamo.mark_dynamic) or pad to a few fixed "
            'shapes; TORCH_LOGS="recompiles" prints every reason.'
        ),
    )


def _graph_breaks(pair: Pair) -> Finding | None:
    run, ref = pair.run, pair.ref
    n = counted(run, EventKind.GRAPH_BREAK, "dynamo_graph_breaks")
    n_ref = counted(ref, EventKind.GRAPH_BREAK, "dynamo_graph_breaks")
    events = run.ev.events_of(EventKind.GRAPH_BREAK)
    places = {m.group("at") for e in events if (m := _AT.search(e.text)) is not None}
    ref_places: set[str] = set()
    if ref is not None:
        ref_places = {
            m.group("at")
            for e in ref.ev.events_of(EventKind.GRAPH_BREAK)
            if (m := _AT.search(e.text)) is not None
        }
    new = places - ref_places
    if not (n > n_ref and (new or not places) and n >= 1):
        return None
    spikes = compile_spikes(run, *GRAPH_BREAKS)
    share = compile_share(run, spikes)
    ref_share = compile_share(ref, compile_spikes(ref, *GRAPH_BREAKS)) or 0.0
    strength = 0.45 + (0.1 if len(new) > 1 else 0.0) + (0.1 if n >= 5 else 0.0)
    strength += 0.15 if spikes else 0.0
    reason = _reason(events)
    where = f" at {', '.join(sorted(new)[:3])}" if new else ""
    claim = f"dynamo broke the graph {n} times{where} ({pair.ref_name}: {n_ref})"
    if reason:
        claim += f"; reason: {reason[:160]}"
    claim += _compiled_claim(pair, spikes, share, ref_share)
    evidence = [e.evidence() for e in _quoted(events)]
    if not events:
        evidence.append(Evidence("metric", f"the hook counted {n} graph breaks"))
    evidence += _spike_evidence(spikes, run.costs is not None and run.costs.in_seconds)
    return Finding(
        kind=FindingKind.GRAPH_BREAKS,
        claim=claim + ".",
        score=score(pair, strength, None if share is None else share - ref_share, whole=True),
        evidence=evidence,
        next=(
            "Each break splits the compiled graph and runs Python in between: rewrite the "
            "call the reason names (or move it out of the compiled region); "
            'TORCH_LOGS="graph_breaks" shows them all.'
        ),
    )
