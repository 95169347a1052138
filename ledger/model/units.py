"""Throughput units: one unit spelled several ways is one unit.

Logs and trackers spell the same rate `tok/s`, `tokens/s`, `tokens/sec`, `tok/sec` or
`tokens_per_sec`; samples, iterations and words likewise. Units are compared by their
canonical form, and a run ingested or imported into an investigation takes the
investigation's spelling when the two are the same unit, so no compare warns that
`tokens/s` differs from `tok/s`.
"""

from __future__ import annotations

import re

# what each thing counted is called, and its canonical name
_COUNTED = {
    "tok": "tok", "toks": "tok", "token": "tok", "tokens": "tok",
    "sample": "samples", "samples": "samples", "sam": "samples", "seq": "samples",
    "seqs": "samples", "sequences": "samples",
    "it": "it", "its": "it", "iter": "it", "iters": "it", "iteration": "it", "iterations": "it",
    "step": "steps", "steps": "steps",
    "word": "words", "words": "words", "wps": "words",
    "img": "images", "imgs": "images", "image": "images", "images": "images",
}  # fmt: skip
_PER_SECOND = re.compile(r"^(?P<what>[a-z]+)\s*(?:/|_?per_?|\s+per\s+)\s*(?:s|sec|secs|second)$")


def canonical(unit: str | None) -> str | None:
    """The unit's canonical form ('tok/s' for 'tokens/sec'); other units as they are,
    lowercased and without spaces; None for none."""
    if unit is None or not unit.strip():
        return None
    text = " ".join(unit.strip().lower().split())
    if text in ("wps", "tps"):
        return "words/s" if text == "wps" else "tok/s"
    match = _PER_SECOND.match(text.replace(" / ", "/"))
    if match and match.group("what") in _COUNTED:
        return f"{_COUNTED[match.group('what')]}/s"
    return text.replace(" ", "")


def same_unit(a: str | None, b: str | None) -> bool:
    """True when `a` and `b` name the same unit however spelled (None matches only None)."""
    return canonical(a) == canonical(b)


def spelled_as(unit: str | None, house: str | None) -> str | None:
    """`unit` in the investigation's spelling `house` when they are the same unit."""
    if unit is not None and house is not None and same_unit(unit, house):
        return house
    return unit
