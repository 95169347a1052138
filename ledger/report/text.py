"""User text made safe to show: no control characters that reorder or hide what is written,
no `$` that matplotlib would read as mathtext, and names short enough for a figure.

Run names, hypotheses, summaries and fate reasons come from people and from logs, so they
may hold anything: U+202E (which mirrors the rest of a line), zero-width characters,
terminal escapes, `$\\frac{1}{$`, or three thousand characters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from ledger.cleantext import clean as clean
from ledger.cleantext import cut_words as cut_words
from ledger.cleantext import one_line as one_line
from ledger.cleantext import shorten as shorten

FIGURE_NAME_CHARS = 40  # a run name in a figure: a tick label, a title, a legend entry


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
