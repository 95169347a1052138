"""The throughput-regression analyzer: steady state, robust statistics, verdicts.

Pure numpy / scipy / ruptures on plain arrays; it knows nothing of SQL or the command
line. The store reads step rows into `StepColumns` and calls `compare_runs`;
docs/analysis.md describes the method for users.
"""

from __future__ import annotations

from ledger.analyze.compare import compare_pair, compare_runs, resolution_status, verdict
from ledger.analyze.run import (
    DEFAULT_ALPHA,
    DEFAULT_THRESHOLD,
    NotEnoughStepsError,
    analyze_run,
)
from ledger.analyze.series import StepColumns
from ledger.model.analysis import (
    Baseline,
    ChangePoint,
    CompareReport,
    RankSpread,
    RunAnalysis,
    RunComparison,
)

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_THRESHOLD",
    "Baseline",
    "ChangePoint",
    "CompareReport",
    "NotEnoughStepsError",
    "RankSpread",
    "RunAnalysis",
    "RunComparison",
    "StepColumns",
    "analyze_run",
    "compare_pair",
    "compare_runs",
    "resolution_status",
    "verdict",
]
