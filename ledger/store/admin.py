"""Creating a ledger and moving its schema: the calls behind `ledger init` and `ledger db`."""

from __future__ import annotations

import os

from ledger.config import locate
from ledger.db import schema
from ledger.db.engine import damaged, integrity_problem, make_engine, translate_errors
from ledger.errors import LedgerNotFoundError, SchemaOutdatedError, StorageError
from ledger.model import records


def init(
    db: str | os.PathLike[str] | None = None,
    *,
    baseline: float | None = None,
    unit: str | None = None,
    investigation: str | None = None,
) -> records.InitResult:
    """Create the ledger at head (or find the existing one) and set its baseline if given."""
    from ledger.store.compare import check_baseline
    from ledger.store.facade import Store

    check_baseline(baseline)  # before anything is created
    location = locate(db)
    existed = location.path.exists() if location.path is not None else None
    lg = Store.open(db, create=True, investigation=investigation, check=True)
    try:
        if existed is None:  # a server database: "created" means we just made the schema
            existed = not lg.created
        if baseline is not None:
            lg.set_baseline(baseline, unit)
        inv = lg.investigation()
    finally:
        lg.close()
    return records.InitResult(db=location.display(), created=not existed, investigation=inv)


def current(db: str | os.PathLike[str] | None = None) -> records.SchemaStatus:
    from ledger.store.opening import not_found

    location = locate(db)
    if location.path is not None and not location.path.exists():
        raise LedgerNotFoundError(not_found(location))
    engine = make_engine(location.url, read_only=True)
    try:
        with translate_errors(location.url):
            # A file whose pages were overwritten can still hold a readable alembic_version:
            # "up to date" must not be said of a ledger that cannot be read.
            problem = integrity_problem(engine)
            if problem is not None:
                raise StorageError(damaged(location.display(), problem))
            state = schema.state(engine)
    finally:
        engine.dispose()
    if state.is_current:
        kind = "current"
    elif state.revision is None:
        kind = "foreign" if state.has_tables else "empty"
    else:
        kind = "older" if state.revision in schema.REVISIONS else "newer"
    return records.SchemaStatus(
        location.display(), state.revision, schema.HEAD, state.is_current, kind
    )


def upgrade(db: str | os.PathLike[str] | None = None) -> records.SchemaUpgrade:
    """Upgrade the ledger's schema to this version's head."""
    before = current(db)
    location = locate(db)
    if before.revision is not None and before.revision not in schema.REVISIONS:
        raise SchemaOutdatedError(schema.newer(location.display(), before.revision))
    engine = make_engine(location.url)
    try:
        with translate_errors(location.url):
            problem = integrity_problem(engine)
            if problem is not None:
                raise StorageError(damaged(location.display(), problem))
            if before.revision is None and schema.state(engine).has_tables:
                schema.require_current(engine, location.display())  # explains "not a ledger"
            schema.upgrade(engine)
    finally:
        engine.dispose()
    after = current(db)
    return records.SchemaUpgrade(after.db, before.revision, after.revision)
