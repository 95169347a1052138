"""How fast `ledger --help` and `import ledger.hook` start, beside the floor they cannot
beat (`import click`; for the hook, a bare interpreter).

    python benchmarks/bench_startup.py [--runs 15]

Each figure is the median wall time of fresh interpreter processes; the machine is shared
and noisy, so look at the medians and the ratio, not single runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def median_seconds(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    py = sys.executable
    cases = {
        "python -c pass": [py, "-c", "pass"],
        "python -c 'import click'": [py, "-c", "import click"],
        "python -c 'import ledger'": [py, "-c", "import ledger"],
        "ledger --help": [py, "-m", "ledger", "--help"],
        # What a training script pays before its first step, for the hook.
        "python -c 'import ledger.hook'": [py, "-c", "from ledger.hook import StepMeter"],
        "python -c 'import sqlalchemy'": [py, "-c", "import sqlalchemy"],
    }
    results = {name: median_seconds(argv, args.runs) for name, argv in cases.items()}
    floor = results["python -c 'import click'"]
    print(f"median of {args.runs} runs each")
    for name, seconds in results.items():
        print(f"  {name:<32} {seconds * 1000:7.1f} ms   {seconds / floor:4.2f}x import click")


if __name__ == "__main__":
    main()
