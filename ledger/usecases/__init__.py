"""The use cases: what the command line, `serve`, the notebook and the Python API do, each
one function taking the store and typed inputs and returning records of ledger.model
(analyze, compare, why, report, imports), and `Ledger` (ledger.usecases.ledger), the
public facade that offers them beside the store's reads and writes."""
