"""`compare` of two runs of 1M steps each, read from SQLite, beside the raw fetch of the same rows.

    .venv/bin/python benchmarks/bench_compare.py [--steps 1000000] [--repeat 5]

Builds a temporary ledger with two single-rank runs (warm-up, AR(1) noise, stalls, one
change point), then times, in the same process and interleaved:

- raw fetch: sqlite3 (no SQLAlchemy, no numpy) fetching both runs' (step, throughput)
  rows, in key order, into tuples: the reference (goal: compare within 0.8x of it);
- read: `Ledger.step_columns` for both runs (what compare reads, into numpy);
- compare: `Ledger.compare([a, b])` end to end (read + analysis), the analyses it kept
  the time before dropped first;
- compare, kept: the same again, which reads the analyses compare kept instead of the
  steps (ledger.store.kept): what a repeated compare of unchanged runs costs;
- analysis alone, on arrays already in memory;
- steps_frame: `Ledger.steps_frame(run, ["throughput"])` of both runs (goal: likewise).

Prints medians over the repetitions and each figure's ratio to the raw fetch.

With `--processes`, each figure is instead a whole fresh process, as a user runs it, the
interleaved repetitions ordered round-robin: `python -c <raw fetch>` (a plain sqlite3 fetch
of both runs' (step, throughput) rows, its interpreter start included: the reference),
`ledger compare A B` (analysed: the kept analyses dropped first; kept: right after it), and
a `python -c` that opens the ledger and builds both steps frames (and one that builds the
first run's alone: the goal's own measure, one run's frame against the fetch of both).
Each process's CPU seconds are printed too, with their ratios (steadier than the wall
clock on a shared machine). `--db PATH` reuses a ledger built before (by this script,
`--keep PATH`), in either mode. `--against TREE` (with `--processes`) runs another checkout's
compare and steps_frame in the same rounds (`git worktree add TREE <commit>`): the tree
before a change and after it, under the same load. `--busy N` keeps N other processes
spinning on the CPU while the rounds run: a neighbour holding a core, on purpose, so that
the figures under load can be measured again at will.
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
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


RUNS = ("eager_unpadded", "eager_dynamiccopy")
RAW_FETCH = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for (run_id,) in db.execute("SELECT id FROM run ORDER BY id").fetchall():
    db.execute(
        "SELECT step, throughput FROM step WHERE run_id = ? ORDER BY rank, step", (run_id,)
    ).fetchall()
"""
FRAMES = """
import sys, ledger
lg = ledger.open(sys.argv[1], create=False)
for run in sys.argv[2:]:
    lg.steps_frame(run, ["throughput"])
"""


def forget_kept(path: Path) -> None:
    """Drop the analyses compare kept (ledger.store.kept): the next compare reads the steps."""
    db = sqlite3.connect(path)
    try:
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'kept_analysis'").fetchone():
            db.execute("DELETE FROM kept_analysis")
            db.commit()
    finally:
        db.close()


def processes(path: Path, repeat: int, against: Path | None = None, busy: int = 0) -> None:
    """Whole commands in fresh processes, round-robin, medians and ratios to the raw fetch.

    `against`: another checkout of ledger (the tree before a change) whose compare and
    steps_frame run in the same rounds, through PYTHONPATH, so that the load hits both.
    """
    trees = {"": None} if against is None else {"": None, " (against)": against}
    commands: dict[str, tuple[list[str], Path | None]] = {
        "raw": ([sys.executable, "-c", RAW_FETCH, str(path)], None)
    }
    for suffix, tree in trees.items():
        ledger_cmd = [sys.executable, "-m", "ledger", "--db", str(path)]
        # cold: the analyses kept by the compare before are dropped first (not timed)
        commands["compare" + suffix] = ([*ledger_cmd, "compare", *RUNS], tree)
        commands["kept" + suffix] = ([*ledger_cmd, "compare", *RUNS], tree)
        commands["frames" + suffix] = ([sys.executable, "-c", FRAMES, str(path), *RUNS], tree)
        # the goal's own row: one run's frame against the fetch of both runs' rows
        commands["frame1" + suffix] = ([sys.executable, "-c", FRAMES, str(path), RUNS[0]], tree)
    times: dict[str, list[float]] = {name: [] for name in commands}
    # CPU seconds of each child (user + system, its threads included): on a shared
    # machine the wall clock mostly measures the neighbours, the CPU far less
    cpu: dict[str, list[float]] = {name: [] for name in commands}

    def env_for(tree: Path | None) -> dict[str, str]:
        # The warm-up run below leaves the .pyc files an installed package has (pip
        # compiles them); with PYTHONDONTWRITEBYTECODE every run would compile ledger anew.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        if tree is not None:
            env["PYTHONPATH"] = str(tree.resolve())
        return env

    # `python -m` and `python -c` put their working directory first on sys.path: run from
    # one that holds no ledger, or a checkout's own ledger shadows PYTHONPATH (rounds
    # before this one measured this tree twice where they meant to compare two)
    neutral = str(path.resolve().parent)
    if (Path(neutral) / "ledger").exists():
        raise SystemExit(f"the ledger file's folder holds a ledger package: {neutral}")
    for tree in trees.values():  # each tree's processes import that tree's ledger
        where = subprocess.run(
            [sys.executable, "-c", "import ledger; print(ledger.__file__)"],
            check=True, capture_output=True, text=True, env=env_for(tree), cwd=neutral,
        ).stdout.strip()  # fmt: skip
        expected = Path(tree or Path(__file__).parent.parent).resolve() / "ledger"
        if Path(where).resolve().parent != expected:
            raise SystemExit(f"{tree or 'this tree'}: its processes import {where}")
    for argv, tree in commands.values():  # once each first: page cache, .pyc files
        subprocess.run(argv, check=True, capture_output=True, env=env_for(tree), cwd=neutral)
    # a neighbour holding a core, on purpose (--busy): the figures under load, at will
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        for _ in range(repeat):
            for name, (argv, tree) in commands.items():
                if name.startswith("compare"):
                    forget_kept(path)
                used = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(
                    argv, check=True, capture_output=True, env=env_for(tree), cwd=neutral
                )
                times[name].append(time.perf_counter() - start)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[name].append(after.ru_utime - used.ru_utime + after.ru_stime - used.ru_stime)
    finally:
        for child in spinning:
            child.kill()
            child.wait()
    med = {k: statistics.median(v) for k, v in times.items()}
    in_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    load = f", {busy} other process(es) spinning on the CPU" if busy else ""
    print(f"whole processes, medians of {repeat}, round-robin{load}")
    print(f"  python -c <raw sqlite3 fetch of both runs>  {med['raw']:7.3f} s   (reference)")
    for suffix in trees:
        print(
            f"  ledger compare A B, analysed{suffix:<14} {med['compare' + suffix]:7.3f} s   "
            f"{med['compare' + suffix] / med['raw']:.2f}x raw (goal <= 0.8x)"
        )
        print(
            f"  ledger compare A B, kept{suffix:<18} {med['kept' + suffix]:7.3f} s   "
            f"{med['kept' + suffix] / med['raw']:.2f}x raw (goal <= 0.8x)"
        )
        print(
            f"  python -c <open, steps_frame of both runs>{suffix} "
            f"{med['frames' + suffix]:7.3f} s   "
            f"{med['frames' + suffix] / med['raw']:.2f}x raw (goal <= 0.8x)"
        )
        print(
            f"  python -c <open, steps_frame of one run>{suffix}   "
            f"{med['frame1' + suffix]:7.3f} s   "
            f"{med['frame1' + suffix] / med['raw']:.2f}x raw (goal <= 0.8x)"
        )
    for name, values in times.items():
        print(f"    {name}: " + " ".join(f"{v:.3f}" for v in values))
    print(f"  CPU seconds (medians): raw {in_cpu['raw']:.3f}")
    for name in commands:
        if name != "raw":
            print(f"    {name} {in_cpu[name]:.3f} ({in_cpu[name] / in_cpu['raw']:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--processes", action="store_true", help="whole fresh processes")
    parser.add_argument("--db", type=Path, help="a ledger this script built before")
    parser.add_argument("--keep", type=Path, help="build the ledger here and keep it")
    parser.add_argument(
        "--against", type=Path,
        help="with --processes: another checkout (the tree before a change), run in turn",
    )  # fmt: skip
    parser.add_argument(
        "--busy", type=int, default=0, metavar="N",
        help="with --processes: N other processes spin on the CPU while the rounds run",
    )  # fmt: skip
    args = parser.parse_args()
    if args.busy and not args.processes:
        parser.error("--busy goes with --processes")
    if args.against is not None and not (args.against / "ledger" / "__init__.py").is_file():
        parser.error(f"--against {args.against}: no ledger package there")

    if args.processes:
        if args.db is not None:
            processes(args.db, args.repeat, args.against, args.busy)
            return
        with tempfile.TemporaryDirectory() as tmp:
            path = args.keep or Path(tmp) / "ledger.db"
            build(path, args.steps)
            processes(path, args.repeat, args.against, args.busy)
        return
    if args.keep is not None:
        build(args.keep, args.steps)
        return

    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or Path(tmp) / "ledger.db"
        if args.db is None:
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

        def kept() -> None:
            lg.compare(runs)

        def frame() -> None:
            for r in runs:
                lg.steps_frame(r, ["throughput"])

        def analysis() -> None:
            compare_runs([(r, c, "tok/s") for r, c in zip(runs, columns, strict=True)])

        times: dict[str, list[float]] = {
            "raw": [], "read": [], "compare": [], "kept": [], "analysis": [], "frame": []
        }  # fmt: skip
        cpu: list[float] = []  # the analysis in CPU seconds: what a loaded machine inflates less
        for _ in range(args.repeat):  # interleaved, so a busy moment hits all alike
            times["raw"].append(timed(raw_fetch))
            times["read"].append(timed(read))
            forget_kept(path)
            times["compare"].append(timed(compare))
            times["kept"].append(timed(kept))
            start_cpu = time.process_time()
            times["analysis"].append(timed(analysis))
            cpu.append(time.process_time() - start_cpu)
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
    print(
        f"  Ledger.compare, analyses kept         {med['kept']:7.3f} s   "
        f"{med['kept'] / med['raw']:.2f}x raw (goal <= 0.8x)"
    )
    print(
        f"  analysis alone (arrays in memory)     {med['analysis']:7.3f} s   "
        f"({statistics.median(cpu):.3f} s of CPU)"
    )
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
