"""`ledger why` on real training: planted causes, each ranked from the hook's rows alone and
from the printed log alone, against a reference run and its twins.

A small transformer trains with AdamW (bf16 autocast on CUDA, its output layer in fp32 so
that TF32 matters; fp32 on the CPU), each case in a fresh process under StepMeter, its
stdout and stderr kept as its log (a line every --log-every steps with the mean step time
and data time of those steps, mmengine's shape, after a Namespace(...) of its arguments).
Then two ledgers are asked `why CASE --against reference`: one holding only what the hook
wrote (OUT/hook.db), one holding only the ingested logs (OUT/log.db).

The cases (`--cases`, comma-separated; the default is every one the device can run):

    twin            the reference with another seed: nothing to find
    recompiles      --compile and a new sequence length every step (recompile limit hit)
    data_wait       a data loader that sleeps before every batch (4 ms on a GPU)
    periodic_save   a blocking checkpoint every 5 log lines (250 ms on a GPU)
    leak            16 MiB kept every step (CUDA only: the hook reads CUDA memory)
    batch_flag      --batch-size half the reference's
    math_attention  --attention math: the math SDPA kernel instead of flash
    tf32_off        --matmul-precision highest: fp32 matmuls without TF32 (CUDA only)
    straggler       under DDP (two GPUs or more), rank 1 waits 10 ms for each batch

What is planted by a setting (compile, batch, attention, precision) is on the command line
and in the Namespace; the rest (a sleep, a save, a leak) is planted through the
environment variable WHY_GPU_PLANT, so the command lines differ only where the case is
a setting.

    python benchmarks/why_gpu.py --out OUT                       # every GPU case (H200)
    python benchmarks/why_gpu.py --out OUT --cases twin,recompiles
    python benchmarks/why_gpu.py --device cpu --steps 120 \
        --cases twin,data_wait,periodic_save --out OUT             # the reduced CPU form

Prints a table (case, what was planted, the kind expected, the top finding from the hook
and from the log, ✓ when it is the expected one) and writes OUT/why_gpu.json and
OUT/why_gpu.md. Needs torch and ledger (the ledger of this checkout, installed or not).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_CHECKOUT = Path(__file__).resolve().parent.parent
if (_CHECKOUT / "ledger" / "__init__.py").is_file():
    sys.path.insert(0, str(_CHECKOUT))

REFERENCE = "reference"


@dataclass(frozen=True)
class Case:
    name: str
    planted: str
    expect_hook: str | None  # the finding expected first; None: no finding
    expect_log: str | None  # None: no finding; "n/a": the log cannot carry it
    flags: tuple[str, ...] = ()
    plant: str = ""  # WHY_GPU_PLANT
    cuda_only: bool = False
    ranks: int = 1


CASES = {
    c.name: c
    for c in (
        Case("twin", "the reference, another seed", None, None),
        Case(
            "recompiles",
            "torch.compile, a new sequence length every step",
            "recompiles",
            "recompiles",
            flags=("--compile",),
            plant="shapes",
            cuda_only=True,  # inductor on a CPU needs a C++ toolchain and minutes
        ),
        Case("data_wait", "a data loader that sleeps before each batch", "data_wait",
             "data_wait", plant="data"),
        Case("periodic_save", "a blocking checkpoint every 5 log lines", "step_spikes",
             "step_spikes", plant="save"),
        Case("leak", "16 MiB kept every step", "memory_growth", "memory_growth",
             plant="leak", cuda_only=True),
        Case("batch_flag", "--batch-size half the reference's", "config_change",
             "config_change", flags=("--batch-size", "HALF")),
        Case("math_attention", "--attention math instead of flash", "config_change",
             "config_change", flags=("--attention", "math"), cuda_only=True),
        Case("tf32_off", "--matmul-precision highest (TF32 off)", "config_change",
             "config_change", flags=("--matmul-precision", "highest"), cuda_only=True),
        Case("straggler", "DDP, rank 1 waits 10 ms for each batch", "straggler", "n/a",
             plant="straggler", cuda_only=True, ranks=2),
    )
}  # fmt: skip


@dataclass(frozen=True)
class Plan:
    """Sizes and plant magnitudes for the device."""

    vocab: int
    dim: int
    layers: int
    heads: int
    seq: int
    batch: int
    data_ms: float
    save_ms: float
    leak_mib: int
    straggle_ms: float


GPU = Plan(32768, 1024, 8, 16, 1024, 8, data_ms=4.0, save_ms=250.0, leak_mib=16, straggle_ms=10)
# the CPU form is a smoke run on a shared host: one thread, a tiny model, larger plants
CPU = Plan(256, 32, 1, 2, 32, 8, data_ms=20.0, save_ms=250.0, leak_mib=0, straggle_ms=20)


# -- the worker: one training run ----------------------------------------------------------


def _worker(argv: list[str]) -> int:
    import torch
    import torch.nn.functional as F
    from torch import nn

    from ledger.hook import StepMeter

    p = argparse.ArgumentParser(prog="why_gpu.py worker")
    p.add_argument("--run-name", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch-size", type=int, default=0)
    p.add_argument("--attention", default="flash", choices=("flash", "math"))
    p.add_argument("--matmul-precision", default="high", choices=("high", "highest"))
    p.add_argument("--compile", action="store_true")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--ddp", action="store_true")
    args = p.parse_args(argv)
    plant = os.environ.get("WHY_GPU_PLANT", "")
    cuda = args.device.startswith("cuda")
    plan = GPU if cuda else CPU
    batch = args.batch_size or plan.batch
    rank, world = 0, 1
    device = torch.device(args.device)
    if args.ddp:
        import torch.distributed as dist

        local = int(os.environ.get("LOCAL_RANK", "0"))
        if cuda:
            torch.cuda.set_device(local)
            device = torch.device(f"cuda:{local}")
        dist.init_process_group("nccl" if cuda else "gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    say = print if rank == 0 else (lambda *a, **k: None)
    say(args, flush=True)  # a Namespace(...) line, as many training scripts print
    torch.manual_seed(args.seed * 100 + rank)
    if not cuda:
        torch.set_num_threads(1)  # a shared host: more threads only contend
    torch.set_float32_matmul_precision(args.matmul_precision)
    torch.backends.cuda.matmul.allow_tf32 = args.matmul_precision == "high"
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = (
        SDPBackend.MATH if args.attention == "math" or not cuda else SDPBackend.FLASH_ATTENTION
    )

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(plan.dim), nn.LayerNorm(plan.dim)
            self.qkv, self.proj = nn.Linear(plan.dim, 3 * plan.dim), nn.Linear(plan.dim, plan.dim)
            self.up, self.down = (
                nn.Linear(plan.dim, 4 * plan.dim),
                nn.Linear(4 * plan.dim, plan.dim),
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, d = x.shape
            qkv = self.qkv(self.norm1(x)).view(b, t, 3, plan.heads, d // plan.heads)
            q, k, v = (y.transpose(1, 2) for y in qkv.unbind(2))
            with sdpa_kernel(backend):
                attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
            return x + self.down(F.gelu(self.up(self.norm2(x))))

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(plan.vocab, plan.dim)
            self.blocks = nn.ModuleList(Block() for _ in range(plan.layers))
            self.norm = nn.LayerNorm(plan.dim)
            self.head = nn.Linear(plan.dim, plan.vocab, bias=False)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
                x = self.embed(ids)
                for block in self.blocks:
                    x = block(x)
                x = self.norm(x)
            return self.head(x.float())  # fp32 logits: the matmul TF32 speeds up

    model: nn.Module = Model().to(device)
    if args.ddp:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    step_model: Any = torch.compile(model, dynamic=False) if args.compile else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    def seq_at(step: int) -> int:
        if plant == "shapes":  # a new length every step, twelve in turn
            return plan.seq - 16 * (step % 12)
        return plan.seq

    def batches() -> Any:
        step = 0
        while True:
            if plant == "data" or (plant == "straggler" and rank == 1):
                time.sleep((plan.straggle_ms if plant == "straggler" else plan.data_ms) / 1000)
            yield torch.randint(0, plan.vocab, (batch, seq_at(step) + 1))
            step += 1

    meter = StepMeter(run=args.run_name, memory_every=10, gpu_every=2.0)
    kept: list[torch.Tensor] = []
    window = data_window = 0.0
    loss_sum = 0.0
    started = time.perf_counter()
    source = batches()
    for step in range(args.steps):
        t0 = time.perf_counter()
        ids = next(source).to(device, non_blocking=True)
        data = time.perf_counter() - t0
        with meter.step(tokens=ids[:, 1:].numel()) as s:
            logits = step_model(ids[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            value = loss.item()  # the loop logs its loss: one sync a step
            s.set(loss=value)
        loss_sum += value
        if plant == "leak" and cuda:
            kept.append(torch.empty(plan.leak_mib * 2**18, device=device))
        if plant == "save" and (step + 1) % (5 * args.log_every) == 0 and rank == 0:
            t_save = time.perf_counter()
            torch.save(model.state_dict(), os.environ.get("WHY_GPU_CKPT", "why_gpu_ckpt.pt"))
            left = plan.save_ms / 1000 - (time.perf_counter() - t_save)
            if left > 0:
                time.sleep(left)  # a checkpoint of a larger model takes this long
        window += time.perf_counter() - t0
        data_window += data
        if (step + 1) % args.log_every == 0:
            n = args.log_every
            memory = torch.cuda.max_memory_allocated(device) // 2**20 if cuda else 0
            eta = (time.perf_counter() - started) / (step + 1) * (args.steps - step - 1)
            say(
                f"{time.strftime('%m/%d %H:%M:%S')} - mmengine - INFO - Iter(train) "
                f"[{step + 1:>5}/{args.steps}]  lr: 3.0000e-04  eta: {int(eta) // 60}:"
                f"{int(eta) % 60:02d}  time: {window / n:.4f}  data_time: {data_window / n:.4f}  "
                f"memory: {memory}  tokens/s: {n * ids[:, 1:].numel() * world / window:.0f}  "
                f"loss: {loss_sum / n:.4f}",
                flush=True,
            )
            window = data_window = loss_sum = 0.0
    meter.close()
    if args.ddp:
        import torch.distributed as dist

        dist.destroy_process_group()
    return 0


# -- the driver: launch every run, then ask why -------------------------------------------


def _launch(
    out: Path, name: str, case: Case, seed: int, args: argparse.Namespace, plan: Plan
) -> Path:
    """Run one training process; its stdout and stderr are its log."""
    flags = [f if f != "HALF" else str(plan.batch // 2) for f in case.flags]
    worker = [str(Path(__file__).resolve()), "worker", "--run-name", name, "--seed", str(seed),
              "--steps", str(args.steps), "--device", args.device,
              "--log-every", str(args.log_every), *flags]  # fmt: skip
    if case.ranks > 1:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc_per_node={case.ranks}", *worker, "--ddp"]  # fmt: skip
    else:
        command = [sys.executable, *worker]
    env = dict(os.environ, WHY_GPU_PLANT=case.plant, LEDGER_DB=str(out / "hook.db"),
               WHY_GPU_CKPT=str(out / "ckpt.pt"), PYTHONPATH=str(_CHECKOUT))  # fmt: skip
    log = out / "logs" / f"train_{name}.log"
    with log.open("w") as sink:
        done = subprocess.run(command, env=env, stdout=sink, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-5:]
        raise SystemExit(f"{name} failed ({done.returncode}): " + " | ".join(tail))
    return log


def _top(result: Any) -> dict[str, Any]:
    found = result.findings
    return {
        "verdict": result.verdict,
        "delta_pct": result.delta_pct,
        "top": found[0].kind if found else None,
        "score": found[0].score if found else None,
        "explains": found[0].explains if found else [],
        "kinds": [f.kind for f in found],
        "claim": found[0].claim if found else None,
    }


def _mark(expected: str | None, got: dict[str, Any]) -> str:
    if expected == "n/a":
        return f"{got['top'] or 'none'} (the log cannot tell)"
    ok = got["top"] == expected
    said = got["top"] or "none"
    if got["score"] is not None:
        said += f" {got['score']:.2f}"
    more = [k for k in got["kinds"][1:]]
    if more:
        said += f" (then {', '.join(more)})"
    return ("✓ " if ok else "✗ ") + said


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        return _worker(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=None, help="default: 1000 (cuda), 120 (cpu)")
    p.add_argument("--log-every", type=int, default=None, help="default: 10 (cuda), 2 (cpu)")
    p.add_argument("--cases", default=None, help="comma-separated (default: all the device can)")
    p.add_argument("--twins", type=int, default=2, help="twin runs (other seeds)")
    p.add_argument("--out", type=Path, default=Path("why_gpu_out"))
    args = p.parse_args()
    import torch

    import ledger

    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise SystemExit("Error: no CUDA device (use --device cpu for the reduced form)")
    plan = GPU if cuda else CPU
    args.log_every = args.log_every or (10 if cuda else 2)
    args.steps = args.steps or (1000 if cuda else 120)
    gpus = torch.cuda.device_count() if cuda else 0
    if args.cases:
        names = [c.strip() for c in args.cases.split(",") if c.strip()]
        unknown = [n for n in names if n not in CASES]
        if unknown:
            raise SystemExit(
                f"Error: unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}"
            )
    else:
        names = [
            n for n, c in CASES.items() if (cuda or not c.cuda_only) and c.ranks <= max(gpus, 1)
        ]
    skipped = [
        n for n in names if (CASES[n].cuda_only and not cuda) or CASES[n].ranks > max(gpus, 1)
    ]
    names = [n for n in names if n not in skipped]
    if args.out.exists():
        shutil.rmtree(args.out)
    (args.out / "logs").mkdir(parents=True)
    runs: list[tuple[str, Case, int]] = [(REFERENCE, CASES["twin"], 0)]
    for name in names:
        if name == "twin":
            runs += [(f"twin{i}", CASES["twin"], i) for i in range(1, args.twins + 1)]
        else:
            runs.append((name, CASES[name], 0))
    if any(CASES[n].ranks > 1 for n in names):
        runs.append((f"{REFERENCE}_ddp", Case("ddp", "", None, None, ranks=2), 0))
    wall: dict[str, float] = {}
    for name, case, seed in runs:
        t = time.perf_counter()
        _launch(args.out, name, case, seed, args, plan)
        wall[name] = time.perf_counter() - t
        print(f"ran {name} ({wall[name]:.0f} s)", flush=True)
    hook_lg = ledger.open(args.out / "hook.db")
    log_lg = ledger.open(args.out / "log.db")
    for name, _, _ in runs:
        log_lg.ingest(args.out / "logs" / f"train_{name}.log", run=name)
    rows = []
    for name, case, _ in runs:
        if name.startswith(REFERENCE):
            continue
        against = f"{REFERENCE}_ddp" if case.ranks > 1 else REFERENCE
        hook = _top(hook_lg.why(name, against))
        log = _top(log_lg.why(name, against))
        rows.append({"case": name, "planted": case.planted, "expect_hook": case.expect_hook,
                     "expect_log": case.expect_log, "hook": hook, "log": log,
                     "wall_s": round(wall[name], 1)})  # fmt: skip
    hook_lg.close()
    log_lg.close()
    device = torch.cuda.get_device_name(0) if cuda else platform.processor() or "cpu"
    head = [
        f"device: {device} ({gpus} GPU(s)); torch {torch.__version__}; {args.steps} steps a run, "
        f"a log line every {args.log_every} steps; skipped: {', '.join(skipped) or 'none'}",
        "",
        "| case | planted | from the hook | from the log |",
        "| --- | --- | --- | --- |",
    ]
    table = [
        f"| {r['case']} | {r['planted']} | {_mark(r['expect_hook'], r['hook'])} | "
        f"{_mark(r['expect_log'], r['log'])} |"
        for r in rows
    ]
    text = "\n".join(head + table)
    print(text)
    (args.out / "why_gpu.md").write_text(text + "\n")
    summary = {"device": device, "gpus": gpus, "torch": torch.__version__, "steps": args.steps,
               "log_every": args.log_every, "skipped": skipped, "cases": rows}  # fmt: skip
    (args.out / "why_gpu.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
