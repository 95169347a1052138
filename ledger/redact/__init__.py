"""Keep secrets out of the ledger.

`redact` masks secrets in commands and command output before they are stored:

- by name: values whose name says they are secret (`HF_TOKEN=…`, `--password x`,
  `"api_key": "…"`, `{'hf_token': …}`, `?api_key=…`, `Pwd=…;` in a connection string;
  `is_secret_key` decides), `Authorization:` and `Cookie:` headers, URL passwords, netrc
  passwords, the password options of tools (`mysql -pX`, `sshpass -p X`, `redis-cli -a X`,
  `openssl … pass:X`, `ldapsearch -w X` …), PEM private key blocks;
- by shape: strings shaped like well-known credentials (hf_…, sk-…, ghp_…, AKIA…, xoxb-…,
  JWTs, webhook URLs, and some fifty vendors' prefixes: ledger.redact.shapes);
- by structure, for shapes no list names: a word of credential length and entropy a few
  words after a secret's name (`api key: X`, `aws configure set aws_secret_access_key X`;
  ledger.redact.structure).

ANSI escape sequences are removed first, so a colour code cannot split a secret from its
name, or a token in two.

`redact_code` is for diffs and source, where `sort(key=…)` and `token = next_token(…)` must
survive: a secret name loses only a string literal or an `UPPER_CASE=value` assignment, or
the literal after it as an argument (`["--password", "X"]`, `os.environ.get("K", "X")`); the
files of a diff that are not code (YAML, .env, shell, JSON) get `redact`.

`redact_and_cut` redacts the whole text and only then keeps its first or last bytes, so a
secret whose name falls before the cut cannot leave its value after it. `StreamRedactor`
(ledger.redact.stream) redacts output as it is written to a file.

Every pattern is anchored on a literal or a word start and bounded, so the cost is linear in
the text: command output can hold a 64 KiB "word".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Literal

from ledger.redact.keys import _private_keys
from ledger.redact.names import _set, is_secret_key
from ledger.redact.shapes import (
    _AUTH_HEADER,
    _BEARER,
    _COOKIE_HEADER,
    _JWT,
    _NETRC,
    _TOKEN_SHAPES,
    _URL_PASSWORD,
    _WEBHOOK,
    vendor_tokens,
)
from ledger.redact.spans import (
    _CODE_KEYED,
    _CODE_LITERAL,
    _ENV_KEYED,
    _FLAG_VALUE,
    _FLAGGED,
    _KEYED,
    _VALUE,
    MASK,
    Span,
    _named,
    _tool_options,
    _values,
)
from ledger.redact.structure import (
    _TOOL_NEEDLES,
    NEAR_NEEDLES,
    arguments_after_names,
    connection_passwords,
    credentials_near_names,
    pass_sources,
    query_values,
    tool_passwords,
)

__all__ = [
    "MASK", "is_secret_key", "redact", "redact_after", "redact_and_cut", "redact_code",
    "strip_ansi",
]  # fmt: skip

# CSI (colours, cursor moves), OSC (titles, hyperlinks) and two-byte escapes.
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]"
)


def strip_ansi(text: str) -> str:
    """`text` without its terminal escape sequences."""
    return _ANSI.sub("", text) if "\x1b" in text else text


# Every pass reads the original text and says what to mask; the spans are joined and masked
# at once, so no pass can hide from another the context it needs (`Cookie: sshpass -p 'x'`).
# Each pass runs only where its text could be: most output holds no URL, no header, no key.
_Pass = tuple[Callable[[str], Iterator[Span]], tuple[str, ...]]
_SHAPES: tuple[_Pass, ...] = (
    (_private_keys, ("private key",)),
    (_values(_URL_PASSWORD), ("://",)),
    (_values(_WEBHOOK), ("hooks.slack", "discord")),
    (_values(_AUTH_HEADER), ("authorization",)),
    (_values(_BEARER), ("bearer",)),
    (_values(_COOKIE_HEADER), ("cookie",)),
    (_values(_TOKEN_SHAPES, 0), ("",)),
    (vendor_tokens, ("",)),
    (_values(_JWT, 0), ("eyj",)),
    (query_values, ("?", "&", ";")),
    (connection_passwords, ("pwd",)),
)
_OUTPUT: tuple[_Pass, ...] = (
    *_SHAPES,
    (_values(_NETRC), ("password", "passwd")),
    (_tool_options, ("mysql", "mariadb", "sshpass", "curl", "wget", "login")),
    (tool_passwords, _TOOL_NEEDLES),
    (pass_sources, ("pass:",)),
    (_named(_KEYED, _VALUE), ("=", ":")),
    (_named(_FLAGGED, _FLAG_VALUE, option=True), ("-",)),
    (credentials_near_names, NEAR_NEEDLES),
)
_SOURCE: tuple[_Pass, ...] = (
    *_SHAPES,
    (_named(_ENV_KEYED, _VALUE), ("=",)),
    (_named(_CODE_KEYED, _CODE_LITERAL), ("=", ":")),
    (arguments_after_names, (",",)),
)


def _spans(passes: tuple[_Pass, ...], text: str) -> list[Span]:
    """What to mask in `text` (free of ANSI codes): the spans of every pass, sorted."""
    lowered = text.lower()
    return sorted(
        span
        for find, needles in passes
        if any(n in lowered for n in needles)
        for span in find(text)
    )


def _masked(text: str, spans: list[Span], start: int = 0) -> str:
    """`text[start:]` with each span masked (spans that overlap or touch: one mask)."""
    out: list[str] = []
    kept = start
    for begin, end in spans:
        if end <= start:
            continue
        begin = max(begin, start)
        if out and begin <= kept:
            kept = max(kept, end)
            continue
        out += [text[kept:begin], MASK]
        kept = end
    out.append(text[kept:])
    return "".join(out)


def _redact(passes: tuple[_Pass, ...], text: str) -> str:
    text = strip_ansi(text)
    return _masked(text, _spans(passes, text))


def redact_after(context: str, text: str) -> str:
    """`text` redacted as it reads after `context` (already stored): a secret whose name is
    in the context loses its value in `text`; nothing of the context is returned."""
    context, text = strip_ansi(context), strip_ansi(text)
    whole = context + text
    return _masked(whole, _spans(_OUTPUT, whole), len(context))


def redact(text: str | None) -> str | None:
    """Commands and command output, as they will be stored."""
    return _redact(_OUTPUT, text) if text else text


# Files of a diff that are code get `redact_code`; configuration, shell and prose get `redact`.
_CODE_SUFFIXES = _set(
    ".py .pyi .pyx .c .cc .cpp .cxx .h .hh .hpp .cu .cuh .rs .go .java .js .mjs .ts .jsx .tsx "
    ".scala .kt .swift .rb .jl .lua .m .mm .cs .php .r"
)
_DIFF_FILE = re.compile(r"^\+\+\+ (?:b/)?(?P<path>[^\t\n]*)", re.MULTILINE)


def _is_code(path: str) -> bool:
    dot = path.rfind(".")
    return dot > path.rfind("/") and path[dot:].lower() in _CODE_SUFFIXES


def redact_code(text: str | None) -> str | None:
    """Diffs and source: identifiers survive; secret literals, and whole non-code files'
    secrets (a diff of a .env or YAML file), do not."""
    if not text:
        return text
    files = list(_DIFF_FILE.finditer(text))
    if not files:
        return _redact(_SOURCE, text)
    # A file's section starts at its `diff --git`/`---` header lines; those are code-safe.
    parts = [_redact(_SOURCE, text[: files[0].start()])]
    for here, after in zip(files, [*files[1:], None], strict=True):
        section = text[here.start() : after.start() if after else len(text)]
        parts.append(_redact(_SOURCE if _is_code(here.group("path")) else _OUTPUT, section))
    return "".join(parts)


def redact_and_cut(
    text: str | None,
    limit_bytes: int,
    *,
    keep: Literal["first", "last"] = "last",
    code: bool = False,
) -> str | None:
    """Redact all of `text`, then keep its first or last `limit_bytes` (UTF-8, whole characters)."""
    redacted = (redact_code if code else redact)(text)
    if not redacted:
        return redacted
    data = redacted.encode("utf-8", errors="surrogatepass")
    if len(data) <= limit_bytes:
        return redacted
    part = data[:limit_bytes] if keep == "first" else data[len(data) - limit_bytes :]
    return part.decode("utf-8", errors="ignore")
