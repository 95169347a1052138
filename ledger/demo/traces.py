"""Throughput traces with a planted truth, for tests, benchmarks and demos.

A trace is level × warm-up × regime × (1 + AR(1) noise), with isolated stalls: the
truth (steady median, warm-up length, change points, stall positions) is known, so an
analysis of the trace can be checked against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

WARMUP_SHAPES = ("linear", "exponential", "plateau", "compile")


@dataclass(frozen=True)
class Truth:
    level: float  # median throughput of the first regime after warm-up
    warmup: int  # steps of warm-up: the steady window must not start before this index
    warmup_shape: str
    change_points: list[tuple[int, float]] = field(default_factory=list)  # (index, factor)
    stalls: list[int] = field(default_factory=list)
    noise: float = 0.0  # marginal relative standard deviation
    phi: float = 0.0  # AR(1) coefficient


def ar1(n: int, phi: float, sd: float, rng: np.random.Generator) -> np.ndarray:
    """A stationary AR(1) series with marginal standard deviation `sd`."""
    from scipy.signal import lfilter

    if n == 0 or sd == 0.0:
        return np.zeros(n)
    shocks = rng.normal(0.0, sd * np.sqrt(1.0 - phi**2), n)
    shocks[0] = rng.normal(0.0, sd)  # start in the stationary distribution
    return lfilter([1.0], [1.0, -phi], shocks)


def warmup_factor(n: int, length: int, shape: str, depth: float = 0.3) -> np.ndarray:
    """Multiplier that is below 1 during the first `length` steps and 1 after.

    `depth`: where the warm-up starts, as a fraction of the level.
    """
    factor = np.ones(n)
    if length <= 0:
        return factor
    t = np.arange(min(length, n), dtype=np.float64)
    if shape == "linear":
        factor[: len(t)] = depth + (1.0 - depth) * t / length
    elif shape == "exponential":
        # within 1 % of the level at `length`
        tau = length / np.log((1.0 - depth) / 0.01)
        factor[: len(t)] = 1.0 - (1.0 - depth) * np.exp(-t / tau)
    elif shape == "plateau":
        factor[: len(t)] = depth
    elif shape == "compile":
        factor[: len(t)] = depth / 10.0  # a few very slow first steps
    else:
        raise ValueError(f"warm-up shape is one of {', '.join(WARMUP_SHAPES)}, not {shape!r}")
    return factor


def trace(
    n: int,
    *,
    level: float = 14_200.0,
    noise: float = 0.03,
    phi: float = 0.5,
    warmup: int = 0,
    warmup_shape: str = "linear",
    warmup_depth: float = 0.3,
    change_points: list[tuple[int, float]] | None = None,
    stalls: int = 0,
    stall_depth: float = 0.2,
    seed: int = 0,
) -> tuple[np.ndarray, Truth]:
    """A throughput trace of n steps and its truth.

    change_points: (index, factor): from that index on the level is multiplied by factor.
    stalls: that many isolated steps after the warm-up at `stall_depth` × their level.
    """
    rng = np.random.default_rng(seed)
    regime = np.ones(n)
    for index, factor in change_points or []:
        regime[index:] *= factor
    values = level * warmup_factor(n, warmup, warmup_shape, warmup_depth) * regime
    values *= 1.0 + ar1(n, phi, noise, rng)
    stall_at: list[int] = []
    if stalls:
        stall_at = sorted(
            int(i) for i in rng.choice(np.arange(warmup + 1, n), size=stalls, replace=False)
        )
        values[stall_at] *= stall_depth
    np.maximum(values, level * 1e-3, out=values)  # throughput stays positive
    truth = Truth(
        level=level,
        warmup=warmup,
        warmup_shape=warmup_shape,
        change_points=list(change_points or []),
        stalls=stall_at,
        noise=noise,
        phi=phi,
    )
    return values, truth


def step_rows(values: np.ndarray, *, first_step: int = 0, tokens: int | None = None) -> list[dict]:
    """Rows for `Ledger.add_steps`: step and throughput (and tokens + step time if given)."""
    if tokens is None:
        return [{"step": first_step + i, "throughput": float(v)} for i, v in enumerate(values)]
    return [
        {"step": first_step + i, "tokens": tokens, "step_time_s": tokens / float(v)}
        for i, v in enumerate(values)
    ]
