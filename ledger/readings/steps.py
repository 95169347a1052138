"""A run's step rows as arrays: what the store reads in bulk and every analysis takes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class StepColumns:
    """A run's step rows as arrays, one entry per (rank, step) row, in any order."""

    step: np.ndarray
    rank: np.ndarray | None = None
    throughput: np.ndarray | None = None
    tokens: np.ndarray | None = None
    step_time_s: np.ndarray | None = None
    wall_time: np.ndarray | None = None  # seconds (epoch) at the end of the step
    wait_s: np.ndarray | None = None  # from the end of the previous step to this one's start

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> StepColumns:
        """Build from a DataFrame with a `step` column and any of the others."""

        def column(name: str, dtype: str) -> np.ndarray | None:
            if name not in frame.columns:
                return None
            return np.asarray(frame[name].to_numpy(dtype=dtype))

        step = column("step", "int64")
        if step is None:
            raise ValueError("step rows need a 'step' column")
        return cls(
            step=step,
            rank=column("rank", "int64"),
            throughput=column("throughput", "float64"),
            tokens=column("tokens", "float64"),
            step_time_s=column("step_time_s", "float64"),
            wall_time=column("wall_time", "float64"),
            wait_s=column("wait_s", "float64"),
        )

    def __len__(self) -> int:
        return len(self.step)
