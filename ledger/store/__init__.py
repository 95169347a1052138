"""The store: the typed `Ledger` facade (ledger.store.ledger) over plain modules of
functions, one per aggregate (hypotheses, fixes, deploys, runs, steps, ingest, probes,
compare, report, meter, timeline, settings, admin). The only code that writes rows."""

from __future__ import annotations

from ledger.store import gate

gate.install()  # before any row is written: every text attribute passes the gate

from ledger.store.ledger import Ledger  # noqa: E402

__all__ = ["Ledger"]
