"""GPU findings: `gpu_idle` and `throttling`.

Evidence: GPU samples, from a probe's nvidia-smi (gpu_sample rows with a probe) or from
the hook's NVML sampling during the run (rows with a run, a rank and the step). The
hook's samples taken during warm-up are left out; a probe's are all taken as they are.
"""

from __future__ import annotations

import numpy as np

from ledger.analyze.diagnose.evidence import GpuRow, Pair, Side, pct, score
from ledger.model.terms import FindingKind
from ledger.model.why import Evidence, Finding

IDLE = 70.0  # % utilisation below which a GPU waits for something
IDLE_GAP = 15.0  # points below the reference's median
IDLE_ALONE = 60.0  # with no samples of the reference
MIN_SAMPLES = 2
THROTTLE_SHARE = 0.25
CLOCK_SHARE = 0.85  # an SM clock below this share of its maximum, under load, is throttled
# NVML's reasons that slow a busy GPU (idle and application-clock reasons do not)
SLOWING = ("sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")
SHOWN = 4


def findings(pair: Pair) -> list[Finding]:
    found = [_idle(pair), _throttling(pair)]
    return [f for f in found if f is not None]


def steady_samples(side: Side | None) -> list[GpuRow]:
    if side is None:
        return []
    start = side.steady_from
    return [
        g
        for g in side.ev.gpu
        if g.probe_id is not None or start is None or g.step is None or g.step >= start
    ]


def _evidence(rows: list[GpuRow], text: str) -> list[Evidence]:
    picked = rows if len(rows) <= SHOWN else [rows[0], rows[len(rows) // 2], rows[-1]]
    out = []
    for g in picked:
        where = f"probe #{g.probe_id}, " if g.probe_id is not None else ""
        at = f", step {g.step:,}" if g.step is not None else ""
        out.append(
            Evidence("gpu_sample", f"{where}GPU {g.gpu_index}{at}: {text.format(g=g)}", id=g.id)
        )
    return out


def _idle(pair: Pair) -> Finding | None:
    rows = [g for g in steady_samples(pair.run) if g.utilization_pct is not None]
    if len(rows) < MIN_SAMPLES:
        return None
    util = np.array([g.utilization_pct for g in rows], dtype=np.float64)
    median = float(np.median(util))
    low = float(np.mean(util < IDLE))
    ref_rows = [g for g in steady_samples(pair.ref) if g.utilization_pct is not None]
    ref_median = None
    if len(ref_rows) >= MIN_SAMPLES:
        ref_median = float(np.median([g.utilization_pct for g in ref_rows]))
    if median >= IDLE or low < 0.6:
        return None
    if ref_median is not None and ref_median - median < IDLE_GAP:
        return None
    if ref_median is None and median > IDLE_ALONE:
        return None
    than = f" ({pair.ref_name}: {ref_median:.0f} %)" if ref_median is not None else ""
    claim = (
        f"the GPUs were busy {median:.0f} % of the time (median of {len(rows)} samples, "
        f"{pct(low)} of them below {IDLE:.0f} %){than}: they wait for the host (data, "
        "Python, kernel launches) or for each other"
    )
    share = (ref_median - median) / ref_median if ref_median else None
    lead = f"the GPUs waited, busy {median:.0f} % of the time{than}"
    return Finding(
        FindingKind.GPU_IDLE,
        claim + ".",
        score(pair, 0.6 + 0.3 * (IDLE - median) / IDLE, share),
        _evidence(rows, "{g.utilization_pct:.0f} % busy"),
        "Profile one step (torch.profiler) to see what the GPU waits for: the data loader, "
        "CPU-bound Python, many small kernels (CUDA graphs, torch.compile), host-device copies.",
        symptom=lead,
    )


def throttled(g: GpuRow) -> bool:
    reasons = {r.strip() for r in (g.throttle or "").split(",") if r.strip()}
    if reasons & set(SLOWING):
        return True
    busy = g.utilization_pct is None or g.utilization_pct >= 50
    return bool(
        busy
        and g.sm_clock_mhz is not None
        and g.max_sm_clock_mhz
        and g.sm_clock_mhz < CLOCK_SHARE * g.max_sm_clock_mhz
    )


def _told(rows: list[GpuRow]) -> list[GpuRow]:
    """Samples that can say whether they throttled (a reason list or clocks)."""
    return [g for g in rows if g.throttle is not None or g.max_sm_clock_mhz]


def _throttling(pair: Pair) -> Finding | None:
    rows = _told(steady_samples(pair.run))
    if len(rows) < MIN_SAMPLES:
        return None
    hit = [g for g in rows if throttled(g)]
    share = len(hit) / len(rows)
    if share < THROTTLE_SHARE or len(hit) < MIN_SAMPLES:
        return None
    ref_rows = _told(steady_samples(pair.ref))
    ref_share = None
    if len(ref_rows) >= MIN_SAMPLES:
        ref_share = sum(throttled(g) for g in ref_rows) / len(ref_rows)
        if share - ref_share < 0.2:
            return None
    reasons = sorted({r.strip() for g in hit for r in (g.throttle or "").split(",") if r.strip()})
    clocks = [
        g.sm_clock_mhz / g.max_sm_clock_mhz for g in hit if g.sm_clock_mhz and g.max_sm_clock_mhz
    ]
    clock = float(np.median(clocks)) if clocks else None
    said = f" ({', '.join(reasons)})" if reasons else ""
    than = f" ({pair.ref_name}: {pct(ref_share)})" if ref_share is not None else ""
    claim = f"the GPUs throttled in {pct(share)} of {len(rows)} samples{said}{than}"
    if clock is not None:
        claim += f", their SM clock at {pct(clock)} of its maximum"
    return Finding(
        FindingKind.THROTTLING,
        claim + ".",
        score(pair, 0.65, 1 - clock if clock is not None else None),
        _evidence(hit, "throttle {g.throttle}, SM {g.sm_clock_mhz} of {g.max_sm_clock_mhz} MHz"),
        "Check power limits and cooling (nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE); "
        "a hardware slowdown points at a failing GPU or power supply: try another node.",
    )
