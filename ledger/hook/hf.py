"""The Hugging Face Trainer adapter: StepMeter as a TrainerCallback.

    from ledger.hook import LedgerCallback
    trainer = Trainer(model, args, train_dataset=ds, callbacks=[LedgerCallback("my_run")])

Each optimizer step (all its gradient-accumulation micro-batches) is one step row, numbered
like `state.global_step`; what the Trainer logs (loss, learning_rate, grad_norm…) becomes
metric rows at the step it was logged. Tokens are counted when the Trainer counts them
(`include_num_input_tokens_seen`). Each process (rank) records its own steps.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

try:
    from transformers import TrainerCallback
except ImportError as exc:  # pragma: no cover - exercised only without transformers
    raise ImportError(
        "ledger.hook.LedgerCallback needs transformers: pip install transformers "
        "(or use ledger.hook.StepMeter directly in your own loop)"
    ) from exc

from ledger.hook.meter import MeteredStep, StepMeter


class LedgerCallback(TrainerCallback):
    """Records every Trainer step into a ledger run (default name: the run or output dir).

    Pass `meter=` to share a meter you made; otherwise one is opened when training begins
    and closed when it ends. Other keyword arguments go to StepMeter.
    """

    def __init__(
        self,
        run: str | None = None,
        *,
        db: str | os.PathLike[str] | None = None,
        meter: StepMeter | None = None,
        **meter_options: Any,
    ) -> None:
        self.run = run
        self.db = db
        self.meter = meter
        self._owns_meter = meter is None
        self._options = meter_options
        self._step: MeteredStep | None = None
        self._tokens_seen = 0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.meter is None or self.meter.closed:
            name = self.run or getattr(args, "run_name", None) or Path(args.output_dir).name
            self._options.setdefault("rank", getattr(args, "process_index", None))
            self.meter = StepMeter(name, db=self.db, **self._options)
            self._owns_meter = True
        self._tokens_seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.meter is None:
            return
        self._step = self.meter.step(state.global_step + 1)
        self._step.__enter__()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step, self._step = self._step, None
        if step is None:
            return
        seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        if seen > self._tokens_seen:
            # The Trainer counts tokens over all processes; a row is one rank's step.
            step.tokens = (seen - self._tokens_seen) // max(1, int(args.world_size))
            self._tokens_seen = seen
        step.__exit__(None, None, None)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        if self.meter is None or not logs:
            return
        numbers = {
            name: value
            for name, value in logs.items()
            if isinstance(value, int | float) and not isinstance(value, bool)
        }
        if numbers:
            self.meter.log(state.global_step, **numbers)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.meter is not None and self._owns_meter:
            self.meter.close()
