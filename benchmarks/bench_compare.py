"""`compare` of two runs of 1M steps each, read from SQLite, beside the raw fetch of the same rows.

    .venv/bin/python benchmarks/bench_compare.py [--steps 1000000] [--repeat 5]

Builds a temporary ledger with two single-rank runs (warm-up, AR(1) noise, stalls, one
change point), then times, in the same process and interleaved:

- raw fetch: sqlite3 (no SQLAlchemy, no numpy) fetching both runs' (step, throughput)
  rows, in key order, into tuples: the reference (goal: compare within 0.8x of it);
- read: `Ledger.step_columns` for both runs (what compare reads, into numpy);
- compare: `Ledger.compare([a, b])` end to end (read + analysis + the stored comparison);
- analysis alone, on arrays already in memory;
- steps_frame: `Ledger.steps_frame(run, ["throughput"])` of both runs (goal: likewise).

Prints medians over the repetitions and each figure's ratio to the raw fetch.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import ledger
from ledger.analyze import compare_runs
from ledger.demo import traces as syn


def build(path: Path, steps: int) -> None:
    lg = ledger.open(path)
    try:
        for name, level, seed, changes in (
            ("eager_unpadded", 10_800.0, 1, []),
            ("eager_dynamiccopy", 14_100.0, 2, [(steps * 2 // 3, 0.9)]),
        ):
            values, _ = syn.trace(
                steps,
                level=level,
                noise=0.03,
                phi=0.6,
                warmup=steps // 50,
                change_points=changes,
                stalls=steps // 1000,
                seed=seed,
            )
            chunk = 200_000
            for start in range(0, steps, chunk):
                rows = [
                    {"step": start + i, "throughput": float(v), "tokens": 4096}
                    for i, v in enumerate(values[start : start + chunk])
                ]
                lg.add_steps(name, rows, throughput_unit="tok/s")
    finally:
        lg.close()


def timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.db"
        t0 = time.perf_counter()
        build(path, args.steps)
        print(f"built 2 runs x {args.steps:,} steps in {time.perf_counter() - t0:.1f} s")

        runs = ["eager_unpadded", "eager_dynamiccopy"]
        raw = sqlite3.connect(path)
        ids = [raw.execute("SELECT id FROM run WHERE name = ?", (r,)).fetchone()[0] for r in runs]
        query = "SELECT step, throughput FROM step WHERE run_id = ? ORDER BY rank, step"

        def raw_fetch() -> None:
            for run_id in ids:
                raw.execute(query, (run_id,)).fetchall()

        lg = ledger.open(path, create=False)
        lg.compare(runs)  # warm: imports, page cache
        columns = [lg.step_columns(r) for r in runs]
        report = None

        def read() -> None:
            for r in runs:
                lg.step_columns(r)

        def compare() -> None:
            nonlocal report
            report = lg.compare(runs)

        def frame() -> None:
            for r in runs:
                lg.steps_frame(r, ["throughput"])

        def analysis() -> None:
            compare_runs([(r, c, "tok/s") for r, c in zip(runs, columns, strict=True)])

        times: dict[str, list[float]] = {
            "raw": [], "read": [], "compare": [], "analysis": [], "frame": []
        }  # fmt: skip
        for _ in range(args.repeat):  # interleaved, so a busy moment hits all alike
            times["raw"].append(timed(raw_fetch))
            times["read"].append(timed(read))
            times["compare"].append(timed(compare))
            times["analysis"].append(timed(analysis))
            times["frame"].append(timed(frame))
        lg.close()
        raw.close()

    med = {k: statistics.median(v) for k, v in times.items()}
    rows = 2 * args.steps
    print(f"rows: {rows:,} (2 runs), medians of {args.repeat} repetitions")
    print(f"  raw sqlite3 fetch, (step, throughput) {med['raw']:7.3f} s   (reference)")
    print(
        f"  Ledger.step_columns, both runs        {med['read']:7.3f} s   "
        f"{med['read'] / med['raw']:.2f}x raw"
    )
    print(
        f"  Ledger.compare (read + analysis)      {med['compare']:7.3f} s   "
        f"{med['compare'] / med['raw']:.2f}x raw (goal <= 0.8x)"
    )
    print(f"  analysis alone (arrays in memory)     {med['analysis']:7.3f} s")
    print(
        f"  Ledger.steps_frame, both runs         {med['frame']:7.3f} s   "
        f"{med['frame'] / med['raw']:.2f}x raw"
    )
    assert report is not None
    for run in report.runs:
        print(
            f"  {run.run}: steady from {run.steady_from_step:,}, median {run.median:,.0f}, "
            f"change points {[c.step for c in run.change_points]}"
        )
    for c in report.comparisons:
        print(f"  {c.summary}")


if __name__ == "__main__":
    main()
