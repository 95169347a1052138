"""Step messages into step rows, in the writer process: wall time, wait, throughput.

Throughput is over a step's start to the next step's start (its block and the wait after
it), so a step is held until the next one arrives. It is counted over its own block when
there is no next step: before a flush, a fate or the end, or when the trainer's clock has
gone `hold_s` past the step's end without another (a pause, an evaluation).
"""

from __future__ import annotations

from typing import Any

from ledger.hook.protocol import Meta, Step


class Rows:
    """Turns one rank's steps into rows, in order; `step()` and `release()` give them out."""

    def __init__(self, hold_s: float) -> None:
        self._hold_ns = int(hold_s * 1e9)
        self._held: dict[str, Any] | None = None
        self._held_t0 = self._held_t1 = 0
        self._last_t1: int | None = None
        self.rank = 0
        self._now_ns = 0  # the trainer's perf_counter_ns and time.time(), read together
        self._now_wall = 0.0

    def meta(self, meta: Meta) -> dict[str, Any] | None:
        """The trainer's clock and rank; the held step, when it has waited long enough."""
        if meta.rank is not None:
            self.rank = meta.rank
        self._now_ns, self._now_wall = meta.now_ns, meta.now_wall
        if self._held is not None and meta.now_ns - self._held_t1 > self._hold_ns:
            return self.release()
        return None

    def step(self, step: Step) -> dict[str, Any] | None:
        """Hold this step; give out the one held before it, its throughput now known."""
        out = self.release(step.t0) if self._held is not None else None
        t0, t1 = step.t0, step.t1
        wait = (t0 - self._last_t1) / 1e9 if self._last_t1 is not None else None
        self._last_t1 = t1
        row: dict[str, Any] = {
            "step": step.step,
            "rank": self.rank,
            "wall_time": self._now_wall - (self._now_ns - t1) / 1e9,
            "step_time_s": (t1 - t0) / 1e9,
            "wait_s": wait if wait is None or wait >= 0 else None,
            "gpu_time_s": step.gpu_s,
            "tokens": step.tokens,
            "throughput": None,
            "loss": step.loss,
        }
        if step.memory is not None:
            allocated, peak, reserved = step.memory
            row["memory_allocated_mib"] = allocated
            row["memory_reserved_mib"] = reserved
            row["memory_max_allocated_mib"] = peak
        if step.scalars:
            for name, value in step.scalars.items():
                if name not in row:
                    row[name] = value
        self._held, self._held_t0, self._held_t1 = row, t0, t1
        return out

    def release(self, next_t0: int | None = None) -> dict[str, Any] | None:
        """The held step, its throughput over its start to `next_t0` (or its own block)."""
        row = self._held
        if row is None:
            return None
        self._held = None
        tokens = row["tokens"]
        interval = (next_t0 - self._held_t0) / 1e9 if next_t0 is not None else row["step_time_s"]
        if isinstance(tokens, int | float) and tokens and interval > 0:
            row["throughput"] = tokens / interval
        return row
