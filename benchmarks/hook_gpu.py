"""StepMeter on a real GPU training loop: what it costs each kind of loop, and whether its GPU
times are right.

Three workloads, each measured in three arms interleaved in blocks (each arm in each
position of a round as often, so drift in clocks and temperature hits all alike):

- `transformer`: a bf16 decoder-only transformer with AdamW, about 20 ms a step on an H200;
- `tiny`: a small one (a few ms a step: the meter's share is larger);
- `host-bound`: ~150 tiny kernels on a small tensor, the GPU mostly idle (the step's time
  is the host launching them, as a small drafter model's is).

The arms: `bare` (no meter), `meter` (`with meter.step(...)`) and `meter+loss` (the same,
plus `s.set(loss=loss)` with the CUDA loss tensor, which the meter must read without
making anyone wait for the GPU). Nothing in the loop reads the loss: like a real loop that
logs every N steps, the GPU runs behind the host, and each block ends with a synchronize
that the last step of the block pays. A step's time is from its start to the next one's.
Printed per arm: median, mean, p99 and max against the bare arm's, and the steps slower
than 1.5x the bare median that the bare arm does not also have.

    python benchmarks/hook_gpu.py --out OUT                     # all three, one GPU
    python benchmarks/hook_gpu.py --workload host-bound --out OUT
    torchrun --nproc_per_node 2 benchmarks/hook_gpu.py --ddp --workload transformer --out OUT
    python benchmarks/hook_gpu.py --device cpu --steps 50 --out OUT   # CPU self-check

On CUDA, the transformer workloads also time each step with events of this script's own
(in every arm alike) and compare them with the gpu_time_s the meter stored.

Needs only torch and ledger (and what ledger installs); it imports the ledger of the
checkout it lives in, installed or not. The table goes to stdout (rank 0), the figures to
OUT/hook_gpu.json (OUT/hook_gpu_ddp.json with --ddp), the ledger to OUT/ledger.db unless
--db names another.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# The ledger of the checkout this script lives in, installed or not: the code measured is
# the code next to the script.
_CHECKOUT = Path(__file__).resolve().parent.parent
if (_CHECKOUT / "ledger" / "__init__.py").is_file():
    sys.path.insert(0, str(_CHECKOUT))

ARMS = ("bare", "meter", "meter+loss")
WORKLOADS = ("transformer", "tiny", "host-bound")
SLOW = 1.5  # a step slower than this times the bare arm's median is a slow step


@dataclass(frozen=True)
class Shape:
    vocab: int
    dim: int
    layers: int
    heads: int
    seq: int
    batch: int


SHAPES = {  # (on CUDA, on the CPU)
    "transformer": (
        Shape(vocab=32768, dim=1024, layers=8, heads=16, seq=1024, batch=8),
        Shape(vocab=128, dim=32, layers=1, heads=2, seq=16, batch=2),
    ),
    "tiny": (
        Shape(vocab=8192, dim=384, layers=4, heads=6, seq=256, batch=8),
        Shape(vocab=64, dim=16, layers=1, heads=2, seq=8, batch=2),
    ),
}


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        attn = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class TinyGPT(nn.Module):
    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.embed = nn.Embedding(s.vocab, s.dim)
        self.blocks = nn.ModuleList(Block(s.dim, s.heads) for _ in range(s.layers))
        self.norm = nn.LayerNorm(s.dim)
        self.head = nn.Linear(s.dim, s.vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu for a self-check")
    p.add_argument("--workload", choices=(*WORKLOADS, "all"), default="all")
    p.add_argument("--steps", type=int, default=600, help="measured steps per arm")
    p.add_argument("--warmup", type=int, default=None, help="steps before measuring")
    p.add_argument("--block", type=int, default=10, help="steps per block of one arm")
    p.add_argument("--ddp", action="store_true", help="under torchrun: DistributedDataParallel")
    p.add_argument("--kernels", type=int, default=150, help="kernels per host-bound step")
    p.add_argument("--out", type=Path, default=Path("hook_gpu_out"))
    p.add_argument("--db", default=None, help="the ledger (default: OUT/ledger.db)")
    return p.parse_args()


class Dist:
    """Rank, world and device; torch.distributed when --ddp."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.enabled = args.ddp
        cuda = args.device.startswith("cuda")
        if self.enabled:
            import torch.distributed as dist

            local = int(os.environ.get("LOCAL_RANK", "0"))
            if cuda:
                torch.cuda.set_device(local)
            dist.init_process_group("nccl" if cuda else "gloo")
            self.rank, self.world = dist.get_rank(), dist.get_world_size()
            self.device = torch.device(f"cuda:{local}" if cuda else "cpu")
        else:
            self.rank, self.world = 0, 1
            self.device = torch.device(args.device)

    def gather(self, value: Any) -> list[Any]:
        if not self.enabled:
            return [value]
        import torch.distributed as dist

        values: list[Any] = [None] * self.world
        dist.all_gather_object(values, value)
        return values

    def barrier(self) -> None:
        if self.enabled:
            import torch.distributed as dist

            dist.barrier()

    def close(self) -> None:
        if self.enabled:
            import torch.distributed as dist

            dist.destroy_process_group()


def make_step(
    workload: str, dist: Dist, kernels: int
) -> tuple[Callable[[], torch.Tensor], int, dict[str, Any]]:
    """(the step, returning its loss on the device; tokens a step; what it is)."""
    cuda = dist.device.type == "cuda"
    if workload == "host-bound":
        small = torch.rand(256, device=dist.device)

        def host_bound_step() -> torch.Tensor:
            # Each op is one tiny kernel: the step's time is the host launching them.
            x = small
            for _ in range(kernels - 1):
                x = torch.sin(x)
            return x.sum()

        return host_bound_step, 256, {"kernels": kernels}
    shape = SHAPES[workload][0 if cuda else 1]
    dtype = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(1234 + dist.rank)
    model: nn.Module = TinyGPT(shape).to(device=dist.device, dtype=dtype)
    if dist.enabled:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[dist.device.index] if cuda else None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    ids = torch.randint(0, shape.vocab, (shape.batch, shape.seq + 1), device=dist.device)

    def train_step() -> torch.Tensor:
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return train_step, shape.batch * shape.seq, {"shape": asdict(shape), "dtype": str(dtype)}


def measure(workload: str, args: argparse.Namespace, dist: Dist, db: str, stamp: str) -> Any:
    """This rank's figures for one workload: every arm's step times, the ledger's view."""
    from ledger.hook import StepMeter

    cuda = dist.device.type == "cuda"
    step_fn, tokens, about = make_step(workload, dist, args.kernels)
    own_events = cuda and workload != "host-bound"  # they would be a share of a tiny step
    run = f"hook_gpu{'_ddp' if dist.enabled else ''}-{workload}-{stamp}"
    # Opened before warm-up, as a training script would; it records the metered arms only,
    # with explicit step numbers that tie its rows to this script's own measurements.
    meter = StepMeter(run, db=db, handle_sigterm=False)
    warmup = args.warmup if args.warmup is not None else (30 if cuda else 3)
    for _ in range(warmup):
        step_fn()
    _sync(cuda)

    times: dict[str, list[float]] = {arm: [] for arm in ARMS}
    ours: dict[int, tuple[Any, Any]] = {}
    blocks = math.ceil(args.steps / args.block)
    number = 0
    for b in range(len(ARMS) * blocks):
        arm = ARMS[(b + b // len(ARMS)) % len(ARMS)]
        starts: list[float] = []
        for _ in range(args.block):
            events = None
            if own_events:
                events = (_timing_event(), _timing_event())
                events[0].record()
            starts.append(time.perf_counter())
            if arm == "bare":
                step_fn()
            else:
                with meter.step(number, tokens=tokens) as s:
                    loss = step_fn()
                    if arm == "meter+loss":
                        s.set(loss=loss)
            if events is not None:
                events[1].record()
                if arm != "bare":
                    ours[number] = events
            number += 1
        _sync(cuda)  # the block's queued GPU work is paid by its last step
        starts.append(time.perf_counter())
        times[arm].extend(later - sooner for sooner, later in itertools.pairwise(starts))
    own = {n: a.elapsed_time(z) / 1000.0 for n, (a, z) in ours.items()}
    closing = time.perf_counter()
    meter.close()
    result: dict[str, Any] = {
        "rank": dist.rank,
        "run": run,
        "arms": summarize(times),
        "meter_dropped": meter.dropped,
        "meter_close_s": time.perf_counter() - closing,
        **about,
    }
    if own:
        result["agreement"] = agreement(own, db, run, dist.rank)
    micro = StepMeter(f"{run}-caller", db=db, handle_sigterm=False, max_pending=1 << 20)
    result["caller_cost"] = caller_costs(micro, cuda)
    micro.close()
    return result


def main() -> int:
    args = parse_args()
    if not args.device.startswith("cuda"):
        torch.set_num_threads(1)  # a self-check: one core, steady, whatever else runs
    dist = Dist(args)
    args.out.mkdir(parents=True, exist_ok=True)
    db = args.db or str((args.out / "ledger.db").resolve())
    # A run per invocation: a second run into the same ledger under the same name would
    # keep the first one's rows for every step number (the ledger's first write wins).
    stamp = dist.gather(time.strftime("%Y%m%d-%H%M%S"))[0]
    workloads = WORKLOADS if args.workload == "all" else (args.workload,)
    result: dict[str, Any] = {
        "device": device_name(dist.device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "steps_per_arm": math.ceil(args.steps / args.block) * args.block,
        "block": args.block,
        "world_size": dist.world,
        "db": db,
        "workloads": {},
    }
    for workload in workloads:
        mine = measure(workload, args, dist, db, stamp)
        everyone = dist.gather(mine)
        dist.barrier()
        if dist.rank == 0:
            result["workloads"][workload] = {
                "ranks": everyone,
                "ledger": read_ledger(db, mine["run"], dist.world),
            }
    if dist.rank == 0:
        print_table(result)
        name = f"hook_gpu{'_ddp' if dist.enabled else ''}.json"
        (args.out / name).write_text(json.dumps(result, indent=2) + "\n")
        print(f"figures written to {args.out / name}")
    dist.barrier()
    dist.close()
    return 0


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.machine()})"


def _timing_event() -> Any:
    return torch.cuda.Event(enable_timing=True)


def _sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def summarize(times: dict[str, list[float]]) -> dict[str, Any]:
    """Per arm, in ms: median, mean, p99, max, and against the bare arm."""
    bare = times["bare"]
    bare_median = statistics.median(bare)
    bare_slow = sum(t > SLOW * bare_median for t in bare)
    out: dict[str, Any] = {}
    for arm, values in times.items():
        ordered = sorted(values)
        slow = sum(t > SLOW * bare_median for t in values)
        figures: dict[str, Any] = {
            "steps": len(values),
            "median_ms": statistics.median(ordered) * 1e3,
            "mean_ms": statistics.fmean(ordered) * 1e3,
            "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1e3,
            "max_ms": ordered[-1] * 1e3,
            "slow_steps": slow,
        }
        if arm != "bare":
            base = out["bare"]
            figures["mean_pct"] = (figures["mean_ms"] / base["mean_ms"] - 1) * 100
            figures["median_pct"] = (figures["median_ms"] / base["median_ms"] - 1) * 100
            figures["p99_pct"] = (figures["p99_ms"] / base["p99_ms"] - 1) * 100
            figures["max_pct"] = (figures["max_ms"] / base["max_ms"] - 1) * 100
            figures["slow_steps_beyond_bare"] = max(0, slow - bare_slow)
            figures["goals_met"] = (
                figures["mean_pct"] <= 0.5
                and figures["p99_pct"] <= 2.0
                and figures["slow_steps_beyond_bare"] == 0
            )
        out[arm] = figures
    return out


def caller_costs(
    meter: Any, cuda: bool, calls: int = 20_000, batch: int = 1_000
) -> dict[str, float]:
    """What the training thread pays per step, with nothing else running: the median over
    batches of `batch` calls, in µs, beside what its parts cost alone."""
    ns = time.perf_counter_ns

    def per_call(body: Any) -> float:
        batches = []
        for _ in range(calls // batch):
            t = ns()
            for _ in range(batch):
                body()
            batches.append((ns() - t) / batch / 1e3)
        return statistics.median(batches)

    result = {"clock_read_us": per_call(ns)}
    if cuda:
        pool = [torch.cuda.Event(enable_timing=True) for _ in range(2)]

        def two_records() -> None:
            pool[0].record()
            pool[1].record()

        result["two_event_records_us"] = per_call(two_records)
    step = iter(range(10**9, 2 * 10**9))

    def metered() -> None:
        with meter.step(next(step), tokens=8192):
            pass

    result["meter_step_us"] = per_call(metered)
    return result


def agreement(ours: dict[int, float], db: str, run: str, rank: int) -> dict[str, Any]:
    """Compare, step by step, the gpu_time_s the meter stored with this script's events."""
    import ledger

    with ledger.open(db) as lg:
        frame = lg.steps_frame(run, ["gpu_time_s"])
    frame = frame[frame["rank"] == rank]
    stored = dict(zip(frame["step"].tolist(), frame["gpu_time_s"].tolist(), strict=True))
    timed = [s for s in ours if s in stored and not math.isnan(stored[s])]
    diffs = sorted(abs(stored[s] - ours[s]) / ours[s] for s in timed if ours[s] > 0)
    if not diffs:
        return {"steps_compared": 0, "steps_with_gpu_time": 0}
    total_ratio = sum(stored[s] for s in timed) / sum(ours[s] for s in timed)
    return {
        "steps_compared": len(diffs),
        "steps_with_gpu_time": len(timed) / len(ours),  # share of metered steps
        "rel_diff_median_pct": statistics.median(diffs) * 100,
        "rel_diff_p95_pct": diffs[int(0.95 * (len(diffs) - 1))] * 100,
        "total_ratio": total_ratio,
        "within_2pct": statistics.median(diffs) <= 0.02 and abs(total_ratio - 1) <= 0.02,
    }


def read_ledger(db: str, run: str, world: int) -> dict[str, Any]:
    import ledger

    with ledger.open(db) as lg:
        summary = lg.meter_summary(run)
        frame = lg.steps_frame(run, ["step_time_s", "gpu_time_s", "memory_allocated_mib"])
    per_rank = frame.groupby("rank")["step"].count().to_dict()
    return {
        "fate": str(summary.fate),
        "rows_per_rank": {int(k): int(v) for k, v in per_rank.items()},
        "ranks": summary.ranks,
        "expected_ranks": world,
        "dropped_steps": summary.dropped_steps,
        "hook_cost_us": summary.hook_cost_us,
        "gpu_time_rows": int(frame["gpu_time_s"].notna().sum()),
        "memory_rows": int(frame["memory_allocated_mib"].notna().sum()),
    }


def print_table(r: dict[str, Any]) -> None:
    print(
        f"StepMeter on {r['device']} (torch {r['torch']}), {r['world_size']} rank(s); "
        f"{r['steps_per_arm']} steps per arm in blocks of {r['block']}, arms interleaved; "
        "a step is from its start to the next one's, each block ends with a synchronize"
    )
    head = (
        f"{'workload':>11} {'rank':>4} {'arm':>10} {'median ms':>10} {'mean ms':>9} "
        f"{'p99 ms':>8} {'max ms':>8} {'mean %':>8} {'p99 %':>7} {'slow+':>6} {'goals':>6}"
    )
    print(head)
    for workload, found in r["workloads"].items():
        for rank in found["ranks"]:
            for arm, a in rank["arms"].items():
                extra = (
                    f"{a['mean_pct']:>+8.2f} {a['p99_pct']:>+7.2f} "
                    f"{a['slow_steps_beyond_bare']:>6} {'met' if a['goals_met'] else 'NOT':>6}"
                    if arm != "bare"
                    else f"{'':>8} {'':>7} {'':>6} {'':>6}"
                )
                print(
                    f"{workload:>11} {rank['rank']:>4} {arm:>10} {a['median_ms']:>10.3f} "
                    f"{a['mean_ms']:>9.3f} {a['p99_ms']:>8.3f} {a['max_ms']:>8.3f} {extra}"
                )
    print("overhead % is of the bare arm's mean; slow+: steps > 1.5x the bare median beyond "
          "the bare arm's own; goals: mean <= +0.5 %, p99 <= +2 %, slow+ 0")  # fmt: skip
    for workload, found in r["workloads"].items():
        for rank in found["ranks"]:
            cost = rank["caller_cost"]
            parts = ", ".join(
                f"{k.removesuffix('_us').replace('_', ' ')} {v:.2f}" for k, v in cost.items()
            )
            agree = rank.get("agreement")
            said = ""
            if agree and agree.get("steps_compared"):
                said = (
                    f"; gpu_time_s on {agree['steps_with_gpu_time']:.0%} of metered steps, "
                    f"{agree['rel_diff_median_pct']:.3f} % from our events (median)"
                )
            print(f"{workload} rank {rank['rank']} caller side, µs per call: {parts}{said}")
        view = found["ledger"]
        print(
            f"{workload} ledger: fate {view['fate']}, rows per rank {view['rows_per_rank']}, "
            f"{view['ranks']}/{view['expected_ranks']} ranks, dropped {view['dropped_steps']}, "
            f"meter's own cost {view['hook_cost_us']} µs/step, {view['gpu_time_rows']} rows with "
            f"gpu_time_s, {view['memory_rows']} with memory"
        )


if __name__ == "__main__":
    sys.exit(main())
