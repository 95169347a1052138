"""Text a figure can draw: the report's fonts are the DejaVu faces matplotlib ships, and a
character none of them holds (a CJK ideograph, an emoji in a run name) is drawn as
MISSING rather than as an empty box with a warning on the terminal for every figure.
The HTML shows every name whole: only figures and PDF pages go through here."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

SANS = ["DejaVu Sans"]
MONO = ["DejaVu Sans Mono", "DejaVu Sans"]  # a letter the monospace face lacks: from Sans
MISSING = "□"  # a glyph DejaVu Sans holds


@lru_cache(maxsize=1)
def _faces() -> tuple[Any, ...]:
    from matplotlib import font_manager, ft2font

    faces = []
    for family in dict.fromkeys([*SANS, *MONO]):
        props = font_manager.FontProperties(family=family)
        faces.append(ft2font.FT2Font(font_manager.findfont(props, fallback_to_default=True)))
    return tuple(faces)


@lru_cache(maxsize=4096)
def covered(ch: str) -> bool:
    """True when one of the report's faces holds a glyph for `ch`."""
    if ch in "\n\t \ue000\ue001" or ch.isascii():
        return True
    return any(face.get_char_index(ord(ch)) for face in _faces())


def drawable(text: str) -> str:
    """`text` with each character no face holds replaced by MISSING."""
    if text.isascii():
        return text
    return "".join(ch if covered(ch) else MISSING for ch in text)


# Names and other ledger text are isolated from the sentence around them (Unicode's first
# strong isolate … pop directional isolate), so a right-to-left name neither turns the
# whole line right-to-left nor pulls the numbers beside it. The isolates are carried as
# private-use stand-ins through cleaning (which drops every bidi control a user could
# have typed) and made real by `isolated`, the last step before matplotlib.
OPEN, CLOSE = "\ue000", "\ue001"
_REAL = str.maketrans({OPEN: "\u2068", CLOSE: "\u2069"})


def isolate(text: str) -> str:
    """`text` marked to be drawn isolated from what surrounds it."""
    return f"{OPEN}{text}{CLOSE}"


def isolated(text: str) -> str:
    """`text` with its isolation marks made real (FSI … PDI)."""
    return text.translate(_REAL) if OPEN in text or CLOSE in text else text
