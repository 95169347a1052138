"""User text made safe to show on one line: no control characters that reorder or hide
what is written, cut in the middle or at a word. The store cuts a probe's conclusion with
it, the report and the command line what they show (ledger.report.text adds what figures
need)."""

from __future__ import annotations

import unicodedata

# Kept although they are format characters: joiners that scripts and emoji need.
_JOINERS = frozenset("\u200c\u200d")
ELLIPSIS = "…"


def clean(text: object) -> str:
    """`text` without control or format characters (bidi overrides and isolates, zero-width
    marks, terminal escapes); tabs and newlines stay, line separators become newlines."""
    value = "" if text is None else str(text)
    if value.isprintable():  # the common case: nothing to take out
        return value
    return "".join(_kept(ch) for ch in value)


def _kept(ch: str) -> str:
    if ch.isprintable() or ch in "\t\n" or ch in _JOINERS:
        return ch
    category = unicodedata.category(ch)
    if category in ("Zl", "Zp"):
        return "\n"
    if category == "Zs":  # no-break and other spaces are spaces
        return " "
    if category in ("Co", "Cn"):  # private use and not yet assigned: shown as they are
        return ch
    if category == "Cs":  # a lone surrogate cannot be written as UTF-8
        return "\ufffd"
    return ""  # Cc and Cf: controls, bidi embeddings/overrides/isolates/marks, zero-width


def shorten(text: str, limit: int) -> str:
    """`text` cut in the middle to at most `limit` characters, keeping its start and end."""
    if len(text) <= limit:
        return text
    head = (limit - 1) * 3 // 5
    tail = limit - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def one_line(text: object) -> str:
    """Clean text on one line (figures have no room for a newline inside a label)."""
    return " ".join(clean(text).split())


def cut_words(text: str, limit: int) -> str:
    """`text` (on one line) cut to at most `limit` characters at a word boundary, with an
    ellipsis; a first word longer than the limit is cut inside it (nothing else to do)."""
    value = one_line(text)
    if len(value) <= limit:
        return value
    room = max(limit - 1, 1)
    head = value[:room]
    space = head.rfind(" ")
    if space >= room // 2:
        head = head[:space]
    return head.rstrip(" ,;:.-") + ELLIPSIS
