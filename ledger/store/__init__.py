"""The Ledger: the only code that writes rows. Split by aggregate, one module each.

Every public method opens its own short transaction and returns plain records
(ledger.model.records), never ORM rows.
"""

from __future__ import annotations

from ledger.store.compare import CompareMixin, StoredComparison
from ledger.store.deploys import DeploysMixin, DriftCheck
from ledger.store.fixes import FixesMixin
from ledger.store.hypotheses import HypothesesMixin
from ledger.store.ingest import IngestMixin
from ledger.store.meter import MeterMixin
from ledger.store.probes import ProbesMixin
from ledger.store.report import ReportMixin
from ledger.store.runs import RunsMixin
from ledger.store.steps import StepsMixin
from ledger.store.timeline import TimelineMixin

__all__ = ["DriftCheck", "Ledger", "StoredComparison"]


class Ledger(
    HypothesesMixin,
    FixesMixin,
    DeploysMixin,
    RunsMixin,
    StepsMixin,
    TimelineMixin,
    IngestMixin,
    ProbesMixin,
    CompareMixin,
    ReportMixin,
    MeterMixin,
):
    """One ledger (a SQLite file or a PostgreSQL database) and one investigation in it."""

    def __repr__(self) -> str:
        return f"<Ledger {self.location.display()} investigation={self.investigation_name!r}>"
