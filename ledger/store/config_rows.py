"""What a run ran with, into run_config: one value per (run, source, key).

Who told decides which value stands when a key is told again (`Keep`): the hook keeps the
first (what the run started with), a log, an import and the API keep the last. The rows go
through the store's gate (values redacted, masked whole when the key names a secret).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, cast

from sqlalchemy import Connection, Table
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.store import gate

_CONFIG = cast(Table, m.RunConfig.__table__)
KEY_CHARS = 500  # a longer key is cut: a key is a name, not a value


class Keep(StrEnum):
    """Which value of a key stands when it is told again."""

    FIRST = "first"
    LAST = "last"


def write_config(
    db: Session | Connection,
    run_id: int,
    source: str,
    items: Mapping[str, Any] | Iterable[tuple[str, Any]],
    *,
    keep: Keep = Keep.LAST,
) -> int:
    """Store `items` (key, value) for `run_id` as told by `source`; the keys told. Within
    `items`, too, a key told twice keeps its first or its last value, as `keep` says."""
    pairs = items.items() if isinstance(items, Mapping) else items
    chosen: dict[str, str] = {}
    for key, value in pairs:
        name = _text(key)[:KEY_CHARS]
        if keep is Keep.LAST or name not in chosen:
            chosen[name] = _text(value)
    if not chosen:
        return 0
    rows = [
        gate.clean_values("run_config", {"run_id": run_id, "source": source, "key": k, "value": v})
        for k, v in chosen.items()
    ]
    # A Session's execute flushes first: the run row it may just have made is there.
    db.execute(_upsert(db, keep), rows)
    return len(chosen)


def _upsert(db: Session | Connection, keep: Keep) -> Any:
    name = db.get_bind().dialect.name if isinstance(db, Session) else db.dialect.name
    if name == "postgresql":
        from sqlalchemy.dialects import postgresql

        statement: Any = postgresql.insert(_CONFIG)
    else:
        from sqlalchemy.dialects import sqlite

        statement = sqlite.insert(_CONFIG)
    if keep is Keep.FIRST:
        return statement.on_conflict_do_nothing()
    return statement.on_conflict_do_update(
        index_elements=[_CONFIG.c.run_id, _CONFIG.c.source, _CONFIG.c.key],
        set_={"value": statement.excluded.value},
    )


def _text(value: Any) -> str:
    """Text both databases accept: a lone surrogate escaped, no NUL."""
    text = value if isinstance(value, str) else str(value)
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
