"""A training process for the hook's multi-process tests: records steps with StepMeter.

Run as a script (never imported by pytest). It prints each finished step's number on
stdout as it goes, so a test can kill it at a moment it knows about.

    python hook_worker.py --db URL --run NAME --steps N [--torch] [--raise-at K] ...
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rank", type=int, default=None)
    parser.add_argument("--torch", action="store_true", help="train a tiny nn.Linear")
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--flush-interval", type=float, default=1.0)
    parser.add_argument("--start-at", type=float, default=None, help="time.time() to start at")
    parser.add_argument("--raise-at", type=int, default=None, help="raise inside this step")
    parser.add_argument("--raise-after", action="store_true", help="raise after the loop")
    parser.add_argument("--no-close", action="store_true", help="leave closing to atexit")
    parser.add_argument("--previous-handler", type=Path, default=None)
    parser.add_argument("--print", action="store_true", help="print each step when done")
    parser.add_argument("--close-timeout", type=float, default=60.0)
    parser.add_argument("--file-size-limit", type=int, default=None, help="RLIMIT_FSIZE bytes")
    parser.add_argument("--fork-sleeper", action="store_true", help="fork a child that sleeps")
    parser.add_argument("--report", action="store_true", help="print dropped=N at the end")
    args = parser.parse_args()

    if args.file_size_limit is not None:  # a full disk, for this process and its writer
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        limit = args.file_size_limit
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    if args.previous_handler is not None:
        marker = args.previous_handler

        def previous(signum: int, frame: object) -> None:
            marker.write_text(f"previous handler got {signum}\n")
            sys.exit(3)

        signal.signal(signal.SIGTERM, previous)

    model = optimizer = None
    if args.torch:
        import torch

        torch.manual_seed(0)
        model = torch.nn.Linear(8, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        inputs, targets = torch.randn(32, 8), torch.randn(32, 1)

    from ledger.hook import StepMeter

    if args.start_at is not None:
        time.sleep(max(0.0, args.start_at - time.time()))
    meter = StepMeter(
        args.run,
        db=args.db,
        rank=args.rank,
        flush_interval=args.flush_interval,
        close_timeout=args.close_timeout,
    )
    if args.fork_sleeper and os.fork() == 0:  # a DataLoader worker that outlives us
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # not the test's pipe: it reads until every holder closes it
        time.sleep(30)
        os._exit(0)
    for i in range(args.steps):
        with meter.step(tokens=32) as step:
            if model is not None:
                loss = torch.nn.functional.mse_loss(model(inputs), targets)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step.set(loss=loss.detach())
            else:
                step.set(loss=1.0 / (i + 1))
            if args.raise_at == i:
                raise RuntimeError(f"boom at step {i}")
            if args.step_sleep:
                time.sleep(args.step_sleep)
        if args.print:
            os.write(1, f"{i}\n".encode())
    if args.raise_after:
        raise ValueError("failed after the loop")
    if not args.no_close:
        meter.close()
    if args.report:
        print(f"dropped={meter.dropped}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
