"""How fast `ledger ingest` stores a log of 1M step lines, beside what the storage allows.

The log is written to a temporary folder with a fresh ledger, both deleted afterwards.
Its step lines are nanochat-style (step/total, loss, step time, tok/sec: step columns;
mfu: one metric row per step) or, with --shape torchtitan, torchtitan-style (three
metric rows per step: grad_norm, memory %, mfu). Printed beside, measured in the same run:

- plain line iteration of the same file;
- the storage limit: raw sqlite3 executemany of as many wide rows (13 columns, the step
  table's width) into an unindexed table — the reference the goal (<= 5x) is set against;
- raw sqlite3 executemany of the rows ingest stores into tables with ledger's keys.

With --backend postgres (LEDGER_TEST_PG_URL or --pg-url), ingest into a fresh schema,
beside a raw psycopg COPY of the same step and metric rows into unindexed tables (goal:
within 2x). Each figure is the median of --repeat runs.

    python benchmarks/bench_ingest.py                       # 1M step lines, SQLite
    python benchmarks/bench_ingest.py --backend postgres --lines 1000000
    python benchmarks/bench_ingest.py --shape torchtitan --lines 200000
    python benchmarks/bench_ingest.py --shape mixed --repeat 1   # rank prefixes, \\r bars

--shape mixed: nanochat-style lines of two ranks behind `[rankN]:`, with a `\\r`-redrawn
training bar whose postfix carries the loss every 50 steps (about 170 MB for 1M lines).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
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


MIXED = (
    "[rank{r}]: step {step:07d}/{total:07d} ({pct:.2f}%) | loss: {loss:.6f} | lrm: 1.00 | "
    "dt: {dt:.2f}ms | tok/sec: {tps:,} | mfu: 45.67 | total time: {tt:.2f}m\n"
)


def _bar(step: int, total: int, k: int) -> str:
    done = step * 10 // total
    return (
        f"\rTraining: {step * 100 // total:3d}%|{'█' * done}{' ' * (10 - done)}| {step}/{total} "
        f"[01:{k:02d}<99:00, 2.{k}it/s, loss={2 + 1 / step:.4f}, lr=3.0e-04]"
    )


def write_mixed(path: Path, lines: int) -> None:
    """nanochat-style step lines from two ranks behind `[rankN]:` prefixes, and every 50
    steps a `\r`-redrawn training bar whose postfix carries the loss (tqdm's set_postfix):
    the shapes a fast path must take, mixed in one file."""
    with path.open("w", newline="") as out:
        step = 0
        written = 0
        while written < lines:
            step += 1
            for r in (0, 1):
                out.write(
                    MIXED.format(r=r, step=step, total=lines, pct=100 * step / lines,
                                 loss=2 + 1 / step, dt=456.7 + step % 13,
                                 tps=12000 + step % 997, tt=step / 120)
                )  # fmt: skip
                written += 1
            if step % 50 == 0:
                out.write("".join(_bar(step, lines, k) for k in range(8)) + "\n")
                written += 1


CPU: dict[str, float] = {}  # CPU seconds of the last raw executemany


def write_log(path: Path, lines: int, shape: str) -> None:
    if shape == "mixed":
        write_mixed(path, lines)
        return
    line = SHAPES[shape]
    with path.open("w") as out:
        for step in range(1, lines + 1):
            out.write(
                line.format(m=(step // 60) % 60, s=step % 60, step=step, loss=2 + 1 / step,
                            tps=12000 + step % 997, total=lines, dt=456.7 + step % 13)
            )  # fmt: skip


def plain_iteration(log: Path) -> float:
    t = time.perf_counter()
    with log.open("rb") as f:
        for _ in f:
            pass
    return time.perf_counter() - t


def raw_sqlite(folder: Path, n: int, metrics_per_step: int) -> tuple[float, float]:
    """(unindexed wide rows, the rows ingest stores into keyed tables), seconds."""
    wide = sqlite3.connect(folder / "wide.db")
    wide.execute("PRAGMA journal_mode=WAL")
    wide.execute("CREATE TABLE step (" + ", ".join(f"c{i}" for i in range(13)) + ")")
    t, c = time.perf_counter(), time.process_time()
    rows = [(1, 1, 0, i, None, 0.45, None, None, 12000.0, 2.0, None, None, None) for i in range(n)]
    wide.executemany(f"INSERT INTO step VALUES ({', '.join('?' * 13)})", rows)
    wide.commit()
    unindexed = time.perf_counter() - t
    CPU["unindexed"] = time.process_time() - c
    wide.close()
    del rows
    keyed = sqlite3.connect(folder / "keyed.db")
    keyed.execute("PRAGMA journal_mode=WAL")
    keyed.execute(
        "CREATE TABLE step (run_id, rank, step, step_time_s, throughput, loss,"
        " PRIMARY KEY (run_id, rank, step))"
    )
    keyed.execute(
        "CREATE TABLE metric (run_id, rank, step, name, value,"
        " PRIMARY KEY (run_id, rank, step, name))"
    )
    t = time.perf_counter()
    steps = [(1, 0, i, 0.45, 12000.0, 2.0) for i in range(n)]
    metrics = [(1, 0, i, f"m{k}", 1.0) for i in range(n) for k in range(metrics_per_step)]
    keyed.executemany("INSERT INTO step VALUES (?, ?, ?, ?, ?, ?)", steps)
    keyed.executemany("INSERT INTO metric VALUES (?, ?, ?, ?, ?)", metrics)
    keyed.commit()
    keyed_s = time.perf_counter() - t
    keyed.close()
    return unindexed, keyed_s


def raw_copy(url: str, n: int, metrics_per_step: int, keyed: bool) -> float:
    """A psycopg COPY of ingest's step and metric rows into plain logged tables: shaped
    like ledger's (its primary keys and the foreign key to the run, which PostgreSQL
    checks row by row) when `keyed`, else unindexed; seconds."""
    import psycopg

    fk = " REFERENCES raw_run (id) ON DELETE CASCADE" if keyed else ""
    key_s = ", PRIMARY KEY (run_id, rank, step)" if keyed else ""
    key_m = ", PRIMARY KEY (run_id, rank, step, name)" if keyed else ""
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        conn.execute("CREATE TABLE raw_run (id bigint PRIMARY KEY)")
        conn.execute("INSERT INTO raw_run VALUES (1)")
        conn.execute(
            f"CREATE TABLE raw_s (run_id bigint NOT NULL{fk}, log_file_id bigint, rank bigint,"
            f" step bigint, step_time_s float8, throughput float8, loss float8{key_s})"
        )
        conn.execute(
            f"CREATE TABLE raw_m (run_id bigint NOT NULL{fk}, log_file_id bigint, rank bigint,"
            f" step bigint, name text, value float8{key_m})"
        )
        conn.commit()
        t = time.perf_counter()
        with conn.cursor() as cur:
            with cur.copy("COPY raw_s FROM STDIN") as copy:
                for i in range(n):
                    copy.write_row((1, 1, 0, i, 0.45, 12000.0, 2.0))
            with cur.copy("COPY raw_m FROM STDIN") as copy:
                for i in range(n):
                    for k in range(metrics_per_step):
                        copy.write_row((1, 1, 0, i, f"m{k}", 1.0))
        conn.commit()
        took = time.perf_counter() - t
        conn.execute("DROP TABLE raw_s, raw_m, raw_run")
        conn.commit()
        return took


def pg_schema_url(base: str) -> tuple[str, str]:
    """A fresh schema on the server (dropped at the end) and a URL that uses it."""
    import psycopg

    name = f"bench_ingest_{os.getpid()}"
    with psycopg.connect(
        base.replace("postgresql+psycopg://", "postgresql://"), autocommit=True
    ) as c:
        c.execute(f"CREATE SCHEMA {name}")
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{name}", name


def drop_schema(base: str, name: str) -> None:
    import psycopg

    with psycopg.connect(
        base.replace("postgresql+psycopg://", "postgresql://"), autocommit=True
    ) as c:
        c.execute(f"DROP SCHEMA {name} CASCADE")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--shape", choices=[*sorted(SHAPES), "mixed"], default="nanochat")
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--pg-url", default=os.environ.get("LEDGER_TEST_PG_URL"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import ledger
    from ledger.store.steps import StepWriter

    # The time ingest spends writing rows (the rest is reading the log): StepWriter.write
    # is the one place its rows go through.
    writing = [0.0]
    write = StepWriter.write

    def timed_write(self: StepWriter, *a: object, **k: object) -> object:
        t = time.perf_counter()
        try:
            return write(self, *a, **k)  # type: ignore[arg-type]
        finally:
            writing[0] += time.perf_counter() - t

    StepWriter.write = timed_write  # type: ignore[assignment,method-assign]
    metrics_per_step = 3 if args.shape == "torchtitan" else 1
    times: dict[str, list[float]] = {}

    def note(key: str, value: float) -> None:
        times.setdefault(key, []).append(value)

    steps = metrics = again_rows = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        log = folder / "train_bench.log"
        write_log(log, args.lines, args.shape)
        mb = log.stat().st_size / 1e6
        for k in range(args.repeat):  # interleaved, so a busy moment hits all alike
            note("plain", plain_iteration(log))
            if args.backend == "sqlite":
                unindexed, keyed = raw_sqlite(folder, args.lines, metrics_per_step)
                note("unindexed", unindexed)
                note("keyed", keyed)
                for f in [*folder.glob("wide.db*"), *folder.glob("keyed.db*")]:
                    f.unlink()
                target = str(folder / f"ledger{k}.db")
                schema = None
            else:
                if not args.pg_url:
                    sys.exit("Error: --backend postgres needs --pg-url or LEDGER_TEST_PG_URL")
                target, schema = pg_schema_url(args.pg_url)
                note("copy", raw_copy(target, args.lines, metrics_per_step, keyed=True))
                note("copy_plain", raw_copy(target, args.lines, metrics_per_step, keyed=False))
            lg = ledger.open(target)
            try:
                writing[0] = 0.0
                t, c = time.perf_counter(), time.process_time()
                result = lg.ingest(log)
                note("ingest", time.perf_counter() - t)
                note("ingest_cpu", time.process_time() - c)
                note("unindexed_cpu", CPU.get("unindexed", float("nan")))
                note("writing", writing[0])
                t = time.perf_counter()
                again = lg.ingest(log)
                note("again", time.perf_counter() - t)
            finally:
                lg.close()
                if schema is not None:
                    drop_schema(args.pg_url, schema)
            steps, metrics, again_rows = result.steps, result.metrics, again.steps
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"log: {args.lines:,} {args.shape}-style lines, {mb:,.0f} MB; {args.backend}; "
          f"medians of {args.repeat}")  # fmt: skip
    print(f"plain line iteration:                      {med['plain']:6.2f} s")
    if args.backend == "sqlite":
        print(f"raw executemany, 1M wide rows, unindexed:  {med['unindexed']:6.2f} s  (reference)")
        print(f"raw executemany, ingest's rows, keyed:     {med['keyed']:6.2f} s")
        ref = med["unindexed"]
        goal = 5
    else:
        print(f"raw COPY, tables shaped like ledger's:    {med['copy']:6.2f} s  (reference)")
        print(f"raw COPY of the same rows, unindexed:      {med['copy_plain']:6.2f} s")
        ref = med["copy"]
        goal = 2
    print(f"ledger ingest:                             {med['ingest']:6.2f} s  "
          f"{med['ingest'] / ref:.2f}x the reference (goal <= {goal}x); "
          f"{steps:,} steps, {metrics:,} metric rows")  # fmt: skip
    print(
        f"  of which writing rows:                   {med['writing']:6.2f} s  "
        f"{med['writing'] / ref:.2f}x the reference"
    )
    if args.backend == "sqlite":  # CPU seconds of this process: steadier on a shared box
        cpu_ref = med["unindexed_cpu"]
        print(
            f"  CPU: ingest {med['ingest_cpu']:.2f} s, raw executemany {cpu_ref:.2f} s: "
            f"{med['ingest_cpu'] / cpu_ref:.2f}x"
        )
    print(
        f"ledger ingest again (unchanged):           {med['again']:6.2f} s, {again_rows} new rows"
    )


if __name__ == "__main__":
    main()
