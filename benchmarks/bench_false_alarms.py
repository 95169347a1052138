"""How often `compare` calls a change when there is none, beside the nominal alpha.

    .venv/bin/python benchmarks/bench_false_alarms.py [--seeds 200] [--steps 2000]

For every noise level (1, 3, 5 %) and AR(1) coefficient (0, 0.5, 0.9), --seeds pairs of
runs are drawn with the same truth (14.2K, a linear warm-up of 5 % of the run, a few
stalls) and compared with the defaults (alpha 0.01, threshold 2 %). Printed per cell and
in total: the false-alarm rate (a verdict other than no-change), and the rate of
p < alpha alone, which should sit near alpha if the p-value is calibrated.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from ledger.analyze import DEFAULT_ALPHA, StepColumns, analyze_run, compare_pair
from ledger.demo import traces as syn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    n = args.steps
    steps = np.arange(n)
    started = time.perf_counter()
    total_alarms = total_significant = total = 0
    print(f"{args.seeds} pairs per cell, {n} steps per run, alpha {DEFAULT_ALPHA}, threshold 2 %")
    print(f"{'noise':>6} {'phi':>5} {'false alarms':>13} {'p < alpha':>10}")
    for cell, (noise, phi) in enumerate(itertools.product((0.01, 0.03, 0.05), (0.0, 0.5, 0.9))):
        alarms = significant = 0
        for seed in range(args.seeds):
            base = 1_000_000 * cell + 2 * seed
            pair = [
                syn.trace(n, noise=noise, phi=phi, warmup=n // 20, stalls=4, seed=base + k)[0]
                for k in (0, 1)
            ]
            a, b = (
                analyze_run(name, StepColumns(step=steps, throughput=values))
                for name, values in zip("ab", pair, strict=True)
            )
            c = compare_pair(a, b)
            alarms += c.verdict != "no-change"
            significant += c.p_value is not None and c.p_value < DEFAULT_ALPHA
        total_alarms += alarms
        total_significant += significant
        total += args.seeds
        print(
            f"{noise:>6.0%} {phi:>5.1f} {alarms / args.seeds:>12.2%} "
            f"{significant / args.seeds:>10.2%}"
        )
    print(
        f"{'all':>12} {total_alarms / total:>12.2%} {total_significant / total:>10.2%}"
        f"   ({total_alarms} of {total} pairs; nominal alpha {DEFAULT_ALPHA:.0%})"
    )
    print(f"took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
