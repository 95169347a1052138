"""Private key blocks (PEM), whole or cut off from their BEGIN or END by a bounded tail."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ledger.redact.spans import Span

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
