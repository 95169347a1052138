"""ledger's vocabulary and records: what every other layer imports down into.

- ledger.model.terms: fates, event kinds, statuses, verdicts, step columns;
- ledger.model.records: the plain records the API returns (`to_dict()` for `--json`);
- ledger.model.analysis: the analyzer's records.

Nothing here imports SQLAlchemy, pandas, click or torch.
"""
