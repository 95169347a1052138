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
from ledger.model.why import Evidence, Finding

STORM = 2  # recompiles from which they are a finding (a limit hit counts at once)
AFTER = 2  # steps after an event in which its compilation shows
SLOW = 2.0  # a step costing this many typical steps is a compile spike
SHOWN = 4  # events quoted as evidence

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


def spikes_after(side: Side, at_steps: list[int]) -> list[tuple[int, float, float]]:
    """(step, cost, typical cost) of the steps within AFTER steps after `at_steps` that
    cost at least SLOW typical steps."""
    trace, costs = side.trace, side.costs
    if trace is None or costs is None or not at_steps:
        return []
    steady = costs.cost[side.start :]
    finite = steady[np.isfinite(steady)]
    if len(finite) < 5:
        return []
    typical = float(np.median(finite))
    out = []
    seen: set[int] = set()
    for s in at_steps:
        lo = int(np.searchsorted(trace.steps, s, side="left"))
        for i in range(lo, min(lo + AFTER + 1, len(trace.steps))):
            if trace.steps[i] > s + AFTER or i in seen:
                continue
            c = float(costs.cost[i])
            if np.isfinite(c) and c >= SLOW * typical:
                seen.add(i)
                out.append((int(trace.steps[i]), c, typical))
    return out


def _spike_share(side: Side, spikes: list[tuple[int, float, float]]) -> float | None:
    if side.costs is None or not spikes:
        return None
    total = float(np.nansum(side.costs.cost))
    extra = sum(c - t for _, c, t in spikes)
    return extra / total if total > 0 else None


def _spike_evidence(spikes: list[tuple[int, float, float]], seconds: bool) -> list[Evidence]:
    unit = " s" if seconds else " (relative)"
    return [
        Evidence("step", f"step {s:,} cost {c:.3g}{unit}, a typical step {t:.3g}{unit}", line=s)
        for s, c, t in spikes[:SHOWN]
    ]


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
    n = counted(run, "recompile", "dynamo_recompiles")
    n_ref = counted(ref, "recompile", "dynamo_recompiles")
    events = run.ev.events_of("recompile")
    limit = [e for e in events if "limit" in e.text or "FailOnRecompile" in e.text]
    limit_ref = ref is not None and any("limit" in e.text for e in ref.ev.events_of("recompile"))
    storm = n >= STORM and n >= 2 * n_ref + 2
    if not (storm or (limit and not limit_ref)):
        return None
    at = [e.step for e in events if e.step is not None]
    spikes = spikes_after(run, at)
    followed = len({s for s, _, _ in spikes})
    share = _spike_share(run, spikes)
    strength = 0.6 + (0.15 if limit else 0.0) + (0.1 if n >= 8 else 0.0)
    if at:
        strength += 0.15 * min(1.0, followed / max(1, len(at)))
    fn, reason = _function(events), _reason(events)
    what = f"{fn}" if fn else "a compiled function"
    claim = f"torch.compile recompiled {what} {n} times ({pair.ref_name}: {n_ref})"
    if limit:
        claim += " and hit its recompile limit, after which the function runs uncompiled"
    if reason:
        claim += f"; last reason: {reason[:160]}"
    if spikes and share is not None:
        claim += f"; {followed} slow steps right after them cost {pct(share)} of the run's time"
    evidence = [e.evidence() for e in _quoted(events)]
    if not events:
        evidence.append(Evidence("metric", f"the hook counted {n} recompilations"))
    seconds = run.costs is not None and run.costs.in_seconds
    evidence += _spike_evidence(spikes, seconds)
    return Finding(
        kind="recompiles",
        claim=claim + ".",
        score=score(pair, strength, share if not limit else None),
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
    n = counted(run, "graph_break", "dynamo_graph_breaks")
    n_ref = counted(ref, "graph_break", "dynamo_graph_breaks")
    events = run.ev.events_of("graph_break")
    places = {m.group("at") for e in events if (m := _AT.search(e.text)) is not None}
    ref_places: set[str] = set()
    if ref is not None:
        ref_places = {
            m.group("at")
            for e in ref.ev.events_of("graph_break")
            if (m := _AT.search(e.text)) is not None
        }
    new = places - ref_places
    if not (n > n_ref and (new or not places) and n >= 1):
        return None
    spikes = spikes_after(run, [e.step for e in events if e.step is not None])
    share = _spike_share(run, spikes)
    strength = 0.45 + (0.1 if len(new) > 1 else 0.0) + (0.1 if n >= 5 else 0.0)
    strength += 0.15 if spikes else 0.0
    reason = _reason(events)
    where = f" at {', '.join(sorted(new)[:3])}" if new else ""
    claim = f"dynamo broke the graph {n} times{where} ({pair.ref_name}: {n_ref})"
    if reason:
        claim += f"; reason: {reason[:160]}"
    if spikes and share is not None:
        claim += f"; {len(spikes)} slow steps right after them cost {pct(share)} of the run's time"
    evidence = [e.evidence() for e in _quoted(events)]
    if not events:
        evidence.append(Evidence("metric", f"the hook counted {n} graph breaks"))
    evidence += _spike_evidence(spikes, run.costs is not None and run.costs.in_seconds)
    return Finding(
        kind="graph_breaks",
        claim=claim + ".",
        score=score(pair, strength, share),
        evidence=evidence,
        next=(
            "Each break splits the compiled graph and runs Python in between: rewrite the "
            "call the reason names (or move it out of the compiled region); "
            'TORCH_LOGS="graph_breaks" shows them all.'
        ),
    )
