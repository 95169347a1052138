"""Secrets found by where they stand rather than by what they look like: the value of a URL's
query parameter or a connection string's key that names a secret, a tool's password option
(`redis-cli -a X`, `openssl … pass:X`, `ldapsearch -w X`), an argument after a secret's name
in code (`["--password", "X"]`, `os.environ.get("API_KEY", "X")`), and a word of credential
length and entropy said next to a secret's name in prose or a command
(`api key: X`, `aws configure set aws_secret_access_key X`).

A list of vendors' prefixes can never be complete; these rules need no vendor's name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from functools import lru_cache

from ledger.redact.names import is_secret_key
from ledger.redact.spans import _QUOTED, _WORD, MASK, Span, _value_span

# -- URL query parameters and connection strings -----------------------------------------------

# `?api_key=X`, `&access_token=X`, `&sig=X` (an Azure SAS), in output and in code alike.
_QUERY = re.compile(r"[?&;](?P<name>[A-Za-z_][\w.\-]{0,100})=(?P<value>[^&#\s'\"<>;\\]{1,4096})")
# ODBC/ADO/Azure connection strings: `Server=…;Uid=sa;Pwd=X;`. `PWD` alone is the working
# directory, so `Pwd=` counts only inside such a string (a `;` before or after it).
_CONN_PWD = re.compile(
    r"(?i)(?:(?<=;)[ \t]*pwd|(?<![\w.\-/$])pwd(?=[ \t]*=[^;\s'\"]{1,4096};))"
    r"[ \t]*=[ \t]*(?P<value>[^;\s'\"]{1,4096})"
)


def query_values(text: str) -> Iterator[Span]:
    for m in _QUERY.finditer(text):
        if is_secret_key(m.group("name")) and not m.group("value").startswith(MASK):
            yield m.span("value")


def connection_passwords(text: str) -> Iterator[Span]:
    for m in _CONN_PWD.finditer(text):
        if not m.group("value").startswith(MASK):
            yield m.span("value")


# -- password options of known tools -------------------------------------------------------------

_OPTION_VALUE = rf"(?P<value>(?![\s\-])(?:{_QUOTED}|{_WORD}))"
# The tool, and its option that takes a password (glued or not: `-pX`, `-p X`, `-w=X`).
_TOOL_OPTIONS: tuple[tuple[str, str], ...] = (
    (r"redis-cli", r"-a|--pass|--askpass-value"),
    (r"keytool", r"-(?:src|dest|new)?(?:storepass|keypass)"),
    (r"ldap(?:search|modify|add|delete|whoami|passwd|compare|modrdn)", r"-w"),
    (r"unzip|zip|zipcloak", r"-P"),
    (r"7z|7za|7zr", r"-p"),
    (r"sqlcmd|bcp|mosquitto_(?:pub|sub|rr)", r"-P"),
    (r"mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport", r"-p"),
    (r"az[ \t]+login", r"-p"),
    (r"ssh-keygen", r"-N|-P"),
    (r"openssl", r"-k|-kfile-never"),
    (r"smbclient", r"-U[ \t]*[^\s%]{1,128}%"),
    (r"lftp", r"-u[ \t]*[^\s,]{1,128},"),
    (r"rabbitmqctl[ \t]+(?:add_user|change_password|authenticate_user)[ \t]+\S{1,128}", r""),
    (r"htpasswd[ \t]+(?:-\w+[ \t]+)*\S{1,512}[ \t]+\S{1,128}", r""),
    (r"vault[ \t]+login", r""),
)
_TOOL_RULES = tuple(
    (
        # (a diff's removed line starts with `-`: `-redis-cli -a X` is the tool too)
        re.compile(rf"(?:(?<![\w.\-/])|(?<=^-)|(?<=\n-))(?:{tool})\b(?P<args>[^\n;&|]{{0,2000}})"),
        re.compile(
            rf"(?<![\w\-])(?:{option})[ \t]*=?[ \t]*{_OPTION_VALUE}"
            if option
            else rf"^[ \t]+{_OPTION_VALUE}"
        ),
    )
    for tool, option in _TOOL_OPTIONS
)
# openssl's password sources: `-passin pass:X`, `-passout pass:X`, `-password pass:X`.
_PASS_SOURCE = re.compile(r"(?<![\w\-:])pass:(?P<value>[^\s'\"]{1,4096})")
_TOOL_NEEDLES = (
    "redis-cli", "keytool", "ldap", "zip", "7z", "sqlcmd", "bcp", "mosquitto", "mongo",
    "az ", "ssh-keygen", "openssl", "smbclient", "lftp", "rabbitmqctl", "htpasswd", "vault",
)  # fmt: skip


def tool_passwords(text: str) -> Iterator[Span]:
    for tool, option in _TOOL_RULES:
        for segment in tool.finditer(text):
            args, at = segment.group("args"), segment.start("args")
            for m in option.finditer(args):
                value = m.group("value")
                span = _value_span(at + m.start("value"), value)
                if span is not None and not value.startswith(MASK):
                    yield span


def pass_sources(text: str) -> Iterator[Span]:
    for m in _PASS_SOURCE.finditer(text):
        value = m.group("value")
        if not value.startswith(MASK) and not value.replace(".", "").isdigit():
            yield m.span("value")


# -- code: an argument after a secret's name --------------------------------------------------

# `["--password", "X"]`, `os.environ.get("API_KEY", "X")`, `getenv('TOKEN', 'X')`,
# `config.get("secret", "X")`: a string naming a secret, a comma, then the literal.
_ARG_AFTER_NAME = re.compile(
    r"(?<![\w])[rbfuRBFU]{0,2}[\"'](?P<name>-{0,2}[A-Za-z_][\w.\-]{0,100})[\"']"
    r"[ \t]*,[ \t]*(?P<value>[rbfuRBFU]{0,2}(?:" + _QUOTED + "))"
)


def arguments_after_names(text: str) -> Iterator[Span]:
    for m in _ARG_AFTER_NAME.finditer(text):
        value = m.group("value")
        if not is_secret_key(m.group("name")) or value.strip("'\"").startswith(MASK):
            continue
        if (span := _value_span(m.start("value"), value)) is not None:
            yield span


# -- a credential-like word next to a secret's name --------------------------------------------

# The names that may stand before a secret in prose or as a positional argument: one word
# that `is_secret_key` calls secret (`aws_secret_access_key`, `AUTH`, `token`), or two words
# of prose (`api key`, `access token`, `client secret`). Found from the few letters every
# such name holds, then widened to its word: one cheap scan of the text.
# Found from the few letters every such name holds, in the lowered text (a case-blind regex
# is many times slower in Python), then widened to the word around them.
_LEXEME = re.compile(r"pass|pwd|secret|token|key|auth|credential|bearer|cookie")
_NAME_CHARS = re.compile(r"[\w.\-]{0,60}")
_WORD_CHARS = frozenset("_.-")
NEAR_NEEDLES = ("pass", "pwd", "secret", "token", "key", "auth", "credential", "bearer", "cookie")
_PHRASE_NOUNS = frozenset({"key", "token", "secret", "password"})
_PHRASE_FIRST = frozenset(
    {"api", "access", "secret", "private", "auth", "client", "refresh", "session", "bearer"}
    | {"bot", "deploy", "personal", "service", "signing", "master", "admin"}
)
_WORD_BEFORE = re.compile(r"([A-Za-z]{2,20})[ \t]+\Z")


def _names_near_values(text: str) -> Iterator[int]:
    """Where each name of a secret in `text` ends."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a few non-ASCII letters lower to two characters
        lowered = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    done = 0
    for m in _LEXEME.finditer(lowered):
        if m.start() < done:
            continue  # inside the word just looked at
        start, floor = m.start(), max(m.start() - 60, 0)
        while start > floor and (text[start - 1].isalnum() or text[start - 1] in _WORD_CHARS):
            start -= 1
        end = _NAME_CHARS.match(text, m.end()).end()  # type: ignore[union-attr]  # may be empty
        done = end
        if (start and text[start - 1] in "/\\") or (end < len(text) and text[end] in "/\\"):
            continue  # a part of a path
        word = text[start:end]
        if word.lower() in _PHRASE_NOUNS:
            before = _WORD_BEFORE.search(text, max(start - 24, 0), start)
            if before is not None and before.group(1).lower() in _PHRASE_FIRST:
                yield end
                continue
        if is_secret_key(word):
            yield end


# What stands between a name and its value: separators, and words of prose that are not it.
_TOKEN = re.compile(r"[ \t&;,|]*(?P<word>[^\s&;,|]{1,512})")  # no credential is longer
_WORDS_AFTER = 4  # a value further from its name than this is not said to be its value
_QUOTES = "\"'`([{<"
_CLOSERS = ".,:;!?)]}>\"'`"
_PATHISH = re.compile(r"^(?:[/~.]|[a-z][a-z0-9+.\-]*://)|\.[A-Za-z]{1,5}$")


@lru_cache(maxsize=4096)
def looks_like_credential(word: str) -> bool:
    """A word of credential length and entropy: long, mixing letters with digits or cases,
    no path, no URL, no number (a step line never loses its numbers to this rule)."""
    if len(word) < 12 or MASK in word or _PATHISH.search(word) or "=" in word.rstrip("="):
        return False  # short, masked, a path or a URL, an assignment of its own
    lower = sum(c.islower() for c in word)
    upper = sum(c.isupper() for c in word)
    digits = sum(c.isdigit() for c in word)
    letters = lower + upper
    if letters == 0 or digits + letters < len(word) * 0.7:
        return False  # a number, a date, a quantity with units, a row of punctuation
    if not digits and not (lower and upper and len(word) >= 16):
        return False  # a plain word, an identifier in one case
    counts: dict[str, int] = {}
    for c in word:
        counts[c] = counts.get(c, 0) + 1
    entropy = -sum(n / len(word) * math.log2(n / len(word)) for n in counts.values())
    return entropy >= 3.0


def credentials_near_names(text: str) -> Iterator[Span]:
    """A credential-like word among the few words after a secret's name (newlines end it)."""
    for pos in _names_near_values(text):
        for _ in range(_WORDS_AFTER):
            found = _TOKEN.match(text, pos)
            if found is None:
                break
            pos = found.end()
            raw = found.group("word")
            lead = len(raw) - len(raw.lstrip(_QUOTES + "=:"))
            value = raw[lead:].rstrip(_CLOSERS)
            if looks_like_credential(value):
                start = found.start("word") + lead
                yield start, start + len(value)
                break
