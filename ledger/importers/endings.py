"""How a tracked run ended, when its tracker's files say it only indirectly: the run
announced how many steps it would take (a `max_steps` in its hyperparameters or config)
and its last step reached that number.

TensorBoard's event files and trackio's database record nothing when a run ends normally
(docs/import.md says what each tracker does record); a run that logged its announced last
step finished.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.model.imports import TrackedRun
from ledger.model.terms import Fate

# The names trainers give the number of steps a run will take (Lightning, the HF Trainer,
# torchtitan, Megatron, nanoGPT).
TOTAL_NAMES = (
    "max_steps",
    "total_steps",
    "num_steps",
    "train_steps",
    "training_steps",
    "num_training_steps",
    "max_iters",
    "train_iters",
    "total_iters",
)


def announced_total(config: Mapping[str, Any]) -> tuple[str, int] | None:
    """(name, steps) of the first announced total in `config`; None when none is said."""
    lowered = {str(k).lower().rsplit("/", 1)[-1].rsplit(".", 1)[-1]: v for k, v in config.items()}
    for name in TOTAL_NAMES:
        value = lowered.get(name)
        try:
            steps = int(float(str(value)))
        except (TypeError, ValueError, OverflowError):
            continue
        if steps > 0:
            return name, steps
    return None


def last_step(run: TrackedRun) -> int | None:
    return max((p[1] for points in run.scalars.values() for p in points), default=None)


def finished_by_total(run: TrackedRun, tracker: str) -> None:
    """Mark `run` finished when its last step reaches the total it announced (a count of
    steps numbered from 0 ends at total - 1, from 1 at total)."""
    if run.fate is not None:
        return
    announced = announced_total(run.config)
    last = last_step(run)
    if announced is None or last is None:
        return
    name, total = announced
    if last >= total - 1:
        run.fate = Fate.FINISHED
        run.fate_reason = (
            f"last step {last:,} reaches {name}={total:,} ({tracker} records no ending)"
        )
