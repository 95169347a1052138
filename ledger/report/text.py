"""User text made safe to show: no control characters that reorder or hide what is written,
no `$` that matplotlib would read as mathtext, and names short enough for a figure.

Run names, hypotheses, summaries and fate reasons come from people and from logs, so they
may hold anything: U+202E (which mirrors the rest of a line), zero-width characters,
terminal escapes, `$\\frac{1}{$`, or three thousand characters.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable

# Kept although they are format characters: joiners that scripts and emoji need.
_JOINERS = frozenset("\u200c\u200d")
ELLIPSIS = "…"
FIGURE_NAME_CHARS = 40  # a run name in a figure: a tick label, a title, a legend entry


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


def escape_math(text: str) -> str:
    """`$` escaped: matplotlib shows `\\$` as a dollar sign and parses no mathtext."""
    return text.replace("$", r"\$")


def mpl(text: object, limit: int | None = None) -> str:
    """Text for a matplotlib artist: clean, on one line, shortened, `$` escaped so it is
    never parsed as mathtext (matplotlib shows `\\$` as a plain dollar sign)."""
    from ledger.report.glyphs import drawable, isolated

    value = one_line(text)
    if limit is not None:
        value = shorten(value, limit)
    return isolated(escape_math(drawable(value)))


def short_names(names: Iterable[str], limit: int = FIGURE_NAME_CHARS) -> dict[str, str]:
    """A label for each name that fits in `limit` characters and tells the names apart.

    Names are cut in the middle; when two cut names would read the same, each of them
    ends with a few characters of a hash of the whole name. The labels are clean and on
    one line (`$` is left as it is: `mpl` escapes it for a figure).
    """
    unique = list(dict.fromkeys(names))
    cut = {name: shorten(one_line(name), limit) for name in unique}
    seen: dict[str, int] = {}
    for label in cut.values():
        seen[label] = seen.get(label, 0) + 1
    labels = {}
    for name in unique:
        label = cut[name]
        if seen[label] > 1:
            mark = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:6]
            label = shorten(one_line(name), max(limit - 8, 8)) + f" #{mark}"
        labels[name] = label
    return labels


def wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` characters, breaking at spaces where it can and
    anywhere inside a word longer than a line (a 3,000-character run name)."""
    import textwrap

    lines: list[str] = []
    for paragraph in clean(text).split("\n"):
        lines.extend(
            textwrap.wrap(paragraph, width, break_long_words=True, break_on_hyphens=False) or [""]
        )
    return lines


def wrap_words(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` characters broken at spaces only: a word longer
    than a line is shortened in its middle (`shorten`), never split across lines."""
    import textwrap

    words = [w if len(w) <= width else shorten(w, width) for w in clean(text).split()]
    return textwrap.wrap(" ".join(words), width, break_long_words=False) or [""]


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
