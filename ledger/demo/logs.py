# ruff: noqa: E501 — verbatim log lines are as long as the programs print them
"""Realistic training logs for the demo investigation, generated from a seeded story.

Each run's log looks like what the engineer would `tail`: a launcher banner, a tqdm
"Loading weights" bar redrawn with carriage returns, nanochat-style step lines printed by
rank 0 with the job's tokens/s, checkpoint stalls, dynamo recompilation warnings, and, for the run that dies,
a CUDA OOM traceback followed by torchrun's ChildFailedError. Throughput follows a warm-up
ramp, then AR(1) noise around the run's level, with an optional drop part way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

TOKENS_PER_STEP = 8 * 8192  # 8 ranks × one 8K-token sequence each, per optimizer step


@dataclass(frozen=True)
class RunStory:
    """How one attempt behaves; `generate_log` turns it into log text."""

    name: str
    level: float  # steady tokens/s of the whole job
    steps: int  # steps the log reaches
    total_steps: int = 3000
    warmup: int = 60  # steps of compilation / ramp-up
    noise: float = 0.012  # relative sd of the AR(1) noise
    drop_at: int | None = None  # step where throughput falls …
    drop_to: float | None = None  # … to this level
    recompiles: int = 0  # dynamo recompilation warnings
    oom_at: int | None = None  # the step whose forward runs out of memory
    shards: int = 851  # weight shards loaded before training
    ranks: int = 8
    stall_every: int = 500  # checkpoint saves: one slow step each
    finished: bool = False
    stopped: bool = False  # the engineer stopped it (SIGTERM) to try the next idea
    seed: int = 0
    memory_gib: float = 61.2
    notes: list[str] = field(default_factory=list)


def throughput_series(story: RunStory) -> np.ndarray:
    """Tokens/s of each step 1..steps: ramp, AR(1) noise, optional drop, checkpoint stalls."""
    rng = np.random.default_rng(story.seed)
    n = story.steps
    level = np.full(n, story.level)
    if story.drop_at is not None and story.drop_to is not None:
        level[story.drop_at - 1 :] = story.drop_to
    ramp = np.ones(n)
    w = min(story.warmup, n)
    ramp[:w] = np.linspace(0.25, 0.97, w)
    phi = 0.6
    shocks = rng.normal(0.0, story.noise * math.sqrt(1 - phi**2), n)
    noise = np.empty(n)
    noise[0] = shocks[0]
    for i in range(1, n):
        noise[i] = phi * noise[i - 1] + shocks[i]
    values = level * ramp * (1 + noise)
    for s in range(story.stall_every // 2, n + 1, story.stall_every):
        values[s - 1] *= 0.2  # the step that also wrote a checkpoint
    return values


def generate_log(story: RunStory, start: datetime) -> str:
    """The whole log file of a run, as one string (with \\r inside progress bars)."""
    out: list[str] = []
    t = start
    out.append(
        f"[{_ts(t)}] launching {story.name}: torchrun --nproc_per_node {story.ranks} train.py"
    )
    out.append(
        f"W1129 {t:%H:%M:%S}.{t.microsecond:06d} torch/distributed/run.py:792] Setting OMP_NUM_THREADS=1"
    )
    out.append(_loading_bar(story.shards, start=t))
    t += timedelta(seconds=story.shards * 0.35)
    if story.shards:
        out.append(f"Materializing param=drafter.lm_head.weight on cuda:0 ({story.shards} shards)")
    speeds = throughput_series(story)
    rng = np.random.default_rng(story.seed + 1)
    loss = 4.2
    warned = 0
    for step in range(1, story.steps + 1):
        tps = float(speeds[step - 1])
        dt = TOKENS_PER_STEP / tps
        t += timedelta(seconds=dt)
        loss = max(1.6, loss * 0.9993 + rng.normal(0, 0.004))
        if story.recompiles and warned < story.recompiles and step % 37 == 0:
            out.extend(_recompile_warning(warned + 1))
            warned += 1
        if story.oom_at is not None and step == story.oom_at:
            out.extend(_oom(story))
            return "\n".join(out) + "\n"
        pct = 100.0 * step / story.total_steps
        minutes = (t - start).total_seconds() / 60
        # Like most trainers, only rank 0 prints, with the whole job's tokens/s.
        out.append(
            f"[rank0]: step {step:05d}/{story.total_steps:05d} ({pct:.2f}%) | loss: {loss:.6f} | "
            f"lrm: 1.00 | dt: {dt * 1000:.2f}ms | tok/sec: {tps:,.0f} | "
            f"mfu: {tps / 14200 * 38.5:.2f} | total time: {minutes:.2f}m"
        )
    if story.finished:
        out.append(f"[{_ts(t)}] Training completed: {story.steps} steps")
    if story.stopped:
        out.extend(_stopped(t))
    return "\n".join(out) + "\n"


def loading_log(story: RunStory, start: datetime, loaded: int) -> str:
    """The log as it stands while weights load: the banner and a bar stopped at `loaded`,
    with no newline after it (tqdm is still redrawing)."""
    head = generate_log(story, start).split("\n", 2)
    bar = _loading_bar(story.shards, start=start, upto=loaded)
    return f"{head[0]}\n{head[1]}\n{bar}"


def nvidia_smi_csv(story: RunStory, loading: bool) -> str:
    """What `nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader` says."""
    rng = np.random.default_rng(story.seed + 7)
    rows = []
    for gpu in range(story.ranks):
        used = story.memory_gib * 1024 * (0.35 if loading else 1.0) + rng.normal(0, 200)
        util = 0 if loading else int(np.clip(rng.normal(92, 4), 0, 100))
        rows.append(f"{gpu}, {used:.0f} MiB, {util} %")
    return "\n".join(rows) + "\n"


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


def _loading_bar(total: int, start: datetime, upto: int | None = None) -> str:
    """tqdm's redraws of a loading bar: one physical line, states separated by \\r."""
    if not total:
        return ""
    states = []
    last = total if upto is None else upto
    for n in [*range(0, last, max(1, total // 40)), last]:
        pct = int(100 * n / total)
        filled = pct // 10
        bar = "█" * filled + " " * (10 - filled)
        elapsed = int(n * 0.35)
        remaining = int((total - n) * 0.35)
        states.append(
            f"Loading weights: {pct:3d}%|{bar}| {n}/{total} "
            f"[{elapsed // 60:02d}:{elapsed % 60:02d}<{remaining // 60:02d}:{remaining % 60:02d}, 2.86it/s]"
        )
    return "\r".join(states)


def _stopped(t: datetime) -> list[str]:
    """torchrun's words when the engineer stops a run with SIGTERM."""
    return [
        f"W1129 {t:%H:%M:%S}.000000 torch/distributed/elastic/agent/server/api.py:704] Received "
        "Signals.SIGTERM death signal, shutting down workers",
        f"W1129 {t:%H:%M:%S}.000000 torch/distributed/elastic/multiprocessing/api.py:900] Sending "
        "process 18211 closing signal SIGTERM",
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 18204 got signal: 15",
    ]


def _recompile_warning(count: int) -> list[str]:
    return [
        "W1129 10:14:03.211000 torch/_dynamo/convert_frame.py:964] [0/8] torch._dynamo hit "
        "config.recompile_limit (8)",
        "W1129 10:14:03.211000 torch/_dynamo/convert_frame.py:964] [0/8]    function: "
        "'flex_attention_forward' (drafter/attention.py:212)",
        "W1129 10:14:03.211000 torch/_dynamo/convert_frame.py:964] [0/8]    last reason: "
        f"0/7: ___check_obj_id(L['block_mask'].mask_mod, {140213 + count})",
        "W1129 10:14:03.211000 torch/_dynamo/convert_frame.py:964] [0/8] To log all recompilation "
        'reasons, use TORCH_LOGS="recompiles".',
    ]


def _oom(story: RunStory) -> list[str]:
    return [
        "[rank3]: Traceback (most recent call last):",
        '[rank3]:   File "/workspace/train.py", line 412, in <module>',
        "[rank3]:     main()",
        '[rank3]:   File "/workspace/train.py", line 388, in main',
        "[rank3]:     loss = drafter(batch, target_hidden)",
        '[rank3]:   File "/workspace/drafter/model.py", line 157, in forward',
        "[rank3]:     cached = self.buffer_cache.get(key, lambda: torch.empty(shape, device='cuda'))",
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.50 GiB. GPU 3 has "
        "a total capacity of 79.19 GiB of which 1.21 GiB is free. Including non-PyTorch memory, this "
        "process has 77.96 GiB memory in use. Of the allocated memory 74.12 GiB is allocated by "
        "PyTorch, and 2.31 GiB is reserved by PyTorch but unallocated.",
        "W1129 11:02:17.002000 torch/distributed/elastic/multiprocessing/api.py:900] Sending process "
        "21905 closing signal SIGTERM",
        "E1129 11:02:18.118000 torch/distributed/elastic/multiprocessing/api.py:874] failed "
        "(exitcode: 1) local_rank: 3 (pid: 21908) of binary: /usr/bin/python3",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  rank      : 3 (local_rank: 3)",
        "  exitcode  : 1 (pid: 21908)",
        "============================================================",
    ]
