"""How fast `ledger parse` reads a log, beside plain line iteration of the same file.

The log is half tqdm redraws (states joined by \\r, as a redrawing bar writes them) and
half torchtitan-style step lines from two ranks. It is written to a temporary folder and
deleted afterwards. Each parse runs in a child process, so that its peak RSS is its own;
plain iteration (`for line in file`, binary, as fast as Python reads lines) runs in the
same process as the parse, right before it, so both see the same machine. Figures are CPU
seconds of one process (the machine may be shared; wall time is printed beside), medians
of --runs runs, and the ratio of the medians.

    python benchmarks/bench_parse.py                       # a 200 MB log, 5 runs
    python benchmarks/bench_parse.py --mb 2048 --runs 3    # a 2 GB log: RSS too
    python benchmarks/bench_parse.py --shape ranked --mb 100   # [rankN]: lines, loading bars

Targets: parse within 20x of plain iteration, on both shapes; peak RSS under 200 MB on a
2 GB log.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
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


RANKED = (
    "[rank{r}]: step {step:05d}/{total:05d} ({pct:.2f}%) | loss: {loss:.6f} | lrm: 1.00 | "
    "dt: {dt:.2f}ms | tok/sec: {tps:,} | mfu: 41.23 | total time: {tt:.2f}m\n"
)


def loading_state(n: int, total: int) -> str:
    filled = n * 10 // total
    bar = "█" * filled + " " * (10 - filled)
    return (
        f"\rLoading checkpoint shards: {n * 100 // total:3d}%|{bar}| {n}/{total} "
        f"[00:{n % 60:02d}<00:30,  1.{n % 10}1s/it]"
    )


def write_ranked(path: Path, megabytes: int) -> int:
    """About `megabytes` MB of `[rankN]: step …` lines from 8 ranks (nanochat-style),
    between runs of `\r`-redrawn loading bars (a redrawing bar writes no newline)."""
    target = megabytes * 1_000_000
    written = 0
    step = 0
    n = 0
    with path.open("w", encoding="utf-8", newline="") as out:
        while written < target:
            bars = "".join(loading_state(n % 851 + 1, 851) for n in range(n, n + 24)) + "\n"
            n += 24
            steps = []
            for _ in range(6):
                step += 1
                for r in range(8):
                    steps.append(
                        RANKED.format(
                            r=r, step=step, total=99_999, pct=step / 1000, loss=2 + 1 / step,
                            dt=412.1 + step % 7, tps=1_148_464 + step % 997, tt=step / 60,
                        )
                    )  # fmt: skip
            block = bars + "".join(steps)
            out.write(block)
            written += len(block.encode())
    return written


def write_log(path: Path, megabytes: int) -> int:
    """Write about `megabytes` MB: alternating runs of bar redraws and step lines, as many
    redraws as step lines."""
    target = megabytes * 1_000_000
    written = 0
    step = 0
    n = 0
    with path.open("w", encoding="utf-8", newline="") as out:
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
t, c = time.perf_counter(), time.process_time()
lines = 0
with open(sys.argv[1], "rb") as f:
    for _ in f:
        lines += 1
plain, plain_wall = time.process_time() - c, time.perf_counter() - t
from ledger.logs import parse_file
t, c = time.perf_counter(), time.process_time()
s = parse_file(sys.argv[1], strict=False)
cpu, wall = time.process_time() - c, time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"plain": plain, "plain_wall": plain_wall, "lines": lines, "cpu": cpu,
                  "wall": wall, "rss_mb": rss, "steps": s.steps, "fate": s.fate,
                  "unread": s.unread_lines, "bar": s.progress.n if s.progress else None}))
"""


def measure(path: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, env=env
    )
    if out.returncode:
        sys.exit(out.stderr)
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=200, help="size of the generated log in MB")
    ap.add_argument("--runs", type=int, default=5, help="runs to take the median of")
    ap.add_argument(
        "--shape", choices=("titan", "ranked"), default="titan",
        help="titan: tqdm redraws and torchtitan lines of two ranks; ranked: [rankN]: step "
        "lines of 8 ranks between \\r-redrawn loading bars",
    )  # fmt: skip
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:  # under /tmp, deleted at the end
        path = Path(tmp) / "train_bench.log"
        size = (write_ranked if args.shape == "ranked" else write_log)(path, args.mb)
        runs = [measure(path) for _ in range(args.runs)]
    mb = size / 1e6
    plain = statistics.median(r["plain"] for r in runs)
    cpu = statistics.median(r["cpu"] for r in runs)
    wall = statistics.median(r["wall"] for r in runs)
    rss = max(r["rss_mb"] for r in runs)
    last = runs[-1]
    what = ("[rankN]: step lines between \\r-redrawn loading bars" if args.shape == "ranked"
            else "half tqdm redraws, half step lines")  # fmt: skip
    print(f"log: {mb:,.0f} MB, {last['lines']:,.0f} physical lines ({what}); medians of "
          f"{args.runs} runs, each a fresh process; CPU seconds of one process")  # fmt: skip
    print(f"plain line iteration (for line in file): {plain:7.2f} s  {mb / plain:8.1f} MB/s")
    print(f"ledger parse:                            {cpu:7.2f} s  {mb / cpu:8.1f} MB/s"
          f"   (wall {wall:.2f} s)")  # fmt: skip
    print(f"ratio parse / plain iteration:           {cpu / plain:7.1f} x   (target <= 20 x)")
    print(f"ledger parse peak RSS:                   {rss:7.0f} MB   (target < 200 MB on 2 GB)")
    ratios = ", ".join(f"{r['cpu'] / r['plain']:.1f}x" for r in runs)
    print(f"each run, parse / plain iteration: {ratios}")
    print(
        f"found: {last['steps']:,.0f} steps, fate {last['fate']}, bar {last['bar']:,.0f}, "
        f"unread lines {last['unread']:,.0f}"
    )


if __name__ == "__main__":
    main()
