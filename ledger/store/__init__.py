"""The Ledger: the only code that writes rows. Split by aggregate, one module each.

Every public method opens its own short transaction and returns plain records
(ledger.records), never ORM rows.
"""

from __future__ import annotations

from ledger.store.deploys import DeploysMixin, DriftCheck
from ledger.store.fixes import FixesMixin
from ledger.store.hypotheses import HypothesesMixin
from ledger.store.meter import MeterMixin
from ledger.store.runs import RunsMixin
from ledger.store.steps import StepsMixin
from ledger.store.timeline import TimelineMixin

__all__ = ["DriftCheck", "Ledger"]


class Ledger(
    HypothesesMixin,
    FixesMixin,
    DeploysMixin,
    RunsMixin,
    StepsMixin,
    TimelineMixin,
    MeterMixin,
):
    """One ledger (a SQLite file or a PostgreSQL database) and one investigation in it."""

    def __repr__(self) -> str:
        return f"<Ledger {self.location.display()} investigation={self.investigation_name!r}>"
