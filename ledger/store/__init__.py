"""The store, persistence only: the typed `Store` facade (ledger.store.facade) over plain
modules of functions, one per aggregate (hypotheses, fixes, deploys, runs, steps, ingest,
probes, compare, report, meter, timeline, settings, admin). The only code that writes
rows; it analyses nothing (the use cases above it do, ledger.usecases)."""

from __future__ import annotations

from ledger.store import gate

gate.install()  # before any row is written: every text attribute passes the gate

from ledger.store.facade import Store  # noqa: E402

__all__ = ["Store"]
