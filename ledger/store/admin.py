"""Creating a ledger and moving its schema: the calls behind `ledger init` and `ledger db`."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ledger.config import locate
from ledger.db import schema
from ledger.db.engine import make_engine, translate_errors
from ledger.errors import LedgerNotFoundError
from ledger.model import records


@dataclass(frozen=True)
class SchemaStatus(records.Record):
    db: str
    revision: str | None
    head: str
    up_to_date: bool


@dataclass(frozen=True)
class InitResult(records.Record):
    db: str
    created: bool
    investigation: records.Investigation


def init(
    db: str | os.PathLike[str] | None = None,
    *,
    baseline: float | None = None,
    unit: str | None = None,
    investigation: str | None = None,
) -> InitResult:
    """Create the ledger at head (or find the existing one) and set its baseline if given."""
    from ledger.store import Ledger

    location = locate(db)
    existed = location.path.exists() if location.path is not None else None
    lg = Ledger.open(db, create=True, investigation=investigation)
    try:
        if existed is None:  # a server database: "created" means we just made the schema
            existed = not lg.created
        if baseline is not None:
            lg.set_baseline(baseline, unit)
        inv = lg.investigation()
    finally:
        lg.close()
    return InitResult(db=location.display(), created=not existed, investigation=inv)


def current(db: str | os.PathLike[str] | None = None) -> SchemaStatus:
    location = locate(db)
    if location.path is not None and not location.path.exists():
        raise LedgerNotFoundError(f"no ledger at {location.display()}; run `ledger init`")
    engine = make_engine(location.url)
    try:
        with translate_errors(location.url):
            state = schema.state(engine)
    finally:
        engine.dispose()
    return SchemaStatus(location.display(), state.revision, schema.HEAD, state.is_current)


def upgrade(db: str | os.PathLike[str] | None = None) -> tuple[SchemaStatus, SchemaStatus]:
    """Upgrade the ledger's schema to this version's head; returns (before, after)."""
    before = current(db)
    location = locate(db)
    engine = make_engine(location.url)
    try:
        with translate_errors(location.url):
            if before.revision is None and schema.state(engine).has_tables:
                schema.require_current(engine, location.display())  # explains "not a ledger"
            schema.upgrade(engine)
    finally:
        engine.dispose()
    return before, current(db)
