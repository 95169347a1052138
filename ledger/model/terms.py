"""The words ledger uses everywhere: fates, event kinds, log effects, statuses, verdicts,
watch outcomes, step columns.

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

# The events `ledger why`'s findings read (the latest of each are kept).
WHY_EVENT_KINDS: tuple[EventKind, ...] = (
    EventKind.RECOMPILE,
    EventKind.GRAPH_BREAK,
    EventKind.OOM,
    EventKind.RESTART,
    EventKind.STALL,
    EventKind.NCCL,
    EventKind.ERROR,
)
# The events that tell the story of a run on the timeline; warnings and progress notes
# stay in `show`.
STORY_EVENT_KINDS: tuple[EventKind, ...] = (
    EventKind.OOM,
    EventKind.NCCL,
    EventKind.RECOMPILE,
    EventKind.GRAPH_BREAK,
    EventKind.SIGNAL,
    EventKind.STALL,
    EventKind.RESTART,
)
# The events a throughput drop is shown beside, when they happened near its step.
NEAR_DROP_EVENT_KINDS: tuple[EventKind, ...] = (
    EventKind.RECOMPILE,
    EventKind.GRAPH_BREAK,
    EventKind.OOM,
    EventKind.RESTART,
    EventKind.STALL,
    EventKind.WARNING,
    EventKind.ERROR,
)


class OpenRecord(StrEnum):
    """A record the log reader holds open while its lines come: a traceback, a header whose
    values follow, an argument dump, or the details that follow a warning."""

    TRACEBACK = "traceback"
    HEADER = "header"
    ARGS = "args"
    RECOMPILE = "recompile"  # the function and reason of a recompile limit
    GUARD = "guard"  # the guard that failed, after `Recompiling function`
    REASON = "reason"  # a graph break's reason
    NCCL = "nccl"  # an NCCL message continued on the next line


class RunPhase(StrEnum):
    """Where the log's run is, once it shows anything: loading, or training."""

    LOADING = "loading"
    TRAINING = "training"


class LogEffect(StrEnum):
    """What a log event means for the run's fate (ledger.logs.fate reads them)."""

    OOM = "oom"
    NCCL = "nccl"
    CRASHED = "crashed"
    KILLED = "killed"
    CANCELLED = "cancelled"  # the scheduler's cancellation: a traceback after it is its echo
    EXIT_ERROR = "exit_error"  # a launcher's report of a positive exit code
    EXIT_OK = "exit_ok"  # a launcher's report of exit code 0
    FINISHED = "finished"
    RESTART = "restart"  # a new run begins in the same log


# The effects that end a run, as far as the log can tell.
FATAL_EFFECTS: tuple[LogEffect, ...] = (
    LogEffect.OOM,
    LogEffect.NCCL,
    LogEffect.CRASHED,
    LogEffect.KILLED,
    LogEffect.CANCELLED,
    LogEffect.EXIT_ERROR,
)


class HypothesisStatus(StrEnum):
    OPEN = "open"
    CONFIRMED = "confirmed"
    REFUTED = "refuted"
    INCONCLUSIVE = "inconclusive"


HYPOTHESIS_STATUSES: tuple[str, ...] = tuple(s.value for s in HypothesisStatus)
RESOLUTIONS: tuple[str, ...] = tuple(
    s.value
    for s in (HypothesisStatus.CONFIRMED, HypothesisStatus.REFUTED, HypothesisStatus.INCONCLUSIVE)
)


class Verdict(StrEnum):
    """A comparison's outcome (compare and watch)."""

    REGRESSION = "regression"  # slower than the reference by more than the threshold
    IMPROVEMENT = "improvement"  # faster by more than the threshold
    NO_CHANGE = "no-change"  # compare: no significant change of that size
    SAME = "same"  # watch: the interval lies within ±threshold of the reference
    UNDECIDED = "undecided"  # watch: timed out before the numbers could tell


VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)


class FindingKind(StrEnum):
    """What a finding of `ledger why` is about, in the order docs/why.md describes them."""

    RECOMPILES = "recompiles"
    GRAPH_BREAKS = "graph_breaks"
    OOM = "oom"
    MEMORY_GROWTH = "memory_growth"
    MEMORY_PRESSURE = "memory_pressure"
    DATA_WAIT = "data_wait"
    STEP_SPIKES = "step_spikes"
    GPU_IDLE = "gpu_idle"
    THROTTLING = "throttling"
    STRAGGLER = "straggler"
    CONFIG_CHANGE = "config_change"
    VERSION_CHANGE = "version_change"
    PATCH = "patch"
    THROUGHPUT_DROP = "throughput_drop"
    WARMUP = "warmup"


class WatchOutcome(StrEnum):
    """How `ledger watch` ended: a decision of the numbers, or what stopped it first."""

    SAME = "same"
    IMPROVEMENT = "improvement"
    REGRESSION = "regression"
    FAILED = "failed"  # the fate is a failure (FAILED_FATES)
    STALLED = "stalled"  # nothing new for the stall limit
    UNDECIDED = "undecided"  # the run or the command ended, or the timeout passed, first


# The outcomes the numbers decide (the monitor's decision), in a MonitorState's words.
WATCH_DECISIONS: tuple[WatchOutcome, ...] = (
    WatchOutcome.REGRESSION,
    WatchOutcome.SAME,
    WatchOutcome.IMPROVEMENT,
)


class WatchPhase(StrEnum):
    """Where a watched run stands at one look (`MonitorState.phase` is warmup or steady)."""

    WAITING = "waiting"  # nothing yet
    LOADING = "loading"  # a loading bar, or the log says it loads
    WARMUP = "warmup"
    STEADY = "steady"
    ATTACHED = "attached"  # decided; watch stays with its trainer until that ends
    DONE = "done"


class LaunchSource(StrEnum):
    """What began a launch of a run."""

    LOG = "log"
    WATCH = "watch"
    DEPLOY = "deploy"
    HOOK = "hook"
    API = "api"
    IMPORT = "import"


# Who started a launch: a log read from its start, a `watch` source, a relaunch deploy
# step, a StepMeter, the API, an import.
LAUNCH_SOURCES: tuple[str, ...] = tuple(s.value for s in LaunchSource)


class ComparisonKind(StrEnum):
    """What recorded a comparison row: `ledger compare --resolve`, or `ledger watch`."""

    COMPARE = "compare"
    WATCH = "watch"


COMPARISON_KINDS: tuple[str, ...] = tuple(k.value for k in ComparisonKind)

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
