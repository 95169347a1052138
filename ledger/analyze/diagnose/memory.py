"""Memory findings: `oom`, `memory_growth`, `memory_pressure`.

Evidence: the OOM line ("Tried to allocate" against the card's capacity, what PyTorch had
allocated and reserved), the memory counters of the steps (allocated and reserved, MiB),
and GPU samples (memory used against total).

Growth is a trend test, not a comparison of two readings: the steps' memory is cut into
blocks, and Kendall's tau of the block medians against their order must be significant
(p < 0.001) while the Theil-Sen slope over the window adds at least 256 MiB and 5 % of
where it started, and the reference must not grow by a third as much.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ledger.analyze.diagnose.evidence import Memory, Pair, RunEvidence, Side, mib, pct, score
from ledger.model.terms import EventKind, Fate, FindingKind
from ledger.model.why import Evidence, Finding

GROWTH_P = 0.001
GROWTH_MIN_MIB = 256.0
GROWTH_MIN_SHARE = 0.05
GAP_SHARE = 0.2  # reserved but unallocated, as a share of reserved: fragmentation
GAP_MIN_MIB = 1024.0
FULL = 0.95  # a card this full is under pressure
BLOCKS = 50

_SIZE = r"(\d[\d.]*)\s*([KMGT]?i?B)"
_TRIED = re.compile(rf"[Tt]ried to allocate {_SIZE}")
_CAPACITY = re.compile(rf"total capacity of {_SIZE}")
_FREE = re.compile(rf"{_SIZE} is free")
_ALLOCATED = re.compile(rf"{_SIZE} (?:is )?allocated by PyTorch")
_UNALLOCATED = re.compile(rf"{_SIZE} (?:is )?reserved (?:by PyTorch )?but unallocated")
_UNITS = {"B": 1 / 2**20, "KB": 1 / 1024, "KIB": 1 / 1024, "MB": 1.0, "MIB": 1.0,
          "GB": 1024.0, "GIB": 1024.0, "TB": 2**20, "TIB": 2**20}  # fmt: skip

EXPANDABLE = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"


def findings(pair: Pair) -> list[Finding]:
    growth = _growth(pair)
    found = [growth, _oom(pair, growth is not None), _pressure(pair)]
    return [f for f in found if f is not None]


def _size(pattern: re.Pattern[str], text: str) -> float | None:
    m = pattern.search(text)
    if m is None:
        return None
    return float(m.group(1)) * _UNITS.get(m.group(2).upper(), 1.0)


def _oom_event(ev: RunEvidence) -> tuple[Evidence | None, str | None, int | None]:
    events = ev.events_of(EventKind.OOM)
    best = max(events, key=lambda e: ("Tried" in e.text or "tried" in e.text, e.id), default=None)
    if best is not None:
        return best.evidence(), best.text, best.step
    if ev.fate == Fate.OOM and ev.fate_reason:
        return Evidence("run", f"fate oom: {ev.fate_reason[:300]}", id=ev.id), ev.fate_reason, None
    return None, None, None


def _oom(pair: Pair, explained: bool) -> Finding | None:
    run, ref = pair.run.ev, pair.ref.ev if pair.ref is not None else None
    evidence, text, step = _oom_event(run)
    if evidence is None or text is None:
        return None
    both = ref is not None and (ref.fate == Fate.OOM or ref.count(EventKind.OOM) > 0)
    tried, capacity = _size(_TRIED, text), _size(_CAPACITY, text)
    free, allocated = _size(_FREE, text), _size(_ALLOCATED, text)
    unallocated = _size(_UNALLOCATED, text)
    at = f" at step {step:,}" if step is not None else ""
    claim = f"{run.name} ran out of GPU memory{at}"
    if tried is not None:
        claim += f": it tried to allocate {mib(tried)}"
        if free is not None and capacity is not None:
            claim += f" with {mib(free)} free of {mib(capacity)}"
    parts = []
    if allocated is not None:
        parts.append(f"{mib(allocated)} allocated by PyTorch")
    if unallocated is not None:
        parts.append(f"{mib(unallocated)} reserved but unallocated")
    if parts:
        claim += f" ({', '.join(parts)})"
    fragmented = unallocated is not None and (
        (tried is not None and unallocated >= tried)
        or (capacity is not None and unallocated >= 0.05 * capacity)
    )
    if fragmented:
        claim += "; the unallocated reserve would have held it: fragmentation"
    if both:
        claim += f"; {pair.ref_name} ran out of memory too"
    if explained:
        hint = "Stop the growth first (the memory_growth finding): it is what filled the card."
    elif fragmented:
        hint = f"Relaunch with {EXPANDABLE} so freed blocks can be reused across shapes."
    else:
        hint = (
            "Lower the memory a step needs (smaller micro-batch or token budget, activation "
            f"checkpointing) or try {EXPANDABLE}."
        )
    strength = 0.45 if both else (0.7 if explained else 0.85)
    return Finding(FindingKind.OOM, claim + ".", score(pair, strength), [evidence], hint)


def memory_series(memory: Memory | None) -> tuple[str, np.ndarray, np.ndarray] | None:
    """(which counter, steps, MiB) of the counter a run recorded most: allocated, else
    reserved; None with fewer than 10 readings."""
    if memory is None:
        return None
    for name, values in (("allocated", memory.allocated), ("reserved", memory.reserved)):
        keep = np.isfinite(values) & (values > 0)
        if keep.sum() >= 10:
            return name, memory.step[keep], values[keep]
    return None


def trend(steps: np.ndarray, values: np.ndarray) -> tuple[float, float, float] | None:
    """(p-value of Kendall's tau, Theil-Sen slope per step, level at the start) over block
    medians; None when too short."""
    from scipy import stats

    n = len(values)
    if n < 10:
        return None
    count = min(BLOCKS, n // 2)
    blocks = np.array_split(np.arange(n), count)
    x = np.array([float(np.median(steps[b])) for b in blocks])
    y = np.array([float(np.median(values[b])) for b in blocks])
    if np.ptp(y) == 0:
        return 1.0, 0.0, float(y[0])
    tau = stats.kendalltau(x, y)
    slope, intercept, _, _ = stats.theilslopes(y, x)
    start = float(intercept + slope * x[0])
    p = float(tau.pvalue) if math.isfinite(tau.pvalue) else 1.0
    return (p if tau.statistic > 0 else 1.0), float(slope), start


def _window(side: Side) -> tuple[str, np.ndarray, np.ndarray] | None:
    found = memory_series(side.ev.memory)
    if found is None:
        return None
    name, steps, values = found
    start = side.steady_from
    if start is None:  # no analysis: leave the first tenth out (allocation at start-up)
        start = int(steps[len(steps) // 10])
    keep = steps >= start
    if keep.sum() < 10:
        return None
    return name, steps[keep], values[keep]


def _grows(side: Side) -> tuple[str, np.ndarray, np.ndarray, float, float] | None:
    """(counter, steps, values, growth MiB over the window, start level) when it grows."""
    window = _window(side)
    if window is None:
        return None
    name, steps, values = window
    found = trend(steps, values)
    if found is None:
        return None
    p, slope, level = found
    growth = slope * float(steps[-1] - steps[0])
    if p < GROWTH_P and growth >= max(GROWTH_MIN_MIB, GROWTH_MIN_SHARE * max(level, 1.0)):
        return name, steps, values, growth, level
    return None


def _growth(pair: Pair) -> Finding | None:
    run = pair.run
    grows = _grows(run)
    if grows is None:
        return None
    name, steps, values, growth, level = grows
    ref_growth = 0.0
    if pair.ref is not None:
        window = _window(pair.ref)
        found = trend(window[1], window[2]) if window is not None else None
        if found is not None:
            ref_growth = max(0.0, found[1] * float(window[1][-1] - window[1][0]))  # type: ignore[index]  # window is set when found is
        if ref_growth * 3 >= growth:
            return None
    died = run.ev.fate == Fate.OOM or run.ev.count(EventKind.OOM) > 0
    per = growth / max(1.0, float(steps[-1] - steps[0])) * 1000
    claim = (
        f"GPU memory {name} grew by {mib(growth)} over steps {int(steps[0]):,}–{int(steps[-1]):,}"
        f" (from about {mib(level)}, {mib(per)} per 1,000 steps)"
    )
    if pair.ref is not None:
        claim += f" while {pair.ref_name} grew {mib(ref_growth)}"
    if died:
        claim += ", until the run ran out of memory"
    claim += ": something keeps buffers from step to step, like a cache that holds one per shape"
    first, last = 0, len(steps) - 1
    evidence = [
        Evidence(
            "step", f"step {int(steps[i]):,}: {mib(float(values[i]))} {name}", line=int(steps[i])
        )
        for i in (first, len(steps) // 2, last)
    ]
    if died:
        oom, _, _ = _oom_event(run.ev)
        if oom is not None:
            evidence.append(oom)
    strength = 0.95 if died else 0.6 + 0.2 * min(1.0, growth / max(level, 1.0))
    return Finding(
        FindingKind.MEMORY_GROWTH,
        claim + ".",
        score(pair, strength),
        evidence,
        "Find what keeps tensors across steps: a cache keyed by sequence shape (bound it, "
        "or round shapes to a few buckets), losses kept as tensors instead of .item(), a "
        "retained graph; torch.cuda.memory._record_memory_history shows who allocates.",
    )


def _gap(side: Side) -> tuple[float, float, int] | None:
    """(median share of reserved not allocated, its MiB, a step showing it) in steady."""
    memory = side.ev.memory
    if memory is None:
        return None
    start = side.steady_from or 0
    keep = (
        (memory.step >= start)
        & np.isfinite(memory.allocated)
        & np.isfinite(memory.reserved)
        & (memory.reserved > 0)
    )
    if keep.sum() < 10:
        return None
    gap = memory.reserved[keep] - memory.allocated[keep]
    share = gap / memory.reserved[keep]
    i = int(np.argsort(share)[len(share) // 2])
    return float(np.median(share)), float(np.median(gap)), int(memory.step[keep][i])


def _full(side: Side) -> tuple[float, list[Evidence]] | None:
    """(median share of the card used, evidence) over GPU samples."""
    rows = [
        g
        for g in side.ev.gpu
        if g.memory_used_mib is not None and g.memory_total_mib and g.memory_total_mib > 0
    ]
    if len(rows) < 2:
        return None
    shares = [g.memory_used_mib / g.memory_total_mib for g in rows]  # type: ignore[operator]  # filtered above
    evidence = [
        Evidence(
            "gpu_sample",
            f"GPU {g.gpu_index}: {mib(g.memory_used_mib or 0)} of {mib(g.memory_total_mib or 0)}",
            id=g.id,
        )
        for g in rows[:3]
    ]
    return float(np.median(shares)), evidence


def _pressure(pair: Pair) -> Finding | None:
    run, ref = pair.run, pair.ref
    gap = _gap(run)
    ref_gap = _gap(ref) if ref is not None else None
    fragmented = gap is not None and gap[0] >= GAP_SHARE and gap[1] >= GAP_MIN_MIB
    if gap is not None and fragmented and (ref_gap is None or ref_gap[0] <= gap[0] - 0.1):
        share, size, at = gap
        than = f" ({pair.ref_name}: {pct(ref_gap[0])})" if ref_gap is not None else ""
        claim = (
            f"the caching allocator held {mib(size)} reserved but unallocated, "
            f"{pct(share)} of what it reserved{than}: fragmentation across changing shapes"
        )
        evidence = [Evidence("step", f"step {at:,}: reserved − allocated = {mib(size)}", line=at)]
        return Finding(
            FindingKind.MEMORY_PRESSURE,
            claim + ".",
            score(pair, 0.45),
            evidence,
            f"Relaunch with {EXPANDABLE}; pad to fewer shapes.",
        )
    full = _full(run)
    ref_full = _full(ref) if ref is not None else None
    if full is not None and full[0] >= FULL and (ref_full is None or ref_full[0] < FULL - 0.05):
        than = f" ({pair.ref_name}: {pct(ref_full[0])})" if ref_full is not None else ""
        claim = f"the GPUs ran {pct(full[0])} full of memory{than}: the allocator is at its limit"
        return Finding(
            FindingKind.MEMORY_PRESSURE,
            claim + ".",
            score(pair, 0.4),
            full[1],
            f"Near the limit the allocator frees and retries (cudaFree syncs): try {EXPANDABLE}, "
            "or lower the memory a step needs.",
        )
    return None
