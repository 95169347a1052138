"""The unit a run's throughput is stored in: the investigation's spelling when it is the
same unit (ledger.model.units), so `tokens/s` from a tracker joins a `tok/s` ledger."""

from __future__ import annotations

from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.model.units import spelled_as


def house_spelling(session: Session, run: m.Run, unit: str | None) -> str | None:
    """`unit` as the run's investigation spells it (its baseline's unit), else as it is."""
    if unit is None:
        return None
    investigation = session.get(m.Investigation, run.investigation_id)
    house = investigation.baseline_unit if investigation is not None else None
    return spelled_as(unit, house)
