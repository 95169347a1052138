"""The colour of each fate, shared by the report's figures and its HTML."""

from __future__ import annotations

from ledger.model.terms import Fate

FATE_COLORS: dict[str, str] = {
    Fate.FINISHED: "#2a9d8f",
    Fate.RUNNING: "#457b9d",
    Fate.LOADING: "#8d99ae",
    Fate.STALLED: "#e9c46a",
    Fate.OOM: "#d62828",
    Fate.CRASHED: "#9d0208",
    Fate.NCCL: "#f77f00",
    Fate.KILLED: "#6a040f",
    Fate.UNKNOWN: "#6c757d",
}
