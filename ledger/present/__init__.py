"""Presentation beside the front ends: records of ledger.model into text for people
(`table`, `words`, and a module per command's rendering: `runs`, `compare`, `why`). The
command line and `serve` use it; figures are ledger.report's."""
