"""How fast `ledger parse` reads a log, beside plain line iteration of the same file.

The log is half tqdm redraws (states joined by \\r, as a redrawing bar writes them) and
half torchtitan-style step lines from two ranks. It is written to a temporary folder and
deleted afterwards. The parse runs in a child process so that its peak RSS is its own.

    python benchmarks/bench_parse.py              # a 200 MB log: speed
    python benchmarks/bench_parse.py --mb 2048    # a 2 GB log: speed and RSS (target < 200 MB)

Targets (issue #3): >= 30 MB/s on one core; RSS under 200 MB on a 2 GB log.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP = (
    "[rank{r}]:[titan] 2025-03-01 10:{m:02d}:{s:02d},123 - root - INFO - step: {step:6d}  "
    "loss: {loss:.4f}  grad_norm: {gn:.4f}  memory: 61.23GiB(77.41%)  tps: {tps:,}  "
    "tflops: 312.45  mfu: 31.59%\n"
)


def bar_state(n: int, total: int) -> str:
    filled = n * 10 // total
    bar = "█" * filled + " " * (10 - filled)
    return f"\rTraining: {n * 100 // total:3d}%|{bar}| {n}/{total} [01:{n % 60:02d}<02:00,  4.{n % 10}it/s]"  # noqa: E501


def write_log(path: Path, megabytes: int) -> int:
    """Write about `megabytes` MB: alternating runs of bar redraws and step lines."""
    target = megabytes * 1_000_000
    written = 0
    step = 0
    n = 0
    with path.open("w", encoding="utf-8") as out:
        while written < target:
            bars = "".join(bar_state(n + i, 10_000_000) for i in range(24)) + "\n"
            n += 24
            steps = []
            for _ in range(12):
                step += 1
                for r in (0, 1):
                    steps.append(
                        STEP.format(
                            r=r, m=(step // 60) % 60, s=step % 60, step=step,
                            loss=2 + 1 / step, gn=1.1, tps=12000 + step % 997,
                        )
                    )  # fmt: skip
            block = bars + "".join(steps)
            out.write(block)
            written += len(block.encode())
    return written


CHILD = r"""
import json, resource, sys, time
from ledger.logs import parse_file
t, c = time.perf_counter(), time.process_time()
s = parse_file(sys.argv[1])
dt, cpu = time.perf_counter() - t, time.process_time() - c
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": dt, "cpu": cpu, "rss_mb": rss,
                  "steps": s.steps, "fate": s.fate, "progress": s.progress}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=200, help="size of the generated log in MB")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train_bench.log"
        size = write_log(path, args.mb)
        mb = size / 1e6
        t = time.process_time()
        lines = 0
        with path.open("rb") as f:
            for _ in f:
                lines += 1
        plain = time.process_time() - t
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, env=env
        )
        if out.returncode:
            sys.exit(out.stderr)
        result = json.loads(out.stdout)
    print(f"log: {mb:,.0f} MB, {lines:,} physical lines (half tqdm redraws, half step lines)")
    print("CPU seconds of one core (the machine may be shared; wall time beside it):")
    print(f"plain line iteration (for line in file): {plain:6.2f} s  {mb / plain:8.1f} MB/s")
    print(
        f"ledger parse:                            {result['cpu']:6.2f} s  "
        f"{mb / result['cpu']:8.1f} MB/s   (target >= 30 MB/s; wall {result['seconds']:.2f} s)"
    )
    print(f"ledger parse peak RSS: {result['rss_mb']:.0f} MB (target < 200 MB on a 2 GB log)")
    print(
        f"found: {result['steps']:,} steps, fate {result['fate']}, bar {result['progress']['n']:,}"
    )


if __name__ == "__main__":
    main()
