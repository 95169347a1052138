"""The throughput-regression analyzer: steady state, robust statistics, verdicts.

Pure numpy / scipy on plain arrays; it knows nothing of SQL or the command
line. The store reads step rows into `StepColumns` and calls `compare_runs`; `watch`
feeds steps to a `SequentialMonitor`. docs/analysis.md and docs/watch.md describe the
methods for users.
"""

from __future__ import annotations

from ledger.analyze.compare import (
    check_settings,
    compare_analyses,
    compare_pair,
    compare_runs,
    resolution_status,
    verdict,
)
from ledger.analyze.run import (
    DEFAULT_ALPHA,
    DEFAULT_THRESHOLD,
    NotEnoughStepsError,
    analyze_run,
    reframed,
)
from ledger.analyze.sequential import SequentialMonitor, baseline_reference, reference_from_run
from ledger.analyze.series import StepColumns
from ledger.model.analysis import (
    Baseline,
    ChangePoint,
    CompareReport,
    MonitorState,
    RankSpread,
    Reference,
    Regime,
    RunAnalysis,
    RunComparison,
    Stalls,
)

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_THRESHOLD",
    "Baseline",
    "ChangePoint",
    "CompareReport",
    "MonitorState",
    "NotEnoughStepsError",
    "RankSpread",
    "Reference",
    "Regime",
    "RunAnalysis",
    "RunComparison",
    "SequentialMonitor",
    "Stalls",
    "StepColumns",
    "analyze_run",
    "baseline_reference",
    "check_settings",
    "compare_analyses",
    "compare_pair",
    "compare_runs",
    "reference_from_run",
    "reframed",
    "resolution_status",
    "verdict",
]
