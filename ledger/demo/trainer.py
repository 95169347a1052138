# ruff: noqa: E501 — verbatim log lines are as long as the programs print them
"""A stand-in trainer: a process that writes a realistic training log at a real pace.

    python -m ledger.demo.trainer --log train_x.log [--ending ok|oom|nccl|stall|finish]
        [--level 14200] [--step-time 0.02] [--shards 851] [--load-time 2] [--steps 600]

It prints what `ledger watch` has to read on a real box, in time: a launcher banner, the
851-shard "Loading weights" bar redrawn with carriage returns (no newline until it is done),
a warm-up ramp, then nanochat-style step lines with tokens/s around `--level` (AR(1) noise,
optional checkpoint stalls) — and then the ending asked for: an OOM traceback and torchrun's
ChildFailedError (exit 1), an NCCL watchdog timeout (exit 134: SIGABRT), silence with the
process still alive (a stall), a "Training completed" line, or simply running until killed.
Without --log it writes to standard output (what `watch -- COMMAND` reads).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable
from typing import TextIO

TOKENS_PER_STEP = 8 * 8192


def loading(out: TextIO, shards: int, seconds: float, sleep: Callable[[float], None]) -> None:
    """The weights bar, redrawn in place (`\\r`) as tqdm does, then its newline."""
    if not shards:
        return
    states = max(2, min(shards, 60))
    for i in range(states + 1):
        n = round(shards * i / states)
        pct = int(100 * n / shards)
        bar = "█" * (pct // 10) + " " * (10 - pct // 10)
        rate = shards / seconds if seconds > 0 else 1000.0
        left = int((shards - n) / rate)
        out.write(
            f"\rLoading weights: {pct:3d}%|{bar}| {n}/{shards} [00:00<{left // 60:02d}:{left % 60:02d}, {rate:.2f}it/s]"
        )
        out.flush()
        sleep(seconds / states)
    out.write("\n")
    out.write(f"Materializing param=drafter.lm_head.weight on cuda:0 ({shards} shards)\n")
    out.flush()


def step_line(step: int, total: int, tps: float, loss: float, minutes: float) -> str:
    dt = TOKENS_PER_STEP / tps
    pct = 100.0 * step / total
    return (
        f"[rank0]: step {step:05d}/{total:05d} ({pct:.2f}%) | loss: {loss:.6f} | lrm: 1.00 | "
        f"dt: {dt * 1000:.2f}ms | tok/sec: {tps:,.0f} | mfu: {tps / 14200 * 38.5:.2f} | "
        f"total time: {minutes:.2f}m\n"
    )


OOM = """[rank3]: Traceback (most recent call last):
[rank3]:   File "/workspace/train.py", line 412, in <module>
[rank3]:     loss = drafter(batch, target_hidden)
[rank3]:   File "/workspace/drafter/model.py", line 157, in forward
[rank3]:     cached = self.buffer_cache.get(key, lambda: torch.empty(shape, device='cuda'))
[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.50 GiB. GPU 3 has a total capacity of 79.19 GiB of which 1.21 GiB is free. Of the allocated memory 74.12 GiB is allocated by PyTorch, and 2.31 GiB is reserved by PyTorch but unallocated.
E1129 11:02:18.118000 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1) local_rank: 3 (pid: 21908) of binary: /usr/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
"""

NCCL = """[rank5]:[E1129 11:40:02.501000 ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=48211, OpType=ALLREDUCE, NumelIn=262144000, NumelOut=262144000, Timeout(ms)=600000) ran for 600043 milliseconds before timing out.
[rank5]:[E1129 11:40:02.503000 ProcessGroupNCCL.cpp:1785] [PG 0 (default_pg) Rank 5] Exception (either an error or timeout) detected by watchdog at work: 48211, last enqueued NCCL work: 48211, last completed NCCL work: 48210.
[rank5]:[E1129 11:40:02.504000 ProcessGroupNCCL.cpp:630] [Rank 5] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
terminate called after throwing an instance of 'c10::DistBackendError'
"""


def train(
    args: argparse.Namespace, out: TextIO, sleep: Callable[[float], None] = time.sleep
) -> int:
    """Write the log; returns the process's exit status."""
    rng = random.Random(args.seed)
    out.write(f"launching {args.name}: torchrun --nproc_per_node 8 train.py --token-budget 49152\n")
    out.write("W1129 10:00:00.000000 torch/distributed/run.py:792] Setting OMP_NUM_THREADS=1\n")
    out.write("Patching SDPA with flex attention for the drafter\n")
    out.flush()
    loading(out, args.shards, args.load_time, sleep)
    noise, loss, started = 0.0, 4.2, time.monotonic()
    for step in range(1, args.steps + 1):
        ramp = 0.3 + 0.7 * min(1.0, step / max(1, args.warmup))
        noise = 0.6 * noise + rng.gauss(0.0, args.noise * math.sqrt(1 - 0.36))
        tps = args.level * ramp * (1.0 + noise)
        stalled = args.stall_every and step % args.stall_every == 0
        pause = args.step_time * (1.0 / ramp) * (6.0 if stalled else 1.0)
        sleep(pause)
        if args.ending == "oom" and step == args.end_at:
            out.write(OOM)
            out.flush()
            return 1
        if args.ending == "nccl" and step == args.end_at:
            out.write(NCCL)
            out.flush()
            return 134
        if args.ending == "stall" and step == args.end_at:
            while True:  # alive, silent: what a hung collective looks like from outside
                sleep(3600)
        loss = max(1.6, loss * 0.999 + rng.gauss(0.0, 0.004))
        minutes = (time.monotonic() - started) / 60
        out.write(step_line(step, args.total, tps if not stalled else tps / 6.0, loss, minutes))
        out.flush()
    if args.ending == "finish":
        out.write(f"Training completed: {args.steps} steps\n")
        out.flush()
        return 0
    while args.ending == "ok":  # keeps running (and printing nothing more) until stopped
        sleep(3600)
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Write a realistic training log at a real pace.")
    p.add_argument("--log", help="the file to write (default: standard output)")
    p.add_argument("--name", default="eager_dynamiccopy")
    p.add_argument("--ending", choices=("ok", "oom", "nccl", "stall", "finish"), default="finish")
    p.add_argument("--end-at", type=int, default=200, help="the step where the ending comes")
    p.add_argument("--level", type=float, default=14200.0, help="steady tokens/s")
    p.add_argument("--noise", type=float, default=0.02, help="relative noise of a step")
    p.add_argument("--step-time", type=float, default=0.01, help="seconds between step lines")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--total", type=int, default=3000, help="the total the step lines announce")
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--stall-every", type=int, default=0, help="a 6x slower step every N steps")
    p.add_argument("--shards", type=int, default=851)
    p.add_argument("--load-time", type=float, default=1.0, help="seconds the weights take")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.log is None:
        return train(args, sys.stdout)
    with open(args.log, "a", encoding="utf-8") as out:
        return train(args, out)


if __name__ == "__main__":
    sys.exit(main())
