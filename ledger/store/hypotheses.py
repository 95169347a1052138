"""Hypotheses: what the engineer thinks is wrong, and what became of it."""

from __future__ import annotations

from sqlalchemy import select

from ledger.db import models as m
from ledger.db.types import utcnow
from ledger.errors import UsageError
from ledger.model import records
from ledger.store.base import LedgerBase

RESOLUTIONS = ("confirmed", "refuted", "inconclusive")


class HypothesesMixin(LedgerBase):
    def add_hypothesis(self, text: str, *, parent: int | None = None) -> records.Hypothesis:
        text = text.strip()
        if not text:
            raise UsageError("a hypothesis needs some text")
        with self._write() as session:
            inv = self._investigation(session)
            if parent is not None:
                self._hypothesis_row(session, parent)
            row = m.Hypothesis(investigation_id=inv.id, text=text, parent_id=parent)
            session.add(row)
            session.flush()
            return records.from_row(records.Hypothesis, row)

    def resolve_hypothesis(
        self, hypothesis_id: int, status: str, *, note: str | None = None
    ) -> records.Hypothesis:
        if status not in RESOLUTIONS:
            raise UsageError(f"status must be one of {', '.join(RESOLUTIONS)}, not {status!r}")
        with self._write() as session:
            row = self._hypothesis_row(session, hypothesis_id)
            row.status = status
            row.resolved_at = utcnow()
            if note is not None:
                row.note = note
            return records.from_row(records.Hypothesis, row)

    def hypothesis(self, hypothesis_id: int) -> records.Hypothesis:
        with self._read() as session:
            return records.from_row(
                records.Hypothesis, self._hypothesis_row(session, hypothesis_id)
            )

    def hypotheses(self, *, status: str | None = None) -> list[records.Hypothesis]:
        with self._read() as session:
            query = select(m.Hypothesis).where(
                m.Hypothesis.investigation_id == self._investigation_id_in(session)
            )
            if status is not None:
                query = query.where(m.Hypothesis.status == status)
            rows = session.scalars(query.order_by(m.Hypothesis.id)).all()
            return [records.from_row(records.Hypothesis, row) for row in rows]
