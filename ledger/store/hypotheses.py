"""Hypotheses: what the engineer thinks is wrong, and what became of it."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.db.types import utcnow
from ledger.errors import UsageError
from ledger.model import records
from ledger.model.terms import HYPOTHESIS_STATUSES, RESOLUTIONS
from ledger.store.lookup import hypothesis_row


def check_text(text: str) -> str:
    text = text.strip()
    if not text:
        raise UsageError("a hypothesis needs some text")
    return text


def check_resolution(status: str) -> str:
    if status not in RESOLUTIONS:
        raise UsageError(f"a hypothesis ends {', '.join(RESOLUTIONS)}, not {status!r}")
    return status


def check_status(status: str | None) -> str | None:
    if status is not None and status not in HYPOTHESIS_STATUSES:
        raise UsageError(f"status is one of {', '.join(HYPOTHESIS_STATUSES)}, not {status!r}")
    return status


def add(session: Session, inv: int, text: str, parent: int | None) -> records.Hypothesis:
    if parent is not None:
        hypothesis_row(session, inv, parent)
    row = m.Hypothesis(investigation_id=inv, text=text, parent_id=parent)
    session.add(row)
    session.flush()
    return records.from_row(records.Hypothesis, row)


def resolve(
    session: Session, inv: int, hypothesis_id: int, status: str, note: str | None
) -> records.Hypothesis:
    row = hypothesis_row(session, inv, hypothesis_id)
    row.status = status
    row.resolved_at = utcnow()
    if note is not None:
        row.note = note
    return records.from_row(records.Hypothesis, row)


def get(session: Session, inv: int, hypothesis_id: int) -> records.Hypothesis:
    return records.from_row(records.Hypothesis, hypothesis_row(session, inv, hypothesis_id))


def listed(session: Session, inv: int, status: str | None) -> list[records.Hypothesis]:
    query = select(m.Hypothesis).where(m.Hypothesis.investigation_id == inv)
    if status is not None:
        query = query.where(m.Hypothesis.status == status)
    rows = session.scalars(query.order_by(m.Hypothesis.id)).all()
    return [records.from_row(records.Hypothesis, row) for row in rows]
