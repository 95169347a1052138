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
    return np.asarray(lfilter([1.0], [1.0, -phi], shocks), dtype=np.float64)


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


def step_rows(
    values: np.ndarray, *, first_step: int = 0, tokens: int | None = None
) -> list[dict[str, float]]:
    """Rows for `Ledger.add_steps`: step and throughput (and tokens + step time if given)."""
    if tokens is None:
        return [{"step": first_step + i, "throughput": float(v)} for i, v in enumerate(values)]
    return [
        {"step": first_step + i, "tokens": tokens, "step_time_s": tokens / float(v)}
        for i, v in enumerate(values)
    ]


# -- timed traces: step times, waits and wall clock, as the hook records them -------------


@dataclass(frozen=True)
class TimedTrace:
    """A simulated run's step columns (tokens, step time, wait, wall time) and its truth.

    `effective` is the true effective throughput of the steady regime (tokens per
    wall-clock second, recurring stalls included, the one-off stall not).
    """

    throughput: np.ndarray  # tokens / step_time_s
    tokens: np.ndarray
    step_time_s: np.ndarray
    wait_s: np.ndarray
    wall_time: np.ndarray  # end of each step, in seconds
    truth: Truth
    effective: float
    stall_steps: list[int]  # where the recurring stalls are
    one_off_step: int | None

    def __len__(self) -> int:
        return len(self.throughput)

    def rows(self, *, first_step: int = 0, wait: bool = True) -> list[dict[str, float]]:
        """Rows for `Ledger.add_steps` (wait_s left out with wait=False)."""
        rows = []
        for i in range(len(self)):
            row = {
                "step": first_step + i,
                "tokens": float(self.tokens[i]),
                "step_time_s": float(self.step_time_s[i]),
                "throughput": float(self.throughput[i]),
                "wall_time": float(self.wall_time[i]),
            }
            if wait:
                row["wait_s"] = float(self.wait_s[i])
            rows.append(row)
        return rows


def mean_inverse(noise: float) -> float:
    """E[1 / (1 + ε)] for ε ~ N(0, noise²): how much longer the mean step is than 1/level."""
    x, w = np.polynomial.hermite_e.hermegauss(80)
    return float(np.sum(w / (1.0 + noise * x)) / np.sum(w))


def stall_seconds(stall_every: int, stall_cost: float, step_s: float) -> float:
    """Seconds of a stall every `stall_every` steps of `step_s` that costs `stall_cost`
    (a fraction) of the wall time."""
    if stall_every <= 0 or stall_cost <= 0.0:
        return 0.0
    return stall_cost * stall_every * step_s / (1.0 - stall_cost)


def timed(
    n: int,
    *,
    level: float = 14_200.0,
    tokens: float = 4096.0,
    noise: float = 0.03,
    phi: float = 0.5,
    warmup: int = 0,
    warmup_shape: str = "linear",
    change_points: list[tuple[int, float]] | None = None,
    stall_every: int = 0,
    stall_cost: float = 0.0,
    stall_in: str = "wait",
    one_off: tuple[int, float] | None = None,
    seed: int = 0,
    start_time: float = 1_700_000_000.0,
) -> TimedTrace:
    """A run of n steps of `tokens` each, at `level` tokens/s × warm-up × regime × noise.

    stall_every / stall_cost: a stall every that many steps after the warm-up, long
    enough to cost that fraction of the wall time; `stall_in` puts it in the wait after
    the step ("wait", as the hook sees a checkpoint between steps) or in the step itself
    ("step", as a log with step times shows it). one_off: (index, seconds) of a single
    extra stall, in the same place.
    """
    if stall_in not in ("wait", "step"):
        raise ValueError(f"stall_in is 'wait' or 'step', not {stall_in!r}")
    values, truth = trace(
        n,
        level=level,
        noise=noise,
        phi=phi,
        warmup=warmup,
        warmup_shape=warmup_shape,
        change_points=change_points,
        seed=seed,
    )
    step_time = tokens / values
    extra = np.zeros(n)
    typical = tokens / level * mean_inverse(noise)
    stall = stall_seconds(stall_every, stall_cost, typical)
    stall_at: list[int] = []
    if stall > 0.0:
        stall_at = list(range(warmup + stall_every - 1, n, stall_every))
        extra[stall_at] = stall
    one_off_step = None
    if one_off is not None:
        one_off_step, seconds = one_off
        extra[one_off_step] += seconds
    wait = np.zeros(n)
    if stall_in == "wait":
        wait = extra
    else:
        step_time = step_time + extra
    wall = start_time + np.cumsum(step_time + wait) - wait
    per_step = typical + (stall / stall_every if stall > 0.0 else 0.0)
    return TimedTrace(
        throughput=tokens / step_time,
        tokens=np.full(n, tokens),
        step_time_s=step_time,
        wait_s=wait,
        wall_time=wall,
        truth=truth,
        effective=tokens / per_step,
        stall_steps=stall_at,
        one_off_step=one_off_step,
    )


def many_costs(
    runs: int | np.ndarray,
    n: int,
    *,
    noise: float,
    phi: float,
    effect: float = 1.0,
    warmup: int = 0,
    compile_steps: int = 0,
    stall_every: int = 0,
    stall_cost: float = 0.0,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Work, cost and typical-step throughput per step of many simulated runs at once
    (arrays runs × n), and the true effective throughput of the reference (effect 1).

    One token per step at level 1 × effect × warm-up × (1 + AR(1) noise); the cost is the
    step time plus, every `stall_every` steps (at a random phase per run), a stall that
    costs `stall_cost` of the wall time. The effect scales the stalls too, so the true
    effective throughput is exactly `effect` × the reference's. A linear warm-up from
    30 % of the level, after `compile_steps` steps at 3 %. `runs` is a count or the
    run numbers: run i's steps are the same whatever n is (a longer horizon extends them).
    """
    from scipy.signal import lfilter

    numbers = np.arange(runs) if isinstance(runs, int) else np.asarray(runs)
    shocks = np.empty((len(numbers), n))
    phase = np.empty(len(numbers), dtype=np.int64)
    for row, number in enumerate(numbers):
        rng = np.random.default_rng([seed, int(number)])
        phase[row] = rng.integers(0, 1 << 30) % max(stall_every, 1)  # the same draws always
        shocks[row] = rng.normal(0.0, 1.0, n)
    shocks *= noise * np.sqrt(1.0 - phi**2)
    shocks[:, 0] /= np.sqrt(1.0 - phi**2)  # start in the stationary distribution
    factor = warmup_factor(n, warmup, "linear")
    factor[:compile_steps] = 0.03
    values = effect * factor * (1.0 + lfilter([1.0], [1.0, -phi], shocks, axis=1))
    np.maximum(values, 1e-3, out=values)
    step = 1.0 / values
    typical = mean_inverse(noise)
    stall = stall_seconds(stall_every, stall_cost, typical)
    cost = step
    if stall > 0.0:
        at = (np.arange(n)[None, :] - phase[:, None]) % stall_every == stall_every - 1
        cost = step + np.where(at, stall / effect, 0.0)
    reference = 1.0 / (typical + (stall / stall_every if stall > 0.0 else 0.0))
    return np.ones_like(step), cost, values, reference
