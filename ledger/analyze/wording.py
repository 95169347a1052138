"""The verdict in words, and the number formats every part of ledger shows them in."""

from __future__ import annotations

import math


def short_value(value: float | None) -> str:
    """14200 → '14.2K', 1250000 → '1.25M', 0.82 → '0.82'."""
    if value is None or not math.isfinite(value):
        return "-"
    magnitude = abs(value)
    if magnitude >= 1e6:
        return f"{value / 1e6:.3g}M"
    if magnitude >= 1e3:
        return f"{value / 1e3:.3g}K"
    return f"{value:.3g}"


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


def comparison_sentence(
    a: str,
    b: str,
    delta_pct: float,
    ci95_pct: tuple[float, float] | None,
    p_value: float | None,
    verdict: str,
    threshold_pct: float,
) -> str:
    """'b is 31.2 % faster than a (CI 29.8–32.5 %, p < 0.001)' and its no-change forms."""
    evidence = f"({interval_text(ci95_pct)}, {p_text(p_value)})"
    if verdict == "improvement":
        return f"{b} is {abs(delta_pct):.1f} % faster than {a} {evidence}"
    if verdict == "regression":
        return f"{b} is {abs(delta_pct):.1f} % slower than {a} {evidence}"
    if abs(delta_pct) >= threshold_pct:
        reason = "not significant"
    elif p_value is not None and math.isfinite(p_value) and p_value < 0.05:
        reason = f"below the {threshold_pct:g} % threshold"
    else:
        reason = "within noise"
    return f"{b} is no different from {a}: {pct(delta_pct, signed=True)} {evidence}, {reason}"


def baseline_sentence(
    vs_baseline_pct: float | None, value: float | None, recovered: bool | None
) -> str:
    """'at 99.1 % of the 14.2K baseline' (+ 'recovered' or 'not recovered')."""
    if vs_baseline_pct is None or value is None:
        return ""
    state = {True: "recovered", False: "not recovered", None: "not comparable"}[recovered]
    return f"at {vs_baseline_pct:.1f} % of the {short_value(value)} baseline ({state})"
