"""Training runs played on a real clock, and what their logs print about them.

Each step computes for a while (around `step_s`, 3 % noise), a stall (a checkpoint, an
eval) now and then adds seconds between steps, and the log stamps the end of each step
to the millisecond or to the second, as a date or as the time of day only. The truth is
what any honest figure must match: tokens over wall-clock seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from ledger.analyze import StepColumns

TOKENS = 8192  # per step, every step
START = datetime(2026, 11, 29, 23, 52, 0, tzinfo=UTC).timestamp()  # runs cross midnight


@dataclass(frozen=True)
class ClockRun:
    """One played run: the true end of every step and what a log would print."""

    step_s: float
    tick: float  # the stamps' resolution, seconds
    ends: np.ndarray  # the true end of each step (epoch seconds)
    compute: np.ndarray  # the true compute time of each step
    stalled: np.ndarray  # bool per step: a stall came before it

    @property
    def stamps(self) -> np.ndarray:
        """The logged stamps: the true end, truncated to the tick (as loggers do)."""
        return np.floor(self.ends / self.tick + 1e-9) * self.tick

    @property
    def time_of_day(self) -> np.ndarray:
        """The stamps as seconds since midnight (a log that prints HH:MM:SS only)."""
        return np.mod(self.stamps, 86_400.0)

    def truth(self, from_step: int, *, per: str = "tokens") -> float:
        """Tokens (or steps) per wall-clock second over the steps from `from_step` on."""
        i = from_step - 1  # steps are 1-based
        span = self.ends[-1] - self.ends[i - 1] if i > 0 else self.ends[-1] - START
        steps = len(self.ends) - i
        return (TOKENS if per == "tokens" else 1.0) * steps / span


def play(step_s: float, tick: float, *, stalls: bool, seed: int = 0) -> ClockRun:
    """A run of steps of `step_s` seconds (see the module's docstring)."""
    rng = np.random.default_rng(seed)
    every = max(50, math.ceil(30.0 / step_s))  # a stall at least 30 s of compute apart
    n = max(600, 10 * every)
    compute = step_s * rng.lognormal(0.0, 0.03, n)
    stalled = np.zeros(n, dtype=bool)
    if stalls:
        stalled[every::every] = True
    pause = max(4.0 * step_s, 3.0)
    ends = START + np.cumsum(compute + np.where(stalled, pause, 0.0))
    return ClockRun(step_s, tick, ends, compute, stalled)


def columns(run: ClockRun, printed: str, *, time_of_day: bool = False) -> StepColumns:
    """The step rows a log would give: `printed` is 'tok/s', 'step_time' or 'both'."""
    n = len(run.ends)
    throughput = np.round(TOKENS / run.compute, 1) if printed in ("tok/s", "both") else None
    step_time = np.round(run.compute, 3) if printed in ("step_time", "both") else None
    return StepColumns(
        step=np.arange(1, n + 1),
        throughput=throughput,
        step_time_s=step_time,
        wall_time=run.time_of_day if time_of_day else run.stamps,
    )


def log_lines(run: ClockRun, printed: str) -> list[str]:
    """The run as an HF-style log, one line a step, stamps at the run's tick."""
    lines = []
    digits = 3 if run.tick < 1 else 0
    for i, (stamp, compute) in enumerate(zip(run.stamps, run.compute, strict=True), start=1):
        when = datetime.fromtimestamp(stamp, UTC)
        text = when.strftime("%Y-%m-%d %H:%M:%S")
        if digits:
            text += f".{round(stamp % 1 * 1000) % 1000:03d}"
        fields = [f"step={i}"]
        if printed in ("tok/s", "both"):
            fields.append(f"tokens_per_sec={TOKENS / compute:.1f}")
        if printed in ("step_time", "both"):
            fields.append(f"step_time={compute:.3f}s")
        lines.append(f"{text} INFO train: " + " ".join(fields) + f" loss={3.0 - i * 1e-4:.4f}")
    return lines
