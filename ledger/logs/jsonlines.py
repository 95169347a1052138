"""JSON lines whose numbers are strings: `{"step": "10", "loss": "2.31", "lr": "3e-4"}`.

JSON lines with plain numbers are read by the key/value reader like any other step line
(and fast, by a learned template); this stage reads the objects it could not: numbers
quoted as strings, nested objects (`{"train": {"loss": …}}` → `train/loss`), keys with
spaces. It turns the object into `key=value` pairs for the same reader, so the key
vocabulary is one.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_CHARS = 1 << 16
_NUMERIC = re.compile(
    r"[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?[kKMGT%]?|nan|inf|-inf", re.I
)
_KEY = re.compile(r"[^\w./\-]+")


def looks_like_json(body: str) -> bool:
    text = body.strip()
    return len(text) < MAX_CHARS and text[:1] == "{" and text[-1:] == "}" and '"' in text


def as_pairs(body: str) -> str | None:
    """`key=value | key=value` for the numbers of a JSON object, else None."""
    try:
        data = json.loads(body.strip())
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    pairs: list[str] = []
    _flatten(data, "", pairs, 0)
    return " | ".join(pairs) if pairs else None


def _flatten(data: dict[str, Any], head: str, out: list[str], depth: int) -> None:
    for key, value in data.items():
        name = _KEY.sub("_", f"{head}{key}").strip("_")
        if not name or (not name[0].isalpha() and name[0] != "_"):
            continue
        if isinstance(value, dict) and depth < 3:
            _flatten(value, f"{name}/", out, depth + 1)
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int | float):
            out.append(f"{name}={value!r}")
        elif isinstance(value, str) and _NUMERIC.fullmatch(value.strip()):
            out.append(f"{name}={value.strip()}")
