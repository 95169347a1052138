"""Causes before symptoms: a symptom that a cause's evidence covers is folded into it.

The findings form a small causal order (ledger.model.why.CAUSE_KINDS explain
SYMPTOM_KINDS): GPUs that wait, slow steps, a long warm-up and a throughput that falls
are what a recompile storm, a slow data loader, a changed setting, a leak or a throttled
GPU look like from outside. Ranking the symptom above its cause sends the reader after
the wrong thing ("the GPU is idle" when it was compiling), so when a cause's evidence
covers a symptom's, the same steps or the same time, the symptom is said inside the
cause's claim ("the GPUs waited, busy 8 % of the time (eager: 97 %), because
torch.compile recompiled …"), its evidence follows the cause's, the cause takes the
higher of the two scores and lists the symptom in `explains`. A symptom no cause covers
stays a finding of its own.

What covers what (each rule reads the rows both findings rest on):

- compiles (recompiles, graph_breaks) cover GPU idleness when half the idle samples were
  taken at or just before a step that compiled, or when the compiling steps' share of the
  wall time is at least half the idle share; slow steps when half of them compiled; a
  throughput drop that starts at a compile; the warm-up's cost when what its compiling
  steps took is what made it long.
- data_wait covers GPU idleness when the wait's share (beyond REF's) is at least half the
  idle share, and slow steps when their waits are at least half of what they added.
- straggler covers GPU idleness as data_wait does (the other ranks wait for it).
- memory (growth, pressure, an OOM) covers a drop at which the memory jumped.
- throttling covers a drop when half the throttled samples come after it.
- a changed setting, version or patch covers GPU idleness when no cause of time does
  (a setting that changes performance: a batch size, a compile flag…), and a long warm-up
  when a compile setting changed.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ledger.analyze.diagnose import config, dynamo, gpu, timing
from ledger.analyze.diagnose.evidence import GpuRow, Pair, pct
from ledger.model.terms import FindingKind
from ledger.model.why import CAUSE_KINDS, SYMPTOM_KINDS, Evidence, Finding

HALF = 0.5
FOLDED_EVIDENCE = 2  # rows of each folded symptom kept under the cause
WEAK = 0.5  # how much a whole-run cause (a setting) covers: below any measured cover
COMPILE_KINDS = {
    FindingKind.RECOMPILES: dynamo.RECOMPILES,
    FindingKind.GRAPH_BREAKS: dynamo.GRAPH_BREAKS,
}


def fold(pair: Pair, found: list[Finding]) -> list[Finding]:
    """The findings with each covered symptom folded into the cause that covers it best."""
    causes = [f for f in found if f.kind in CAUSE_KINDS]
    if not causes:
        return found
    folded: dict[int, list[Finding]] = {i: [] for i in range(len(causes))}
    kept: list[Finding] = []
    for symptom in (f for f in found if f.kind in SYMPTOM_KINDS):
        best: tuple[float, float, int] | None = None
        for i, cause in enumerate(causes):
            cover = covers(pair, cause, symptom)
            if cover > 0 and (best is None or (cover, cause.score) > best[:2]):
                best = (cover, cause.score, i)
        if best is None:
            kept.append(symptom)
        else:
            folded[best[2]].append(symptom)
    # the warm-up's compiling is said once, by the first compile finding (recompiles)
    first = next((i for i, c in enumerate(causes) if c.kind in COMPILE_KINDS), None)
    out = [_merged(pair, cause, folded[i], i == first) for i, cause in enumerate(causes)]
    others = [f for f in found if f.kind not in CAUSE_KINDS and f.kind not in SYMPTOM_KINDS]
    return out + kept + others


def _merged(pair: Pair, cause: Finding, symptoms: list[Finding], warm_up: bool) -> Finding:
    leads = [s.symptom or s.claim.rstrip(".") for s in symptoms]
    explains = [s.kind for s in symptoms]
    if warm_up and FindingKind.WARMUP not in explains:
        warm = _compiled_warmup(pair)
        if warm is not None:
            leads.append(warm)
            explains.append(FindingKind.WARMUP)
    if not leads:
        return cause
    evidence = list(cause.evidence)
    for s in symptoms:
        evidence += [
            Evidence(e.table, f"{s.kind}: {e.text}", id=e.id, line=e.line)
            for e in s.evidence[:FOLDED_EVIDENCE]
        ]
    score = max([cause.score, *(s.score for s in symptoms)])
    return dataclasses.replace(
        cause,
        claim="; ".join(leads) + ", because " + cause.claim,
        score=score,
        evidence=evidence,
        explains=explains,
    )


def _compiled_warmup(pair: Pair) -> str | None:
    """The warm-up's cost in words when it would have been a finding but for the steps
    that compiled in it (they are the compiles' cost)."""
    compiled = timing.compiling_in_warmup(pair.run)
    if compiled <= 0 or timing.warmup_holds(pair) is not None:
        return None
    holds = timing.warmup_holds(pair, less_compile=False)
    if holds is None:
        return None
    (excess, share, _), _ = holds
    return f"the warm-up took {excess:,.3g} s beyond a steady pace ({pct(share)})"


def covers(pair: Pair, cause: Finding, symptom: Finding) -> float:
    """How well `cause`'s evidence covers `symptom`'s: 0 (not at all) to 1."""
    kind, what = cause.kind, symptom.kind
    if kind in COMPILE_KINDS:
        return _compile_covers(pair, COMPILE_KINDS[kind], symptom)
    if kind == FindingKind.DATA_WAIT:
        if what == FindingKind.GPU_IDLE:
            return _share_covers(_wait_beyond(pair), _idle_share(pair))
        if what == FindingKind.STEP_SPIKES:
            return _wait_in_spikes(pair)
        return 0.0
    if kind == FindingKind.STRAGGLER and what == FindingKind.GPU_IDLE:
        return _share_covers(_straggler_gap(cause), _idle_share(pair))
    if (
        kind in (FindingKind.MEMORY_GROWTH, FindingKind.MEMORY_PRESSURE, FindingKind.OOM)
        and what == FindingKind.THROUGHPUT_DROP
    ):
        return 1.0 if any("memory allocated" in e.text for e in symptom.evidence) else 0.0
    if kind == FindingKind.THROTTLING and what == FindingKind.THROUGHPUT_DROP:
        return _throttled_after(pair, _drop_step(symptom))
    if kind in (FindingKind.CONFIG_CHANGE, FindingKind.VERSION_CHANGE, FindingKind.PATCH):
        if what == FindingKind.GPU_IDLE and _performance(cause):
            return WEAK * 0.5
        if (
            what == FindingKind.WARMUP
            and kind == FindingKind.CONFIG_CHANGE
            and _mentions(cause, "compile")
        ):
            return WEAK
    return 0.0


def _share_covers(cause_share: float | None, symptom_share: float | None) -> float:
    if cause_share is None or symptom_share is None or not symptom_share > 0:
        return 0.0
    ratio = cause_share / symptom_share
    return min(1.0, ratio) if ratio >= HALF else 0.0


def _compile_covers(
    pair: Pair, which: tuple[tuple[str, ...], tuple[str, ...]], symptom: Finding
) -> float:
    run = pair.run
    spikes = dynamo.compile_spikes(run, *which)
    steps = np.array(sorted({s for s, _, _ in spikes}), dtype=np.int64)
    events = [e.step for e in run.ev.events_of(*which[0]) if e.step is not None]
    slack = dynamo.AFTER * run.spacing
    if symptom.kind == FindingKind.GPU_IDLE:
        near = _near_fraction(_idle_steps(pair), steps, slack + 1)
        if near is not None and near >= HALF:
            return near
        share = dynamo.compile_share(run, spikes)
        ref = dynamo.compile_share(pair.ref, dynamo.compile_spikes(pair.ref, *which)) or 0.0
        return _share_covers(None if share is None else share - ref, _idle_share(pair))
    if symptom.kind == FindingKind.STEP_SPIKES:
        found = timing.spikes(run)
        if found is None:
            return 0.0
        near = _near_fraction(found.steps, steps, slack)
        return near if near is not None and near >= HALF else 0.0
    if symptom.kind == FindingKind.THROUGHPUT_DROP:
        at = _drop_step(symptom)
        analysis = run.analysis
        if at is None or analysis is None:
            return 0.0
        width = max(5, analysis.n_steps // 100) * run.spacing
        where = np.concatenate([steps, np.array(events, dtype=np.int64)])
        return 1.0 if len(where) and np.min(np.abs(where - at)) <= width else 0.0
    return 0.0


def _near_fraction(at: np.ndarray | None, steps: np.ndarray, slack: int) -> float | None:
    """The share of `at` within `slack` steps before (or at) one of `steps`, or just after."""
    if at is None or len(at) == 0 or len(steps) == 0:
        return None
    where = np.searchsorted(steps, at, side="left")
    after = steps[np.minimum(where, len(steps) - 1)]
    before = steps[np.maximum(where - 1, 0)]
    near = ((after - at >= 0) & (after - at <= slack)) | ((at - before >= 0) & (at - before <= 2))
    return float(np.mean(near))


def _idle_rows(pair: Pair) -> list[GpuRow]:
    return [
        g
        for g in gpu.steady_samples(pair.run)
        if g.utilization_pct is not None and g.utilization_pct < gpu.IDLE
    ]


def _idle_steps(pair: Pair) -> np.ndarray | None:
    steps = [g.step for g in _idle_rows(pair) if g.step is not None and g.probe_id is None]
    return np.array(sorted(steps), dtype=np.int64) if len(steps) >= gpu.MIN_SAMPLES else None


def _busy(samples: list[GpuRow]) -> float | None:
    util = [g.utilization_pct for g in samples if g.utilization_pct is not None]
    return float(np.median(util)) if len(util) >= gpu.MIN_SAMPLES else None


def _idle_share(pair: Pair) -> float | None:
    """How much of the time the GPUs waited beyond REF's (or beyond busy), 0-1."""
    run = _busy(gpu.steady_samples(pair.run))
    if run is None:
        return None
    ref = _busy(gpu.steady_samples(pair.ref)) if pair.ref is not None else None
    if ref is not None and ref > 0:
        return max(0.0, (ref - run) / ref)
    return max(0.0, 1.0 - run / 100.0)


def _wait_beyond(pair: Pair) -> float:
    return timing.wait_share(pair.run) - timing.wait_share(pair.ref)


def _wait_in_spikes(pair: Pair) -> float:
    """The share of what the slow steps added that was waiting for data: the hook's wait_s
    between steps, or a log's data time inside them."""
    found = timing.spikes(pair.run)
    columns = timing.wait_columns(pair.run)
    if found is None or columns is None or not len(found.steps):
        return 0.0
    steps, wait, total, _ = columns
    at = np.isin(steps, found.steps)
    if not at.any():
        return 0.0
    typical_wait = float(np.median(wait))
    typical_total = float(np.median(total))
    extra = float(np.sum(np.maximum(total[at] - typical_total, 0.0)))
    waited = float(np.sum(np.maximum(wait[at] - typical_wait, 0.0)))
    if not (extra > 0 and math.isfinite(waited)):
        return 0.0
    ratio = waited / extra
    return min(1.0, ratio) if ratio >= HALF else 0.0


def _straggler_gap(cause: Finding) -> float | None:
    """The straggler's gap to the median rank, from its evidence ("median 0.900 of …")."""
    for e in cause.evidence:
        if "median " in e.text and "of the ranks' median" in e.text:
            try:
                return 1.0 - float(e.text.split("median ", 1)[1].split(" ", 1)[0])
            except ValueError:
                return None
    return None


def _drop_step(symptom: Finding) -> int | None:
    return symptom.evidence[0].line if symptom.evidence else None


def _throttled_after(pair: Pair, at: int | None) -> float:
    if at is None:
        return 0.0
    hit = [g for g in gpu.steady_samples(pair.run) if g.step is not None and gpu.throttled(g)]
    if len(hit) < gpu.MIN_SAMPLES:
        return 0.0
    after = float(np.mean([g.step is not None and g.step >= at for g in hit]))
    return after if after >= HALF else 0.0


def _keys(cause: Finding) -> list[str]:
    """The settings a config finding's evidence names ("run: flag.batch = 8 (hook)")."""
    return [
        e.text.split(" = ", 1)[0].split(": ", 1)[-1]
        for e in cause.evidence
        if e.table == "run_config" and " = " in e.text
    ]


def _performance(cause: Finding) -> bool:
    """Whether a setting that differs is one that changes performance (config.PERF)."""
    return cause.kind != FindingKind.CONFIG_CHANGE or any(
        config.PERF.search(k) for k in _keys(cause)
    )


def _mentions(cause: Finding, word: str) -> bool:
    return any(word in k.lower() for k in _keys(cause))
