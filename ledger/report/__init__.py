"""Regression reports: figures and a self-contained HTML page drawn from plain data.

The store gathers a `ReportData` (ledger.store.report) and the use case analyses it
(ledger.usecases.report); this package only draws it.
"""
