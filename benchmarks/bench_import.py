"""`ledger import` of a TensorBoard log, beside TensorBoard's own reader of the same files.

    .venv/bin/python benchmarks/bench_import.py [--steps 100000] [--repeat 3]

Writes one run's event files with torch.utils.tensorboard (loss, tokens_per_sec and lr
every step), then times, in the same process and interleaved:

- reader: TensorBoard's EventAccumulator loading every scalar (what the import reads
  with: the floor);
- import: `Ledger.import_runs` into a fresh SQLite ledger, end to end (read, map, write);
- again: the second import of the same folder (reads it all, adds nothing).

Prints medians over the repetitions and the ratio of import to the reader.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import ledger


def write_log(folder: Path, steps: int) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder), max_queue=10_000)
    for step in range(steps):
        writer.add_scalar("train/loss", 2.0 / (step + 1), step)
        writer.add_scalar("tokens_per_sec", 14_000.0 + step % 97, step)
        writer.add_scalar("lr", 3e-4, step)
    writer.close()


def read_only(folder: Path) -> int:
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(folder), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    acc.Reload()
    return sum(len(acc.Scalars(tag)) for tag in acc.Tags()["scalars"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "runs" / "eager"
        write_log(folder, args.steps)
        reader, first, again = [], [], []
        for i in range(args.repeat):
            t0 = time.perf_counter()
            points = read_only(folder)
            reader.append(time.perf_counter() - t0)
            with ledger.open(root / f"ledger{i}.db") as lg:
                t0 = time.perf_counter()
                result = lg.import_runs([root / "runs"])
                first.append(time.perf_counter() - t0)
                assert result.steps == args.steps, result.steps
                t0 = time.perf_counter()
                assert lg.import_runs([root / "runs"]).steps == 0
                again.append(time.perf_counter() - t0)
    r, f, a = (statistics.median(x) for x in (reader, first, again))
    print(f"{args.steps:,} steps, {points:,} scalars, median of {args.repeat}")
    print(f"  TensorBoard's reader : {r:7.2f} s")
    rate = f"{args.steps / f:,.0f} steps/s"
    print(f"  ledger import        : {f:7.2f} s  ({f / r:.2f}x the reader, {rate})")
    print(f"  import again         : {a:7.2f} s  ({a / r:.2f}x the reader)")


if __name__ == "__main__":
    main()
