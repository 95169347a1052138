"""What every part of the store shares: the engine, the investigation, sessions, lookups."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from ledger.config import DEFAULT_INVESTIGATION, Location, locate
from ledger.db import models as m
from ledger.db import schema
from ledger.db.engine import make_engine, session_scope, translate_errors
from ledger.errors import LedgerNotFoundError, NotFoundError
from ledger.model import records
from ledger.proc import CommandResult
from ledger.redact import redact


class LedgerBase:
    """Holds the connection to one ledger and one investigation inside it."""

    def __init__(self, location: Location, engine: Engine, investigation: str) -> None:
        self.location = location
        self.engine = engine
        self.investigation_name = investigation
        self._investigation_id: int | None = None
        self.created = False  # True when this open made the schema

    # -- opening ---------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        db: str | os.PathLike[str] | None = None,
        *,
        create: bool = True,
        investigation: str | None = None,
    ) -> LedgerBase:
        location = locate(db)
        where = location.display()
        if not create and location.path is not None and not location.path.exists():
            raise LedgerNotFoundError(
                f"no ledger at {where}; run `ledger init` here, or pass --db / set LEDGER_DB"
            )
        engine = make_engine(location.url, create_dir=create)
        try:
            with translate_errors(location.url):
                created = cls._prepare_schema(engine, where, create=create)
        except BaseException:
            engine.dispose()  # a refused ledger must not leave connections behind
            raise
        ledger = cls(location, engine, investigation or DEFAULT_INVESTIGATION)
        ledger.created = created
        return ledger

    @staticmethod
    def _prepare_schema(engine: Engine, where: str, *, create: bool) -> bool:
        """Check the schema is this code's, creating it in an empty database; True if created."""
        current = schema.state(engine)
        if not current.is_empty:
            schema.require_current(engine, where)
            return False
        if not create:
            raise LedgerNotFoundError(
                f"{where} holds no ledger yet; run `ledger init --db {where}`"
            )
        # False when another process (a rank racing this one) created it first.
        return schema.upgrade(engine)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> LedgerBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions ----------------------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with translate_errors(self.location.url), session_scope(self.engine, write=False) as s:
            yield s

    @contextmanager
    def _write(self) -> Iterator[Session]:
        with translate_errors(self.location.url), session_scope(self.engine, write=True) as s:
            yield s

    # -- the investigation -------------------------------------------------------------

    def _investigation(self, session: Session, *, create: bool = True) -> m.Investigation:
        row = session.scalar(
            select(m.Investigation).where(m.Investigation.name == self.investigation_name)
        )
        if row is None:
            if not create:
                raise NotFoundError(
                    "investigation",
                    self.investigation_name,
                    session.scalars(select(m.Investigation.name)).all(),
                )
            _insert_if_missing(session, m.Investigation, name=self.investigation_name)
            row = session.scalars(
                select(m.Investigation).where(m.Investigation.name == self.investigation_name)
            ).one()
        self._investigation_id = row.id
        return row

    def _investigation_id_in(self, session: Session) -> int:
        """The investigation's id; on a read session a missing one reads as no rows at all."""
        if self._investigation_id is None:
            row = session.scalar(
                select(m.Investigation.id).where(m.Investigation.name == self.investigation_name)
            )
            if row is None:
                return -1
            self._investigation_id = row
        return self._investigation_id

    def investigation(self) -> records.Investigation:
        with self._write() as session:
            return records.from_row(records.Investigation, self._investigation(session))

    def _set_baseline(self, value: float | None, unit: str | None) -> records.Investigation:
        """Store the baseline as given (None clears it); `set_baseline` is the public call."""
        with self._write() as session:
            row = self._investigation(session)
            row.baseline_value = value
            if unit is not None or value is None:
                row.baseline_unit = unit
            return records.from_row(records.Investigation, row)

    # -- lookups shared by the aggregates ------------------------------------------------

    def _run_row(self, session: Session, name: str) -> m.Run:
        inv = self._investigation_id_in(session)
        row = session.scalar(select(m.Run).where(m.Run.investigation_id == inv, m.Run.name == name))
        if row is None:
            known = session.scalars(
                select(m.Run.name).where(m.Run.investigation_id == inv).order_by(m.Run.id)
            ).all()
            raise NotFoundError("run", name, known)
        return row

    def _hypothesis_row(self, session: Session, hypothesis_id: int) -> m.Hypothesis:
        inv = self._investigation_id_in(session)
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

    def _ensure_run(self, session: Session, name: str) -> m.Run:
        inv = self._investigation(session).id
        row = session.scalar(select(m.Run).where(m.Run.investigation_id == inv, m.Run.name == name))
        if row is None:
            _insert_if_missing(session, m.Run, investigation_id=inv, name=name)
            row = session.scalars(
                select(m.Run).where(m.Run.investigation_id == inv, m.Run.name == name)
            ).one()
        return row

    @staticmethod
    def _store_command_result(row: m.DeployStep | m.Probe, result: CommandResult) -> None:
        """What a deploy step or a probe keeps of the command it ran (output redacted)."""
        row.started_at = result.started_at
        row.ended_at = result.ended_at
        row.exit_code = result.exit_code
        row.timed_out = result.timed_out
        row.output = redact(result.output)

    @staticmethod
    def _count(session: Session, column: object, *where: object) -> int:
        return int(session.scalar(select(func.count()).select_from(column).where(*where)) or 0)  # type: ignore[arg-type]


def _insert_if_missing(session: Session, model: type[m.Base], **values: object) -> None:
    """INSERT … ON CONFLICT DO NOTHING: two processes creating the same run (eight ranks of
    one launch) both succeed, where select-then-insert would fail one of them on PostgreSQL
    (SQLite's BEGIN IMMEDIATE already serialises writers)."""
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    session.execute(insert(model).values(**values).on_conflict_do_nothing())
