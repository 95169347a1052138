"""Keep secrets out of the ledger.

`redact` masks secrets in commands and command output before they are stored: values whose
name says they are secret (`HF_TOKEN=…`, `--password x`, `"api_key": "…"`, `{'hf_token': …}`;
`is_secret_key` decides), `Authorization:` and `Cookie:` headers, URL passwords, netrc
passwords, `mysql -pX` / `sshpass -p X`, PEM private key blocks, and strings shaped like
well-known credentials (hf_…, sk-…, ghp_…, AKIA…, xoxb-…, JWTs, webhook URLs).

`redact_code` is for diffs and source, where `sort(key=…)` and `token = next_token(…)` must
survive: a secret name loses only a string literal or an `UPPER_CASE=value` assignment; the
files of a diff that are not code (YAML, .env, shell, JSON) get `redact`.

`redact_and_cut` redacts the whole text and only then keeps its first or last bytes, so a
secret whose name falls before the cut cannot leave its value after it.

Every pattern is anchored on a literal or a word start and bounded, so the cost is linear in
the text: command output can hold a 64 KiB "word".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Literal

MASK = "***"
Span = tuple[int, int]  # [start, end) of text to mask


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# ---------------------------------------------------------------------------------------------
# Which names are secret.
#
# A name is split into lower-case words (`WANDB_API_KEY`, `apiKey`, `--hf-token`, `db.pass`).
# Strong nouns are secret wherever they stand, unless a word after them says the value is
# about the secret rather than the secret itself (`password_min_length`, `secret_name`).
# Weak nouns are secret only as the last word, and not after a qualifier that makes them
# ordinary (`pad_token`, `sort_key`, `forward_pass`); plurals never are (`max_tokens`).
_STRONG = _set(
    "password passwd passphrase secret credential credentials cookie authorization "
    "apikey dsn webhook jwt bearer sessionid secrets passwords"
)
_WEAK = _set("token key pass pwd auth sig signature")
_ABOUT = _set(
    "length len min max count num size file path dir name names hash hashed type kind env "
    "var prefix suffix policy rotation expiry expires expiration ttl age required enabled "
    "set present field prompt reset manager arn ref id mode strength changed updated label "
    "hint format stdin rate"
)
_ORDINARY_QUALIFIERS: dict[str, frozenset[str]] = {
    "token": _set(
        "pad eos bos unk mask sep cls start end stop special image img vision audio video "
        "eot eom fim think begin next prev last first new input output target padding sample "
        "predicted generated vocab bpe text word sub subword split boundary placeholder tool "
        "system user assistant turn per max min num total avg mean decoder encoder"
    ),
    "key": _set(
        "sort primary foreign cache dict group partition shard sharding seq sequence lookup "
        "index hash row column col map metric task batch input output attn attention query kv "
        "join unique composite random rng prng seed split data label feature cluster routing "
        "config state param module layer name dataset sample image text audio video tensor "
        "checkpoint ckpt prefix object log event entry table field record first last next prev "
        "lock idempotency dedup match filter by dim hot monkey public"
    ),
    "pass": _set(
        "forward fwd backward bwd first second third final multi single one two by compile "
        "graph skip no num each per train eval val test bypass"
    ),
    "pwd": frozenset(["old"]),
    "auth": _set("no use require required enable enabled disable disabled skip"),
    "sig": frozenset(),
    "signature": _set("function method type call fn func input output"),
}
# Words after a secret noun that keep it secret (`HF_TOKEN_PROD`, `api_key_2`, `token_value`).
_KEEPS_SECRET = _set(
    "prod production dev staging stage test ci ro rw read write readonly old new backup "
    "primary secondary main default local remote value val raw plain b64 base64 hex enc "
    "encrypted"
)
# Single words that end in a noun (`PGPASSWORD`, `hftoken`, `accesskey`).
_ENDS_SECRET = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "credential",
    "credentials",
    "token",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "authkey",
    "signingkey",
    "masterkey",
    "sessionid",
    "cookie",
)
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


@lru_cache(maxsize=4096)
def is_secret_key(name: str) -> bool:
    """Whether a key (a metric or config name, an option, a variable) names a secret."""
    words = [w.lower() for part in re.split(r"[^A-Za-z0-9]+", name) for w in _WORDS.findall(part)]
    while words and (words[-1].isdigit() or words[-1] in _KEEPS_SECRET):
        words.pop()
    if not words:
        return False
    last, before = words[-1], words[-2] if len(words) > 1 else ""
    if last == "id" and before == "key":  # AWS_ACCESS_KEY_ID, private_key_id
        words.pop()
        last, before = "key", words[-2] if len(words) > 1 else ""
    if any(w in _STRONG for w in words):
        for i, word in enumerate(words):
            if word in _STRONG and (i + 1 == len(words) or words[i + 1] not in _ABOUT):
                return True
    if last in _WEAK:
        if last in ("key", "pwd", "pass") and not before:
            # a bare `key` is a dict key, PWD the working directory, `pass=3` a test count
            return False
        return before not in _ORDINARY_QUALIFIERS[last]
    return len(words) == 1 and (
        any(last.endswith(n) for n in _ENDS_SECRET) or "password" in last or "passwd" in last
    )


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


def _named(names: re.Pattern[str], values: re.Pattern[str]) -> Callable[[str], Iterator[Span]]:
    """The values after each secret name that `names` finds."""

    def spans(text: str) -> Iterator[Span]:
        pos = 0
        while (m := names.search(text, pos)) is not None:
            pos = m.end()  # a name that is not secret: its value may hold one (`--env=HF_TOKEN=x`)
            if not is_secret_key(m.group("name")):
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


# ---------------------------------------------------------------------------------------------
# Shapes that say "secret" on their own.

_TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|sk-[A-Za-z0-9_\-]{20,}"  # OpenAI (sk-proj-…), Anthropic (sk-ant-…)
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}|glpat-[A-Za-z0-9_\-]{20,}"
    r"|xox[abposre]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|AIPA)[A-Z0-9]{16}(?![A-Z0-9])"  # AWS access key id
    r"|AIza[A-Za-z0-9_\-]{35}"  # Google API key
    r"|npm_[A-Za-z0-9]{36}|pypi-[A-Za-z0-9_\-]{40,}"
    r")"
)
_JWT = re.compile(
    r"(?<![A-Za-z0-9_])(?<![^\n]-)eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{2,}\.[A-Za-z0-9_\-]*"
)
_WEBHOOK = re.compile(
    r"(?P<head>hooks\.slack\.com/(?:services|workflows|triggers)/"
    r"|discord(?:app)?\.com/api/webhooks/)(?P<value>[A-Za-z0-9_/\-]+)"
)
_AUTH_HEADER = re.compile(
    r"(?<!\w)(?P<name>(?:proxy-)?authorization)(?P<sep>[ \t]*[:=][ \t]*)"
    r"(?P<value>(?:(?:bearer|basic|token|digest|negotiate)[ \t]+)?[^\s'\"]{1,8192})",
    re.IGNORECASE,
)
_BEARER = re.compile(
    r"(?<!\w)(?P<name>bearer)(?P<sep>[ \t]+)(?P<value>[\w.~+/=\-]{12,8192})", re.IGNORECASE
)
_COOKIE_HEADER = re.compile(
    r"(?<!\w)(?P<name>(?:set-)?cookie)(?P<sep>[ \t]*:[ \t]*)(?P<value>[^\r\n'\"]{1,8192})",
    re.IGNORECASE,
)
# (A `+` or `-` that starts a line is a diff's, not part of a word or a scheme.)
# The password runs to the last @ of the authority, so that a password holding one is masked
# whole: postgresql://admin:p@ss@db/x.
_URL_PASSWORD = re.compile(
    r"(?P<name>(?<![\w.])(?<![^\n][+\-])[a-z][a-z0-9+.\-]{0,30}://[^\s:/'\"]{0,256}:)(?P<sep>)"
    r"(?P<value>[^\s/'\"]{1,256})(?=@)",
    re.IGNORECASE,
)
# netrc: `machine h login u password X`, on one line or several (a diff's lines start with +/-).
_NETRC = re.compile(
    r"(?P<name>(?<!\w)(?:default\s+)?(?:(?:machine|login|account)\s+\S{1,512}\s+(?:[+\-]\s*)?){1,3}"
    r"(?:password|passwd))(?P<sep>\s+)(?P<value>\S{1,4096})"
)
# Commands whose options carry a password: the command, then its words up to the shell's next
# separator or the next such command (`sshpass -p X ssh h mysql -pY`); within them, the option.
# Matching the whole segment first keeps this linear.
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
_PEM_MARK = re.compile(r"-----(BEGIN|END) [A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)?-----")
# The text of a key block cut off from its BEGIN or its END is found word by word: base64 words
# that are long, padded (`…==`) or alone on their line, and `Proc-Type: …` header lines (a
# diff's lines start with +/-, a JSON string's lines end in an escaped \n). Any other word ends
# it, so that the words around a cut block are not masked with it.
_PEM_TOKEN = re.compile(r"\n|\\[nr]|[^\s\\]{1,8192}|\\")
_KEY_WORD = re.compile(r"[+\-]?(?:[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9+/]+={1,2})")
_KEY_LINE_WORD = re.compile(r"[+\-]?[A-Za-z0-9+/=]*")  # a diff line may be its prefix alone
_NEWLINES = ("\n", "\\n", "\\r")
_KEY_HEADER = re.compile(r"[+\-]?[A-Z][A-Za-z\-]{0,40}:")


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


def _private_keys(text: str) -> Iterator[Span]:
    """Private key blocks, and the parts of one that a cut left without BEGIN or END."""
    if "PRIVATE KEY" not in text:
        return
    pos = kept = 0
    while (mark := _PEM_MARK.search(text, pos)) is not None:
        if mark.group(1) == "BEGIN":
            end = _PEM_MARK.search(text, mark.end())
            if end is not None and end.group(1) == "END":
                span: Span | None = (mark.end(), end.start())
                pos = end.end()
            else:  # cut off before its END: the key words that follow
                span = _key_words(text, mark.end(), len(text), at_end=False)
                pos = span[1] if span else mark.end()
        else:  # an END whose BEGIN was cut off: the key words just before it
            span = _key_words(text, kept, mark.start(), at_end=True)
            pos = mark.end()
        kept = pos
        if span is not None:
            begin, stop = span
            # Keep the line breaks around the body, so that the block still reads as one.
            while begin < stop and text[begin].isspace():
                begin += 1
            while stop > begin and text[stop - 1].isspace():
                stop -= 1
            if stop > begin:
                yield begin, stop


def _key_words(text: str, lo: int, hi: int, *, at_end: bool) -> Span | None:
    """The run of key words that starts at `lo` (or ends at `hi`, `at_end`)."""
    if not at_end:
        return _key_words_after(text, lo, hi)
    run: list[Span] = []
    for line in reversed(list(_lines(text, lo, hi))):  # the text between two marks: once each
        words = list(zip(line, _key_flags(text, line), strict=True))
        for word, is_key in reversed(words):
            if not is_key:
                break
            run.append(word)
        else:
            continue
        break
    return (run[-1][0], run[0][1]) if run else None


def _key_words_after(text: str, lo: int, hi: int) -> Span | None:
    """As `_key_words`, reading only as far as the first word that is not key text."""
    run: Span | None = None
    first: Span = (lo, lo)  # a line's first word: judged once the line shows if it is alone
    on_line = 0
    header = False
    for token in _PEM_TOKEN.finditer(text, lo, hi):
        word = token.group()
        if word in _NEWLINES:
            if on_line == 1:
                if not _KEY_LINE_WORD.fullmatch(text, *first):
                    break
                run = _joined(run, first)
            on_line, header = 0, False
            continue
        on_line += 1
        if on_line == 1:
            first, header = token.span(), _KEY_HEADER.fullmatch(word) is not None
            continue
        if on_line == 2:
            if not (header or _KEY_WORD.fullmatch(text, *first)):
                break
            run = _joined(run, first)
        if not (header or _KEY_WORD.fullmatch(word)):
            break
        run = _joined(run, token.span())
    else:
        if on_line == 1 and _KEY_LINE_WORD.fullmatch(text, *first):
            run = _joined(run, first)
    return run


def _joined(run: Span | None, word: Span) -> Span:
    return (run[0] if run else word[0], word[1])


def _lines(text: str, lo: int, hi: int) -> Iterator[list[Span]]:
    line: list[Span] = []
    for token in _PEM_TOKEN.finditer(text, lo, hi):
        if token.group() in _NEWLINES:
            yield line
            line = []
        else:
            line.append(token.span())
    yield line


def _key_flags(text: str, line: list[Span]) -> list[bool]:
    words = [text[a:b] for a, b in line]
    if len(words) == 1:
        return [_KEY_LINE_WORD.fullmatch(words[0]) is not None]
    if words and _KEY_HEADER.fullmatch(words[0]):
        return [True] * len(words)
    return [_KEY_WORD.fullmatch(word) is not None for word in words]


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
    (_values(_JWT, 0), ("eyj",)),
)
_OUTPUT: tuple[_Pass, ...] = (
    *_SHAPES,
    (_values(_NETRC), ("password", "passwd")),
    (_tool_options, ("mysql", "mariadb", "sshpass", "curl", "wget", "login")),
    (_named(_KEYED, _VALUE), ("=", ":")),
    (_named(_FLAGGED, _FLAG_VALUE), ("-",)),
)
_SOURCE: tuple[_Pass, ...] = (
    *_SHAPES,
    (_named(_ENV_KEYED, _VALUE), ("=",)),
    (_named(_CODE_KEYED, _CODE_LITERAL), ("=", ":")),
)


def _redact(passes: tuple[_Pass, ...], text: str) -> str:
    lowered = text.lower()
    spans = sorted(
        span
        for find, needles in passes
        if any(n in lowered for n in needles)
        for span in find(text)
    )
    out: list[str] = []
    kept = 0
    for begin, end in spans:
        if out and begin <= kept:  # overlaps or touches the last mask: one mask for both
            kept = max(kept, end)
            continue
        out += [text[kept:begin], MASK]
        kept = end
    out.append(text[kept:])
    return "".join(out)


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
