"""Findings about where wall time goes: `data_wait`, `step_spikes`, `throughput_drop`,
`warmup` (a slow rank, `straggler`, is ledger.analyze.diagnose.ranks').

Evidence: the steps' own columns (step_time_s, wait_s, tokens, wall_time, per-rank
throughput) read through the same analysis as compare (ledger.analyze.run: the steady
window, outliers, change points; ledger.analyze.effective: what each step cost), and a
log's data-time fields (metrics such as data_time) where the hook's wait_s is missing.
Differences between RUN and REF are judged on batch statistics (Welch's t on batch
shares; batch-median intervals), so autocorrelated steps do not count as independent.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ledger.analyze.diagnose.dynamo import AFTER, COMPILES, compile_spikes
from ledger.analyze.diagnose.evidence import Pair, Side, pct, score
from ledger.analyze.diagnose.periodic import find_periodic
from ledger.analyze.diagnose.ranks import late_rank
from ledger.analyze.effective import find_stalls
from ledger.analyze.robust import integrated_time
from ledger.analyze.stats import batch_count
from ledger.analyze.wording import short_value
from ledger.model.terms import NEAR_DROP_EVENT_KINDS, EventKind, FindingKind
from ledger.model.why import Evidence, Finding

P_VALUE = 0.001
WAIT_MIN = 0.01  # a wait share this much above the reference's (of wall time) counts
WAIT_ALONE = 0.05  # ... or this share, with no reference run
SPIKES_MIN = 3
SPIKE_COST_MIN = 0.01  # share of wall time the spikes must add beyond the reference's
REGULAR = 0.2  # gaps between spikes within this relative spread: a period
WARMUP_RATIO = 2.0
WARMUP_SHARE = 0.03
SHOWN = 4

_DATA_TIME = re.compile(
    r"^(?:train[/_.])?(?:data(?:_?time|_?load(?:ing)?(?:_time)?|loader(?:_time)?|_wait)"
    r"|time[/_.]data|load_time)(?:_s)?$",
    re.IGNORECASE,
)


def findings(pair: Pair) -> list[Finding]:
    found = [_data_wait(pair), _spikes(pair), _drop(pair), _warmup(pair)]
    return [f for f in found if f is not None]


# -- data_wait ----------------------------------------------------------------------------


def wait_columns(side: Side) -> tuple[np.ndarray, np.ndarray, np.ndarray, str] | None:
    """(steps, wait s, step time s, what) of the steady window: the hook's wait_s, else a
    log's data-time field against the step time."""
    trace = side.trace
    if trace is None:
        return None
    s = slice(side.start, None)
    if trace.wait_s is not None and trace.step_time_s is not None:
        wait, step = trace.wait_s[s], trace.step_time_s[s]
        keep = np.isfinite(wait) & np.isfinite(step) & (step > 0)
        if keep.sum() >= 20:
            wait = np.maximum(wait[keep], 0.0)
            return trace.steps[s][keep], wait, step[keep] + wait, "wait_s"
    for name, (steps, values) in side.ev.metrics.items():
        if not _DATA_TIME.match(name) or trace.step_time_s is None:
            continue
        at = np.searchsorted(trace.steps, steps)
        ok = (at < len(trace.steps)) & (steps >= (side.steady_from or 0))
        ok[ok] &= trace.steps[at[ok]] == steps[ok]
        times = trace.step_time_s[at[ok]]
        data = values[ok]
        keep = np.isfinite(times) & np.isfinite(data) & (times > 0) & (data >= 0)
        if keep.sum() >= 20:
            # a log's data time is part of the step time it prints (mmengine, detectron2)
            return steps[ok][keep], data[keep], np.maximum(times[keep], data[keep]), name
    return None


def wait_share(side: Side | None) -> float:
    """The share of the steady wall time spent waiting between steps (0 when unknown)."""
    found = wait_columns(side) if side is not None else None
    if found is None:
        return 0.0
    total = float(found[2].sum())
    return float(found[1].sum()) / total if total > 0 else 0.0


def _steady_waits(side: Side) -> tuple[np.ndarray, np.ndarray, np.ndarray, str] | None:
    """wait_columns without the recurring slow steps: a checkpoint every 50 steps waits
    between steps too, but it is a stall (step_spikes), not a loader that cannot keep up."""
    found = wait_columns(side)
    slow = spikes(side)
    if found is None or slow is None or not len(slow.steps):
        return found
    keep = ~np.isin(found[0], slow.steps)
    if keep.sum() < 20:
        return found
    return found[0][keep], found[1][keep], found[2][keep], found[3]


def _batch_shares(wait: np.ndarray, total: np.ndarray) -> np.ndarray:
    k = batch_count(len(wait), integrated_time(wait))
    k = max(k, 2)
    return np.array(
        [
            w.sum() / t.sum()
            for w, t in zip(np.array_split(wait, k), np.array_split(total, k), strict=True)
        ]
    )


def _data_wait(pair: Pair) -> Finding | None:
    from scipy import stats

    if late_rank(pair.run, pair.threshold) is not None:
        return None  # one rank waits, the others wait for it: the straggler finding says it
    found = _steady_waits(pair.run)
    if found is None:
        return None
    steps, wait, total, what = found
    share = float(wait.sum() / total.sum())
    shares = _batch_shares(wait, total)
    ref = _steady_waits(pair.ref) if pair.ref is not None else None
    ref_share = 0.0
    if ref is not None:
        ref_share = float(ref[1].sum() / ref[2].sum())
        ref_shares = _batch_shares(ref[1], ref[2])
        if share - ref_share < max(WAIT_MIN, pair.threshold / 2):
            return None
        test = stats.ttest_ind(shares, ref_shares, equal_var=False)
        if not (math.isfinite(test.pvalue) and test.pvalue < P_VALUE):
            return None
    else:
        low = float(np.mean(shares) - 3 * np.std(shares, ddof=1) / math.sqrt(len(shares)))
        if share < WAIT_ALONE or low < WAIT_ALONE / 2:
            return None
    median_ms = 1000 * float(np.median(wait))
    than = ""
    if ref is not None:
        than = f" ({pair.ref_name}: {1000 * float(np.median(ref[1])):.3g} ms, {pct(ref_share)})"
    source = "waited" if what == "wait_s" else f"spent in data loading ({what})"
    claim = (
        f"{pair.run.name} {source} {median_ms:.3g} ms per step (median), {pct(share)} of its "
        f"steady wall time{than}: the data loader or host work between steps does not keep up"
    )
    worst = np.argsort(wait)[::-1][:SHOWN]
    evidence = [
        Evidence(
            "step", f"step {int(steps[i]):,}: {what} {1000 * wait[i]:.3g} ms", line=int(steps[i])
        )
        for i in sorted(worst)
    ]
    evidence.insert(
        0, Evidence("step", f"{len(wait):,} steady steps: median {what} {median_ms:.3g} ms")
    )
    return Finding(
        FindingKind.DATA_WAIT,
        claim + ".",
        score(pair, 0.9, share - ref_share),
        evidence,
        "Feed the GPU ahead of time: more DataLoader workers, pin_memory and prefetch_factor, "
        "tokenise and pad outside the loop; torch.profiler shows the gap between steps.",
    )


# -- step_spikes --------------------------------------------------------------------------


def _explained_steps(side: Side) -> set[int]:
    """Steps right after a recompile or graph break, and those that compiled where the
    hook's counters rose: their cost is the compile's."""
    out: set[int] = set()
    for e in side.ev.events_of(EventKind.RECOMPILE, EventKind.GRAPH_BREAK):
        if e.step is not None:
            out.update(range(e.step, e.step + AFTER * side.spacing + 1))
    out.update(s for s, _, _ in compile_spikes(side, *COMPILES))
    return out


@dataclass(frozen=True)
class Spikes:
    """The recurring slow steps (or logged lines) of a steady window no compile explains."""

    steps: np.ndarray  # the step of each (for a line: its last step)
    share: float  # of the steady wall time, what they added beyond typical steps
    extra_steps: float  # median of what each added, in typical steps
    every_lines: int | None  # a regular rise every k lines of a log that prints means


def spikes(side: Side) -> Spikes | None:
    """The recurring slow steps no compile explains (worked out once a side: _spikes)."""
    if "spikes" not in side.memo:
        side.memo["spikes"] = _find_spikes(side)
    found = side.memo["spikes"]
    return found if isinstance(found, Spikes) else None


def _find_spikes(side: Side) -> Spikes | None:
    """The recurring slow steps no compile explains; None without steps: the slow outliers,
    and the steps (or lines) of a phase that rises every k of them
    (ledger.analyze.diagnose.periodic). A log that prints the mean of every N steps is read
    as N steps a line: a phase that rises every k lines is a stall every k × N steps."""
    found = side.steady_costs()
    if found is None:
        return None
    steps, work, cost = found
    if side.spacing > 1 and side.trace is not None and side.trace.step_time_s is not None:
        # a line's mean step time is finer than its timestamp (many logs print seconds)
        mean_step = side.trace.step_time_s[side.start :]
        if np.mean(np.isfinite(mean_step) & (mean_step > 0)) >= 0.8:
            work, cost = np.ones(len(mean_step)), mean_step
    split = find_stalls(work, cost)
    mask = split.mask.copy()
    # on noisy steps a stall may hide from the outlier rule, never from its phase
    periodic = find_periodic(work, cost)
    if periodic is not None:
        mask |= periodic.mask
    explained = _explained_steps(side)
    if explained:
        mask &= ~np.isin(steps, list(explained))
    usable = np.isfinite(work) & np.isfinite(cost) & (cost > 0)
    total = float(cost[usable].sum())
    clean = usable & ~mask
    typical = float(work[clean].sum() / cost[clean].sum()) if clean.any() else math.nan
    every = periodic.every if periodic is not None else None
    if not mask.any() or total <= 0 or not (math.isfinite(typical) and typical > 0):
        return Spikes(steps[mask], 0.0, math.nan, every)
    typical_cost = work[mask] / typical
    extra = float(np.nansum(np.maximum(cost[mask] - typical_cost, 0.0)))
    # a line of N steps costs N typical steps: what it added, in steps, is N × its excess
    added = float(np.nanmedian((cost[mask] - typical_cost) / typical_cost)) * side.spacing
    return Spikes(steps[mask], extra / total, added, every)


def _spikes(pair: Pair) -> Finding | None:
    found = spikes(pair.run)
    if found is None:
        return None
    at, share = found.steps, found.share
    if len(at) < SPIKES_MIN:
        return None
    ref = spikes(pair.ref) if pair.ref is not None else None
    ref_share = ref.share if ref is not None else 0.0
    if share - ref_share < SPIKE_COST_MIN or share < 2 * ref_share:
        return None
    gaps = np.diff(at)
    period = float(np.median(gaps)) if len(gaps) else math.nan
    regular = bool(
        len(gaps) >= 2 and period > 0 and np.median(np.abs(gaps - period)) <= REGULAR * period
    )
    every = f" every {period:,.0f} steps" if regular else ""
    than = f" ({pair.ref_name}: {pct(ref_share)})" if pair.ref is not None else ""
    n = pair.run.spacing
    if n > 1:
        lines = f"every {found.every_lines} lines" if found.every_lines else "in some lines"
        claim = (
            f"{len(at)} stalls recur{every}: the log prints the mean of every {n} steps, and "
            f"that mean rises {lines}; each stall adds about {found.extra_steps:.2g} typical "
            f"steps, together {pct(share)} of the steady wall time{than}"
        )
        evidence = [
            Evidence(
                "step", f"the line at step {int(s):,} (steps {int(s) - n + 1:,}–{int(s):,}) is "
                "slow", line=int(s),
            )
            for s in at[:SHOWN]
        ]  # fmt: skip
    else:
        claim = (
            f"{len(at)} slow steps recur{every}, each costing about "
            f"{1 + found.extra_steps:.2g} typical steps; together they add {pct(share)} to the "
            f"steady wall time{than}"
        )
        evidence = [
            Evidence("step", f"step {int(s):,} is a slow step", line=int(s)) for s in at[:SHOWN]
        ]
    if regular:
        evidence.append(Evidence("step", f"median gap {period:,.0f} steps over {len(at)} spikes"))
    return Finding(
        FindingKind.STEP_SPIKES,
        claim + ".",
        score(pair, 0.85 if regular else 0.7, share - ref_share),
        evidence,
        "Something runs every few steps: a checkpoint, an eval, logging that synchronises "
        "(loss.item(), a metrics all-reduce), the garbage collector; make it asynchronous "
        "or less frequent.",
        symptom=f"{len(at)} slow steps{every} added {pct(share)} to the steady wall time",
    )


# -- throughput_drop -----------------------------------------------------------------------


def _near(side: Side, step: int, width: int) -> list[Evidence]:
    """What happened within `width` steps of `step`: events, a memory jump."""
    out = [
        e.evidence()
        for e in side.ev.events
        if e.step is not None and abs(e.step - step) <= width and e.kind in NEAR_DROP_EVENT_KINDS
    ][:SHOWN]
    memory = side.ev.memory
    if memory is not None:
        before = memory.allocated[(memory.step < step) & (memory.step >= step - 10 * width)]
        after = memory.allocated[(memory.step >= step) & (memory.step < step + 10 * width)]
        before, after = before[np.isfinite(before)], after[np.isfinite(after)]
        if len(before) >= 3 and len(after) >= 3:
            b, a = float(np.median(before)), float(np.median(after))
            if b > 0 and abs(a / b - 1) > 0.05 and abs(a - b) > 256:
                out.append(
                    Evidence("step", f"memory allocated {b:,.0f} → {a:,.0f} MiB there", line=step)
                )
    return out


def _drop(pair: Pair) -> Finding | None:
    analysis = pair.run.analysis
    if analysis is None:
        return None
    drops = [c for c in analysis.change_points if c.shift_pct <= -100 * pair.threshold]
    if not drops:
        return None
    worst = min(drops, key=lambda c: c.shift_pct)
    ref = pair.ref.analysis if pair.ref is not None else None
    if ref is not None and any(
        c.shift_pct <= worst.shift_pct / 2 and abs(c.step - worst.step) <= analysis.n_steady // 10
        for c in ref.change_points
    ):
        return None  # the reference fell at the same place: not a difference
    after = max(0, analysis.last_step - worst.step) / max(
        1, analysis.last_step - analysis.steady_from_step
    )
    share = -worst.shift_pct / 100 * after
    width = max(5, analysis.n_steps // 100)
    near = _near(pair.run, worst.step, width)
    lead = f"throughput fell {-worst.shift_pct:.1f} % at step {worst.step:,}"
    claim = f"{lead} ({short_value(worst.before)} → {short_value(worst.after)}) and stayed there"
    claim += "; around that step: " + near[0].text if near else "; nothing was logged there"
    evidence = [
        Evidence(
            "step",
            f"change point at step {worst.step:,} (p = {worst.p_value:.2g})",
            line=worst.step,
        ),
        *near,
    ]
    return Finding(
        FindingKind.THROUGHPUT_DROP,
        claim[:400] + ".",
        score(pair, 0.6 if near else 0.5, share),
        evidence,
        "Look at what changed at that step: the events quoted, memory, the GPU samples "
        "around it; a run that slows down in steps points at a cache, a leak or a recompile.",
        symptom=lead,
    )


# -- warmup ---------------------------------------------------------------------------------


def compiling_in_warmup(side: Side) -> float:
    """What the warm-up's compiling steps cost beyond a typical step (the compiles')."""
    return sum(c - t for s, c, t in compile_spikes(side, *COMPILES) if s < (side.steady_from or 0))


def _excess_warmup(side: Side, less_compile: bool = True) -> tuple[float, float, int] | None:
    """(cost of the warm-up beyond a steady pace, its share of all cost, warm-up steps);
    `less_compile`: beyond what its compiling steps cost too (that is the compiles')."""
    trace, costs = side.trace, side.costs
    if trace is None or costs is None or side.start <= 0:
        return (0.0, 0.0, 0) if trace is not None else None
    s = slice(side.start, None)
    usable = np.isfinite(costs.work[s]) & np.isfinite(costs.cost[s])
    steady_cost = float(costs.cost[s][usable].sum())
    if steady_cost <= 0:
        return None
    rate = float(costs.work[s][usable].sum()) / steady_cost
    head_work, head_cost = costs.work[: side.start], costs.cost[: side.start]
    ok = np.isfinite(head_work) & np.isfinite(head_cost)
    excess = float(np.sum(head_cost[ok] - head_work[ok] / rate))
    if less_compile:
        excess -= compiling_in_warmup(side)
    total = steady_cost + float(head_cost[ok].sum())
    return max(excess, 0.0), max(excess, 0.0) / total if total > 0 else 0.0, side.start


def warmup_holds(
    pair: Pair, less_compile: bool = True
) -> tuple[tuple[float, float, int], tuple[float, float, int]] | None:
    """RUN's and REF's warm-up excess (as _excess_warmup) when RUN's is a finding: more
    than WARMUP_RATIO times REF's and WARMUP_SHARE more of its wall time."""
    found = _excess_warmup(pair.run, less_compile)
    if found is None or pair.ref is None:
        return None
    ref = _excess_warmup(pair.ref, less_compile)
    if ref is None:
        return None
    if found[0] <= WARMUP_RATIO * ref[0] or found[1] - ref[1] < WARMUP_SHARE:
        return None
    return found, ref


def _warmup(pair: Pair) -> Finding | None:
    # what the warm-up spent compiling is the compiles' cost (the recompiles finding):
    # the warm-up is a finding only for the part no compile explains
    holds = warmup_holds(pair)
    if holds is None or pair.ref is None:
        return None
    (excess, share, steps), (ref_excess, ref_share, _) = holds
    seconds = pair.run.costs is not None and pair.run.costs.in_seconds
    unit = " s" if seconds else " (in typical steps' time)"
    compiled = compiling_in_warmup(pair.run)
    beyond = " and its compiling steps" if compiled > 0 else ""
    lead = (
        f"{pair.run.name} took {steps:,} steps to warm up, {excess:,.3g}{unit} beyond a steady "
        f"pace{beyond}, {pct(share)} of its wall time ({pair.ref_name}: {ref_excess:,.3g}{unit}, "
        f"{pct(ref_share)})"
    )
    claim = lead + ": a longer compile or warm-up phase"
    evidence = [
        Evidence("step", f"steady from step {pair.run.steady_from:,}", line=pair.run.steady_from),
        Evidence("step", f"{pair.ref_name} steady from step {pair.ref.steady_from:,}"),
    ]
    return Finding(
        FindingKind.WARMUP,
        claim + ".",
        score(pair, 0.55 + (0.15 if excess > 5 * ref_excess else 0.0)),
        evidence,
        "Compilation at start: fewer distinct shapes early, a cache of compiled kernels "
        "kept between launches (TORCHINDUCTOR_CACHE_DIR), or a lighter compile mode.",
        symptom=f"the warm-up took {excess:,.3g}{unit} beyond a steady pace ({pct(share)})",
    )
