"""Ledger-wide settings: a name and a JSON value each (`log.patterns`: the user's own
step-line shapes, which ingest and probe use)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.errors import UsageError

PATTERNS = "log.patterns"


def get(session: Session, name: str, default: Any = None) -> Any:
    row = session.get(m.Setting, name)
    return json.loads(row.value) if row is not None else default


def put(session: Session, name: str, value: Any) -> None:
    row = session.get(m.Setting, name)
    if row is None:
        session.add(m.Setting(name=name, value=json.dumps(value)))
    else:
        row.value = json.dumps(value)


def patterns(session: Session) -> list[str]:
    return [str(p) for p in get(session, PATTERNS, [])]


def check_pattern(pattern: str) -> str:
    from ledger.logs.shapes import compile_patterns

    try:
        compile_patterns([pattern])
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    return pattern


def add_pattern(session: Session, pattern: str) -> list[str]:
    kept = patterns(session)
    if pattern not in kept:
        kept.append(pattern)
    put(session, PATTERNS, kept)
    return kept


def remove_pattern(session: Session, number: int) -> list[str]:
    kept = patterns(session)
    if not 1 <= number <= len(kept):
        raise UsageError(f"no pattern #{number}; there are {len(kept)}")
    kept.pop(number - 1)
    put(session, PATTERNS, kept)
    return kept
