"""Reading a run back: 20,000 steps x 6 scalars into one wide DataFrame, ledger beside trackio.

Both stores get the same run (loss, lr, grad_norm, mfu, accuracy, tokens_seen per step;
ledger keeps loss as a step column and the other five as metric rows, as a training script
logging a dict gets). Then, in fresh processes taken round-robin, each reads it back:

- ledger: `ledger.open(db).wide_frame(run)` (steps and metrics pivoted, one row per step);
- trackio: its own reader, `SQLiteStorage.get_logs(project, run)`, into `pd.DataFrame`;
- plain sqlite3: a fetch of the same rows from ledger's file (steps, then the 100,000
  metric rows) into tuples, no DataFrame: the reference the goal (<= 2x) is set against.

Each figure is the time of the read inside its process (opening the file included; the
modules each reader needs imported before the clock and printed apart), the median over
--repeat rounds. trackio lives in a virtual environment of its own
(benchmarks/.venvs/trackio, made with pip on first use, or --trackio-python).

    .venv/bin/python benchmarks/bench_readback.py [--steps 20000] [--repeat 7]
    .venv/bin/python benchmarks/bench_readback.py --no-trackio   # ledger and plain only

--no-trackio measures ledger against the plain fetch alone (the goal's reference), where
trackio cannot be installed (a machine without a package index).
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = HERE / ".venvs" / "trackio"
RUN = "readback"
PROJECT = "bench"

WRITE_TRACKIO = r"""
import json, os, sys
from trackio.sqlite_storage import SQLiteStorage
rows = json.load(open(sys.argv[1]))
steps = [r.pop("step") for r in rows]
SQLiteStorage.bulk_log(project=sys.argv[2], run=sys.argv[3], metrics_list=rows, steps=steps)
"""

READ_TRACKIO = r"""
import sys, time
t = time.perf_counter()
import pandas as pd
from trackio.sqlite_storage import SQLiteStorage
imported = time.perf_counter() - t
t = time.perf_counter()
frame = pd.DataFrame(SQLiteStorage.get_logs(sys.argv[1], sys.argv[2]))
took = time.perf_counter() - t
print(took, imported, frame.shape[0], frame.shape[1])
"""

READ_LEDGER = r"""
import sys, time
t = time.perf_counter()
import ledger
# What the read imports, before the clock as trackio's imports are: the store (SQLAlchemy),
# pandas, and the bulk reader's driver.
import ledger.store, pandas, pyarrow, adbc_driver_sqlite.dbapi
imported = time.perf_counter() - t
t = time.perf_counter()
with ledger.open(sys.argv[1], create=False) as lg:
    frame = lg.wide_frame(sys.argv[2])
took = time.perf_counter() - t
print(took, imported, frame.shape[0], frame.shape[1])
"""

READ_PLAIN = r"""
import sqlite3, sys, time
t = time.perf_counter()
db = sqlite3.connect(sys.argv[1])
(run_id,) = db.execute("SELECT id FROM run WHERE name = ?", (sys.argv[2],)).fetchone()
steps = db.execute("SELECT step, loss FROM step WHERE run_id = ? ORDER BY rank, step",
                   (run_id,)).fetchall()
metrics = db.execute("SELECT step, name, value FROM metric WHERE run_id = ?"
                     " ORDER BY rank, step, name", (run_id,)).fetchall()
took = time.perf_counter() - t
print(took, 0.0, len(steps), len(metrics))
"""


def trackio_python(given: str | None) -> str:
    if given:
        return given
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"making a virtual environment for trackio in {VENV.relative_to(ROOT)} …")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "trackio", "pandas"], check=True)
    return str(python)


def rows_for(steps: int) -> list[dict[str, float | int]]:
    return [
        {
            "step": s,
            "loss": 3.0 - s / (steps + 1),
            "lr": 3e-4 * min(1.0, s / 500),
            "grad_norm": 1.0 + (s % 97) / 100,
            "mfu": 0.41 + (s % 13) / 1000,
            "accuracy": s / steps,
            "tokens_seen": float(s * 4096),
        }
        for s in range(1, steps + 1)
    ]


def run(python: str, code: str, *args: str, env: dict[str, str] | None = None) -> list[float]:
    out = subprocess.run(
        [python, "-c", code, *args], capture_output=True, text=True, env=env, check=False
    )
    if out.returncode != 0:
        sys.exit(f"Error: a reader failed:\n{out.stderr.strip()}")
    return [float(x) for x in out.stdout.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--trackio-python", help="a python that has trackio (else one is made)")
    parser.add_argument(
        "--no-trackio", action="store_true", help="leave trackio out: ledger beside plain only"
    )
    args = parser.parse_args()
    tpython = None if args.no_trackio else trackio_python(args.trackio_python)
    import ledger

    rows = rows_for(args.steps)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = folder / "ledger.db"
        with ledger.open(db) as lg:
            lg.add_steps(RUN, [dict(r) for r in rows])
        data = folder / "rows.json"
        data.write_text(json.dumps(rows))
        env = {**os.environ, "TRACKIO_DIR": str(folder / "trackio")}
        if tpython is not None:
            run(tpython, WRITE_TRACKIO, str(data), PROJECT, RUN, env=env)
        here = {**os.environ, "PYTHONPATH": str(ROOT)}
        times: dict[str, list[float]] = {"ledger": [], "trackio": [], "plain": []}
        imports: dict[str, list[float]] = {"ledger": [], "trackio": []}
        shapes: dict[str, tuple[int, int]] = {}
        for _ in range(args.repeat):  # round-robin, fresh processes
            took, imported, *shape = run(sys.executable, READ_LEDGER, str(db), RUN, env=here)
            times["ledger"].append(took)
            imports["ledger"].append(imported)
            shapes["ledger"] = (int(shape[0]), int(shape[1]))
            if tpython is not None:
                took, imported, *shape = run(tpython, READ_TRACKIO, PROJECT, RUN, env=env)
                times["trackio"].append(took)
                imports["trackio"].append(imported)
                shapes["trackio"] = (int(shape[0]), int(shape[1]))
            took, _, *shape = run(sys.executable, READ_PLAIN, str(db), RUN)
            times["plain"].append(took)
    med = {k: statistics.median(v) for k, v in times.items() if v}
    imp = {k: statistics.median(v) for k, v in imports.items() if v}
    print(f"one run, {args.steps:,} steps x 6 scalars, medians of {args.repeat} fresh processes")
    print(f"  plain sqlite3 fetch of the rows        {med['plain']:7.3f} s   (reference)")
    beside = f"{med['ledger'] / med['trackio']:.2f}x trackio (goal < 1x); " if tpython else ""
    print(
        f"  ledger wide_frame                      {med['ledger']:7.3f} s   "
        f"{med['ledger'] / med['plain']:.2f}x plain (goal <= 2x), {beside}"
        f"frame {shapes['ledger']}, imports {imp['ledger']:.2f} s"
    )
    if tpython is None:
        return
    print(
        f"  trackio get_logs into a DataFrame      {med['trackio']:7.3f} s   "
        f"frame {shapes['trackio']}, imports {imp['trackio']:.2f} s"
    )


if __name__ == "__main__":
    main()
