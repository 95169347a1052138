"""The torch-side hook: record every training step into the ledger from inside the loop.

    from ledger.hook import StepMeter
    meter = StepMeter(run="eager_dynamiccopy")
    for batch in loader:
        with meter.step(tokens=batch["input_ids"].numel()):
            train_step(batch)

`ledger.hook.LedgerCallback` is the same meter as a Hugging Face TrainerCallback; it is
imported on first use, so `from ledger.hook import StepMeter` never imports transformers.
`import ledger` never imports this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.hook.meter import MeteredStep, StepMeter

__all__ = ["LedgerCallback", "MeteredStep", "StepMeter"]

if TYPE_CHECKING:
    from ledger.hook.hf import LedgerCallback


def __getattr__(name: str) -> object:
    if name == "LedgerCallback":
        from ledger.hook.hf import LedgerCallback

        return LedgerCallback
    if name == "LedgerLogger":  # the Lightning logger, imported on first use like the callback
        from ledger.hook.lightning import LedgerLogger

        return LedgerLogger
    raise AttributeError(f"module 'ledger.hook' has no attribute {name!r}")
