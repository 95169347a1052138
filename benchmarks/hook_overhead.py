"""What StepMeter costs the training thread per step, beside what the alternatives cost.

In one run, per step, with the same six scalars (tokens, loss, lr, grad_norm, mfu,
loss_scale) for everybody:

- StepMeter: `with meter.step(**six): pass`, timed with its writer caught up (the steady
  state of a real loop, whose steps are milliseconds) and while its writer drains a backlog
  (the worst case: back-to-back empty steps competing with the writer for the GIL);
- a bare `queue.SimpleQueue.put` of the tuple the meter enqueues (the floor);
- `mlflow.log_metrics(six, step=i, synchronous=False)` into an MLflow SQLite store (async
  logging, MLflow's fastest per-step path);
- wandb's offline `run.log(six, step=i)`;

each as the median over repetitions of the mean over a block of calls; then how long it
takes, after the last of 20,000 steps, until all of them are durable (StepMeter.close(),
mlflow's flush of its async queue, wandb's run.finish()).

mlflow and wandb are not dependencies of ledger. To measure them, use a virtualenv of its
own for the benchmark (any folder will do):

    python -m venv ../bench-venv
    ../bench-venv/bin/pip install -e . mlflow wandb
    ../bench-venv/bin/python benchmarks/hook_overhead.py

Without them installed (or with --skip-peers) their lines say "not run". The figures are
printed as a table; `--json FILE` also writes them as JSON. `--gil-only` and `--close-only`
measure only the GIL loop (both ways of feeding the writer) or close() in fresh processes.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import queue
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

SIX = {
    "tokens": 4096,
    "loss": 2.5,
    "lr": 3e-4,
    "grad_norm": 1.25,
    "mfu": 0.41,
    "loss_scale": 65536.0,
}
DURABLE_STEPS = 20_000


def per_call_us(block: Callable[[int], None], reps: int, n: int, between=None) -> list[float]:
    """Microseconds per call for each repetition of `block(n)` (n calls)."""
    results = []
    for _ in range(reps):
        if between is not None:
            between()
        start = time.perf_counter_ns()
        block(n)
        results.append((time.perf_counter_ns() - start) / n / 1000)
    return results


def bench_meter(folder: Path, reps: int, n: int) -> dict[str, Any]:
    import ledger
    from ledger.hook import StepMeter

    db = f"sqlite:///{folder / 'ledger.db'}"
    meter = StepMeter("bench", db=db, max_pending=1_000_000, handle_sigterm=False)
    assert meter.flush(60)
    counter = iter(range(10**9))

    def steps(count: int) -> None:
        # Keywords as a training loop writes them (the same six values as SIX).
        step = meter.step
        for _ in range(count):
            with step(
                next(counter), tokens=4096, loss=2.5, lr=3e-4, grad_norm=1.25, mfu=0.41,
                loss_scale=65536.0,
            ):  # fmt: skip
                pass

    def steps_two(count: int) -> None:
        step = meter.step
        for _ in range(count):
            with step(next(counter), tokens=4096, loss=2.5):
                pass

    def caught_up_writer() -> None:
        meter.flush(60)
        time.sleep(0.01)  # let the writer finish its round and go back to sleep

    steps(n)  # warm-up
    caught_up = per_call_us(steps, reps, n, between=caught_up_writer)
    two_scalars = per_call_us(steps_two, reps, n, between=caught_up_writer)
    meter.flush(60)
    draining = per_call_us(steps, reps, n)
    meter.close()
    with ledger.open(db) as lg:
        self_cost = lg.meter_summary("bench").hook_cost_us

    # Durability: a fresh meter, 20,000 steps as fast as they come, then close().
    durable_db = f"sqlite:///{folder / 'durable.db'}"
    meter = StepMeter("durable", db=durable_db, max_pending=1_000_000, handle_sigterm=False)
    assert meter.flush(60)
    start = time.perf_counter()
    steps_counter = iter(range(DURABLE_STEPS))
    for i in steps_counter:
        with meter.step(i, **SIX):
            pass
    recorded = time.perf_counter()
    meter.close()
    closed = time.perf_counter()
    with ledger.open(durable_db) as lg:
        stored = lg.meter_summary("durable").steps
    assert stored == DURABLE_STEPS, stored
    return {
        "caught_up_us": caught_up,
        "two_scalars_us": two_scalars,
        "draining_us": draining,
        "self_recorded_us": self_cost,
        "durable_after_close_s": closed - recorded,
        "durable_total_s": closed - start,
    }


def bench_put(reps: int, n: int) -> dict[str, Any]:
    q: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def puts(count: int) -> None:
        put = q.put
        for i in range(count):
            put((i, 1_000, 2_000, 4096, 2.5, SIX, None, None, None, 0))

    def drain() -> None:
        while not q.empty():
            q.get_nowait()

    return {"caught_up_us": per_call_us(puts, reps, n, between=drain)}


def bench_mlflow(folder: Path, reps: int, n: int) -> dict[str, Any] | None:
    try:
        import mlflow
    except ImportError:
        return None
    logging.getLogger("mlflow").setLevel(logging.ERROR)
    mlflow.set_tracking_uri(f"sqlite:///{folder / 'mlflow.db'}")
    mlflow.set_experiment("bench")
    counter = iter(range(10**9))

    def logs(count: int) -> None:
        log = mlflow.log_metrics
        for _ in range(count):
            log(SIX, step=next(counter), synchronous=False)

    with mlflow.start_run():
        logs(min(n, 200))  # warm-up: the async queue's thread starts on first use
        calls = per_call_us(logs, reps, n)
        mlflow.flush_async_logging()
    with mlflow.start_run():
        for i in range(DURABLE_STEPS):
            mlflow.log_metrics(SIX, step=i, synchronous=False)
        recorded = time.perf_counter()
        mlflow.flush_async_logging()
        closed = time.perf_counter()
    return {"calls_us": calls, "durable_after_close_s": closed - recorded}


def bench_wandb(folder: Path, reps: int, n: int) -> dict[str, Any] | None:
    try:
        import wandb
    except ImportError:
        return None
    os.environ.setdefault("WANDB_SILENT", "true")
    settings = wandb.Settings(mode="offline", silent=True, console="off")
    run = wandb.init(project="bench", dir=str(folder), settings=settings)
    counter = iter(range(10**9))

    def logs(count: int) -> None:
        log = run.log
        for _ in range(count):
            log(SIX, step=next(counter))

    logs(min(n, 200))
    calls = per_call_us(logs, reps, n)
    run.finish()
    run = wandb.init(project="bench", dir=str(folder), settings=settings)
    for i in range(DURABLE_STEPS):
        run.log(SIX, step=i)
    recorded = time.perf_counter()
    run.finish()
    closed = time.perf_counter()
    return {"calls_us": calls, "durable_after_close_s": closed - recorded}


def bench_gil_loop(folder: Path, blocks: int = 30, block: int = 50) -> dict[str, Any]:
    """A loop whose steps hold the GIL for 1 ms of pure Python (as a loop launching kernels
    does), bare and metered, in rotating blocks; the slowdown of the metered steps, median
    over blocks of the mean step time. Two ways of feeding the writer are measured:

    - "forwarder": the meter as it ships, its forwarder thread waking every 20 ms;
    - "caller": the alternative of doing the forwarder's work on the training thread every
      20 steps (its thread asleep), which needs no GIL hand-over between threads.
    """
    from ledger.hook import StepMeter

    forwarded = StepMeter("gil", db=str(folder / "gil.db"), handle_sigterm=False)
    pumped = StepMeter("gil_caller", db=str(folder / "gil.db"), handle_sigterm=False)
    assert forwarded.flush(60) and pumped.flush(60)
    pumped._link.interval = 3600.0  # its thread sleeps; the loop below pumps instead
    pump = functools.partial(pumped._link.pump, yields=False)

    def busy() -> None:
        end = time.perf_counter_ns() + 1_000_000
        while time.perf_counter_ns() < end:
            pass

    arms = ("without", "forwarder", "caller")
    times: dict[str, list[float]] = {arm: [] for arm in arms}
    pump_ns: list[int] = []
    pump_cpu_ns = 0
    # CPU time is what the other side of the GIL gets: a load on the box stretches wall
    # times, not these. The forwarder's thread (and its replies thread) in the shipped arm.
    link = forwarded._link
    clocks = [time.pthread_getcpuclockid(t.ident) for t in (link._forwarder, link._replies)
              if t.ident is not None]  # fmt: skip
    forwarder_cpu_ns = 0  # counted over the forwarder arm's blocks only
    step = 0
    for b in range(len(arms) * blocks):
        turn = b // len(arms)
        arm = arms[(b + turn) % len(arms)]  # each arm in each position as often
        cpu_at = sum(time.clock_gettime_ns(c) for c in clocks) if arm == "forwarder" else 0
        t = time.perf_counter_ns()
        for i in range(block):
            if arm == "forwarder":
                with forwarded.step(step, **SIX):
                    busy()
            elif arm == "caller":
                with pumped.step(step, **SIX):
                    busy()
                if i % 20 == 19:
                    p, c = time.perf_counter_ns(), time.thread_time_ns()
                    pump()
                    pump_cpu_ns += time.thread_time_ns() - c
                    pump_ns.append(time.perf_counter_ns() - p)
            else:
                busy()
            step += 1
        times[arm].append((time.perf_counter_ns() - t) / block / 1e3)
        if arm == "forwarder":
            forwarder_cpu_ns += sum(time.clock_gettime_ns(c) for c in clocks) - cpu_at
    forwarded.close()
    pumped.close()
    bare = statistics.median(times["without"])
    out: dict[str, Any] = {"without_us": bare}
    for arm in arms[1:]:
        median = statistics.median(times[arm])
        out[f"{arm}_us"] = median
        out[f"{arm}_slowdown_pct"] = (median / bare - 1) * 100
    out["caller_pump_us"] = statistics.median(pump_ns) / 1e3 if pump_ns else None
    metered_steps = blocks * block
    out["forwarder_cpu_us_per_step"] = forwarder_cpu_ns / metered_steps / 1e3
    out["caller_pump_cpu_us_per_step"] = pump_cpu_ns / metered_steps / 1e3
    # The shipped design's figure under its historical names.
    out["with_us"], out["slowdown_pct"] = out["forwarder_us"], out["forwarder_slowdown_pct"]
    return out


# Fresh processes, as a training script is: import, make the meter, 20,000 steps as fast as
# they come, close(). What is timed is close() (until every step is durable), and the
# writer process's start-up alone (StepMeter() then flush() with nothing recorded).
_FRESH_METER = """
import sys, time
from ledger.hook import StepMeter
db, mode, STEPS = sys.argv[1], sys.argv[2], int(sys.argv[3])
six = dict(tokens=4096, loss=2.5, lr=3e-4, grad_norm=1.25, mfu=0.41, loss_scale=65536.0)
made = time.perf_counter()
meter = StepMeter("durable", db=db, max_pending=1_000_000, handle_sigterm=False)
if mode == "startup":
    assert meter.flush(120)
    print(time.perf_counter() - made)
    meter.close()
    raise SystemExit
for i in range(STEPS):
    with meter.step(i, **six):
        pass
looped = time.perf_counter()
meter.close()
print(time.perf_counter() - looped, looped - made)
"""

# The reference, in a fresh process too: the same rows written by the ledger's own writer
# in this process, the ledger opened before the clock starts (as ledger's earlier
# in-process writer did at construction): what writing them costs at all.
_FRESH_REFERENCE = """
import sys, time
from datetime import UTC, datetime
from ledger.usecases.ledger import Ledger
STEPS = int(sys.argv[2])
lg = Ledger.open(sys.argv[1], create=True)
run = lg.start_metered_run("durable", host="h", command=None, launched_at=datetime.now(UTC))
rows = [{"step": i, "rank": 0, "wall_time": 1.7e9 + i, "step_time_s": 1e-5, "wait_s": 1e-6,
         "gpu_time_s": None, "tokens": 4096, "throughput": 4e8, "loss": 2.5, "lr": 3e-4,
         "grad_norm": 1.25, "mfu": 0.41, "loss_scale": 65536.0} for i in range(STEPS)]
start = time.perf_counter()
for at in range(0, len(rows), 10_000):
    lg.write_meter_batch(run.id, rows[at:at + 10_000], metrics=[], dropped=0, cost_us=None,
                         fates=[])
print(time.perf_counter() - start)
"""


def bench_close_fresh(folder: Path, runs: int) -> dict[str, Any]:
    """close() after 20,000 steps x 6 scalars in fresh processes (interleaved with the
    reference), each into a new ledger; medians of `runs`."""
    import subprocess

    checkout = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (checkout, os.environ.get("PYTHONPATH")) if p)}  # fmt: skip

    def child(code: str, db: Path, *args: str) -> list[float]:
        done = subprocess.run(
            [sys.executable, "-c", code, f"sqlite:///{db}", *args],
            capture_output=True, text=True, env=env, timeout=300, check=True,
        )  # fmt: skip
        return [float(x) for x in done.stdout.split()]

    close, loop, startup, reference = [], [], [], []
    for i in range(runs):
        steps = str(DURABLE_STEPS)
        took, looped = child(_FRESH_METER, folder / f"fresh-{i}.db", "steps", steps)
        close.append(took)
        loop.append(looped)
        startup.append(child(_FRESH_METER, folder / f"startup-{i}.db", "startup", steps)[0])
        reference.append(child(_FRESH_REFERENCE, folder / f"reference-{i}.db", steps)[0])
    return {
        "close_s": close,
        "loop_s": loop,
        "writer_startup_s": startup,
        "reference_write_s": reference,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=31, help="repetitions (median taken)")
    parser.add_argument("--calls", type=int, default=1000, help="calls per repetition")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--fresh", type=int, default=3, help="fresh-process close() runs")
    parser.add_argument(
        "--close-only", action="store_true", help="only the fresh-process close() figures"
    )
    parser.add_argument("--gil-only", action="store_true", help="only the GIL-loop figures")
    parser.add_argument("--gil-blocks", type=int, default=30, help="GIL-loop blocks per arm")
    parser.add_argument("--skip-peers", action="store_true", help="leave mlflow and wandb out")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.gil_only:
        with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
            gil = bench_gil_loop(Path(tmp), blocks=args.gil_blocks)
        print(json.dumps(gil, indent=2))
        if args.json is not None:
            args.json.write_text(json.dumps({"gil_loop": gil}, indent=2) + "\n")
        return 0
    if args.close_only:
        with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
            fresh = bench_close_fresh(Path(tmp), args.fresh)
        print_fresh(fresh)
        if args.json is not None:
            args.json.write_text(json.dumps({"fresh_close": fresh}, indent=2) + "\n")
        return 0

    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        folder = Path(tmp)
        results: dict[str, Any] = {
            "python": sys.version.split()[0],
            "reps": args.reps,
            "calls_per_rep": args.calls,
            "meter": bench_meter(folder, args.reps, args.calls),
            "simplequeue_put": bench_put(args.reps, args.calls),
            "mlflow": None if args.skip_peers else bench_mlflow(folder, args.reps, args.calls),
            "wandb": None if args.skip_peers else bench_wandb(folder, args.reps, args.calls),
            "gil_loop": bench_gil_loop(folder, blocks=args.gil_blocks),
            "fresh_close": bench_close_fresh(folder, args.fresh) if args.fresh else None,
        }
    print_table(results)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def print_fresh(fresh: dict[str, Any] | None) -> None:
    if not fresh:
        return
    med = statistics.median
    print(
        f"close() after {DURABLE_STEPS} steps x 6 scalars, fresh processes, new ledgers, "
        f"median of {len(fresh['close_s'])}: {med(fresh['close_s']):.2f} s "
        f"(runs {', '.join(f'{x:.2f}' for x in fresh['close_s'])}; the loop took "
        f"{med(fresh['loop_s']):.3f} s); goal <= 0.5 s"
    )
    print(
        f"  the writer process's start-up alone (StepMeter() to a done flush()): "
        f"{med(fresh['writer_startup_s']):.2f} s; reference, the same rows written in-process "
        f"into an open ledger: {med(fresh['reference_write_s']):.2f} s"
    )


def print_table(r: dict[str, Any]) -> None:
    meter, put = r["meter"], r["simplequeue_put"]
    base = statistics.median(meter["caught_up_us"])
    rows: list[tuple[str, ...]] = []

    def add(name: str, calls: list[float] | float | None, durable: float | None = None) -> None:
        if calls is None:
            rows.append((name, "not run", "", "", ""))
            return
        values = calls if isinstance(calls, list) else [calls]
        median = statistics.median(values)
        best = f"{min(values):.2f}" if len(values) > 1 else ""
        rows.append(
            (
                name,
                f"{median:.2f}",
                best,
                f"{median / base:.1f}x",
                f"{durable:.2f}" if durable is not None else "",
            )
        )

    add("StepMeter, writer caught up", meter["caught_up_us"], meter["durable_after_close_s"])
    add("StepMeter, two scalars", meter["two_scalars_us"])
    add("StepMeter, writer draining", meter["draining_us"])
    add("StepMeter, as it records itself", meter["self_recorded_us"])
    add("SimpleQueue.put, same tuple", put["caught_up_us"])
    for key, name in (("mlflow", "mlflow.log_metrics (async)"), ("wandb", "wandb run.log (off)")):
        found = r[key]
        add(
            name,
            None if found is None else found["calls_us"],
            (found or {}).get("durable_after_close_s"),
        )
    print(
        f"caller-side cost per step, six scalars: median (and best) of {r['reps']} repetitions "
        f"x {r['calls_per_rep']} calls; Python {r['python']}"
    )
    print(f"{'':34} {'µs/step':>9} {'best':>7} {'vs meter':>9} {'s to durable':>13}")
    for name, *cells in rows:
        if cells[0] == "not run":
            print(f"{name:34} {'not run':>9}")
            continue
        median, best, ratio, durable = cells
        print(f"{name:34} {median:>9} {best:>7} {ratio:>9} {durable:>13}")
    print(
        f"'s to durable': seconds from the last of {DURABLE_STEPS} steps until all are on disk "
        f"(StepMeter.close, mlflow.flush_async_logging, wandb run.finish); StepMeter recorded "
        f"and stored them all in {meter['durable_total_s']:.2f} s"
    )
    print_fresh(r.get("fresh_close"))
    gil = r["gil_loop"]
    print(
        f"a loop whose steps hold the GIL for 1 ms: {gil['without_us']:.1f} µs/step bare, "
        f"{gil['with_us']:.1f} with the meter: {gil['slowdown_pct']:+.2f} % (goal <= 0.5 %)"
    )
    print(
        f"  the alternative, the forwarder's work done on the training thread every 20 steps: "
        f"{gil['caller_us']:.1f} µs/step, {gil['caller_slowdown_pct']:+.2f} % "
        f"(one round of it: {gil['caller_pump_us']:.1f} µs)"
    )
    print(
        f"  CPU time per metered step, the forwarder's threads: "
        f"{gil['forwarder_cpu_us_per_step']:.2f} µs; the caller's pumping: "
        f"{gil['caller_pump_cpu_us_per_step']:.2f} µs (a 1 ms step: 10 µs is 1 %)"
    )


if __name__ == "__main__":
    sys.exit(main())
