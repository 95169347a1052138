"""Values and the names before them: what of `name=value`, `name: value`, `"name": "value"`,
`--name value` and a password option of a known tool is masked."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from ledger.redact.names import is_secret_key

MASK = "***"
Span = tuple[int, int]  # [start, end) of text to mask


# ---------------------------------------------------------------------------------------------
# Values.

_QUOTED = (
    r"\\\"(?:[^\"\\\n]|\\[^\"\n]){0,4096}\\\""  # \"…\" inside an escaped JSON string
    r"|\"(?:[^\"\\\n]|\\.){0,4096}\""
    r"|'(?:[^'\\\n]|\\.){0,4096}'"
)
# An unquoted value runs to the end of its shell word, quoted parts included: a name's value can
# hold another name and its quoted value (`x=AWS_SECRET_ACCESS_KEY="…"`).
_WORD = r"[^\s'\"&|;<>`](?:[^\s'\"&|;<>`]|\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}'){0,4096}"
_VALUE = re.compile(
    rf"{_QUOTED}"
    r"|\\?[\"'][^\s\"']{0,4096}"  # a quote that does not close on its line: up to a space
    rf"|{_WORD}"
)
_FLAG_VALUE = re.compile(rf"{_QUOTED}|(?!-){_WORD}")
_CODE_LITERAL = re.compile(rf"[rbfuRBFU]{{0,2}}(?:{_QUOTED})")


_BARE = re.compile(r"[^\s'\"&|;<>`]+")
_STRING_PREFIX = re.compile(r"[rbfuRBFU]{1,2}(?=\\?[\"'])")


def _value_span(start: int, value: str) -> Span | None:
    """What of a value at `start` to mask: inside its quotes (so a command still reads as the
    same words), short of the punctuation that closes the text around it (`f(key=abc)`)."""
    if prefix := _STRING_PREFIX.match(value):
        start, value = start + prefix.end(), value[prefix.end() :]
    for quote in ('\\"', "\\'", '"', "'"):
        if value.startswith(quote):
            q = len(quote)
            closed = len(value) >= 2 * q and value.endswith(quote)
            begin, end = start + q, start + len(value) - (q if closed else 0)
            return (begin, end) if end > begin else None
    end = start + len(value.rstrip(")]},. \t"))
    return (start, end) if end > start else None


# ---------------------------------------------------------------------------------------------
# Named values: `name=value`, `name: value`, `"name": "value"`, `--name value`.

_NAME = r"(?<![\w.\-])(?P<name>-{0,2}[A-Za-z_][\w.\-]{0,100})"
# A subscript's bracket may close the name (`os.environ["HF_TOKEN"] = …`), and the separator may
# cross a shell quote boundary: shlex.join(['{"api_key":', '"abc"}']) gives
# '{"api_key":' '"abc"}'.
_KEYED = re.compile(
    _NAME + r"(?P<close>\\?[\"']?\]?)(?P<sep>[ \t]*[=:](?:[ \t]+|'[ \t]+'|\"[ \t]+\"){0,4})"
)
_FLAGGED = re.compile(r"(?<![\w.\-])(?P<name>--?[A-Za-z][\w.\-]{0,100})(?P<sep>[ \t]+)")
_CODE_KEYED = re.compile(
    _NAME + r"(?P<close>\\?[\"']?\]?)"
    r"(?P<sep>[ \t]*(?::[ \t]*[A-Za-z_][\w.\[\], |]{0,60}=|[=:])"
    r"(?:[ \t]+|'[ \t]+'|\"[ \t]+\"){0,4})(?=[rbfuRBFU]{0,2}\\?[\"'])"
)
# A diff's removed line starts with `-`: `-HF_TOKEN=old` is a name too.
_ENV_KEYED = re.compile(r"(?<![\w.\-])(?P<name>-?[A-Z][A-Z0-9_]{0,100})(?P<close>)(?P<sep>=)")


# An option spelled with a bare word that elsewhere is no secret (`pass=3` is a test count,
# `PWD` the working directory): as an option (`--pass X`, `-pwd X`) it is a password.
_OPTION_WORDS = frozenset({"pass", "pwd", "pw", "passwd"})


def is_secret_option(name: str) -> bool:
    return is_secret_key(name) or name.lstrip("-").lower() in _OPTION_WORDS


def _named(
    names: re.Pattern[str], values: re.Pattern[str], *, option: bool = False
) -> Callable[[str], Iterator[Span]]:
    """The values after each secret name that `names` finds (`option`: the names are
    command-line options, where `--pass` names a password too)."""
    secret = is_secret_option if option else is_secret_key

    def spans(text: str) -> Iterator[Span]:
        pos = 0
        while (m := names.search(text, pos)) is not None:
            pos = m.end()  # a name that is not secret: its value may hold one (`--env=HF_TOKEN=x`)
            if not secret(m.group("name")):
                continue
            v = values.match(text, pos)
            if v is None:
                continue
            if v.group().startswith(MASK):
                # Redacted before: only what was joined to its mask since (`***rest`) is new.
                bare = _BARE.match(text, v.start())
                # short of the punctuation that closes the text around it, as a value is
                end = v.start() + len(bare.group().rstrip(")]},.")) if bare is not None else 0
                if end > v.start() + len(MASK):
                    yield v.start(), end
                pos = v.start() + len(MASK)
                continue
            if (span := _value_span(v.start(), v.group())) is not None:
                yield span
                pos = v.end()

    return spans


_TOOL = (
    r"(?<![\w.])(?<![^\n]-)(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump|sshpass|curl|wget"
    r"|(?:docker|podman|helm)[ \t]+(?:registry[ \t]+)?login|wandb[ \t]+login)\b"
)
_TOOL_SEGMENT = re.compile(rf"(?P<tool>{_TOOL})(?P<args>(?:(?!{_TOOL})[^\n;&|]){{0,2000}})")
# mysql -pX, mysql -p X, sshpass -p X, docker login -p X.
_P_OPTION = re.compile(
    r"(?P<name>(?<![\w\-])-p)(?P<sep>[ \t]*)"
    r"(?P<value>(?![\s\-])(?:" + _QUOTED + "|" + _WORD + "))"
)
# curl -u user:pass, wget --user=user:pass.
_USER_OPTION = re.compile(
    r"(?P<name>(?<![\w\-])(?:-u|--user|--proxy-user)[ \t=]*[\"']?[^\s:'\"]{0,128}:)(?P<sep>)"
    r"(?P<value>[^\s'\"]{1,4096})"
)
# wandb login [options] KEY: every word that is not an option.
_POSITIONAL = re.compile(r"(?<!\S)(?!-)\S+")


def _values(
    pattern: re.Pattern[str], group: str | int = "value"
) -> Callable[[str], Iterator[Span]]:
    def spans(text: str) -> Iterator[Span]:
        for m in pattern.finditer(text):
            if group == 0:
                yield m.span()
            elif (span := _value_span(m.start(group), m.group(group))) is not None:
                yield span

    return spans


def _tool_options(text: str) -> Iterator[Span]:
    for segment in _TOOL_SEGMENT.finditer(text):
        tool, args, at = segment.group("tool"), segment.group("args"), segment.start("args")
        if tool.startswith("wandb"):
            inner = _values(_POSITIONAL, 0)
        elif tool in ("curl", "wget"):
            inner = _values(_USER_OPTION)
        else:
            inner = _values(_P_OPTION)
        for begin, end in inner(args):
            yield at + begin, at + end
