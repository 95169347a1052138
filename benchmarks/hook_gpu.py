"""StepMeter on a real GPU training step: its overhead, and whether its GPU times are right.

A small bf16 decoder-only transformer trains with AdamW. After warm-up, blocks of steps
with the meter and blocks without it alternate (A/B interleaved, so drift in clocks and
temperature hits both arms alike), each arm getting `--steps` steps. Every step is timed
by this script on the host (until its loss is on the host, as a loop that logs its loss
does) and with CUDA events of its own around the step. Printed: the step time of each arm,
the meter's overhead in % of the step time, and how the GPU step times the meter stored in
the ledger agree with the script's own events.

    python benchmarks/hook_gpu.py --out OUT                     # one GPU
    torchrun --nproc_per_node 2 benchmarks/hook_gpu.py --ddp --out OUT   # two ranks, NCCL
    python benchmarks/hook_gpu.py --device cpu --steps 20 --out OUT      # CPU smoke run
    python benchmarks/hook_gpu.py --host-bound --out OUT        # ~150 tiny kernels a step

--host-bound replaces the transformer by a step that launches ~150 tiny kernels on a
small tensor (about 2 ms a step on an H200 host, the GPU mostly idle, as a small drafter
model is): there the meter's host cost is a visible share of the step.

Needs only torch and ledger (and what ledger installs: the hook uses sqlalchemy and, to
create a new ledger, alembic with Mako and MarkupSafe); it imports the ledger of the
checkout it lives in, installed or not. The table goes to stdout (rank 0),
the figures to OUT/hook_gpu.json (OUT/hook_gpu_ddp.json with --ddp), and the ledger to
OUT/ledger.db unless --db names another.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import sys
import time
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


@dataclass(frozen=True)
class Shape:
    vocab: int
    dim: int
    layers: int
    heads: int
    seq: int
    batch: int


GPU_SHAPE = Shape(vocab=32768, dim=1024, layers=8, heads=16, seq=1024, batch=8)
CPU_SHAPE = Shape(vocab=256, dim=64, layers=2, heads=4, seq=32, batch=4)


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
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu for a smoke run")
    p.add_argument("--steps", type=int, default=400, help="measured steps per arm (>= 200)")
    p.add_argument("--warmup", type=int, default=None, help="steps before measuring")
    p.add_argument("--block", type=int, default=10, help="steps per A or B block")
    p.add_argument("--ddp", action="store_true", help="under torchrun: DistributedDataParallel")
    p.add_argument("--host-bound", action="store_true", help="~150 tiny kernels a step")
    p.add_argument("--kernels", type=int, default=150, help="kernels per host-bound step")
    p.add_argument("--out", type=Path, default=Path("hook_gpu_out"))
    p.add_argument("--db", default=None, help="the ledger (default: OUT/ledger.db)")
    p.add_argument("--run", default=None, help="ledger run name (default: hook_gpu[_ddp]-TIME)")
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


def main() -> int:
    args = parse_args()
    dist = Dist(args)
    cuda = dist.device.type == "cuda"
    shape = GPU_SHAPE if cuda else CPU_SHAPE
    warmup = args.warmup if args.warmup is not None else (30 if cuda else 3)
    args.out.mkdir(parents=True, exist_ok=True)
    db = args.db or str((args.out / "ledger.db").resolve())
    # A run per invocation: a second run into the same ledger under the same name would
    # keep the first one's rows for every step number (the ledger's first write wins).
    stamp = dist.gather(time.strftime("%Y%m%d-%H%M%S"))[0]
    kind = "_host" if args.host_bound else ""
    run = args.run or f"hook_gpu{'_ddp' if args.ddp else ''}{kind}-{stamp}"

    torch.manual_seed(1234 + dist.rank)
    dtype = torch.bfloat16 if cuda else torch.float32
    model: nn.Module = TinyGPT(shape).to(device=dist.device, dtype=dtype)
    if dist.enabled:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[dist.device.index] if cuda else None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    ids = torch.randint(0, shape.vocab, (shape.batch, shape.seq + 1), device=dist.device)
    tokens = shape.batch * shape.seq

    def train_step() -> torch.Tensor:
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    if args.host_bound:
        small = torch.rand(256, device=dist.device)
        kernels = args.kernels

        def host_bound_step() -> torch.Tensor:
            # Each op is one tiny kernel: the step's time is the host launching them.
            x = small
            for _ in range(kernels - 1):
                x = torch.sin(x)
            return x.sum()

    step_fn = host_bound_step if args.host_bound else train_step

    from ledger.hook import StepMeter

    # The meter is opened before warm-up, as a training script would, and records only the
    # B blocks; explicit step numbers tie its rows to this script's own measurements.
    meter = StepMeter(run, db=db, handle_sigterm=False)
    for _ in range(warmup):
        loss = step_fn()
    _sync(cuda)
    loss.item()

    host: dict[str, list[float]] = {"without": [], "with": []}
    events: dict[str, list[float]] = {"without": [], "with": []}
    event_of_step: dict[int, float] = {}
    pairs: list[tuple[Any, Any, str, int]] = []
    blocks = math.ceil(args.steps / args.block)
    step = 0
    for block in range(2 * blocks):
        # ABBA order inside each pair of pairs, so neither arm always goes first.
        arm = "with" if (block % 2 == 1) ^ (block // 2 % 2 == 1) else "without"
        for _ in range(args.block):
            start_event = end_event = None
            if cuda:
                start_event = torch.cuda.Event(enable_timing=True)
                end_event = torch.cuda.Event(enable_timing=True)
                start_event.record()
            t0 = time.perf_counter()
            context = meter.step(step, tokens=tokens) if arm == "with" else contextlib.nullcontext()
            with context as s:
                loss = step_fn()
                if s is not None:
                    s.set(loss=loss)
            if cuda:
                end_event.record()
            loss.item()  # the loss on the host, as a loop that logs it every step
            host[arm].append(time.perf_counter() - t0)
            if cuda:
                pairs.append((start_event, end_event, arm, step))
            step += 1
    _sync(cuda)
    wall_done = time.perf_counter()
    for start_event, end_event, arm, number in pairs:
        seconds = start_event.elapsed_time(end_event) / 1000.0
        events[arm].append(seconds)
        if arm == "with":
            event_of_step[number] = seconds
    meter.close()
    closed_after = time.perf_counter() - wall_done

    mine = summarize(host, events, event_of_step, meter, db, run, dist.rank, closed_after)
    micro = StepMeter(f"{run}-caller", db=db, handle_sigterm=False, max_pending=1 << 20)
    mine["caller_cost"] = caller_costs(micro, cuda)
    micro.close()
    everyone = dist.gather(mine)
    dist.barrier()
    if dist.rank == 0:
        ledger_view = read_ledger(db, run, dist.world)
        result = {
            "device": device_name(dist.device),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "shape": asdict(shape),
            "workload": f"host-bound, {args.kernels} kernels" if args.host_bound else "transformer",
            "dtype": str(dtype),
            "tokens_per_step": tokens,
            "warmup_steps": warmup,
            "steps_per_arm": len(host["with"]),
            "block": args.block,
            "world_size": dist.world,
            "db": db,
            "run": run,
            "ranks": everyone,
            "ledger": ledger_view,
        }
        print_table(result)
        name = f"hook_gpu{'_ddp' if dist.enabled else ''}{kind}.json"
        (args.out / name).write_text(json.dumps(result, indent=2) + "\n")
        print(f"figures written to {args.out / name}")
    dist.barrier()
    dist.close()
    return 0


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.machine()})"


def _sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def summarize(
    host: dict[str, list[float]],
    events: dict[str, list[float]],
    event_of_step: dict[int, float],
    meter: Any,
    db: str,
    run: str,
    rank: int,
    closed_after: float,
) -> dict[str, Any]:
    """This rank's figures: step times per arm, overhead, and the meter's GPU times vs ours."""
    med = statistics.median
    a, b = host["without"], host["with"]
    result: dict[str, Any] = {
        "rank": rank,
        "host_step_ms": {"without": med(a) * 1e3, "with": med(b) * 1e3},
        "host_mean_ms": {"without": statistics.fmean(a) * 1e3, "with": statistics.fmean(b) * 1e3},
        "overhead_pct_median": (med(b) / med(a) - 1) * 100,
        "overhead_pct_mean": (statistics.fmean(b) / statistics.fmean(a) - 1) * 100,
        # The tail: a few slow steps move the mean but not the median; say where they are.
        "host_tail_ms": {arm: _tail(times) for arm, times in host.items()},
        "meter_dropped": meter.dropped,
        "meter_close_s": closed_after,
    }
    if events["with"]:
        result["gpu_event_ms"] = {
            "without": med(events["without"]) * 1e3,
            "with": med(events["with"]) * 1e3,
        }
        result["agreement"] = agreement(event_of_step, db, run, rank)
    return result


def _tail(times: list[float]) -> dict[str, Any]:
    ordered = sorted(times)
    median = statistics.median(ordered)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3

    slow = [i for i, t in enumerate(times) if t > 1.5 * median]
    return {"p90": pct(0.90), "p99": pct(0.99), "max": max(ordered) * 1e3,
            "slow_steps": len(slow), "first_slow": slow[:5]}  # fmt: skip


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
    # The meter times a sample of steps (event_every); compare those.
    timed = [s for s in ours if s in stored and not math.isnan(stored[s])]
    diffs = [abs(stored[s] - ours[s]) / ours[s] for s in timed]
    if not diffs:
        return {"steps_compared": 0}
    diffs.sort()
    total_ratio = sum(stored[s] for s in timed) / sum(ours[s] for s in timed)
    return {
        "steps_compared": len(diffs),
        "steps_missing": len(ours) - len(diffs),
        "rel_diff_median_pct": statistics.median(diffs) * 100,
        "rel_diff_p95_pct": diffs[int(0.95 * (len(diffs) - 1))] * 100,
        "rel_diff_max_pct": diffs[-1] * 100,
        "total_ratio": total_ratio,
        "within_2pct": statistics.median(diffs) <= 0.02 and abs(total_ratio - 1) <= 0.02,
    }


def read_ledger(db: str, run: str, world: int) -> dict[str, Any]:
    import ledger

    with ledger.open(db) as lg:
        summary = lg.meter_summary(run)
        frame = lg.steps_frame(run, ["step_time_s"])
    per_rank = frame.groupby("rank")["step"].count().to_dict()
    return {
        "fate": summary.fate,
        "rows_per_rank": {int(k): int(v) for k, v in per_rank.items()},
        "ranks": summary.ranks,
        "expected_ranks": world,
        "dropped_steps": summary.dropped_steps,
        "hook_cost_us": summary.hook_cost_us,
    }


def print_table(r: dict[str, Any]) -> None:
    print(
        f"StepMeter on {r['device']} (torch {r['torch']}), {r['workload']}, "
        f"{r['world_size']} rank(s); "
        f"{r['steps_per_arm']} steps per arm in blocks of {r['block']} (A/B interleaved) "
        f"after {r['warmup_steps']} warm-up; {r['tokens_per_step']} tokens/step, {r['dtype']}; "
        "each step timed until its loss is on the host"
    )
    print(
        f"{'rank':>4} {'without ms':>11} {'with ms':>9} {'overhead %':>11} {'(mean) %':>9} "
        f"{'GPU ev ms':>10} {'agree med %':>12} {'p95 %':>7} {'sum ratio':>10} {'ok':>4}"
    )
    for rank in r["ranks"]:
        agree = rank.get("agreement") or {}
        gpu = rank.get("gpu_event_ms", {}).get("with")
        print(
            f"{rank['rank']:>4} {rank['host_step_ms']['without']:>11.3f} "
            f"{rank['host_step_ms']['with']:>9.3f} {rank['overhead_pct_median']:>+11.3f} "
            f"{rank['overhead_pct_mean']:>+9.3f} "
            f"{(f'{gpu:.3f}' if gpu is not None else 'n/a'):>10} "
            f"{_fmt(agree.get('rel_diff_median_pct')):>12} "
            f"{_fmt(agree.get('rel_diff_p95_pct')):>7} "
            f"{_fmt(agree.get('total_ratio'), 4):>10} "
            f"{('yes' if agree.get('within_2pct') else 'NO') if agree else 'n/a':>4}"
        )
    for rank in r["ranks"]:
        for arm, tail in rank["host_tail_ms"].items():
            print(
                f"rank {rank['rank']} {arm:>7}: p90 {tail['p90']:.3f} ms, "
                f"p99 {tail['p99']:.3f} ms, "
                f"max {tail['max']:.3f} ms, {tail['slow_steps']} steps > 1.5x median "
                f"(first at {tail['first_slow']})"
            )
        cost = rank["caller_cost"]
        parts = ", ".join(
            f"{k.removesuffix('_us').replace('_', ' ')} {v:.2f}" for k, v in cost.items()
        )
        print(f"rank {rank['rank']} caller side, µs per call: {parts}")
    view = r["ledger"]
    print(
        f"ledger: fate {view['fate']}, rows per rank {view['rows_per_rank']}, "
        f"{view['ranks']}/{view['expected_ranks']} ranks, dropped {view['dropped_steps']}, "
        f"meter's own cost {view['hook_cost_us']} µs/step"
    )


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


if __name__ == "__main__":
    sys.exit(main())
