"""How often `compare` calls a change when there is none, beside the nominal alpha.

    .venv/bin/python benchmarks/bench_false_alarms.py [--seeds 200] [--steps 2000]

For every noise level (1, 3, 5 %) and AR(1) coefficient (0, 0.5, 0.9), --seeds pairs of
runs are drawn with the same truth and compared with the defaults (alpha 0.01,
threshold 2 %), in two shapes:

- `log`: a throughput per step only (14.2K, a linear warm-up of 5 % of the run, four
  isolated stalls at 20 % of the level), so the effective figure is the harmonic mean;
- `hook`: tokens, step time and wait per step, with a stall every 50 steps in the wait
  that costs 10 % of the wall time (a checkpoint), the same warm-up.

Printed per cell and in total: the false-alarm rate (a verdict other than no-change; the
verdict is judged on effective throughput), and the rate of p < alpha alone for the
effective figure and for the median, which should sit near alpha if the p-values are
calibrated.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from ledger.analyze import DEFAULT_ALPHA, StepColumns, analyze_run, compare_pair
from ledger.demo import traces as syn


def pair(shape: str, n: int, noise: float, phi: float, seed: int) -> list[StepColumns]:
    steps = np.arange(n)
    if shape == "log":
        return [
            StepColumns(
                step=steps,
                throughput=syn.trace(
                    n, noise=noise, phi=phi, warmup=n // 20, stalls=4, seed=seed + k
                )[0],
            )
            for k in (0, 1)
        ]
    runs = [
        syn.timed(
            n, noise=noise, phi=phi, warmup=n // 20, stall_every=50, stall_cost=0.1, seed=seed + k
        )
        for k in (0, 1)
    ]
    return [
        StepColumns(step=steps, tokens=t.tokens, step_time_s=t.step_time_s, wait_s=t.wait_s)
        for t in runs
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    n = args.steps
    started = time.perf_counter()
    print(f"{args.seeds} pairs per cell, {n} steps per run, alpha {DEFAULT_ALPHA}, threshold 2 %")
    print(
        f"{'shape':>5} {'noise':>6} {'phi':>5} {'false alarms':>13} "
        f"{'p < alpha (effective)':>22} {'(median)':>9}"
    )
    cells = itertools.product(("log", "hook"), (0.01, 0.03, 0.05), (0.0, 0.5, 0.9))
    totals = {"log": [0, 0, 0, 0], "hook": [0, 0, 0, 0]}
    for cell, (shape, noise, phi) in enumerate(cells):
        alarms = significant = median_significant = 0
        for seed in range(args.seeds):
            a, b = (
                analyze_run(name, columns)
                for name, columns in zip(
                    "ab", pair(shape, n, noise, phi, 1_000_000 * cell + 2 * seed), strict=True
                )
            )
            c = compare_pair(a, b)
            alarms += c.verdict != "no-change"
            significant += c.p_value is not None and c.p_value < DEFAULT_ALPHA
            median_significant += c.median_p_value is not None and c.median_p_value < DEFAULT_ALPHA
        counts = totals[shape]
        for i, value in enumerate((alarms, significant, median_significant, args.seeds)):
            counts[i] += value
        print(
            f"{shape:>5} {noise:>6.0%} {phi:>5.1f} {alarms / args.seeds:>12.2%} "
            f"{significant / args.seeds:>22.2%} {median_significant / args.seeds:>9.2%}"
        )
    for shape, (alarms, significant, median_significant, total) in totals.items():
        print(
            f"{shape:>5} {'all':>12} {alarms / total:>12.2%} {significant / total:>22.2%} "
            f"{median_significant / total:>9.2%}   ({alarms} of {total} pairs; nominal alpha "
            f"{DEFAULT_ALPHA:.0%})"
        )
    print(f"took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
