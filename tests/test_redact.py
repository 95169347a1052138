"""Secrets never reach the ledger: what redaction removes and what it must leave alone."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from secret_shapes import PEM_BODY, SHAPES, Shape, leaks

from ledger.redact import MASK, is_secret_key, redact, redact_and_cut, redact_code, strip_ansi

SECRET = "s3cr3t-VALUE-42"
SHAPE_IDS = [s.name for s in SHAPES]


def test_the_catalogue_is_broad_and_each_secret_is_in_its_text() -> None:
    assert len(SHAPES) >= 64
    assert len({s.secret for s in SHAPES}) >= 60
    for shape in SHAPES:
        assert shape.secret in strip_ansi(shape.text), shape.name  # one is split by a colour
        assert leaks(shape.secret, shape.text), shape.name  # `leaks` finds it before redaction


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_every_shape_is_masked(shape: Shape) -> None:
    out = redact(shape.text)
    assert out is not None and MASK in out
    assert leaks(shape.secret, out) == [], out


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("path", ["deploy/.env", "configs/train.yaml", "scripts/launch.sh"])
def test_every_shape_is_masked_in_a_diff_of_a_config_file(shape: Shape, path: str) -> None:
    added = "".join(f"+{line}\n" for line in shape.text.splitlines())
    removed = "".join(f"-{line}\n" for line in shape.text.splitlines())
    diff = f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n{removed}{added}"
    out = redact_code(diff)
    assert out is not None and leaks(shape.secret, out) == [], out


@pytest.mark.parametrize(
    "line",
    [
        f'+HF_TOKEN = "{SECRET}"',
        f'+    api_key = "{SECRET}"',
        f"-    password = '{SECRET}'",
        f'+    client = OpenAI(api_key="{SECRET}", timeout=30)',
        f'+    headers = {{"Authorization": "Bearer {SECRET}", "Accept": "json"}}',
        f"+    cfg = {{'hf_token': '{SECRET}', 'lr': 3e-4}}",
        f'+    hf_token: str = "{SECRET}"',
        f'+    db = connect("postgresql://app:{SECRET}@db/ledger")',
        f"+os.environ['WANDB_API_KEY'] = '{SECRET}'",
        "+    token = 'hf_" + "Q" * 34 + "'",
        f'+key = """-----BEGIN PRIVATE KEY-----\n+{PEM_BODY}\n+-----END PRIVATE KEY-----"""',
        f"+HF_TOKEN={SECRET}",
        f"-HF_TOKEN={SECRET}",
    ],
)
def test_secrets_in_code_are_masked(line: str) -> None:
    secret = PEM_BODY if "PRIVATE KEY" in line else ("hf_" + "Q" * 34 if "QQQ" in line else SECRET)
    diff = f"--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n{line}\n"
    out = redact_code(diff)
    assert out is not None and leaks(secret, out) == [], out


ORDINARY_OUTPUT = [
    "step 1662 | loss 2.3134 | lr 3.0e-04 | tokens/s 14,203 | mem 61.2GB",
    "[rank0]: step=500 loss=2.31 grad_norm=0.93 lr=0.0003 tps=14203.5 wait_s=0.02",
    "{'loss': 2.3134, 'grad_norm': 0.93, 'learning_rate': 3e-05, 'epoch': 0.12}",
    "torchrun --nproc_per_node 8 train.py --token-budget 49152 --max-tokens 4096 "
    "--tokenizer=meta-llama/Llama-3-8B",
    "tokenizer=LlamaTokenizerFast num_tokens=1048576 tokens_per_sec=14203 "
    "time_to_first_token=0.21 ms_per_token=12.3",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  train.py",
    "commit 3f2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a\nAuthor: Dev <dev@example.com>\n"
    "HEAD is now at 0e7533e Foundation",
    "/home/user/.cache/huggingface/hub/models--meta-llama--Llama-3-8B/snapshots/"
    "8cde5ca8380496c9a6cc7ef3a8b46a0372a1d920/config.json",
    "TOKENIZERS_PARALLELISM=false NCCL_DEBUG=INFO CUDA_VISIBLE_DEVICES=0,1,2,3 HF_HOME=/data/hf",
    "HF_TOKEN_PATH=/root/.cache/huggingface/token WANDB_PROJECT=ledger WANDB_MODE=offline",
    "ssh -p 2222 host 'mkdir -p /tmp/run && tail -n 90 train.log'",
    "scp -P 2222 build/train.py host:/tmp/ && rsync -e 'ssh -p 2222' -avz out/ host:/data/",
    "psql -p 5432 -h localhost -U postgres -c 'select count(*) from step'",
    "mysql -h db -u reader -P 3306 -e 'select 1'",
    "scp build/train.py host:/tmp/",
    "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "https://huggingface.co/meta-llama/Llama-3-8B/resolve/main/config.json?download=true",
    "git@github.com:org/repo.git",
    "Epoch 1: 100%|##########| 500/500 [01:23<00:00, 6.01it/s, loss=2.31, v_num=3]",
    "Token indices sequence length is longer than the specified maximum sequence length "
    "for this model (2048 > 1024)",
    "eval pass@1=0.31 pass_at_1=0.31 first_pass_time=3.2 num_passes=2",
    "tests: pass=10 fail=2 skip=1",
    "Recompiling function forward in /workspace/model.py:123 triggered by guard failure: "
    "L['self'].key_cache[0].size()[2] == 512",
    "torch._dynamo hit config.cache_size_limit (8); function: 'forward' (/workspace/model.py:88)",
    "nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader",
    "0, 61234 MiB, 98 %",
    "model.config: num_key_value_heads=8 key_dim=64 sort_keys=True pad_token_id=0 eos_token_id=2",
    "Loaded tokenizer: pad_token=<pad> eos_token=</s> bos_token=<s>",
    "key=train/loss value=2.31 step=100",
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total)",
    "python -m torch.distributed.run --nnodes 2 --rdzv-endpoint=10.0.0.1:29500 train.py",
    "pip install torch==2.3.0 --index-url https://download.pytorch.org/whl/cu121",
    "saved s3://bucket/runs/eager/step_1000/model.safetensors (etag 5d41402abc4b2a76b9719d91101)",
    "xargs -P 4 -n 1 make -j 8",
    'ledger deploy --run eager_dynamiccopy --step relaunch -- ssh host "pct exec 200 -- ..."',
    "step: 1662  loss: 2.31  tps: 14,203",
    "python train.py --max_tokens 4096 --sort_keys --lr 3e-4",
]

ORDINARY_DIFFS = [
    "--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n"
    "-    cache = GpuBufferCache(persistent=True)\n"
    "+    cache = GpuBufferCache(persistent=cfg.compile)\n",
    "diff --git a/model.py b/model.py\nindex 3f2a1b9..8cde5ca 100644\n--- a/model.py\n"
    "+++ b/model.py\n@@ -10,6 +10,8 @@ class Attn:\n"
    "+        batch = sorted(batch, key=len)\n"
    "+        tokenizer.pad_token = tokenizer.eos_token\n"
    '+        pad_token = "<pad>"\n'
    "+        token = next_token(logits)\n"
    "+        cfg.password_min_length = 8\n"
    '+        api_key = os.environ["OPENAI_API_KEY"]\n'
    '+        token = os.environ.get("HF_TOKEN", "")\n'
    '+        parser.add_argument("--hf-token", type=str, default=None)\n'
    "+        self.num_key_value_heads = config.num_key_value_heads\n"
    "+        key_states = self.k_proj(hidden_states)\n",
    "--- a/configs/llama.yaml\n+++ b/configs/llama.yaml\n@@ -1,3 +1,3 @@\n model: llama\n"
    "-max_tokens: 4096\n+max_tokens: 8192\n tokenizer: meta-llama/Llama-3-8B\n",
    "--- a/run.sh\n+++ b/run.sh\n@@ -1 +1 @@\n"
    "-torchrun --nproc_per_node 8 train.py --token-budget 49152\n"
    "+TOKENIZERS_PARALLELISM=false torchrun --nproc_per_node 8 train.py --token-budget 49152\n",
]


@pytest.mark.parametrize("text", ORDINARY_OUTPUT)
def test_ordinary_output_and_commands_are_untouched(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("diff", ORDINARY_DIFFS)
def test_ordinary_diffs_are_untouched(diff: str) -> None:
    assert redact_code(diff) == diff


def test_whole_ordinary_log_is_untouched() -> None:
    log = "\n".join(ORDINARY_OUTPUT * 20)
    assert redact(log) == log
    assert redact_and_cut(log, 4096) == log.encode()[-4096:].decode("utf-8", errors="ignore")


@pytest.mark.parametrize(
    "key",
    [
        "api_key", "API_KEY", "apiKey", "x-api-key", "hf_token", "HF_TOKEN", "--hf-token",
        "token", "password", "DB_PASS", "PGPASSWORD", "MYSQL_PWD", "SMTP_PASSWORD",
        "JWT_SECRET", "client_secret", "aws_secret_access_key", "AWS_ACCESS_KEY_ID",
        "private_key", "private_key_id", "WANDB_API_KEY", "GH_TOKEN", "accessToken",
        "refresh_token", "HF_TOKEN_PROD", "api_key_2", "cookie", "Authorization", "SENTRY_DSN",
        "SLACK_WEBHOOK_URL", "secret_key", "passphrase", "GOOGLE_APPLICATION_CREDENTIALS",
        "train/api_key", "model.hub_token",
    ],
)  # fmt: skip
def test_names_of_secrets(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "tokens_per_sec", "num_tokens", "max_tokens", "--max-tokens", "--token-budget",
        "tokenizer", "TOKENIZERS_PARALLELISM", "pad_token", "eos_token_id", "pad_token_id",
        "time_to_first_token", "ms_per_token", "token_type_ids", "sort_keys", "key", "key_dim",
        "num_key_value_heads", "key_padding_mask", "cache_key", "password_min_length",
        "secret_name", "HF_TOKEN_PATH", "PWD", "OLDPWD", "pass", "pass_at_1", "eval/pass@1",
        "num_passes", "loss", "lr", "grad_norm", "train/loss", "step", "wait_s", "monkey",
        "public_key", "next_token", "", "---", "sha256",
    ],
)  # fmt: skip
def test_names_that_are_not_secrets(key: str) -> None:
    assert not is_secret_key(key)


# ---------------------------------------------------------------------------------------------
# Redact, then cut.


def _around_a_secret(secret: str) -> tuple[str, int, int]:
    """A long output with `HF_TOKEN=<secret>` in the middle, and where the name and value lie."""
    head = "".join(f"step {i} loss 2.{i:03d}\n" for i in range(300))
    tail = "".join(f"step {i} loss 1.{i:03d}\n" for i in range(300, 600))
    planted = f"launching with HF_TOKEN={secret} --steps 10\n"
    name_at = len(head) + planted.index("HF_TOKEN")
    value_end = len(head) + planted.index(secret) + len(secret)
    return head + planted + tail, name_at, value_end


def test_a_cut_between_a_secret_name_and_its_value_keeps_nothing_of_it() -> None:
    secret = "PlainValueNoShape9876"  # caught by its name only, as a cut would lose it
    text, name_at, value_end = _around_a_secret(secret)
    naive_leaks = 0
    for boundary in range(name_at - 3, value_end + 3):
        last = len(text) - boundary  # keep everything from `boundary` on
        kept = redact_and_cut(text, last)
        assert kept is not None and len(kept.encode()) <= last
        assert leaks(secret, kept) == [], boundary
        first = redact_and_cut(text, boundary, keep="first")
        assert first is not None and leaks(secret, first) == [], boundary
        naive_leaks += bool(leaks(secret, redact(text[boundary:]) or ""))
    # Cutting first and redacting after would have leaked: the test would catch that order.
    assert naive_leaks > 0


def test_a_cut_inside_a_private_key_keeps_none_of_it() -> None:
    head = "x" * 500 + "\n-----BEGIN PRIVATE KEY-----\n"
    text = head + PEM_BODY + "\n-----END PRIVATE KEY-----\n" + "y" * 500
    for boundary in range(len(head) - 30, len(head) + len(PEM_BODY), 7):
        for keep in ("first", "last"):
            limit = boundary if keep == "first" else len(text) - boundary
            kept = redact_and_cut(text, limit, keep=keep)
            assert kept is not None and leaks(PEM_BODY, kept) == [], (boundary, keep)


def test_cut_keeps_whole_characters_within_the_limit() -> None:
    text = "é" * 1000 + "日本" * 500
    for limit in range(1, 40):
        for keep in ("first", "last"):
            kept = redact_and_cut(text, limit, keep=keep)
            assert kept is not None and len(kept.encode()) <= limit
            assert text.startswith(kept) if keep == "first" else text.endswith(kept)
            assert len(kept.encode()) >= limit - 3  # at most one character is dropped
    assert redact_and_cut(text, 1 << 20) == text
    assert redact_and_cut(None, 10) is None and redact_and_cut("", 10) == ""


def test_cut_of_a_diff_redacts_it_as_code() -> None:
    diff = "--- a/t.py\n+++ b/t.py\n@@ -1 +1 @@\n+token = next_token(logits)\n"
    assert redact_and_cut(diff, 1 << 20, keep="first", code=True) == diff
    assert redact_and_cut(diff, 1 << 20, keep="first") != diff  # as output, `token=` is masked


# ---------------------------------------------------------------------------------------------
# Cost and robustness.


def test_redaction_is_linear_on_pathological_output() -> None:
    # Guards against catastrophic backtracking (a 64 KiB word once took minutes), not a
    # benchmark: each input takes milliseconds, a quadratic pattern would take minutes.
    code = r"""
from ledger.redact import redact, redact_and_cut, redact_code, strip_ansi
N = 65536
cases = [
    'x' * N, 'a=b ' * (N // 4), 'key' * (N // 3), 'TOKEN_' * (N // 6), 'a:' * (N // 2),
    'https://' + 'u' * 5000 + ':' * 5000, '-' * N, 'hf_' * (N // 3), 'eyJ-' * (N // 4),
    'eyJaaaaaaaaa.' * (N // 13), '-----BEGIN PRIVATE KEY-----' * (N // 27),
    '-----END PRIVATE KEY-----' * (N // 25), '-----BEGIN PRIVATE KEY-----!' * (N // 28),
    ('x' * 100 + '-----END PRIVATE KEY-----') * (N // 125), 'machine x ' * (N // 10),
    'login ' * (N // 6), 'mysql -p' * (N // 8), 'mysql ' + 'a ' * (N // 2),
    'mysql ' * (N // 6), 'token="a ' * (N // 9), 'token="a\\' * (N // 9),
    'https://a:' * (N // 10), '"api_key":' * (N // 10), 'Cookie: ' * (N // 8),
    "'{\"api_key\":' '" * (N // 14), '\\"' * (N // 2), 'token=' + ')' * (N - 7) + 'x',
    'api_key=' * (N // 8), '--password ' * (N // 11), '--a ' * (N // 4), 'curl -u ' * (N // 8),
    'wandb login ' * (N // 12), 'Bearer ' * (N // 7), 'Authorization: ' * (N // 15),
    'a_' * (N // 2) + '=x', ('a' * 99 + ' ') * (N // 100), ('a' * 99 + ':') * (N // 100),
    'sk-' * (N // 3), 'AKIA' * (N // 4), 'xoxb-' * (N // 5),
    'hooks.slack.com/services/' * (N // 26), '"' * N, "'" * N, '\n' * N, ' ' * N,
    'https://u:' + '@' * 200 + '/' * 100, 'default ' * (N // 8),
    ('+++ b/x.yaml\n' + 'password: x\n') * (N // 25),
    ('HF_TOKEN=hf_' + 'a' * 40 + ' --password p "api_key": "v" https://u:p@h ') * (N // 100),
    'redis-cli ' * (N // 10), 'redis-cli -a ' * (N // 13), 'pass:' * (N // 5),
    '?api_key=' * (N // 9), '&token=' + 'x' * (N - 7), 'api key ' * (N // 8),
    'token ' + 'A1b2C3d4' * (N // 8), 'password ' * (N // 9), '["--password", ' * (N // 16),
    '("API_KEY", "' * (N // 13), ';Pwd=' * (N // 5), 'pwd=' + 'x' * (N - 4),
    'keytool -storepass ' * (N // 19), 'ldapsearch ' + '-w ' * (N // 3), 'x' * N + ':AA',
    'SG.' * (N // 3), 'dapi' * (N // 4), 'Ab1' * (N // 3), '\x1b[' * (N // 2),
    'secret ' * (N // 7), 'key-' * (N // 4), 'A1' * (N // 2),
]
for t in cases:
    redact(t); redact_code(t); redact_and_cut(t, 1024)
"""
    # minutes would mean a quadratic pattern; seconds are the cost of ~70 inputs of 64 KiB
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


SEPARATORS = st.sampled_from([" ", "\n", "\t", " \n", "\r\n", "  "])
SURROUNDINGS = st.one_of(
    st.text(max_size=300),
    st.text(alphabet="ab=:-_ \n\t\"'{}@/.,;xX0$\\", max_size=300),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from(SHAPES),
    around=SURROUNDINGS,
    at=st.integers(min_value=0, max_value=300),
    before=SEPARATORS,
    after=SEPARATORS,
    limit=st.integers(min_value=1, max_value=2000),
)
def test_a_planted_shape_never_survives(
    shape: Shape, around: str, at: int, before: str, after: str, limit: int
) -> None:
    at = min(at, len(around))
    text = around[:at] + before + shape.text + after + around[at:]
    assert leaks(shape.secret, redact(text) or "") == []
    assert leaks(shape.secret, redact_and_cut(text, limit) or "") == []
    assert leaks(shape.secret, redact_and_cut(text, limit, keep="first") or "") == []
    diff = "--- a/.env\n+++ b/.env\n" + text
    assert leaks(shape.secret, redact_code(diff) or "") == []


# Pieces of other shapes around a shape: each pass must still see the context it needs.
PIECES = [
    *"\"'=:@{}[].,;|&+- \n\t\\x",  # one character each
    "curl", "token=", "password", "login", "machine", "mysql", "-p", "wandb login", "://",
    "https://u:", "Cookie:", "Authorization:", "Bearer", "--password", "api_key", "HF_TOKEN",
    "'{\"api_key\":'", "eyJ", "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----",
    "+++ b/x.yaml\n",
]  # fmt: skip


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from(SHAPES),
    pre=st.lists(st.sampled_from(PIECES), max_size=12),
    post=st.lists(st.sampled_from(PIECES), max_size=12),
    before=SEPARATORS,
    after=SEPARATORS,
)
def test_a_shape_among_pieces_of_others_never_survives(
    shape: Shape, pre: list[str], post: list[str], before: str, after: str
) -> None:
    text = "".join(pre) + before + shape.text + after + "".join(post)
    assert leaks(shape.secret, redact(text) or "") == []
    assert leaks(shape.secret, redact_code("--- a/.env\n+++ b/.env\n" + text) or "") == []


@settings(max_examples=300, deadline=None)
@given(shape=st.sampled_from(SHAPES), around=SURROUNDINGS)
def test_redacting_twice_changes_nothing_more(shape: Shape, around: str) -> None:
    once = redact(f"{around} {shape.text} {around}")
    assert redact(once) == once


def test_text_joined_to_an_earlier_mask_is_masked_too() -> None:
    # A masked line completed later (`HF_TOKEN=***` + the rest of the value) keeps no rest.
    assert redact(f"HF_TOKEN={MASK}{SECRET} next") == f"HF_TOKEN={MASK} next"
    assert redact(f"HF_TOKEN={MASK} next") == f"HF_TOKEN={MASK} next"


@given(st.text(max_size=500))
def test_redact_never_raises(text: str) -> None:
    assert isinstance(redact(text), str)
    assert isinstance(redact_code(text), str)
    assert isinstance(redact_and_cut(text, 100), str)


def test_a_mask_before_closing_punctuation_is_left_alone() -> None:
    # Found by the property test above: `***}` lost its `}` on a second pass.
    once = redact('"} docker run -e "HF_TOKEN=FakeLedgerDockerEnvToken2" --gpus all img "}')
    assert "FakeLedgerDockerEnvToken2" not in once and redact(once) == once
    assert redact(f"HF_TOKEN={MASK}}}") == f"HF_TOKEN={MASK}}}"
