"""The Lightning adapter: StepMeter as a Lightning `Logger` (and `Callback`).

    from ledger.hook import LedgerLogger
    ledger_logger = LedgerLogger("my_run")
    trainer = L.Trainer(logger=ledger_logger, callbacks=[ledger_logger])

As a logger it records what the LightningModule logs (`self.log("train_loss", …)`) as
metric rows at the step Lightning logs them, and the hyperparameters Lightning gives its
loggers (`save_hyperparameters()`, the datamodule's) into the run's configuration
(run_config, source `api`), flattened as Lightning's loggers show them (`optimizer/lr`),
from rank 0 as Lightning's own loggers do. Given as a callback too, it times
every optimizer step (all its gradient-accumulation batches) as one step row, numbered
like `trainer.global_step` after it, with the loss `training_step` returned: the rows
`ledger.hook.LedgerCallback` writes for the Hugging Face Trainer. Each process (rank)
records its own steps.
"""

from __future__ import annotations

import json
import os
from argparse import Namespace
from collections.abc import Mapping
from typing import Any

try:
    from lightning.fabric.utilities.logger import _convert_params, _flatten_dict
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.loggers import Logger
    from lightning.pytorch.utilities import rank_zero_only
except ImportError as exc:  # pragma: no cover - exercised only without lightning
    raise ImportError(
        "ledger.hook.LedgerLogger needs Lightning: pip install 'ledger[lightning]' "
        "(or use ledger.hook.StepMeter directly in your own loop)"
    ) from exc

from ledger.hook.meter import MeteredStep, StepMeter
from ledger.model.terms import Fate

# Lightning's finalize() status → the run's fate (None: the meter decides, finished unless
# the last step failed)
FINAL_STATUS: dict[str, Fate | None] = {"success": None, "finished": None, "failed": Fate.CRASHED}


class LedgerLogger(Logger, Callback):
    """Records a Lightning fit into a ledger run (default name: $LEDGER_RUN, else the
    script's name). Other keyword arguments go to StepMeter; pass `meter=` to share one."""

    def __init__(
        self,
        run: str | None = None,
        *,
        db: str | os.PathLike[str] | None = None,
        meter: StepMeter | None = None,
        **meter_options: Any,
    ) -> None:
        super().__init__()
        self.run = run
        self.db = db
        self.meter = meter
        self._owns_meter = meter is None
        self._options = meter_options
        self._step: MeteredStep | None = None
        self._opened_at = 0  # global_step when the open step began
        self._raised = False  # a step ended with an exception: its fate is the run's

    # -- the Logger side -----------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.run or "ledger"

    @property
    def version(self) -> str:
        return self.meter.run if self.meter is not None else (self.run or "0")

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        numbers = {
            name: float(value)
            for name, value in metrics.items()
            if name != "epoch" and _is_number(value)
        }
        if numbers:
            meter = self._meter()
            meter.log(int(step) if step is not None else meter._next_step, **numbers)

    @rank_zero_only  # as Lightning's own loggers: rank 0 tells the run's configuration
    def log_hyperparams(self, params: Mapping[str, Any] | Namespace, *args: Any, **kw: Any) -> None:
        """Into the run's run_config (source `api`): one row per flattened name, text as
        given, any other value as JSON. Told at once, in its own short transaction."""
        items = hyperparameters(params)
        if not items:
            return
        from ledger.store import Store

        meter = self._meter()  # the run's name, ledger and investigation, as the meter has them
        with Store.open(meter.db, investigation=meter.investigation) as lg:
            lg.set_config(meter.run, items, source="api")

    def save(self) -> None:
        if self.meter is not None and not self.meter.closed:
            self.meter.flush()

    def finalize(self, status: str) -> None:
        """The fit (or validate, test) ended: close the meter this logger opened."""
        self._close_open_step()
        if self.meter is not None and self._owns_meter and not self.meter.closed:
            fate = None if self._raised else FINAL_STATUS.get(status, Fate.CRASHED)
            reason = None if fate is None else f"Lightning ended the fit: {status}"
            self.meter.close(fate, reason)

    # -- the Callback side: timing each optimizer step -----------------------------------

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, idx: int) -> None:
        if self._step is not None:
            return  # a later batch of one gradient-accumulation window
        meter = self._meter(rank=getattr(trainer, "global_rank", None))
        self._opened_at = int(trainer.global_step)
        self._step = meter.step(self._opened_at + 1)
        self._step.__enter__()

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, idx: int
    ) -> None:
        step = self._step
        if step is None or int(trainer.global_step) == self._opened_at:
            return  # the optimizer has not stepped yet: the step goes on
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if loss is not None and hasattr(loss, "detach"):
            step.set(loss=loss.detach())
        self._step = None
        step.__exit__(None, None, None)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        """A step that raised ends with the exception: the meter reads the fate from it."""
        step, self._step = self._step, None
        if step is not None:
            self._raised = True
            step.__exit__(type(exception), exception, exception.__traceback__)

    # -- helpers -------------------------------------------------------------------------

    def _meter(self, rank: int | None = None) -> StepMeter:
        if self.meter is None or (self.meter.closed and self._owns_meter):
            options = dict(self._options)
            if rank is not None:
                options.setdefault("rank", rank)
            self.meter = StepMeter(self.run, db=self.db, **options)
            self._owns_meter = True
            self._raised = False
        return self.meter

    def _close_open_step(self) -> None:
        step, self._step = self._step, None
        if step is not None:
            step.__exit__(None, None, None)


def hyperparameters(params: Mapping[str, Any] | Namespace | None) -> dict[str, str]:
    """Lightning's hyperparameters as run_config items: nested names joined by `/` (as
    Lightning's loggers flatten them), text kept, other values as JSON (str() beyond)."""
    flat = _flatten_dict(_convert_params(dict(params) if isinstance(params, Mapping) else params))
    return {
        str(name): value if isinstance(value, str) else json.dumps(value, default=str)
        for name, value in flat.items()
    }


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    numel = getattr(value, "numel", None)
    return callable(numel) and numel() == 1
