"""Finding and creating the rows every aggregate starts from: the investigation, a run, a
hypothesis. Functions of an open session; each raises NotFoundError with "did you mean"
suggestions when a name the caller gave does not exist."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.orm import Session

from ledger.config import DEFAULT_INVESTIGATION
from ledger.db import models as m
from ledger.db.types import utcnow
from ledger.errors import NotFoundError, UsageError
from ledger.model.terms import Fate
from ledger.store import gate

NO_INVESTIGATION = -1  # the id a read uses for an investigation not created yet: no rows match


def investigation_row(session: Session, name: str) -> m.Investigation:
    """The investigation called `name`, created when it does not exist (write sessions)."""
    row = session.scalar(select(m.Investigation).where(m.Investigation.name == name))
    if row is None:
        insert_if_missing(session, m.Investigation, name=name)
        row = session.scalars(select(m.Investigation).where(m.Investigation.name == name)).one()
    return row


def investigation_id(session: Session, name: str) -> int:
    """The investigation's id; NO_INVESTIGATION when it does not exist (reads see no rows).

    A Core query (the table, not the mapped class): a read that needs only ids then
    never pays for configuring the ORM's mappers, a third of a small read's time."""
    table = m.Investigation.__table__
    found = session.scalar(select(table.c.id).where(table.c.name == name))
    if found is not None:
        return int(found)
    if name != DEFAULT_INVESTIGATION:
        # A named investigation that does not exist is a typo to read from, not an empty
        # one: "no runs yet" would hide it. (Writing to it starts it.)
        names = session.scalars(select(table.c.name).order_by(table.c.id)).all()
        raise NotFoundError("investigation", name, list(names))
    return NO_INVESTIGATION


def run_id(session: Session, inv: int, name: str) -> int:
    """The id of the run called `name` (a Core query, as above), or NotFoundError."""
    table = m.Run.__table__
    found = session.scalar(
        select(table.c.id).where(table.c.investigation_id == inv, table.c.name == name)
    )
    if found is None:
        raise NotFoundError("run", name, run_names(session, inv))
    return int(found)


def find_run(session: Session, inv: int, name: str) -> m.Run | None:
    return session.scalar(select(m.Run).where(m.Run.investigation_id == inv, m.Run.name == name))


def run_names(session: Session, inv: int) -> list[str]:
    query = select(m.Run.name).where(m.Run.investigation_id == inv).order_by(m.Run.id)
    return list(session.scalars(query).all())


def run_row(session: Session, inv: int, name: str, hint: str | None = None) -> m.Run:
    """The run called `name`, or NotFoundError naming the closest known runs (and `hint`:
    how to make it, where the command can)."""
    row = find_run(session, inv, name)
    if row is None:
        raise NotFoundError("run", name, run_names(session, inv), hint)
    return row


# deploy and probe may name a run before its log exists (the baseline relaunch): say how.
NEW_RUN_HINT = "--new records it as a new run"


def check_run_name(name: str) -> str:
    """A name a new run may take: not empty or blank, no control character (a newline, an
    ESC sequence that would repaint a terminal). Every run is made by ensure_run, so this
    is the one check."""
    if not isinstance(name, str) or not name.strip():
        raise UsageError("a run needs a name (e.g. eager_dynamiccopy), not an empty or blank one")
    bad = next((c for c in name if _is_control(c)), None)
    if bad is not None:
        raise UsageError(f"a run name holds no control characters; {name!r} has {bad!r} in it")
    return name


def _is_control(char: str) -> bool:
    import unicodedata

    return unicodedata.category(char) in ("Cc", "Zl", "Zp")


def ensure_run(session: Session, inv: int, name: str) -> tuple[m.Run, bool]:
    """The run called `name`, created (fate unknown) when new; True when this call made it.
    The name is checked first, even for a run that exists: one stored before names were
    checked can still be read (run_row), not written to under that name."""
    check_run_name(name)
    row = find_run(session, inv, name)
    if row is not None:
        return row, False
    created = insert_if_missing(session, m.Run, investigation_id=inv, name=name)
    query = select(m.Run).where(m.Run.investigation_id == inv, m.Run.name == name)
    row = session.scalars(query).one()
    if created:  # every run has its launch 1 (ledger.store.launches)
        session.add(m.Launch(run_id=row.id, number=1, fate=row.fate or Fate.UNKNOWN,
                             started_at=utcnow()))  # fmt: skip
        session.flush()
    return row, created


def hypothesis_row(session: Session, inv: int, hypothesis_id: int) -> m.Hypothesis:
    row = session.scalar(
        select(m.Hypothesis).where(
            m.Hypothesis.investigation_id == inv, m.Hypothesis.id == hypothesis_id
        )
    )
    if row is None:
        known = session.scalars(
            select(m.Hypothesis.id).where(m.Hypothesis.investigation_id == inv)
        ).all()
        raise NotFoundError("hypothesis", hypothesis_id, known)
    return row


def count(session: Session, model: type[m.Base], *where: ColumnElement[bool]) -> int:
    return int(session.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def insert_if_missing(session: Session, model: type[m.Base], **values: Any) -> bool:
    """INSERT … ON CONFLICT DO NOTHING; True when this call inserted the row.

    Two processes creating the same run (eight ranks of one launch) both succeed, where
    select-then-insert would fail one of them on PostgreSQL (SQLite's BEGIN IMMEDIATE
    already serialises writers).
    """
    key = sa_inspect(model).primary_key
    values = gate.clean_values(str(model.__tablename__), values)
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        statement = pg_insert(model).values(**values).on_conflict_do_nothing().returning(*key)
    else:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        statement = sqlite_insert(model).values(**values).on_conflict_do_nothing().returning(*key)
    # A row comes back only when this call inserted it (rowcount is -1 with RETURNING).
    return session.execute(statement).first() is not None
