"""How fast `ledger ingest` stores a log of 1M step lines in SQLite.

The log is written to a temporary folder with a fresh ledger, both deleted afterwards.
Its step lines are nanochat-style (step/total, loss, step time, tok/sec: step columns;
mfu: one metric row per step) or, with --shape torchtitan, torchtitan-style (three
metric rows per step: grad_norm, memory %, mfu). Printed beside: plain line iteration
of the same file, and raw sqlite3 executemany of as many rows as ingest stores.

    python benchmarks/bench_ingest.py             # 1M step lines (target: <= 10 s)
    python benchmarks/bench_ingest.py --shape torchtitan --lines 200000
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SHAPES = {
    "torchtitan": (
        "[rank0]:[titan] 2025-03-01 10:{m:02d}:{s:02d},123 - root - INFO - step: {step:7d}  "
        "loss: {loss:.4f}  grad_norm: 1.1000  memory: 61.23GiB(77.41%)  tps: {tps:,}  "
        "mfu: 31.59%\n"
    ),
    "nanochat": (
        "step {step:07d}/{total:07d} | loss: {loss:.6f} | dt: {dt:.2f}ms | tok/sec: {tps:,} "
        "| mfu: 45.67\n"
    ),
}
LINE = SHAPES["torchtitan"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="nanochat")
    args = ap.parse_args()
    line = SHAPES[args.shape]
    import ledger

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "train_bench.log"
        with log.open("w") as out:
            for step in range(1, args.lines + 1):
                out.write(
                    line.format(m=(step // 60) % 60, s=step % 60, step=step, loss=2 + 1 / step,
                                tps=12000 + step % 997, total=args.lines, dt=456.7 + step % 13)
                )  # fmt: skip
        mb = log.stat().st_size / 1e6
        t = time.perf_counter()
        with log.open("rb") as f:
            for _ in f:
                pass
        plain = time.perf_counter() - t

        metrics_per_step = 3 if args.shape == "torchtitan" else 1
        n = args.lines
        raw_db = sqlite3.connect(Path(tmp) / "raw.db")
        raw_db.execute(
            "CREATE TABLE step (run_id, rank, step, wall_time, step_time_s, gpu_time_s, tokens,"
            " throughput, loss, memory_allocated_mib, memory_reserved_mib,"
            " PRIMARY KEY (run_id, rank, step))"
        )
        raw_db.execute(
            "CREATE TABLE metric (run_id, rank, step, name, value,"
            " PRIMARY KEY (run_id, rank, step, name))"
        )
        rows = [(1, 0, i, None, 0.45, None, None, 12000.0, 2.0, None, None) for i in range(n)]
        mrows = [(1, 0, i, f"m{k}", 1.0) for i in range(n) for k in range(metrics_per_step)]
        t = time.perf_counter()
        raw_db.executemany("INSERT INTO step VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        raw_db.executemany("INSERT INTO metric VALUES (?, ?, ?, ?, ?)", mrows)
        raw_db.commit()
        raw = time.perf_counter() - t
        raw_db.close()
        raw_rows = len(rows) + len(mrows)
        del rows, mrows

        lg = ledger.open(Path(tmp) / "ledger.db")
        t, c = time.perf_counter(), time.process_time()
        result = lg.ingest(log)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        t = time.perf_counter()
        again = lg.ingest(log)
        second = time.perf_counter() - t
        lg.close()
    print(f"log: {args.lines:,} {args.shape}-style step lines, {mb:,.0f} MB")
    print(f"plain line iteration:            {plain:6.2f} s")
    print(
        f"raw sqlite3 executemany:         {raw:6.2f} s for {raw_rows:,} rows "
        f"({raw_rows / raw:,.0f} rows/s)"
    )
    print(
        f"ledger ingest:                   {wall:6.2f} s wall, {cpu:.2f} s CPU "
        f"({result.steps:,} steps, {result.metrics:,} metric rows; target <= 10 s)"
    )
    print(f"ledger ingest again (unchanged): {second:6.2f} s, {again.steps} new rows")


if __name__ == "__main__":
    main()
