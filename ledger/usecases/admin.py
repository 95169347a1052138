"""Creating a ledger and moving its schema, as the command line asks for them (`ledger
init`, `ledger db current`, `ledger db upgrade`): calls of ledger.store.admin."""

from __future__ import annotations

import os

from ledger.model import records
from ledger.store import admin


def init(
    db: str | os.PathLike[str] | None = None,
    *,
    baseline: float | None = None,
    unit: str | None = None,
    investigation: str | None = None,
) -> records.InitResult:
    """Create the ledger at head (or find the existing one) and set its baseline if given."""
    return admin.init(db, baseline=baseline, unit=unit, investigation=investigation)


def current(db: str | os.PathLike[str] | None = None) -> records.SchemaStatus:
    """The ledger's schema revision, and how it stands against this version's."""
    return admin.current(db)


def upgrade(db: str | os.PathLike[str] | None = None) -> records.SchemaUpgrade:
    """Upgrade the ledger's schema to this version's, keeping every row."""
    return admin.upgrade(db)
