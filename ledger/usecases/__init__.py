"""Use cases: what a front end (the command line, `serve`, a notebook) asks of the ledger,
each one call that takes typed inputs and returns typed records."""
