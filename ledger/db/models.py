"""The ledger's tables. The schema is a public interface (docs/schema.md documents every
column): people open the file with sqlite3, pandas or datasette, so names are plain.

Every change here goes with an Alembic revision in migrations/versions; a test checks
that the models and the migrations agree.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ledger.db.types import BigInt, Real, UTCDateTime, Word, utcnow
from ledger.model.terms import (
    COMPARISON_KINDS,
    EVENT_KINDS,
    FATES,
    HYPOTHESIS_STATUSES,
    VERDICTS,
    ComparisonKind,
    Fate,
    HypothesisStatus,
    Verdict,
)
from ledger.model.terms import LAUNCH_SOURCES as LAUNCH_SOURCES  # store.launches reads it here

# Named constraints make SQLite batch migrations possible and PostgreSQL errors readable.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Who started a launch (revision 0006): LAUNCH_SOURCES; NULL for the first launch of a run
# that existed before launches were recorded.
CONFIG_SOURCES = ("hook", "log", "deploy", "import", "api")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Investigation(Base):
    """A question with a baseline; a ledger has one named 'default' that most users never name."""

    __tablename__ = "investigation"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    description: Mapped[str | None] = mapped_column(Text)
    baseline_value: Mapped[float | None] = mapped_column(Real)
    baseline_unit: Mapped[str | None] = mapped_column(String(50))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Hypothesis(Base):
    __tablename__ = "hypothesis"
    __table_args__ = (CheckConstraint(_one_of("status", HYPOTHESIS_STATUSES), name="status"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    investigation_id: Mapped[int] = mapped_column(
        ForeignKey("investigation.id", ondelete="CASCADE"), index=True
    )
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("hypothesis.id", ondelete="SET NULL"))
    text: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20), default=HypothesisStatus.OPEN.value)
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Patch(Base):
    """What was changed to test a hypothesis."""

    __tablename__ = "patch"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    hypothesis_id: Mapped[int] = mapped_column(
        ForeignKey("hypothesis.id", ondelete="CASCADE"), index=True
    )
    summary: Mapped[str] = mapped_column(Text)
    diff: Mapped[str | None] = mapped_column(Text)
    git_commit: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class PatchFile(Base):
    """A file a patch touched, with its sha256 after the change: what a deploy must ship."""

    __tablename__ = "patch_file"
    __table_args__ = (UniqueConstraint("patch_id", "path"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    patch_id: Mapped[int] = mapped_column(ForeignKey("patch.id", ondelete="CASCADE"))
    path: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64))


class Run(Base):
    """One training launch, named like its log (train_eager_dynamiccopy.log → eager_dynamiccopy)."""

    __tablename__ = "run"
    __table_args__ = (
        UniqueConstraint("investigation_id", "name"),
        CheckConstraint(_one_of("fate", FATES), name="fate"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    investigation_id: Mapped[int] = mapped_column(
        ForeignKey("investigation.id", ondelete="CASCADE")
    )
    name: Mapped[str] = mapped_column(String(200))
    patch_id: Mapped[int | None] = mapped_column(
        ForeignKey("patch.id", ondelete="SET NULL"), index=True
    )
    command: Mapped[str | None] = mapped_column(Text)
    host: Mapped[str | None] = mapped_column(String(200))
    throughput_unit: Mapped[str | None] = mapped_column(String(50))
    fate: Mapped[Fate] = mapped_column(Word(Fate, 20), default=Fate.UNKNOWN)
    fate_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Written by the torch-side hook (ledger.hook.StepMeter), revision 0004: steps it dropped
    # under back-pressure, summed over ranks, and its own caller-side cost per step.
    hook_dropped_steps: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    hook_cost_us: Mapped[float | None] = mapped_column(Real)


class Launch(Base):
    """One launch of a run (revision 0006): a run named `eager_b` may be launched several
    times (a relaunch after a fix). Each launch keeps its own steps, events and fate;
    `number` counts from 1 within the run, and the highest is the run's latest launch, the
    one compare, watch, why and the report judge unless asked (`eager_b@1`). The run's own
    `fate` is its latest launch's."""

    __tablename__ = "launch"
    __table_args__ = (
        UniqueConstraint("run_id", "number"),
        CheckConstraint(_one_of("fate", FATES), name="fate"),
        CheckConstraint(f"source IS NULL OR {_one_of('source', LAUNCH_SOURCES)}", name="source"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    source: Mapped[str | None] = mapped_column(String(20))
    command: Mapped[str | None] = mapped_column(Text)  # what was launched, when ledger knows
    fate: Mapped[Fate] = mapped_column(Word(Fate, 20), default=Fate.UNKNOWN)
    fate_reason: Mapped[str | None] = mapped_column(Text)
    exit_code: Mapped[int | None] = mapped_column(Integer)  # a command watch ran, as it ended
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Revision 0007: how many times the launch's stored steps were changed other than by
    # adding rows (a rewritten log's rows removed, empty values filled in). With the count
    # of its step rows it says whether a kept analysis still describes them (KeptAnalysis).
    steps_rewritten: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Revision 0008: which step columns some step row of the launch holds a value in, one
    # bit a column (ledger.store.steps.HELD_ORDER), set by the step writer as it writes; a
    # reader reads those columns without counting them over every row. NULL: not known.
    # A new launch holds nothing yet (0); see launches.launch_row for the exception.
    held_columns: Mapped[int | None] = mapped_column(Integer, default=0)


class KeptAnalysis(Base):
    """One launch's analysis as compare last made it (revision 0007), so that comparing
    runs whose steps have not changed reads this row instead of their steps. `settings`
    names the analyzer's code and what the analysis was asked (threshold, baseline, unit);
    `steps` and `rewritten` are the launch's step count and `steps_rewritten` when its
    steps were read. Any other value now means the steps changed: the row is not used."""

    __tablename__ = "kept_analysis"

    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), primary_key=True)
    launch: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    settings: Mapped[str] = mapped_column(String(64))
    steps: Mapped[int] = mapped_column(BigInt)
    rewritten: Mapped[int] = mapped_column(Integer)
    body: Mapped[str] = mapped_column(Text)  # the RunAnalysis as JSON (ledger.model.kept)
    made_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class DeployStep(Base):
    """One step of getting a patch onto the box, and whether what it shipped was the patch."""

    __tablename__ = "deploy_step"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), index=True)
    patch_id: Mapped[int | None] = mapped_column(ForeignKey("patch.id", ondelete="SET NULL"))
    name: Mapped[str] = mapped_column(String(100))
    command: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    timed_out: Mapped[bool] = mapped_column(Boolean, default=False)
    recorded_only: Mapped[bool] = mapped_column(Boolean, default=False)
    output: Mapped[str | None] = mapped_column(Text)
    output_bytes: Mapped[int | None] = mapped_column(BigInt)
    artifact_path: Mapped[str | None] = mapped_column(Text)
    artifact_sha256: Mapped[str | None] = mapped_column(String(64))
    expected_sha256: Mapped[str | None] = mapped_column(String(64))
    drift: Mapped[bool | None] = mapped_column(Boolean)


class LogFile(Base):
    """A log file ingested for a run, and how far: ingestion resumes from `offset`."""

    __tablename__ = "log_file"
    __table_args__ = (UniqueConstraint("run_id", "path", "launch"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    path: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(BigInt, default=0)
    offset: Mapped[int] = mapped_column(BigInt, default=0)
    lines: Mapped[int] = mapped_column(BigInt, default=0)
    sha256: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ingested_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The log reader's state at `offset` (JSON), so that a grown file is read on from there.
    state: Mapped[str | None] = mapped_column(Text)
    # Revision 0005: lines the reader could not make sense of (counted, never silently
    # dropped), and what the file is ("log", "trainer_state", "stream", "tensorboard"…).
    unread_lines: Mapped[int] = mapped_column(BigInt, default=0, server_default="0")
    format: Mapped[str | None] = mapped_column(String(30))
    # Revision 0006: the launch its rows belong to. A file replaced or truncated (a trainer
    # started again into it) is read again into a new launch, as a new row.
    launch: Mapped[int] = mapped_column(Integer, default=1, server_default="1")


class Step(Base):
    """One training step of one rank. Further scalars live in `metric`."""

    __tablename__ = "step"

    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), primary_key=True)
    # Revision 0006: the launch of the run (launch.number), second in the key so that one
    # launch's steps are one range of it; a relaunch never overwrites an earlier launch's.
    launch: Mapped[int] = mapped_column(
        Integer, primary_key=True, autoincrement=False, server_default="1"
    )
    rank: Mapped[int] = mapped_column(BigInt, primary_key=True, autoincrement=False)
    step: Mapped[int] = mapped_column(BigInt, primary_key=True, autoincrement=False)
    wall_time: Mapped[float | None] = mapped_column(Real)
    step_time_s: Mapped[float | None] = mapped_column(Real)
    gpu_time_s: Mapped[float | None] = mapped_column(Real)
    tokens: Mapped[int | None] = mapped_column(BigInt)
    throughput: Mapped[float | None] = mapped_column(Real)
    loss: Mapped[float | None] = mapped_column(Real)
    memory_allocated_mib: Mapped[float | None] = mapped_column(Real)
    memory_reserved_mib: Mapped[float | None] = mapped_column(Real)
    # Revision 0005. wait_s: time from the end of the previous step to the start of this
    # one (the data loader, host work between steps); throughput counts it.
    wait_s: Mapped[float | None] = mapped_column(Real)
    # The log file the row was read from; NULL for rows written by the hook or the API. A
    # re-read of a rewritten log removes only its own rows. No foreign key: it would cost
    # a lookup per row on the hot path, and a log_file row is never deleted on its own.
    log_file_id: Mapped[int | None] = mapped_column(Integer)


class Metric(Base):
    """A further named scalar of a step (grad_norm, lr, mfu…), one row per value."""

    __tablename__ = "metric"

    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), primary_key=True)
    launch: Mapped[int] = mapped_column(
        Integer, primary_key=True, autoincrement=False, server_default="1"
    )  # as step.launch
    rank: Mapped[int] = mapped_column(BigInt, primary_key=True, autoincrement=False)
    step: Mapped[int] = mapped_column(BigInt, primary_key=True, autoincrement=False)
    # Text since 0005: FSDP parameter names (grad norms per parameter) pass 100 characters.
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[float | None] = mapped_column(Real)
    log_file_id: Mapped[int | None] = mapped_column(Integer)  # as step.log_file_id


class LogEvent(Base):
    """Something a log said that matters: an OOM, a traceback, an NCCL timeout, a recompile…"""

    __tablename__ = "log_event"
    __table_args__ = (
        CheckConstraint(_one_of("kind", EVENT_KINDS), name="kind"),
        Index(None, "run_id", "kind"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    log_file_id: Mapped[int | None] = mapped_column(
        ForeignKey("log_file.id", ondelete="CASCADE"), index=True
    )
    # Revision 0005: an event read from a probe's output belongs to the probe, and its
    # `line` is a line of that output, not of the log file.
    probe_id: Mapped[int | None] = mapped_column(
        ForeignKey("probe.id", ondelete="CASCADE"), index=True
    )
    line: Mapped[int | None] = mapped_column(BigInt)
    # The last training step seen before the event (0005): where a recompile or an OOM
    # falls on the throughput curve.
    step: Mapped[int | None] = mapped_column(BigInt)
    kind: Mapped[str] = mapped_column(String(20))
    text: Mapped[str] = mapped_column(Text)
    rank: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    launch: Mapped[int] = mapped_column(Integer, default=1, server_default="1")  # 0006


class Probe(Base):
    """A status check of a run (tail the log, nvidia-smi) and what it concluded."""

    __tablename__ = "probe"
    __table_args__ = (CheckConstraint(f"fate IS NULL OR {_one_of('fate', FATES)}", name="fate"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), index=True)
    command: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    timed_out: Mapped[bool] = mapped_column(Boolean, default=False)
    output: Mapped[str | None] = mapped_column(Text)
    fate: Mapped[Fate | None] = mapped_column(Word(Fate, 20))
    conclusion: Mapped[str | None] = mapped_column(Text)


class GpuSample(Base):
    """One GPU's state, as a probe saw it (probe_id) or as the hook sampled it through NVML
    during a run (run_id, rank, sampled_at; revision 0005)."""

    __tablename__ = "gpu_sample"
    __table_args__ = (UniqueConstraint("probe_id", "gpu_index"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    probe_id: Mapped[int | None] = mapped_column(ForeignKey("probe.id", ondelete="CASCADE"))
    gpu_index: Mapped[int] = mapped_column(Integer)
    name: Mapped[str | None] = mapped_column(String(100))
    memory_used_mib: Mapped[float | None] = mapped_column(Real)
    memory_total_mib: Mapped[float | None] = mapped_column(Real)
    utilization_pct: Mapped[float | None] = mapped_column(Real)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), index=True)
    rank: Mapped[int | None] = mapped_column(Integer)
    step: Mapped[int | None] = mapped_column(BigInt)  # the rank's last step when sampled
    sampled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    power_w: Mapped[float | None] = mapped_column(Real)
    power_limit_w: Mapped[float | None] = mapped_column(Real)
    sm_clock_mhz: Mapped[float | None] = mapped_column(Real)
    max_sm_clock_mhz: Mapped[float | None] = mapped_column(Real)
    temperature_c: Mapped[float | None] = mapped_column(Real)
    # Active clock-throttle reasons by name, comma-separated ("sw_power_cap,hw_slowdown").
    throttle: Mapped[str | None] = mapped_column(Text)


class RunConfig(Base):
    """What a run ran with, one value a row: versions, GPUs, world size, flags, environment,
    git commit (revision 0005). `source` says who told: the hook, a log, the relaunch
    command of a deploy step, an import, the API."""

    __tablename__ = "run_config"
    __table_args__ = (CheckConstraint(_one_of("source", CONFIG_SOURCES), name="source"),)

    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), primary_key=True)
    source: Mapped[str] = mapped_column(String(20), primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str | None] = mapped_column(Text)


class Setting(Base):
    """A ledger-wide setting: a name and a JSON value (e.g. `log.patterns`)."""

    __tablename__ = "setting"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Comparison(Base):
    """A recorded verdict: `ledger compare A B --resolve H` (run b against run a), or the
    decision of `ledger watch` (kind 'watch'; run b against run a, or against the baseline
    when run_a_id is NULL, revision 0005)."""

    __tablename__ = "comparison"
    __table_args__ = (
        CheckConstraint(_one_of("verdict", VERDICTS), name="verdict"),
        CheckConstraint(_one_of("kind", COMPARISON_KINDS), name="kind"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    investigation_id: Mapped[int] = mapped_column(
        ForeignKey("investigation.id", ondelete="CASCADE")
    )
    hypothesis_id: Mapped[int | None] = mapped_column(
        ForeignKey("hypothesis.id", ondelete="SET NULL"), index=True
    )
    run_a_id: Mapped[int | None] = mapped_column(
        ForeignKey("run.id", ondelete="CASCADE"), index=True
    )
    run_b_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    unit: Mapped[str | None] = mapped_column(String(50))
    steady_from_a: Mapped[int | None] = mapped_column(Integer)
    steady_from_b: Mapped[int | None] = mapped_column(Integer)
    median_a: Mapped[float | None] = mapped_column(Real)
    median_b: Mapped[float | None] = mapped_column(Real)
    delta_pct: Mapped[float | None] = mapped_column(Real)
    ci_low_pct: Mapped[float | None] = mapped_column(Real)
    ci_high_pct: Mapped[float | None] = mapped_column(Real)
    p_value: Mapped[float | None] = mapped_column(Real)
    threshold_pct: Mapped[float] = mapped_column(Real)
    alpha: Mapped[float] = mapped_column(Real)
    verdict: Mapped[Verdict] = mapped_column(Word(Verdict, 20))
    summary: Mapped[str] = mapped_column(Text)
    # Revision 0005: who decided, the reference when it is a number (the baseline), the
    # effective throughputs (tokens over wall-clock time, stalls included), and for watch
    # the step at which the decision came.
    kind: Mapped[ComparisonKind] = mapped_column(
        Word(ComparisonKind, 10),
        default=ComparisonKind.COMPARE,
        server_default=ComparisonKind.COMPARE.value,
    )
    reference_value: Mapped[float | None] = mapped_column(Real)
    effective_a: Mapped[float | None] = mapped_column(Real)
    effective_b: Mapped[float | None] = mapped_column(Real)
    decided_at_step: Mapped[int | None] = mapped_column(BigInt)
    # Revision 0006: the launches compared (launch.number of run a and run b).
    launch_a: Mapped[int | None] = mapped_column(Integer)
    launch_b: Mapped[int | None] = mapped_column(Integer)
