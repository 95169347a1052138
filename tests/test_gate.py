"""The gate at which text enters the ledger (ledger.store.gate): a rule for every text column,
held from the moment a value is assigned, redaction before every cut, no secret metrics."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from sqlalchemy import String, Text

from ledger.db import models as m
from ledger.db.engine import session_scope
from ledger.errors import UsageError
from ledger.proc import OUTPUT_TAIL_BYTES
from ledger.redact import MASK, redact
from ledger.store import gate
from ledger.usecases.ledger import Ledger

SECRET = "PlainValueNoShape9876"  # found by its name only
HF = "hf_" + "GateTestTokenAbCdEfGhIjKlMnOpQr12"


def test_every_text_column_has_a_rule() -> None:
    columns = {
        (table.name, column.name)
        for table in m.Base.metadata.sorted_tables
        for column in table.columns
        # a word column (db.types.Word) is text under its enum: its impl is a String
        if isinstance(getattr(column.type, "impl", column.type), String | Text)
    }
    assert columns == set(gate.RULES), "a new text column needs a rule in ledger.store.gate"


def test_a_row_holds_the_clean_value_from_assignment_on() -> None:
    row = m.Hypothesis(text=f"fails with HF_TOKEN={SECRET}")
    assert SECRET not in row.text and MASK in row.text
    row.note = f"and {HF}"
    assert HF not in row.note
    step = m.DeployStep(command="x", output="y" * (OUTPUT_TAIL_BYTES * 2) + "THE END")
    assert step.output is not None and step.output.endswith("THE END")
    assert len(step.output.encode()) == OUTPUT_TAIL_BYTES


@pytest.mark.parametrize("order", ["key first", "value first"])
def test_a_config_value_whose_key_names_a_secret_is_masked_whole(order: str) -> None:
    values = {"run_id": 1, "source": "api", "key": "env.WANDB_API_KEY", "value": "0123abcd"}
    if order == "value first":
        values = dict(reversed(list(values.items())))
    assert m.RunConfig(**values).value == MASK
    assert m.RunConfig(run_id=1, source="api", key="env.HF_HOME", value="/data/hf").value == (
        "/data/hf"
    )
    assert gate.clean_values("run_config", values)["value"] == MASK


def test_a_name_holding_a_secret_is_refused(lg: Ledger) -> None:
    with pytest.raises(UsageError, match="looks like a secret"):
        lg.ensure_run(f"eager_{HF}")
    with pytest.raises(UsageError, match="looks like a secret"):
        m.RunConfig(run_id=1, source="api", key=f"token {HF}", value="x")
    assert lg.run_names() == []


def test_output_is_redacted_before_its_tail_is_kept(lg: Ledger) -> None:
    # The secret's name falls just before the kept tail, its value inside it.
    tail_starts = 200_000 - OUTPUT_TAIL_BYTES
    head = "x" * (tail_starts - len(" HF_TOKEN=") + 3) + " "
    printed = f"{head}HF_TOKEN={SECRET}\n" + "y" * (200_000 - len(head) - len(SECRET) - 10)
    script = Path("print.py")
    script.write_text(f"import sys; sys.stdout.write({printed!r})")
    lg.record_fix("h", "s", run="r")
    step = lg.deploy("r", "relaunch", [sys.executable, str(script)])
    assert step.output is not None and len(step.output.encode()) <= OUTPUT_TAIL_BYTES
    assert SECRET[3:13] not in step.output and SECRET[-10:] not in step.output
    assert step.output_bytes == len(printed)
    # …which cutting first and redacting after would have leaked.
    cut_first = redact(printed.encode()[-OUTPUT_TAIL_BYTES:].decode())
    assert SECRET[-10:] in (cut_first or "")


def test_a_long_diff_is_redacted_before_its_head_is_kept(lg: Ledger) -> None:
    cut = gate.MAX_DIFF_BYTES
    url = f"postgresql://app:{SECRET}@db/ledger"
    filler = "+x\n" * ((cut - 20) // 3)
    diff = f"--- a/.env\n+++ b/.env\n{filler}+DATABASE_URL={url}\n+more\n"
    assert len(diff.encode()) > cut
    fix = lg.record_fix("h", "s", diff=diff)
    stored = lg.patch(fix.patch_id).diff or ""
    assert SECRET[:10] not in stored and "[ledger: diff truncated" in stored
    assert len(stored.encode()) < cut + 100


def test_the_readers_saved_state_stays_json_and_ingest_resumes(lg: Ledger) -> None:
    log = Path("train_s.log")
    log.write_text(f"step=1 loss=2.0 tokens/s=100\nRuntimeError: login with {HF}\n")
    lg.ingest(log)
    with session_scope(lg.engine, write=False) as session:
        state = session.query(m.LogFile.state).scalar()
    assert state is not None and HF not in state
    assert json.loads(state)["last_event"]["text"] == f"RuntimeError: login with {MASK}"
    with log.open("a") as f:
        f.write("step=2 loss=1.9 tokens/s=100\n")
    result = lg.ingest(log)
    assert result.steps == 1 and result.reset is None  # read on from the saved state


def test_a_metric_whose_name_is_a_secret_is_counted_not_stored(lg: Ledger) -> None:
    rows = [
        {"step": 1, "loss": 2.0, "lr": 3e-4, "api_key": 8675309123},
        {"step": 2, "loss": 1.9, f"grad/{HF}": 1.0, "abcd1234efgh5678ijkl9_tokens_s": 5.0},
    ]
    report = lg.write_steps("r", rows)
    names = set(lg.metrics_frame("r")["name"])
    assert names == {"lr"}
    assert report.bad_values == 3 and report.bad_rows == 0 and report.metrics == 1
    assert not any(HF in p for p in report.problems)


@pytest.mark.parametrize(
    "name",
    ["api_key", "train/hf_token", "password", "grad/" + HF, "abcdfakeledgermetricapikey4_tokens_s"],
)
def test_secret_metric_names(name: str) -> None:
    assert gate.is_secret_metric(name)


@pytest.mark.parametrize(
    "name",
    [
        "loss", "lr", "grad_norm", "tokens_per_sec", "time_to_first_token", "eval/pass@1",
        "model.layers.12.self_attn.k_proj.weight", "mfu", "memory/max_allocated_mib",
        "loss/train_epoch_3", "nccl_allreduce_ms", "fsdp_shard_0_grad_norm",
    ],
)  # fmt: skip
def test_ordinary_metric_names(name: str) -> None:
    assert not gate.is_secret_metric(name)


def test_command_words_are_redacted_before_they_are_quoted() -> None:
    argv = ["printf", "%s\n", "sshpass -p 'pw-from-argv-1' ssh root@host"]
    assert "pw-from-argv-1" not in gate.command(argv)
    joined = ["tool", "--config", '{"api_key":', f'"{SECRET}"}}']
    assert SECRET not in gate.command(joined)  # what spans words: the joined line is redacted
