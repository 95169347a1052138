"""How soon `ledger watch` acts on a failure line and on silence, beside the goals.

    python benchmarks/bench_watch_latency.py [--repeat 5] [--interval 0.25]

A writer appends a realistic log at a steady pace (steps every 10 ms); then either writes
an OOM traceback (the failure case) or stops writing (the stall case, --stall-after 2).
The figure is the time from that moment to watch's exit, measured here, in fresh
`ledger watch` processes (their start-up is outside the window: the writer starts only
once watch has made the run). Goals: a failure within 1 s; a stall within --stall-after + 1 s.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OOM = (
    "[rank3]: Traceback (most recent call last):\n"
    '[rank3]:   File "/workspace/train.py", line 412, in <module>\n'
    "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.50 GiB.\n"
)
STALL_AFTER = 2.0


def step(i: int) -> str:
    return f"step {i} | loss 2.0 | tok/s {14000 + (i * 37) % 300}\n"


def _wait_for_run(db: Path, run: str) -> None:
    for _ in range(600):
        with sqlite3.connect(db) as conn:
            if conn.execute("SELECT 1 FROM run WHERE name = ?", (run,)).fetchone():
                return
        time.sleep(0.05)
    raise SystemExit(f"watch never made run {run}")


def one(folder: Path, ending: str, interval: float) -> float:
    log = folder / f"train_{ending}_{time.monotonic_ns()}.log"
    run = log.stem.removeprefix("train_")
    with log.open("w") as handle:
        handle.writelines(step(i) for i in range(40))
    code = "import sys\nfrom ledger.cli import main\nsys.argv[0] = 'ledger'\nmain()"
    args = ["watch", run, "--log", str(log), "--interval", str(interval), "--threshold", "0.001"]
    if ending == "stall":
        args += ["--stall-after", str(STALL_AFTER)]
    watcher = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _wait_for_run(folder / "l.db", run)  # watch is up and reading: start the clock's story
    # The stall case stops before a steady window could decide anything first.
    last = 140 if ending == "oom" else 60
    with log.open("a") as handle:
        for i in range(40, last):  # steps while watch settles in
            handle.write(step(i))
            handle.flush()
            time.sleep(0.01)
        if ending == "oom":
            handle.write(OOM)
            handle.flush()
        moment = time.monotonic()
    watcher.wait(timeout=120)
    took = time.monotonic() - moment
    return took - STALL_AFTER if ending == "stall" else took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--interval", type=float, default=0.25, help="watch's --interval")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = {**os.environ, "LEDGER_DB": str(folder / "l.db")}
        os.environ.update(env)
        subprocess.run(
            [sys.executable, "-m", "ledger", "init", "--baseline", "14200"],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        print(f"ledger watch --interval {args.interval}, {args.repeat} runs each")
        for ending, goal in (("oom", 1.0), ("stall", 1.0)):
            times = [one(folder, ending, args.interval) for _ in range(args.repeat)]
            what = "OOM line to exit" if ending == "oom" else "stall to exit, beyond --stall-after"
            print(
                f"  {what:<38} median {statistics.median(times):5.2f} s   "
                f"max {max(times):5.2f} s   goal ≤ {goal:.1f} s"
            )


if __name__ == "__main__":
    main()
