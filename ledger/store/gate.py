"""The one gate text passes on its way into the ledger.

Every text column of every table has a rule here (RULES; a test checks that none is left
out): free text is redacted (ledger.redact) and only then bounded, so that a cut cannot
separate a secret's name from its value; a diff is redacted as code; the log reader's saved
state is redacted inside its JSON; a config value whose key names a secret is masked whole;
a name or a path that rows are found by is refused if it holds a secret, since a masked one
could no longer be found. Enumerations and hex digests, checked elsewhere, pass as they are.

ORM writes cannot go around it: `install` puts a listener on every such attribute, so a row
holds the clean value from the moment it is assigned (and the record built from it too).
The few Core writers call `clean_values` (run updates, INSERT … ON CONFLICT), `clean` (log
events) and `secret_metrics` (the step writer, whose rows carry no text but metric names).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import String, Table, Text, event

from ledger.db import models as m
from ledger.errors import UsageError
from ledger.proc import OUTPUT_TAIL_BYTES
from ledger.redact import MASK, is_secret_key, redact, redact_and_cut, redact_code

# How much more than it keeps a command's output tail holds, so that the secret whose name
# falls just before the kept part is still seen whole by redaction (ledger.proc keeps the
# tail as the command prints; this gate redacts it, then keeps OUTPUT_TAIL_BYTES).
REDACTION_MARGIN_BYTES = 16 * 1024
OUTPUT_READ_BYTES = OUTPUT_TAIL_BYTES + REDACTION_MARGIN_BYTES  # what a deploy or probe reads
MAX_DIFF_BYTES = 1 << 20  # a diff past this is a generated file; its head is kept
REASON_CHARS = 2000  # a fate's evidence is a line or two; a whole traceback is an event

Rule = Callable[[str], str]


def text(value: str) -> str:
    """Free text: commands, outputs, notes, reasons, event lines."""
    return redact(value) or ""


def command(argv: Sequence[str]) -> str:
    """A command as stored: each word redacted on its own (quoting would hide a shape that
    a word holds whole), then the shell-quoted line (for what spans words)."""
    return text(shlex.join(text(word) for word in argv))


def output(value: str) -> str:
    """A command's output: redacted whole, then its last OUTPUT_TAIL_BYTES."""
    return redact_and_cut(value, OUTPUT_TAIL_BYTES) or ""


def diff(value: str) -> str:
    """A patch's diff: redacted as code, then its first MAX_DIFF_BYTES."""
    redacted = redact_code(value) or ""
    if len(redacted.encode()) <= MAX_DIFF_BYTES:
        return redacted
    head = redact_and_cut(redacted, MAX_DIFF_BYTES, keep="first", code=True) or ""
    return f"{head}\n[ledger: diff truncated to {MAX_DIFF_BYTES} bytes]\n"


def reason(value: str) -> str:
    """A fate's reason: redacted, then its first REASON_CHARS characters."""
    redacted = text(value)
    return redacted if len(redacted) <= REASON_CHARS else redacted[: REASON_CHARS - 1] + "…"


def saved_state(value: str) -> str:
    """The log reader's state (JSON): every string in it redacted, the JSON kept whole."""
    try:
        data = json.loads(value)
    except ValueError:
        return text(value)
    cleaned = _clean_json(data)
    return value if cleaned == data else json.dumps(cleaned)


def _clean_json(data: Any) -> Any:
    if isinstance(data, str):
        return text(data)
    if isinstance(data, list):
        return [_clean_json(item) for item in data]
    if isinstance(data, dict):
        return {k: MASK if is_secret_key(k) else _clean_json(v) for k, v in data.items()}
    return data


def identity(value: str) -> str:
    """A name or a path that rows are looked up by: refused when it holds a secret."""
    if text(value) != value:
        raise UsageError(
            "a name or path holds what looks like a secret; the ledger does not store it"
        )
    return value


def verbatim(value: str) -> str:
    """An enumeration (fate, kind, status) or a hex digest, checked where it is set."""
    return value


# Every String and Text column of ledger.db.models, and what the gate does to it.
RULES: dict[tuple[str, str], Rule] = {
    ("investigation", "name"): identity,
    ("investigation", "description"): text,
    ("investigation", "baseline_unit"): text,
    ("hypothesis", "text"): text,
    ("hypothesis", "status"): verbatim,
    ("hypothesis", "note"): text,
    ("patch", "summary"): text,
    ("patch", "diff"): diff,
    ("patch", "git_commit"): verbatim,
    ("patch_file", "path"): identity,
    ("patch_file", "sha256"): verbatim,
    ("run", "name"): identity,
    ("run", "command"): text,
    ("run", "host"): text,
    ("run", "throughput_unit"): text,
    ("run", "fate"): verbatim,
    ("run", "fate_reason"): reason,
    ("launch", "source"): verbatim,
    ("launch", "command"): text,
    ("launch", "fate"): verbatim,
    ("launch", "fate_reason"): reason,
    ("deploy_step", "name"): text,
    ("deploy_step", "command"): text,
    ("deploy_step", "output"): output,
    ("deploy_step", "artifact_path"): text,
    ("deploy_step", "artifact_sha256"): verbatim,
    ("deploy_step", "expected_sha256"): verbatim,
    ("log_file", "path"): identity,
    ("log_file", "sha256"): verbatim,
    ("log_file", "state"): saved_state,
    ("log_file", "format"): verbatim,
    ("metric", "name"): identity,  # written by the step writer: see secret_metrics
    ("log_event", "kind"): verbatim,
    ("log_event", "text"): text,
    ("probe", "command"): text,
    ("probe", "output"): output,
    ("probe", "fate"): verbatim,
    ("probe", "conclusion"): text,
    ("gpu_sample", "name"): text,
    ("gpu_sample", "throttle"): text,
    ("run_config", "source"): verbatim,
    ("run_config", "key"): identity,
    ("run_config", "value"): text,  # and masked whole when the key names a secret
    ("setting", "name"): identity,
    # A setting is the person's own configuration (log patterns): a regex is not a secret,
    # and redacting one would change what it matches.
    ("setting", "value"): verbatim,
    ("comparison", "unit"): text,
    ("comparison", "verdict"): verbatim,
    ("comparison", "summary"): text,
    ("comparison", "kind"): verbatim,
    ("kept_analysis", "settings"): verbatim,  # a hex digest
    # JSON that ledger made of numbers and of texts that passed this gate on their way in
    # (the run's name, its unit); redacting or cutting it would only break the JSON.
    ("kept_analysis", "body"): verbatim,
}


def clean(table: str, column: str, value: Any) -> Any:
    """`value` as column `table.column` may hold it."""
    if not isinstance(value, str) or not value:
        return value
    return RULES.get((table, column), text)(value)


def clean_values(table: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """A Core INSERT's or UPDATE's values, each as its column may hold it."""
    cleaned = {name: clean(table, name, value) for name, value in values.items()}
    key = str(values.get("key") or "")
    if table == "run_config" and cleaned.get("value") and is_secret_key(key):
        cleaned["value"] = MASK
    return cleaned


# -- metric names ------------------------------------------------------------------------


@lru_cache(maxsize=65536)
def is_secret_metric(name: str) -> bool:
    """A key=value whose key names a secret is not a metric (`api_key=8675309123`); nor is
    one whose name holds a secret (a token the log put before `tokens/s`)."""
    return is_secret_key(name) or text(name) != name or _token_like(name)


def _token_like(name: str) -> bool:
    # A run of 20+ letters and digits with both is no metric's word, and is how a token
    # looks once a reader has folded it into a name (`abcd…key4_tokens_s`).
    run = digits = letters = 0
    for ch in name + " ":
        if ch.isascii() and ch.isalnum():
            run += 1
            digits += ch.isdigit()
            letters += ch.isalpha()
            continue
        if run >= 20 and digits and letters:
            return True
        run = digits = letters = 0
    return False


def secret_metrics(names: Iterable[str]) -> set[str]:
    """Which of these metric names may not be stored (see is_secret_metric)."""
    return {name for name in set(names) if is_secret_metric(name)}


# -- the ORM listeners -------------------------------------------------------------------

_installed = False


def install() -> None:
    """Put the gate on every text attribute of every model (once per process)."""
    global _installed
    if _installed:
        return
    for mapper in m.Base.registry.mappers:
        table = cast(Table, mapper.local_table)
        for column in table.columns:
            if isinstance(column.type, String | Text):
                attribute = getattr(mapper.class_, column.key)
                event.listen(attribute, "set", _on_set(table.name, column.key), retval=True)
    event.listen(m.RunConfig.key, "set", _config_key_set, retval=True)
    _installed = True


def _on_set(table: str, column: str) -> Callable[..., Any]:
    def cleaned(target: Any, value: Any, _old: Any, _initiator: Any) -> Any:
        value = clean(table, column, value)
        if table == "run_config" and column == "value" and value:
            key = target.__dict__.get("key")
            if key and is_secret_key(key):
                return MASK
        return value

    return cleaned


def _config_key_set(target: m.RunConfig, key: Any, _old: Any, _initiator: Any) -> Any:
    # The value may have been set first (RunConfig(value=…, key=…)).
    if isinstance(key, str) and is_secret_key(key) and target.__dict__.get("value"):
        target.value = MASK
    return key
