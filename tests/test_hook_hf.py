"""The Hugging Face callback drives a real Trainer over a tiny model built in code."""

from __future__ import annotations

from pathlib import Path

import pytest

import ledger

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")


class _Tokens:
    """A map-style dataset of fixed token sequences: no download, no tokenizer."""

    def __init__(self, count: int, length: int, vocab: int) -> None:
        import torch

        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (count, length), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, object]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


@pytest.mark.slow
def test_trainer_steps_and_logs_become_rows(db_url: str, tmp_path: Path) -> None:
    from ledger.hook import LedgerCallback

    config = transformers.GPT2Config(
        n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16, bos_token_id=0
    )
    model = transformers.GPT2LMHeadModel(config)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf_tiny"),
        max_steps=6,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        logging_steps=2,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        include_num_input_tokens_seen="all",
        disable_tqdm=True,
    )
    callback = LedgerCallback(db=db_url)
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=_Tokens(64, 16, 64), callbacks=[callback]
    )
    trainer.train()

    with ledger.open(db_url) as lg:
        steps = lg.steps_frame("hf_tiny")  # named after the output folder
        metrics = lg.metrics_frame("hf_tiny")
        summary = lg.meter_summary("hf_tiny")
    assert steps["step"].tolist() == [1, 2, 3, 4, 5, 6]  # optimizer steps, as global_step
    # Two micro-batches of 4 sequences of 16 tokens per optimizer step.
    assert (steps["tokens"] == 2 * 4 * 16).all()
    assert (steps["step_time_s"] > 0).all()
    logged = metrics[metrics["name"] == "loss"]
    assert logged["step"].tolist() == [2, 4, 6]
    assert (logged["value"] > 0).all()
    assert set(metrics["name"]) >= {"loss", "learning_rate", "grad_norm"}
    assert summary.fate == "finished"
    assert callback.meter is not None and callback.meter.closed


def test_the_callback_is_reached_lazily_from_ledger_hook() -> None:
    import ledger.hook

    assert ledger.hook.LedgerCallback.__module__ == "ledger.hook.hf"
    assert issubclass(ledger.hook.LedgerCallback, transformers.TrainerCallback)
