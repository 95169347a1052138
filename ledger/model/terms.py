"""The words ledger uses everywhere: fates, event kinds, statuses, verdicts, step columns.

Every layer (db, logs, analyze, store, report, hook, cli) imports these from here, so a
fate or an event kind is spelled once. Nothing here imports anything heavy.
"""

from __future__ import annotations

from enum import StrEnum


class Fate(StrEnum):
    """How a run stands or how it ended."""

    LOADING = "loading"  # weights, data or compilation before the first step
    RUNNING = "running"  # steps are coming
    FINISHED = "finished"  # the log or the hook says training ended normally
    OOM = "oom"  # CUDA (or host) out of memory
    CRASHED = "crashed"  # a traceback, a segfault, a non-zero exit
    NCCL = "nccl"  # a collective timed out or NCCL failed
    KILLED = "killed"  # a signal, the OOM killer, Slurm, Ctrl-C
    STALLED = "stalled"  # alive on paper, silent for too long
    UNKNOWN = "unknown"  # nothing tells yet

    @property
    def is_final(self) -> bool:
        return self in FINAL_FATES

    @property
    def is_failure(self) -> bool:
        return self in FAILED_FATES


# The run is over: nothing more will come.
FINAL_FATES = frozenset({Fate.FINISHED, Fate.OOM, Fate.CRASHED, Fate.NCCL, Fate.KILLED})
# The run died: what `watch` calls failed.
FAILED_FATES = frozenset({Fate.OOM, Fate.CRASHED, Fate.NCCL, Fate.KILLED})
# The run died of something in the run itself. `killed` is left out: it is often the
# engineer stopping an attempt to try the next idea, so a report labels it without
# marking the attempt as broken.
FAULT_FATES = frozenset({Fate.OOM, Fate.CRASHED, Fate.NCCL})
# Not over yet, as far as anyone can tell.
IN_PROGRESS_FATES = frozenset({Fate.UNKNOWN, Fate.LOADING, Fate.RUNNING, Fate.STALLED})
FATES: tuple[str, ...] = tuple(f.value for f in Fate)


class EventKind(StrEnum):
    """What a log line (or the hook, or `watch`) said that matters."""

    TRACEBACK = "traceback"
    OOM = "oom"
    NCCL = "nccl"
    RECOMPILE = "recompile"  # dynamo recompiled, or hit its recompile limit
    GRAPH_BREAK = "graph_break"  # TORCH_LOGS=graph_breaks
    SIGNAL = "signal"  # Killed, SIGKILL/SIGTERM exits, Slurm cancellation
    EXIT = "exit"  # a launcher's exit report (torchrun's ChildFailedError…)
    WARNING = "warning"
    ERROR = "error"
    PROGRESS = "progress"
    LOADING = "loading"
    FINISHED = "finished"
    STALL = "stall"  # no new output or rows for longer than the run's pace allows
    RESTART = "restart"  # a new run begins in the same log (a crash, then a relaunch)


EVENT_KINDS: tuple[str, ...] = tuple(k.value for k in EventKind)


class HypothesisStatus(StrEnum):
    OPEN = "open"
    CONFIRMED = "confirmed"
    REFUTED = "refuted"
    INCONCLUSIVE = "inconclusive"


HYPOTHESIS_STATUSES: tuple[str, ...] = tuple(s.value for s in HypothesisStatus)
RESOLUTIONS: tuple[str, ...] = ("confirmed", "refuted", "inconclusive")


class Verdict(StrEnum):
    """A comparison's outcome (compare and watch)."""

    REGRESSION = "regression"  # slower than the reference by more than the threshold
    IMPROVEMENT = "improvement"  # faster by more than the threshold
    NO_CHANGE = "no-change"  # compare: no significant change of that size
    SAME = "same"  # watch: the interval lies within ±threshold of the reference
    UNDECIDED = "undecided"  # watch: timed out before the numbers could tell


VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)

# The scalar columns of a `step` row, after its key (run_id, rank, step).
STEP_COLUMNS: tuple[str, ...] = (
    "wall_time",
    "step_time_s",
    "gpu_time_s",
    "tokens",
    "throughput",
    "loss",
    "memory_allocated_mib",
    "memory_reserved_mib",
    "wait_s",  # revision 0005: time between the end of the previous step and this one's start
)
