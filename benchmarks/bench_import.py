"""`ledger import` of a TensorBoard log, beside TensorBoard's own reader of the same files.

    .venv/bin/python benchmarks/bench_import.py [--steps 100000] [--repeat 3]

Writes one run's event files with torch.utils.tensorboard (loss, tokens_per_sec and lr
every step), then times, in the same process and interleaved:

- reader: TensorBoard's EventAccumulator loading every scalar (what the import reads
  with: the floor);
- import: `Ledger.import_runs` into a fresh SQLite ledger, end to end (read, map, write);
- again: the second import of the same folder (reads it all, adds nothing: it asks the
  database which stored columns are empty, one small integer per step);
- fill: the import after a value was logged at every old step (a second event file with
  step_time for each step, as a run measured afterwards writes it): every step's empty
  column filled in place.

Prints medians over the repetitions and the ratio of each to the reader.
"""

from __future__ import annotations

import argparse
import shutil
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


def write_later(folder: Path, steps: int) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder), max_queue=10_000, filename_suffix=".later")
    for step in range(steps):
        writer.add_scalar("step_time", 0.5 + step % 7 / 100, step)
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
        later = root / "later"
        write_later(later, args.steps)
        reader, first, again, fill = [], [], [], []
        for i in range(args.repeat):
            t0 = time.perf_counter()
            points = read_only(folder)
            reader.append(time.perf_counter() - t0)
            runs = root / f"runs{i}"
            shutil.copytree(root / "runs", runs)
            with ledger.open(root / f"ledger{i}.db") as lg:
                t0 = time.perf_counter()
                result = lg.import_runs([runs])
                first.append(time.perf_counter() - t0)
                assert result.steps == args.steps, result.steps
                t0 = time.perf_counter()
                assert lg.import_runs([runs]).steps == 0
                again.append(time.perf_counter() - t0)
                for file in later.iterdir():
                    shutil.copy(file, runs / "eager" / file.name)
                t0 = time.perf_counter()
                filled = lg.import_runs([runs])
                fill.append(time.perf_counter() - t0)
                assert (filled.steps, filled.filled) == (0, args.steps), filled
    r, f, a, g = (statistics.median(x) for x in (reader, first, again, fill))
    print(f"{args.steps:,} steps, {points:,} scalars, median of {args.repeat}")
    print(f"  TensorBoard's reader : {r:7.2f} s")
    rate = f"{args.steps / f:,.0f} steps/s"
    print(f"  ledger import        : {f:7.2f} s  ({f / r:.2f}x the reader, {rate})")
    print(f"  import again         : {a:7.2f} s  ({a / r:.2f}x the reader)")
    print(f"  import, every step filled : {g:7.2f} s  ({g / r:.2f}x the reader, one more file)")


if __name__ == "__main__":
    main()
