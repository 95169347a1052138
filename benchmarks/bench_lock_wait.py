"""How long another writer waits for SQLite's write lock beside a long ingest.

Writes a log of --mb megabytes (step lines, gzip with --gzip: a small file that expands),
starts `ledger ingest` on it in a process of its own, and meanwhile adds a hypothesis every
0.2 s from this process, timing each add: its wait for the lock is most of it. Prints the
longest and the median add beside the ingest's own time, and the same adds with no ingest
beside them (the reference, measured in the same run).

    .venv/bin/python benchmarks/bench_lock_wait.py [--mb 2048] [--gzip]

Before ingest committed as it went, the adds waited for the whole read (and failed after
the 30 s busy timeout beside a 2 GB log).
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ledger

LINE = "step {i} | loss 2.3412 | lr 3.0e-04 | grad_norm 1.02 | tokens/s 14,2{d}0 | dt 288.1ms\n"


def write_log(path: Path, mb: int, packed: bool) -> int:
    opener = gzip.open if packed else open
    written, steps = 0, 0
    with opener(path, "wt") as out:  # type: ignore[operator]
        while written < mb << 20:
            block = "".join(LINE.format(i=steps + i, d=i % 10) for i in range(1, 10_001))
            out.write(block)
            written += len(block)
            steps += 10_000
    return steps


def adds(lg: ledger.Ledger, until: object, label: str) -> list[float]:
    waits = []
    i = 0
    while until():  # type: ignore[operator]
        start = time.perf_counter()
        lg.add_hypothesis(f"{label} {i}")
        waits.append(time.perf_counter() - start)
        i += 1
        time.sleep(0.2)
    return waits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=2048)
    parser.add_argument("--gzip", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ledger.db"
        log = Path(tmp) / ("train_big.log.gz" if args.gzip else "train_big.log")
        write_log(log, args.mb, args.gzip)
        with ledger.open(db) as lg:
            stop = time.monotonic() + 5
            quiet = adds(lg, lambda: time.monotonic() < stop, "alone")
            proc = subprocess.Popen(
                [sys.executable, "-m", "ledger", "--db", str(db), "ingest", str(log)],
                stdout=subprocess.DEVNULL,
            )
            start = time.monotonic()
            beside = adds(lg, lambda: proc.poll() is None, "beside")
            took = time.monotonic() - start
    print(f"log: {args.mb} MB{' (gzip)' if args.gzip else ''}; ingest took {took:.1f} s")
    print(
        f"  hypothesis add, alone:              median {statistics.median(quiet) * 1000:7.1f} ms"
        f"   max {max(quiet) * 1000:7.1f} ms   ({len(quiet)} adds)"
    )
    print(
        f"  hypothesis add, beside the ingest:  median {statistics.median(beside) * 1000:7.1f} ms"
        f"   max {max(beside) * 1000:7.1f} ms   ({len(beside)} adds; goal: max <= 2 s)"
    )


if __name__ == "__main__":
    main()
