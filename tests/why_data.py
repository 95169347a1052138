"""Planted-cause runs for the `ledger why` tests: real-looking logs (torchtitan's step
lines with timestamps, dynamo's warnings, a CUDA OOM traceback) and hook-like step rows,
with realistic noise and one planted difference each."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

START = datetime(2025, 3, 1, 10, 0, 0, tzinfo=UTC)


def _noise(rng: np.random.Generator, scale: float) -> float:
    # heavier tails than a normal: a Student t with 5 degrees of freedom
    return float(scale * rng.standard_t(5) / np.sqrt(5 / 3))


def titan_log(
    path: Path,
    steps: int,
    *,
    seed: int,
    step_s: float = 0.5,
    tps: float = 12000.0,
    noise: float = 0.01,
    memory_gib: Callable[[int], float] = lambda s: 61.0,
    extra_s: Callable[[int], float] = lambda s: 0.0,
    rate: Callable[[int], float] = lambda s: 1.0,
    before: Callable[[int], list[str]] = lambda s: [],
    tail: list[str] | None = None,
    warmup: int = 20,
) -> Path:
    """A torchtitan log: one timestamped step line per step (rank 0), tokens per second,
    memory; `before(step)` adds lines before a step's line, `extra_s(step)` seconds to its
    interval, `rate(step)` scales its pace."""
    rng = np.random.default_rng(seed)
    t = START
    lines = [f"[rank0]:[titan] {t:%Y-%m-%d %H:%M:%S},000 - root - INFO - Training starts at step 1"]
    for s in range(1, steps + 1):
        lines.extend(before(s))
        slow = 4.0 if s <= warmup // 2 else 1.5 if s <= warmup else 1.0
        pace = rate(s)
        seconds = step_s * slow / pace * (1 + _noise(rng, noise)) + extra_s(s)
        t += timedelta(seconds=seconds)
        speed = tps * pace / slow * (1 + _noise(rng, noise))
        mem = memory_gib(s) + float(rng.normal(0, 0.02))
        lines.append(
            f"[rank0]:[titan] {t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d} - root - INFO - "
            f"step: {s:>2}  loss: {9.0 / (1 + s / 200):.4f}  memory: {mem:.2f}GiB(77.41%)  "
            f"tps: {speed:,.0f}  mfu: 31.59%"
        )
    lines.extend(tail or [])
    path.write_text("\n".join(lines) + "\n")
    return path


def recompile_warning(step: int, count: int) -> list[str]:
    head = f"V0301 10:00:00.000000 140 torch/_dynamo/guards.py:2813] [0/{count}] [__recompiles]"
    return [
        f"{head} Recompiling function flex_attention_forward in drafter/attention.py:212",
        f"{head}     triggered by the following guard failure(s):",
        f"{head}     - 0/{count - 1}: ___check_obj_id(L['block_mask'].mask_mod, {140213 + step})",
    ]


def recompile_limit() -> list[str]:
    head = "W0301 10:14:03.211000 140 torch/_dynamo/convert_frame.py:964] [0/8]"
    return [
        f"{head} torch._dynamo hit config.recompile_limit (8)",
        f"{head}    function: 'flex_attention_forward' (drafter/attention.py:212)",
        f"{head}    last reason: 0/7: ___check_obj_id(L['block_mask'].mask_mod, 140299)",
        f'{head} To log all recompilation reasons, use TORCH_LOGS="recompiles".',
    ]


OOM_TAIL = [
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/workspace/train.py", line 412, in <module>',
    "[rank0]:     main()",
    '[rank0]:   File "/workspace/drafter/model.py", line 157, in forward',
    "[rank0]:     cached = self.buffer_cache.get(key, lambda: torch.empty(shape, device='cuda'))",
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.50 GiB. GPU 0 has "
    "a total capacity of 79.19 GiB of which 1.21 GiB is free. Including non-PyTorch memory, this "
    "process has 77.96 GiB memory in use. Of the allocated memory 74.12 GiB is allocated by "
    "PyTorch, and 2.31 GiB is reserved by PyTorch but unallocated.",
]


def hook_rows(
    steps: int,
    *,
    seed: int,
    step_s: float = 0.5,
    tokens: int = 6000,
    noise: float = 0.02,
    wait_s: float = 0.002,
    extra_s: Callable[[int], float] = lambda s: 0.0,
    memory_mib: float = 40000.0,
    ranks: int = 1,
    rank_pace: Callable[[int], float] = lambda r: 1.0,
    warmup: int = 30,
) -> list[dict[str, Any]]:
    """What the hook writes per step: tokens, the time inside the step, the wait before
    it, the wall time, memory; a compile-slow start."""
    rng = np.random.default_rng(seed)
    t = START.timestamp()
    rows = []
    for s in range(steps):
        slow = 1.0 + (8.0 if s == 0 else 2.0 * max(0, warmup - s) / warmup)
        common = step_s * slow * (1 + _noise(rng, noise)) + extra_s(s)
        wait = max(0.0, wait_s * (1 + _noise(rng, 0.2)))
        t += common + wait
        for r in range(ranks):
            inside = common / rank_pace(r) * (1 + float(rng.normal(0, 0.003)))
            rows.append(
                {
                    "step": s,
                    "rank": r,
                    "tokens": tokens,
                    "step_time_s": inside,
                    "wait_s": wait,
                    "wall_time": t,
                    "throughput": tokens / (inside + wait),
                    "memory_allocated_mib": memory_mib + float(rng.normal(0, 4)),
                    "memory_reserved_mib": memory_mib * 1.08,
                    "loss": 9.0 / (1 + s / 200),
                }
            )
    return rows


def nvidia_smi_csv(path: Path, utils: list[float]) -> Path:
    lines = ["index, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%]"]
    lines += [
        f"{i}, NVIDIA H100 80GB HBM3, 61234 MiB, 81559 MiB, {u:.0f} %" for i, u in enumerate(utils)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def utilisation_along(
    rows: list[dict[str, Any]], util: Callable[[int], float], every_s: float = 5.0
) -> list[tuple[int | None, float]]:
    """What an NVML sampler every `every_s` seconds sees along hook rows (one rank): at
    each sample, the last finished step (None before the first) and the utilisation of
    the step in progress, `util(step)`."""
    ends = np.array([r["wall_time"] for r in rows])
    steps = [int(r["step"]) for r in rows]
    begin = ends[0] - rows[0]["step_time_s"] - (rows[0]["wait_s"] or 0.0)
    out: list[tuple[int | None, float]] = []
    t = begin + every_s
    while t < ends[-1]:
        running = int(np.searchsorted(ends, t))  # the first step not finished at t
        out.append((steps[running - 1] if running else None, util(steps[running])))
        t += every_s
    return out


def megatron_log(
    path: Path,
    steps: int,
    *,
    seed: int,
    every: int = 10,
    step_s: float = 0.1,
    noise: float = 0.02,
    extra_s: Callable[[int], float] = lambda s: 0.0,
) -> Path:
    """A Megatron-LM log: a line every `every` iterations with the mean time per iteration
    over them (ms), TFLOP/s of that mean, and a timestamp to the second."""
    rng = np.random.default_rng(seed)
    t = START
    spent = 0.0
    lines = []
    for s in range(1, steps + 1):
        d = step_s * (1 + _noise(rng, noise)) * (4.0 if s <= 5 else 1.0) + extra_s(s)
        spent += d
        t += timedelta(seconds=d)
        if s % every == 0:
            mean = spent / every
            lines.append(
                f" [{t:%Y-%m-%d %H:%M:%S}] iteration {s:>8}/{steps:>8} | consumed samples: "
                f"{8 * s:>10} | elapsed time per iteration (ms): {1000 * mean:.1f} | throughput "
                f"per GPU (TFLOP/s/GPU): {10.0 * step_s / mean:.1f} | learning rate: "
                f"1.000000E-04 | global batch size:     8 | lm loss: {9 / (1 + s / 200):.6E} | "
                "loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:   0 |"
            )
            spent = 0.0
    path.write_text("\n".join(lines) + "\n")
    return path
