"""Keep secrets out of the ledger.

Commands and their outputs are redacted before they are stored: values of assignments and
flags whose name contains TOKEN, SECRET, PASSWORD, PASSWD, KEY or CREDENTIAL
(`HF_TOKEN=…`, `--password x`, `"api_key": "…"`), `Authorization:` headers, the password
in `user:pass@host` URLs, and strings shaped like well-known API tokens (hf_…, ghp_…, sk-…).

Diffs are code: `sort(key=…)` must survive, so `redact_code` only removes URL passwords,
token-shaped strings, authorization headers and UPPER_CASE environment assignments.
"""

from __future__ import annotations

import re

MASK = "***"

# TOKENS/TOKENIZER and KEYS are counts and settings (max_tokens, TOKENIZERS_PARALLELISM,
# sort_keys), not secrets.
_SENSITIVE = r"(?:TOKEN(?![SI])|SECRET|PASSW(?:OR)?D|KEY(?![SB])|CREDENTIAL|AUTH_?TOKEN)"
# Names start where a word starts and are bounded in length: command output can hold a
# 64 KiB "word", over which an unanchored, unbounded name pattern backtracks quadratically.
_START = r"(?<![\w.-])"
_NAME = rf"[\w.-]{{0,60}}?{_SENSITIVE}[\w.-]{{0,60}}"
_VALUE = r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&|'\"<>)}\]]+)"

_ASSIGNMENT = re.compile(
    rf"(?P<name>{_START}{_NAME})(?P<close>[\"']?)(?P<sep>[ \t]*[=:][ \t]*)(?P<value>{_VALUE})",
    re.IGNORECASE,
)
_FLAG = re.compile(
    rf"(?P<name>(?<![\w-])--?{_NAME})(?P<sep>[ \t]+)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\-'\"][^\s'\"]*)",
    re.IGNORECASE,
)
_ENV_ASSIGNMENT = re.compile(
    rf"(?P<name>{_START}[A-Z0-9_]{{0,60}}?{_SENSITIVE}[A-Z0-9_]{{0,60}})(?P<close>)(?P<sep>=)"
    rf"(?P<value>{_VALUE})"
)
_AUTH_HEADER = re.compile(
    r"(?P<name>(?:proxy-)?authorization)(?P<sep>[ \t]*[:=][ \t]*)"
    r"(?P<value>(?:(?:bearer|basic|token|digest)[ \t]+)?[^\s'\"]+)",
    re.IGNORECASE,
)
_URL_PASSWORD = re.compile(
    r"(?P<head>(?<![\w.+-])[a-z][a-z0-9+.\-]{0,30}://[^\s:/@'\"]{1,256}:)(?P<value>[^\s@/'\"]{1,256})(?=@)",
    re.IGNORECASE,
)
_TOKEN_SHAPES = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|sk-[A-Za-z0-9_\-]{20,}|xox[abpr]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16})\b"
)


def _mask_value(match: re.Match[str]) -> str:
    value = match.group("value")
    # Keep the quotes, so that a redacted command still reads as the same shell words.
    value = value[0] + MASK + value[0] if value and value[0] in "\"'" else MASK
    close = match.groupdict().get("close") or ""
    return f"{match.group('name')}{close}{match.group('sep')}{value}"


def _common(text: str) -> str:
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
    text = _AUTH_HEADER.sub(_mask_value, text)
    return _TOKEN_SHAPES.sub(MASK, text)


def redact(text: str | None) -> str | None:
    """Commands and command output, as they will be stored."""
    if not text:
        return text
    text = _common(text)
    text = _FLAG.sub(_mask_value, text)
    return _ASSIGNMENT.sub(_mask_value, text)


def redact_code(text: str | None) -> str | None:
    """Diffs and source: only what cannot be a legitimate identifier is removed."""
    if not text:
        return text
    return _ENV_ASSIGNMENT.sub(_mask_value, _common(text))
