"""The Lightning logger records a real CPU fit of a tiny model."""

from __future__ import annotations

from typing import Any

import pytest

import ledger

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

# A tiny fit on the CPU: Lightning's advice about workers, GPUs and small logging intervals.
ADVICE = "ignore::lightning.fabric.utilities.warnings.PossibleUserWarning"
# Lightning builds torch's pytree LeafSpec, which torch 2.13 calls deprecated.
LEAFSPEC = r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning"


class _Tiny(L.LightningModule):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.losses: list[float] = []

    def training_step(self, batch: Any, idx: int) -> Any:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, on_step=True)
        self.losses.append(float(loss.detach()))
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def _loader(batches: int) -> Any:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(batches * 8, 4, generator=generator)
    y = x.sum(dim=1, keepdim=True)
    data = torch.utils.data.TensorDataset(x, y)
    return torch.utils.data.DataLoader(data, batch_size=8, num_workers=0)


def _fit(logger: Any, steps: int, accumulate: int = 1) -> _Tiny:
    model = _Tiny()
    trainer = L.Trainer(
        accelerator="cpu", devices=1, max_steps=steps, logger=logger, callbacks=[logger],
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        log_every_n_steps=1, accumulate_grad_batches=accumulate,
    )  # fmt: skip
    trainer.fit(model, _loader(steps * accumulate))
    return model


@pytest.mark.filterwarnings(ADVICE)
@pytest.mark.filterwarnings(LEAFSPEC)
def test_a_cpu_fit_becomes_step_rows_and_metrics(db_url: str) -> None:
    from ledger.hook import LedgerLogger

    model = _fit(LedgerLogger("tiny", db=db_url, cuda=False), steps=12)
    with ledger.open(db_url) as lg:
        summary = lg.run_summary("tiny")
        assert (summary.fate, summary.steps) == ("finished", 12)
        steps = lg.steps_frame("tiny")
        assert steps["step"].tolist() == list(range(1, 13))
        assert steps["loss"].tolist() == pytest.approx(model.losses, rel=1e-6)
        assert (steps["step_time_s"] > 0).all()
        logged = lg.metrics_frame("tiny")
        train = logged[logged["name"] == "train_loss"]
        assert len(train) == 12
        assert sorted(train["value"].tolist()) == pytest.approx(sorted(model.losses), rel=1e-6)


@pytest.mark.filterwarnings(ADVICE)
@pytest.mark.filterwarnings(LEAFSPEC)
def test_gradient_accumulation_is_one_step_per_optimizer_step(db_url: str) -> None:
    from ledger.hook import LedgerLogger

    _fit(LedgerLogger("accumulated", db=db_url, cuda=False), steps=5, accumulate=3)
    with ledger.open(db_url) as lg:
        assert lg.steps_frame("accumulated")["step"].tolist() == [1, 2, 3, 4, 5]


def test_the_logger_is_reached_lazily_from_ledger_hook() -> None:
    import subprocess
    import sys

    code = (
        "import sys, ledger.hook; assert 'lightning' not in sys.modules; "
        "from ledger.hook import LedgerLogger; assert 'lightning' in sys.modules; "
        "print(LedgerLogger.__name__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "LedgerLogger"


class _OutOfMemory(_Tiny):
    def training_step(self, batch: Any, idx: int) -> Any:
        if idx == 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return super().training_step(batch, idx)


@pytest.mark.filterwarnings(ADVICE)
@pytest.mark.filterwarnings(LEAFSPEC)
def test_a_fit_that_raises_ends_with_the_exceptions_fate(db_url: str) -> None:
    from ledger.hook import LedgerLogger

    logger = LedgerLogger("oom", db=db_url, cuda=False)
    trainer = L.Trainer(
        accelerator="cpu", devices=1, max_steps=10, logger=logger, callbacks=[logger],
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        log_every_n_steps=1,
    )  # fmt: skip
    with pytest.raises(torch.OutOfMemoryError):
        trainer.fit(_OutOfMemory(), _loader(10))
    with ledger.open(db_url) as lg:
        summary = lg.run_summary("oom")
        assert (summary.fate, summary.steps) == ("oom", 4)  # the step that raised is a row too


class _Configured(_Tiny):
    def __init__(self, lr: float, optimizer: dict[str, Any], compile: str) -> None:
        super().__init__()
        self.save_hyperparameters()


@pytest.mark.filterwarnings(ADVICE)
@pytest.mark.filterwarnings(LEAFSPEC)
def test_hyperparameters_land_in_run_config_with_source_api(db_url: str) -> None:
    from sqlalchemy import text

    from ledger.hook import LedgerLogger

    logger = LedgerLogger("configured", db=db_url, cuda=False)
    trainer = L.Trainer(
        accelerator="cpu", devices=1, max_steps=3, logger=logger, callbacks=[logger],
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        log_every_n_steps=1,
    )  # fmt: skip
    model = _Configured(0.05, {"name": "sgd", "momentum": 0.9}, "max-autotune")
    trainer.fit(model, _loader(3))
    with ledger.open(db_url) as lg, lg.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT c.key, c.value, c.source FROM run_config c JOIN run r ON r.id = c.run_id "
                "WHERE r.name = 'configured' AND c.source = 'api'"
            )
        ).fetchall()
        assert {k: v for k, v, _ in rows} == {
            "lr": "0.05",
            "optimizer/name": "sgd",  # nested, flattened as Lightning's loggers show it
            "optimizer/momentum": "0.9",
            "compile": "max-autotune",
        }
        assert lg.run_summary("configured").steps == 3  # the fit itself still recorded


def test_hyperparameters_are_flattened_text() -> None:
    from argparse import Namespace

    from ledger.hook.lightning import hyperparameters

    assert hyperparameters(Namespace(lr=0.1, layers=[1, 2], dtype=torch.float16)) == {
        "lr": "0.1",
        "layers": "[1, 2]",
        "dtype": '"torch.float16"',
    }
    assert hyperparameters(None) == {}
