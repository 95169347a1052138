"""The verdict in words, and the number formats every part of ledger shows them in."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledger.model.terms import Fate, Verdict, WatchPhase

if TYPE_CHECKING:
    from ledger.model.analysis import MonitorState


def short_value(value: float | None, digits: int = 3, *, missing: str = "-") -> str:
    """14200 → '14.2K', 1250000 → '1.25M', 0.82 → '0.82' (`digits` significant digits);
    `missing` when there is no finite value (the report's figures draw an en dash)."""
    if value is None or not math.isfinite(value):
        return missing
    magnitude = abs(value)
    if magnitude >= 1e6:
        return f"{value / 1e6:.{digits}g}M"
    if magnitude >= 1e3:
        return f"{value / 1e3:.{digits}g}K"
    return f"{value:.{digits}g}"


def p_text(p: float | None) -> str:
    if p is None or not math.isfinite(p):
        return "p n/a"
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.2g}" if p < 0.1 else f"p = {p:.2f}"


def pct(value: float | None, signed: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:+.1f} %" if signed else f"{value:.1f} %"


def interval_text(ci: tuple[float, float] | None) -> str:
    if ci is None:
        return "CI n/a"
    if ci[0] < 0 or ci[1] < 0:  # "-28.5–-25.3" misreads; spell the range out
        return f"CI {ci[0]:.1f} to {ci[1]:.1f} %"
    return f"CI {ci[0]:.1f}–{ci[1]:.1f} %"


@dataclass(frozen=True)
class ComparedStretch:
    """A run compared from its last change point on: where, and how far it moved."""

    from_step: int
    shift_pct: float

    def words(self, run: str) -> str:
        verb = "rose" if self.shift_pct > 0 else "fell"
        return f"{run} {verb} {abs(self.shift_pct):.1f} % at step {self.from_step:,}"


def comparison_sentence(
    a: str,
    b: str,
    delta_pct: float,
    ci95_pct: tuple[float, float] | None,
    p_value: float | None,
    verdict: str,
    threshold_pct: float,
    *,
    stretch_a: ComparedStretch | None = None,
    stretch_b: ComparedStretch | None = None,
    whole_delta_pct: float | None = None,
    median_delta_pct: float | None = None,
    stall_cost_pct: tuple[float, float] = (0.0, 0.0),
) -> str:
    """'b is 31.2 % faster than a (CI 29.8–32.5 %, p < 0.001)' and its no-change forms.

    With a regime ('b fell 20.0 % at step 2,400; since then it is 19.8 % slower than a
    …; whole steady window −9.9 %'), and the typical step and stall costs beside it when
    they tell a different story than the effective figure.
    """
    lead = ""
    subject = b
    if stretch_a is not None and stretch_b is not None:
        lead = f"{stretch_a.words(a)} and {stretch_b.words(b)}; since then "
    elif stretch_b is not None:
        lead, subject = f"{stretch_b.words(b)}; since then ", "it"
    elif stretch_a is not None:
        lead = f"{stretch_a.words(a)}; against {a} since then, "
    parts = [lead + _core(a, subject, delta_pct, ci95_pct, p_value, verdict, threshold_pct)]
    if whole_delta_pct is not None and math.isfinite(whole_delta_pct):
        parts.append(f"whole steady window {pct(whole_delta_pct, signed=True)}")
    cost_a, cost_b = stall_cost_pct
    notable = threshold_pct / 2.0
    if max(cost_a, cost_b) >= notable:
        parts.append(f"recurring stalls cost {b} {pct(cost_b)} of its time, {a} {pct(cost_a)}")
    typical = median_delta_pct is not None and math.isfinite(median_delta_pct)
    if typical and abs(median_delta_pct - delta_pct) >= notable:  # type: ignore[operator]
        parts.append(f"typical step {pct(median_delta_pct, signed=True)}")
    return "; ".join(parts)


def _core(
    a: str,
    subject: str,
    delta_pct: float,
    ci95_pct: tuple[float, float] | None,
    p_value: float | None,
    verdict: str,
    threshold_pct: float,
) -> str:
    evidence = f"({interval_text(ci95_pct)}, {p_text(p_value)})"
    verb = "is"
    if verdict == Verdict.IMPROVEMENT:
        return f"{subject} {verb} {abs(delta_pct):.1f} % faster than {a} {evidence}"
    if verdict == Verdict.REGRESSION:
        return f"{subject} {verb} {abs(delta_pct):.1f} % slower than {a} {evidence}"
    if abs(delta_pct) >= threshold_pct:
        reason = "not significant"
    elif p_value is not None and math.isfinite(p_value) and p_value < 0.05:
        reason = f"below the {threshold_pct:g} % threshold"
    else:
        reason = "within noise"
    return (
        f"{subject} {verb} no different from {a}: {pct(delta_pct, signed=True)} {evidence}, "
        f"{reason}"
    )


# The fates of a launch that died: never "recovered", whatever its figure.
DEAD_FATES = frozenset({Fate.KILLED, Fate.OOM, Fate.CRASHED, Fate.NCCL, Fate.STALLED})


def recovery_word(recovered: bool | None, fate: str | None = None) -> tuple[str, bool]:
    """What a run's figure against the baseline makes it, and whether that is good news:
    'recovered' for a finished or running launch (or one whose fate nothing tells); a
    run that died is named by its fate ('killed: not a recovery'), whatever its figure."""
    if recovered is None:
        return "not comparable", False
    if fate is not None and fate in DEAD_FATES:
        return f"{fate}: not a recovery", False
    # finished, running, or nothing known against it (a run fed through the API)
    return ("recovered", True) if recovered else ("not recovered", False)


def counted(n: int, thing: str) -> str:
    """'1 step', '2 steps', '1,500 steps'."""
    return f"{n:,} {thing}" if n == 1 else f"{n:,} {thing}s"


def baseline_sentence(
    vs_baseline_pct: float | None,
    value: float | None,
    recovered: bool | None,
    fate: str | None = None,
) -> str:
    """'at 99.1 % of the 14.2K baseline' (+ 'recovered', 'not recovered', or for a run
    that died its fate: 'killed: not a recovery')."""
    if vs_baseline_pct is None or value is None:
        return ""
    state, _ = recovery_word(recovered, fate)
    return f"at {vs_baseline_pct:.1f} % of the {short_value(value)} baseline ({state})"


def monitor_sentence(state: MonitorState, decided_n: int = 0) -> str:
    """The state in one line ('steady 340 steps: effective 13.9K …; undecided: …')."""
    ref = state.reference
    against = f"the {short_value(ref.value)} baseline" if ref.kind == "baseline" else f"{ref.run}"
    if state.phase == WatchPhase.WARMUP:
        return f"warm-up: {counted(state.steps, 'step')}, not steady yet"
    ci = state.pct_ci
    delta_ci = (ci[0] - 100.0, ci[1] - 100.0) if ci is not None else None
    interval = (
        f"CI {pct(delta_ci[0], signed=True)} to {pct(delta_ci[1], signed=True)}"
        if delta_ci is not None
        else "CI n/a"
    )
    delta = (state.pct_of_reference or math.nan) - 100.0
    threshold = f"±{state.threshold_pct:g} %"
    after = f"after {counted(decided_n, 'steady step')}"
    if state.decision == Verdict.REGRESSION:
        return f"regression: {abs(delta):.1f} % slower than {against} ({interval}) {after}"
    if state.decision == Verdict.IMPROVEMENT:
        return f"improvement: {abs(delta):.1f} % faster than {against} ({interval}) {after}"
    if state.decision == Verdict.SAME:
        return (
            f"same: within {threshold} of {against} ({pct(delta, signed=True)}, {interval}) {after}"
        )
    figures = f"effective {short_value(state.effective)}"
    if state.pct_of_reference is not None:
        figures += f", {state.pct_of_reference:.1f} % of {against} ({interval})"
    if state.remaining_steps is None:
        wait = f"undecided: cannot resolve {threshold} against {against}"
    else:
        wait = f"undecided: about {state.remaining_steps:,} more steps to resolve {threshold}"
    return f"steady {counted(state.steady_steps, 'step')}: {figures}; {wait}"
