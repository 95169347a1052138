"""A slow rank: `straggler`.

Evidence: per-rank rows of the steady steps. Where ranks run at their own pace, one rank's
throughput against the median rank at the same step (batch-median interval). Where they
are synchronous (DDP, FSDP: every rank's interval is the same, so throughput cannot tell),
the composition of each step: one rank waits longer between steps (its data, its host)
while the others spend about as long more inside theirs, waiting for it at the
collectives.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ledger.analyze.diagnose.evidence import Pair, Side, pct, score
from ledger.analyze.robust import integrated_time
from ledger.analyze.stats import batch_count, estimate_median
from ledger.model.terms import FindingKind
from ledger.model.why import Evidence, Finding

P_VALUE = 0.001


def findings(pair: Pair) -> list[Finding]:
    found = _straggler(pair)
    return [found] if found is not None else []


def rank_ratios(side: Side) -> dict[int, np.ndarray] | None:
    """Each rank's throughput over the median of all ranks at the same step, steady steps."""
    trace = side.trace
    if trace is None or trace.ranks is None or side.steady_from is None:
        return None
    r = trace.ranks
    keep = (r.step >= side.steady_from) & np.isfinite(r.value) & (r.value > 0)
    rank, step, value = r.rank[keep], r.step[keep], r.value[keep]
    if len(np.unique(rank)) < 2:
        return None
    steps, step_at = np.unique(step, return_inverse=True)
    names, rank_at = np.unique(rank, return_inverse=True)
    grid = np.full((len(steps), len(names)), np.nan)  # one row per step, one column per rank
    grid[step_at, rank_at] = value
    with np.errstate(all="ignore"):
        ratio = grid / np.nanmedian(grid, axis=1)[:, None]
    return {int(k): ratio[:, i][np.isfinite(ratio[:, i])] for i, k in enumerate(names)}


@dataclass(frozen=True)
class LateRank:
    """A rank that waits outside its steps while the others wait for it inside theirs."""

    rank: int
    gap_s: float  # its median wait between steps beyond the other ranks'
    inside_s: float  # the other ranks' median step time beyond its own
    steps: int


def late_rank(side: Side | None, threshold: float) -> LateRank | None:
    """In synchronous training every rank's interval is the same, so a slow rank does not
    show in per-rank throughput: it shows as a rank whose wait between steps (its data, its
    host) is longer than the others', while theirs are longer inside the step by about as
    much (they wait for it at the collectives). Batch means of the per-step gap (as many
    batches as its autocorrelation allows) must be above `threshold` of a typical step."""
    from scipy import stats

    if side is None or side.ev.columns is None or side.steady_from is None:
        return None
    cols = side.ev.columns
    if cols.rank is None or cols.wait_s is None or cols.step_time_s is None:
        return None
    keep = (cols.step >= side.steady_from) & np.isfinite(cols.wait_s)
    keep &= np.isfinite(cols.step_time_s)
    rank, step = cols.rank[keep], cols.step[keep]
    wait, inside = cols.wait_s[keep], cols.step_time_s[keep]
    names = np.unique(rank)
    if len(names) < 2:
        return None
    steps, at = np.unique(step, return_inverse=True)
    where = np.searchsorted(names, rank)
    grid_wait = np.full((len(steps), len(names)), np.nan)
    grid_in = np.full((len(steps), len(names)), np.nan)
    grid_wait[at, where], grid_in[at, where] = wait, inside
    full = np.all(np.isfinite(grid_wait) & np.isfinite(grid_in), axis=1)
    if full.sum() < 20:
        return None
    grid_wait, grid_in = grid_wait[full], grid_in[full]
    slow = int(np.argmax(np.median(grid_wait, axis=0)))
    others = [i for i in range(len(names)) if i != slow]
    gap = grid_wait[:, slow] - np.median(grid_wait[:, others], axis=1)
    longer = np.median(grid_in[:, others], axis=1) - grid_in[:, slow]
    typical = float(np.median(grid_in + grid_wait))
    k = max(2, batch_count(len(gap), integrated_time(gap)))
    means = np.array([b.mean() for b in np.array_split(gap, k)])
    bound = threshold * typical
    if np.ptp(means) <= 1e-9 * max(abs(float(means[0])), 1e-12):
        p = 0.0 if means[0] > bound else 1.0  # no spread at all: the test has nothing to say
    else:
        p = float(stats.ttest_1samp(means, bound, alternative="greater").pvalue)
    median_gap, median_longer = float(np.median(gap)), float(np.median(longer))
    if not (math.isfinite(p) and p < P_VALUE):
        return None
    if median_gap < threshold * typical or median_longer < 0.5 * median_gap:
        return None
    return LateRank(int(names[slow]), median_gap, median_longer, int(full.sum()))


def _late_straggler(pair: Pair) -> Finding | None:
    late = late_rank(pair.run, pair.threshold)
    if late is None:
        return None
    ref = late_rank(pair.ref, pair.threshold)
    if ref is not None and ref.rank == late.rank and ref.gap_s >= late.gap_s / 2:
        return None  # as late in the reference: not this difference
    found = pair.run.steady_costs()
    typical = float(np.nanmedian(found[2])) if found is not None else math.nan
    share = late.gap_s / typical if typical > 0 else None
    claim = (
        f"rank {late.rank} waited {1000 * late.gap_s:.3g} ms longer between steps than the "
        f"other ranks (median over {late.steps:,} steady steps), and they spent "
        f"{1000 * late.inside_s:.3g} ms longer inside theirs: in synchronous training they "
        f"wait for rank {late.rank} at every collective"
    )
    return Finding(
        FindingKind.STRAGGLER,
        claim + ".",
        score(pair, 0.8, share),
        [
            Evidence(
                "step",
                f"rank {late.rank}: wait_s {1000 * late.gap_s:.3g} ms above the "
                "other ranks' (median a step)",
            ),
            Evidence(
                "step",
                f"the other ranks: step_time_s {1000 * late.inside_s:.3g} ms "
                f"above rank {late.rank}'s",
            ),
        ],
        f"Look at what rank {late.rank} does between steps: its data loader and shard, its "
        "host (CPU binding, other processes), a logging or checkpoint call only it makes.",
    )


def _straggler(pair: Pair) -> Finding | None:
    ratios = rank_ratios(pair.run)
    if ratios is None:
        return _late_straggler(pair)
    estimates = {k: estimate_median(v[v > 0]) for k, v in ratios.items() if len(v) >= 10}
    if len(estimates) < 2:
        return None
    slow = min(estimates, key=lambda k: estimates[k].value)
    est = estimates[slow]
    ci = est.interval()
    if not (est.value <= 1 - pair.threshold and ci is not None and ci[1] < 1 - pair.threshold / 2):
        return _late_straggler(pair)
    ref_ratios = rank_ratios(pair.ref) if pair.ref is not None else None
    ref_value = None
    if ref_ratios is not None and slow in ref_ratios and len(ref_ratios[slow]) >= 10:
        ref_value = float(np.median(ref_ratios[slow]))
        if ref_value <= est.value + pair.threshold / 2:
            return None  # as slow in the reference: not this difference
    gap = 1 - est.value
    than = f" ({pair.ref_name}: {pct(1 - ref_value)} behind)" if ref_value is not None else ""
    claim = (
        f"rank {slow} ran {pct(gap)} slower than the median rank over {len(ratios[slow]):,} "
        f"steady steps{than}: one straggler holds back every collective"
    )
    return Finding(
        FindingKind.STRAGGLER,
        claim + ".",
        score(pair, 0.75, gap),
        [
            Evidence(
                "step",
                f"rank {slow}: median {est.value:.3f} of the ranks' median, "
                f"95 % interval {ci[0]:.3f}–{ci[1]:.3f}",
            )
        ],
        f"Look at rank {slow}'s GPU and host: clocks, temperature and throttle reasons, its "
        "links, its CPU binding and data shard; drain or swap the node.",
    )
