"""`why` of one hook-like run against another, beside `compare` of the same two runs.

    .venv/bin/python benchmarks/bench_why.py [--steps 200000] [--repeat 3]

Builds a temporary ledger with two single-rank runs written as the hook writes them
(tokens, step_time_s, wait_s, wall_time, memory), the second with a slower data loader,
then times `Ledger.compare([a, b])` (which now also finds the top cause) and
`Ledger.why(b, a)` interleaved, and prints their medians and the ratio why / compare.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import ledger


def rows(steps: int, seed: int, wait: float) -> list[dict[str, float]]:
    rng = np.random.default_rng(seed)
    step_time = 0.5 * (1 + 0.02 * rng.standard_normal(steps))
    waits = np.maximum(wait * (1 + 0.2 * rng.standard_normal(steps)), 0.0)
    wall = 1.7e9 + np.cumsum(step_time + waits)
    memory = 40_000 + 4 * rng.standard_normal(steps)
    return [
        {
            "step": i,
            "tokens": 6000,
            "step_time_s": float(step_time[i]),
            "wait_s": float(waits[i]),
            "wall_time": float(wall[i]),
            "memory_allocated_mib": float(memory[i]),
        }
        for i in range(steps)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lg = ledger.open(Path(tmp) / "ledger.db")
        lg.write_steps("fed", rows(args.steps, 1, 0.002))
        lg.write_steps("starved", rows(args.steps, 2, 0.05))
        compare_s, why_s = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            lg.compare(["fed", "starved"])
            compare_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            found = lg.why("starved", "fed")
            why_s.append(time.perf_counter() - t)
        lg.close()
    c, w = statistics.median(compare_s), statistics.median(why_s)
    top = found.top.kind if found.top is not None else "none"
    print(f"steps per run: {args.steps:,}; top finding: {top}")
    print(f"compare (with its top finding): {c:.2f} s")
    print(f"why:                            {w:.2f} s  ({w / c:.2f}x compare)")


if __name__ == "__main__":
    main()
