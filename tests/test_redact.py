"""Secrets never reach the ledger: what redaction removes and what it must leave alone."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.redact import MASK, redact, redact_code

SECRET = "s3cr3t-VALUE-42"


@pytest.mark.parametrize(
    "text",
    [
        f"HF_TOKEN={SECRET} python train.py",
        f'ssh host "pct exec 200 -- env HF_TOKEN={SECRET} torchrun train.py"',
        f"export WANDB_API_KEY={SECRET}",
        f"mysql --password {SECRET} -u root",
        f"mysql --password={SECRET}",
        f"tool --api-key '{SECRET}' --lr 1e-4",
        f'AWS_SECRET_ACCESS_KEY="{SECRET} with spaces" aws s3 ls',
        f'{{"client_secret": "{SECRET}"}}',
        f"db_passwd: {SECRET}",
        f"GOOGLE_APPLICATION_CREDENTIALS={SECRET}",
        f'curl -H "Authorization: Bearer {SECRET}" https://example.com',
        f"git clone https://user:{SECRET}@example.com/repo.git",
        f"postgresql://postgres:{SECRET}@db:5432/ledger",
    ],
)
def test_secret_values_are_masked(text: str) -> None:
    out = redact(text)
    assert SECRET not in out and MASK in out


@pytest.mark.parametrize(
    "token",
    [
        "hf_" + "a1B2" * 8,
        "ghp_" + "Z9y8" * 9,
        "sk-" + "proj_" + "q" * 30,
        "AKIA" + "ABCDEFGHIJKLMNOP",
    ],
)
def test_token_shapes_are_masked_anywhere(token: str) -> None:
    assert token not in redact(f"loaded credentials {token} from cache")
    assert token not in redact_code(f"+    token = '{token}'")


@pytest.mark.parametrize(
    "text",
    [
        "TOKENIZERS_PARALLELISM=false torchrun --nproc_per_node 8 train.py",
        "python train.py --max_tokens 4096 --sort_keys --lr 3e-4",
        "scp build/train.py host:/tmp/",
        "postgresql+psycopg://postgres@127.0.0.1:5432/test",
        "step: 1662  loss: 2.31  tps: 14,203",
    ],
)
def test_ordinary_commands_are_untouched(text: str) -> None:
    assert redact(text) == text


def test_code_keeps_identifiers() -> None:
    diff = "+    batch = sorted(batch, key=len)\n+    cfg.password_min_length = 8\n"
    assert redact_code(diff) == diff
    assert SECRET not in redact_code(f"+HF_TOKEN={SECRET}\n")


def test_redaction_is_linear_on_pathological_output() -> None:
    # Guards against catastrophic backtracking (a 64 KiB word once took minutes), not a benchmark.
    code = (
        "from ledger.redact import redact, redact_code\n"
        "for t in ['x' * 65536, 'a=b ' * 20000, 'key' * 30000, 'TOKEN_' * 10000, 'a:' * 40000,\n"
        "          'https://' + 'u' * 5000 + ':' * 5000, '-' * 65536]:\n"
        "    redact(t); redact_code(t)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@given(prefix=st.text(max_size=200), suffix=st.text(max_size=200))
def test_planted_assignment_never_survives(prefix: str, suffix: str) -> None:
    text = f"{prefix}\nHF_TOKEN={SECRET}\n{suffix}"
    assert SECRET not in redact(text)
    assert SECRET not in redact_code(text)


@given(st.text(max_size=500))
def test_redact_never_raises(text: str) -> None:
    assert isinstance(redact(text), str)
    assert isinstance(redact_code(text), str)
