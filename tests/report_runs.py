"""Ledgers whose runs hide their cost from the median: what the report tests draw.

- `baseline`: 14.2K tok/s, finished.
- `eager_stall`: every step at 14.2K, but every 50th step also waits for a checkpoint and
  costs 6× (effective ≈ 50 / 55 = 90.9 % of the baseline), finished.
- `eager_spikes`: recompiles, and every 12th step costs 4.5× (effective ≈ 12 / 15.5 =
  77.4 %), finished.
- `eager_killed`: at the baseline, stopped with SIGTERM at step 83.

Each log stamps its lines (to the millisecond), and the runs ran in the order above,
an hour apart; `write_logs` returns them so they can be ingested out of that order.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

LEVEL = 14_200.0
TOKENS = 65_536
RAN = ("baseline", "eager_stall", "eager_spikes", "eager_killed")
EFFECTIVE_PCT = {"baseline": 100.0, "eager_stall": 100 * 50 / 55, "eager_spikes": 100 * 12 / 15.5}


def _slow(name: str, step: int) -> float:
    if name == "eager_stall" and step % 50 == 0:
        return 6.0
    if name == "eager_spikes" and step % 12 == 0:
        return 4.5
    return 1.0


def log_text(name: str, start: datetime, steps: int = 600, *, killed_at: int | None = None) -> str:
    rng = np.random.default_rng(len(name))
    t = start
    out = [f"{_ts(t)} launching {name}: torchrun --nproc_per_node 8 train.py"]
    last = killed_at or steps
    for step in range(1, last + 1):
        warm = min(1.0, 0.3 + step / 40)
        tps = LEVEL * warm * (1 + rng.normal(0, 0.01)) / _slow(name, step)
        dt = TOKENS / tps
        t += timedelta(seconds=dt)
        if name == "eager_spikes" and step % 12 == 0:
            out.append(
                f"{_ts(t)} W1129 torch/_dynamo/convert_frame.py:964] [0/8] torch._dynamo hit "
                "config.recompile_limit (8)"
            )
        out.append(
            f"{_ts(t)} [rank0]: step {step:05d}/03000 | loss: {4.2 - step * 0.002:.4f} | "
            f"dt: {dt * 1000:.2f}ms | tok/sec: {tps:,.0f}"
        )
    if killed_at is not None:
        out.append(
            f"{_ts(t)} W1129 torch/distributed/elastic/agent/server/api.py:704] Received "
            "Signals.SIGTERM death signal, shutting down workers"
        )
    else:
        out.append(f"{_ts(t)} Training completed: {last} steps")
    return "\n".join(out) + "\n"


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def write_logs(folder: Path) -> dict[str, Path]:
    """Each run's log in `folder`, the runs an hour apart in the order of RAN."""
    start = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    paths = {}
    for i, name in enumerate(RAN):
        path = folder / f"train_{name}.log"
        killed = 83 if name == "eager_killed" else None
        path.write_text(log_text(name, start + timedelta(hours=i), killed_at=killed))
        paths[name] = path
    return paths
