"""The Store: the persistence facade, the only code that writes rows. The public `Ledger`
(ledger.usecases.ledger) is a Store with the use cases on top (analysis, compare, why, the
report), which get what they analyse from here as plain data, in one read each.

Each public method owns its transaction: a read session (`_read`) or a write session
(`_write`, SQLite's write lock taken up front), inside which it calls functions of the
aggregate modules (ledger.store.runs, .fixes, .deploys, .ingest, …). Slow work that needs
no database (a deploy command, hashing files) happens between transactions. Methods return
records from ledger.model, never ORM rows.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TextIO

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from ledger.config import DEFAULT_INVESTIGATION, Location
from ledger.db import models as m
from ledger.db.engine import BUSY_TIMEOUT_MS, session_scope, translate_errors
from ledger.errors import StorageError
from ledger.hashing import sha256_file
from ledger.model import records
from ledger.model.analysis import Baseline, CompareReport, MonitorState, Resolution
from ledger.model.imports import ColumnMap, ImportResult, TrackedRun
from ledger.model.records import FateChange, StepWrite
from ledger.model.terms import Fate, HypothesisStatus
from ledger.store import (
    analysed,
    compare,
    deploys,
    fixes,
    frames,
    hypotheses,
    imports,
    ingest,
    kept,
    launches,
    lookup,
    meter,
    opening,
    runs,
    settings,
    steps,
    timeline,
    trainer_state,
    why,
)
from ledger.store import report as report_data
from ledger.store.ingest import STALL_AFTER_S

log = logging.getLogger("ledger.store")

# How long keeping an analysis waits for a busy ledger (an ingest --follow, the hook's
# writer) before it lets it be: the next compare analyses those steps again.
BRIEF_WAIT_MS = 300

# How many times an ingest overtaken by another ingest of its log goes on from the other's
# place before it gives up (each time the other read on while this one paused).
OVERTAKEN_TRIES = 20

if TYPE_CHECKING:
    from datetime import datetime

    import pandas as pd

    from ledger.readings.steps import StepColumns
    from ledger.store.series import LiveReads


class Store:
    """One ledger (a SQLite file or a PostgreSQL database) and one investigation in it:
    its rows, read and written in one transaction per method."""

    def __init__(self, location: Location, engine: Engine, investigation: str) -> None:
        self.location = location
        self.engine = engine
        self.investigation_name = investigation
        self.created = False  # True when this open made the schema
        self.read_only = False  # opened to change nothing (Store.open)

    @classmethod
    def open(
        cls,
        db: str | os.PathLike[str] | None = None,
        *,
        create: bool = True,
        investigation: str | None = None,
        busy_timeout: float = BUSY_TIMEOUT_MS / 1000,
        connect_timeout: float | None = None,
        read_only: bool = False,
        check: bool = False,
    ) -> Self:
        """Open the ledger at `db` (a path or URL), or the one discovery finds.

        `create=False` refuses a ledger that does not exist yet. `busy_timeout` bounds the
        wait for SQLite's write lock; `connect_timeout` the wait for a PostgreSQL server.
        `read_only` changes nothing in the file; `check` refuses a damaged SQLite file
        (PRAGMA quick_check) before anything is written to it.
        """
        location, engine, created = opening.connect(
            db, create=create, busy_timeout=busy_timeout, connect_timeout=connect_timeout,
            read_only=read_only, check=check,
        )  # fmt: skip
        ledger = cls(location, engine, investigation or DEFAULT_INVESTIGATION)
        ledger.created, ledger.read_only = created, read_only
        return ledger

    @staticmethod
    def writable(db: str | os.PathLike[str] | None = None) -> bool:
        """Whether this process could write the ledger at `db` (or the one discovery finds)."""
        return opening.writable(db)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.location.display()
        return f"<{type(self).__name__} {where} investigation={self.investigation_name!r}>"

    @contextmanager
    def _read(self) -> Iterator[tuple[Session, int]]:
        """A read session and the investigation's id (no rows match one not created yet)."""
        with translate_errors(self.location.url), session_scope(self.engine, write=False) as s:
            yield s, lookup.investigation_id(s, self.investigation_name)

    @contextmanager
    def _write(self) -> Iterator[tuple[Session, int]]:
        """A write session and the investigation's id (created when new)."""
        with translate_errors(self.location.url), session_scope(self.engine, write=True) as s:
            yield s, lookup.investigation_row(s, self.investigation_name).id

    # The use cases that run a command between two transactions (ledger.usecases.commands:
    # deploy, probe) take theirs through these.
    read_session = _read
    write_session = _write

    # -- the investigation and its baseline ---------------------------------------------

    def investigation(self) -> records.Investigation:
        with self._write() as (s, inv):
            return records.from_row(records.Investigation, s.get_one(m.Investigation, inv))

    def baseline(self) -> Baseline:
        """The throughput the investigation is trying to get back to (value None: none)."""
        with self._read() as (s, _):
            return compare.baseline(s, self.investigation_name)

    def set_baseline(self, value: float | None, unit: str | None = None) -> Baseline:
        """Set the baseline (a finite throughput above 0), or clear it with None; the unit
        stays unless given (tok/s when there was none)."""
        value = compare.check_baseline(value)
        with self._write() as (s, _):
            return compare.set_baseline(s, self.investigation_name, value, unit, "investigation")

    def set_baseline_of_run(self, value: float, unit: str | None, run: str) -> Baseline:
        """Keep a run's figure as the baseline (its source: the run)."""
        with self._write() as (s, _):
            return compare.set_baseline(s, self.investigation_name, value, unit, f"run {run}")

    # -- hypotheses and fixes -------------------------------------------------------------

    def add_hypothesis(self, text: str, *, parent: int | None = None) -> records.Hypothesis:
        text = hypotheses.check_text(text)
        with self._write() as (s, inv):
            return hypotheses.add(s, inv, text, parent)

    def resolve_hypothesis(
        self, hypothesis_id: int, status: str, *, note: str | None = None
    ) -> records.Hypothesis:
        status = hypotheses.check_resolution(status)
        with self._write() as (s, inv):
            return hypotheses.resolve(s, inv, hypothesis_id, status, note)

    def hypothesis(self, hypothesis_id: int) -> records.Hypothesis:
        with self._read() as (s, inv):
            return hypotheses.get(s, inv, hypothesis_id)

    def hypotheses(self, *, status: str | None = None) -> list[records.Hypothesis]:
        status = hypotheses.check_status(status)
        with self._read() as (s, inv):
            return hypotheses.listed(s, inv, status)

    def record_fix(
        self,
        hypothesis: int | str,
        summary: str,
        *,
        diff: str | TextIO | None = None,
        git_dir: str | os.PathLike[str] | None = None,
        files: Sequence[str | os.PathLike[str]] = (),
        run: str | None = None,
    ) -> records.FixRecord:
        """Record in one transaction: the hypothesis (new unless `hypothesis` is an id), the
        patch with its diff and the sha256 of every file it touched, and the run that tests
        it. `diff` is the text or a stream of it; with `git_dir`, the diff is `git diff HEAD`
        there and the commit is HEAD."""
        patch = fixes.prepare(summary, diff, git_dir, files)
        with self._write() as (s, inv):
            return fixes.record(s, inv, hypothesis, patch, run)

    def patch(self, patch_id: int) -> records.Patch:
        with self._read() as (s, _):
            return fixes.patch_record(s, patch_id)

    # -- deploys ----------------------------------------------------------------------------

    def check_artifact(self, run: str, artifact: str | os.PathLike[str]) -> records.DriftCheck:
        """Compare a file about to be shipped with what the run's patch recorded."""
        digest = sha256_file(artifact)
        with self._read() as (s, inv):
            return deploys.drift_check(s, inv, run, artifact, digest)

    def record_deploy(
        self,
        run: str,
        step: str,
        command: Sequence[str],
        *,
        exit_code: int,
        artifact: str | os.PathLike[str] | None = None,
        output: str | None = None,
        new: bool = False,
    ) -> records.DeployStep:
        """Record a step that ran elsewhere."""
        argv = deploys.check_command(command, step)
        check = self.check_artifact(run, artifact) if artifact is not None else None
        with self._write() as (s, inv):
            return deploys.record_only(s, inv, run, step, argv, check, exit_code, output, new)

    def deploy_steps(self, run: str) -> list[records.DeployStep]:
        with self._read() as (s, inv):
            return deploys.steps_of(s, lookup.run_row(s, inv, run).id, run)

    # -- runs ------------------------------------------------------------------------------

    def ensure_run(self, name: str) -> records.RunSummary:
        """The run called `name`, created (with fate unknown) when it does not exist yet."""
        with self._write() as (s, inv):
            row, _ = lookup.ensure_run(s, inv, name)
            return runs.summary(s, row)

    def set_fate(self, run: str, fate: str, reason: str | None = None) -> None:
        with self._write() as (s, inv):
            runs.set_fate(s, inv, run, fate, reason)

    def set_config(self, run: str, items: Mapping[str, str], source: str = "api") -> int:
        """What `run` ran with, into run_config (the run is made if new); items told."""
        with self._write() as (s, inv):
            row, _ = lookup.ensure_run(s, inv, run)
            return ingest.write_config(s, row.id, source, list(items.items()))

    def run_names(self) -> list[str]:
        """Every run's name, oldest first."""
        with self._read() as (s, inv):
            return [row.name for row in runs.ordered(s, inv)]

    def runs(self) -> list[records.RunSummary]:
        with self._read() as (s, inv):
            return [runs.summary(s, row) for row in runs.ordered(s, inv)]

    def run_summary(self, run: str) -> records.RunSummary:
        with self._read() as (s, inv):
            return runs.summary(s, lookup.run_row(s, inv, run))

    def detail(self, run: str) -> records.RunDetail:
        """The run with its hypothesis, patch, deploy steps, log files, probes, launches and
        last verdict, as stored (`Ledger.show` adds its figures)."""
        with self._read() as (s, inv):
            return runs.detail(s, lookup.run_row(s, inv, run))

    def timeline(self) -> list[records.TimelineEntry]:
        """Every row of the investigation in time order."""
        with self._read() as (s, inv):
            return timeline.entries(s, inv)

    # -- steps -----------------------------------------------------------------------------

    def add_steps(
        self,
        run: str,
        rows: Iterable[Mapping[str, Any]],
        *,
        throughput_unit: str | None = None,
    ) -> int:
        """Add per-step rows to a run (created if new); returns how many rows were sent.

        A row is a mapping with `step` (required), `rank` (default 0), any of the step
        columns (ledger.model.terms.STEP_COLUMNS), and further named scalars (metrics).
        """
        return self.write_steps(run, rows, throughput_unit=throughput_unit).steps

    def write_steps(
        self,
        run: str,
        rows: Iterable[Mapping[str, Any]],
        *,
        throughput_unit: str | None = None,
    ) -> StepWrite:
        """`add_steps`, returning what was stored and what could not be (counted, in words)."""
        with self._write() as (s, inv):
            row, _ = lookup.ensure_run(s, inv, run)
            if throughput_unit is not None and row.throughput_unit != throughput_unit:
                row.throughput_unit = throughput_unit
            s.flush()
            return steps.StepWriter(s.connection(), row.id).write_mappings(rows)

    def steps_frame(self, run: str, columns: Iterable[str] | None = None) -> pd.DataFrame:
        """A run's steps as a DataFrame (rank, step, then the step columns), ordered by step.

        Read in bulk (ledger.store.columnar); missing values and NaN both come back as NaN.
        """
        wanted = steps.check_columns(columns)
        with self._read() as (s, inv):
            run_id, launch = launches.ids(s, inv, run)
            return frames.steps_frame(s.connection(), run_id, wanted, launch)

    def metrics_frame(self, run: str) -> pd.DataFrame:
        """A run's further scalars in long form: rank, step, name, value."""
        with self._read() as (s, inv):
            return frames.metrics_frame(s.connection(), *launches.ids(s, inv, run))

    def wide_frame(self, run: str) -> pd.DataFrame:
        """A run as one table: a row per step (and rank), its step columns that hold a
        value, then a column per metric."""
        with self._read() as (s, inv):
            return frames.wide_frame(s.connection(), *launches.ids(s, inv, run))

    def step_columns(
        self, run: str, *, after: int | None = None, launch: int | None = None
    ) -> StepColumns:
        """The steps of a launch of the run (default: the one `run` names, RUN or RUN@N)
        after step `after`, as arrays for ledger.analyze."""
        with self._read() as (s, inv):
            run_id, named = launches.ids(s, inv, run)
            return analysed.step_columns(s, run_id, after, named if launch is None else launch)

    def add_event(
        self, run: str, kind: str, text: str, *, step: int | None = None
    ) -> records.Event:
        """Record an event no log holds (a stall `watch` saw)."""
        with self._write() as (s, inv):
            return runs.add_event(s, inv, run, kind, text, step)

    def record_watch(
        self, run: str, state: MonitorState, outcome: str, summary: str, against: str | None,
        launch: int | None = None,
    ) -> records.StoredComparison:  # fmt: skip
        """Keep a decision of `ledger watch` on a launch of `run` as a comparison row (kind
        'watch')."""
        with self._write() as (s, inv):
            found = compare.watch_decision(s, inv, run, against, state, outcome, summary)
            launches.mark_comparison(s, inv, found.id, run, against, launch)
            return found

    # -- logs ------------------------------------------------------------------------------

    def log_patterns(self) -> list[str]:
        """The user's own step-line regexes, kept in the ledger's settings."""
        with self._read() as (s, _):
            return settings.patterns(s)

    def add_log_pattern(self, pattern: str) -> list[str]:
        settings.check_pattern(pattern)
        with self._write() as (s, _):
            return settings.add_pattern(s, pattern)

    def remove_log_pattern(self, number: int) -> list[str]:
        with self._write() as (s, _):
            return settings.remove_pattern(s, number)

    def _read_log(
        self, file: Path, name: str, patterns: Sequence[str], tokens_per_step: float | None,
        stall_after: float, progress: ingest.Progress | None, cache: ingest.PrefixCache | None,
        fresh: bool,
    ) -> records.IngestResult:  # fmt: skip
        """One read of what is new in a log, in one write session."""
        with self._write() as (s, inv):
            request = ingest.LogRequest(
                (*settings.patterns(s), *patterns), tokens_per_step, stall_after, progress, cache,
                fresh,
            )  # fmt: skip
            return ingest.read_log(s, inv, file, name, request)

    def ingest(
        self,
        path: str | os.PathLike[str],
        run: str | None = None,
        *,
        patterns: Sequence[str] = (),
        tokens_per_step: float | None = None,
        progress: ingest.Progress | None = None,
        stall_after: float = STALL_AFTER_S,
        cache: ingest.PrefixCache | None = None,
        fresh: bool = False,
    ) -> records.IngestResult:
        """Read what is new in a log (or a trainer_state.json) into `run` (default: named
        after the file); `cache` is what `follow` keeps between looks; `fresh`: the output
        of a command ledger ran itself (never refused as a copy of another run's log)."""
        file = Path(path)
        ingest.check_readable(file)
        name = ingest.run_name_for(file) if run is None else run
        if file.name.endswith(".json"):
            with self._write() as (s, inv):
                return trainer_state.ingest(s, inv, file, name)
        for _ in range(OVERTAKEN_TRIES - 1):
            try:
                return self._read_log(file, name, patterns, tokens_per_step, stall_after,
                                      progress, cache, fresh)  # fmt: skip
            except ingest.Overtaken:
                # Another ingest read on from where this one paused: what this one stored
                # stands, and it goes on from the other's place (rolled back to it), as a
                # person would by running ingest again. The result is of the last read.
                log.info("ingest of %s was overtaken by another ingest; going on from its place",
                         file)  # fmt: skip
        return self._read_log(file, name, patterns, tokens_per_step, stall_after, progress,
                              cache, fresh)  # fmt: skip

    def store_imports(self, found: list[TrackedRun], cmap: ColumnMap) -> ImportResult:
        """Store the runs other trackers recorded, read already (new steps only)."""
        with self._write() as (s, inv):
            return imports.store_all(s, inv, found, cmap)

    def log_events(self, run: str, kind: str | None = None) -> list[dict[str, Any]]:
        """A run's log events in order: line, kind, text, rank."""
        with self._read() as (s, inv):
            return ingest.log_events(s, lookup.run_row(s, inv, run).id, kind)

    # -- what the use cases analyse, read in one session each (ledger.usecases) ----------

    def analysis_inputs(
        self, run: str, baseline: float | None
    ) -> tuple[StepColumns, str | None, float | None]:
        """A run's steps (of the launch it names), its unit, and the baseline chosen."""
        with self._read() as (s, inv):
            named = launches.find(s, inv, run)
            row = named.run
            columns, unit = (
                analysed.step_columns(s, row.id, None, named.launch),
                row.throughput_unit,
            )
            if baseline is None:
                baseline = compare.baseline(s, self.investigation_name).value
        return columns, unit, baseline

    def compare_inputs(
        self,
        names: Sequence[str],
        baseline: float | None,
        resolve: int | None,
        settings: str | None = None,
    ) -> compare.Inputs:
        """What compare analyses: each run's steps (or, with `settings`, the analysis kept
        with those settings when its steps have not changed since), unit and fate, and the
        baseline chosen. Unknown names fail here."""
        with self._read() as (s, inv):
            if resolve is not None:
                hypotheses.get(s, inv, resolve)
            return compare.inputs(s, inv, self.investigation_name, names, baseline, settings)

    def why_pairs(
        self, names: Sequence[str], columns: Mapping[str, StepColumns], slower: Iterable[str]
    ) -> list[why.Gathered]:
        """What `why` reads of each run of `slower` against the first of `names`, reusing
        the steps compare read (`columns`, by label)."""
        wanted = set(slower)
        with self._read() as (s, inv):
            return why.compared(s, inv, self.investigation_name, names, columns, wanted)

    def keep_analyses(self, entries: Sequence[kept.Entry]) -> int:
        """Keep analyses compare made, for the next compare of the same steps; returns how
        many were kept. Never waits long for a busy ledger and never fails the comparison:
        what could not be written is said in the log (`ledger.store`), and the next compare
        only analyses those runs again."""
        if not entries or self.read_only:
            return 0
        try:
            brief = session_scope(self.engine, write=True, wait_ms=BRIEF_WAIT_MS)
            with translate_errors(self.location.url), brief as s:
                kept.keep(s, list(entries))
        except StorageError as e:
            log.info("kept no analysis of %s: %s", ", ".join(str(e.run_id) for e in entries), e)
            return 0
        return len(entries)

    def store_resolution(
        self, report: CompareReport, resolve: int, status: HypothesisStatus
    ) -> Resolution:
        """Keep the comparison on hypothesis `resolve` and resolve it as `status`."""
        with self._write() as (s, _):
            return compare.resolve(s, self.investigation_name, report, resolve, status)

    def why_inputs(self, run: str, against: str | None = None) -> why.Gathered:
        """What `why` reasons over for `run` against `against` (None: the default)."""
        with self._read() as (s, inv):
            return why.gather(s, inv, self.investigation_name, run, against)

    def comparisons(self, *, hypothesis: int | None = None) -> list[records.StoredComparison]:
        """Recorded comparisons (compare --resolve, watch decisions), oldest first."""
        with self._read() as (s, inv):
            return compare.stored(s, inv, hypothesis)

    def report_inputs(self, runs: Sequence[str] | None = None) -> report_data.Gathered:
        """What `ledger report` draws, as stored, for `runs` (default: every run)."""
        with self._read() as (s, inv):
            return report_data.gather(
                s, inv, self.investigation_name, self.location.display(), runs
            )

    def live_reads(self) -> LiveReads:
        """Read-only reads for live views: downsampled steps, GPU samples, configuration."""
        from ledger.store.series import LiveReads

        return LiveReads(self.engine, self.location.url, self.investigation_name)

    # -- launches --------------------------------------------------------------------------

    def launches(self, run: str) -> list[records.Launch]:
        """The run's launches in order (`RUN@1`, `RUN@2`…), each with its fate, steps and
        the last verdict on it."""
        with self._read() as (s, inv):
            return launches.detailed(s, lookup.run_row(s, inv, run))

    def begin_launch(self, run: str, source: str, command: str | None = None) -> records.Launch:
        """Start a new launch of `run` (created if new), or reuse its latest while that
        holds nothing yet; the run's fate starts again from `unknown`."""
        with self._write() as (s, inv):
            row, _ = lookup.ensure_run(s, inv, run)
            return launches.begin(s, row, source, command)

    def end_launch(
        self, run: str, launch: int, fate: str, reason: str | None, *, exit_code: int | None = None
    ) -> None:
        """Close a launch with the fate that is known (the run's too, when it is the latest)."""
        with self._write() as (s, inv):
            launches.set_fate(
                s, lookup.run_row(s, inv, run), launch, Fate(fate), reason, exit_code=exit_code,
                ended=True,
            )  # fmt: skip

    def launch_fate(self, run: str, launch: int) -> tuple[str, str | None]:
        """The launch's fate and reason as stored now."""
        with self._read() as (s, inv):
            row = lookup.run_row(s, inv, run)
            return launches.fate_and_reason(s, row, launch)

    # -- the torch hook --------------------------------------------------------------------

    def start_metered_run(
        self, run: str, *, host: str | None, command: str | None, launched_at: datetime
    ) -> records.MeteredRun:
        """Create the run if needed and mark it running, for a StepMeter (see store.meter)."""

        def start() -> records.MeteredRun:
            with self._write() as (s, inv):
                return meter.start_run(
                    s, inv, run, host=host, command=command, launched_at=launched_at
                )

        return meter.retry_race(start)

    def write_meter_batch(
        self,
        run_id: int,
        rows: Sequence[Mapping[str, Any]],
        *,
        metrics: Iterable[tuple[int, int, str, Any]] = (),
        dropped: int = 0,
        cost_us: float | None = None,
        fates: Sequence[FateChange] = (),
        config: Mapping[str, str] | None = None,
        gpus: Sequence[Mapping[str, Any]] = (),
    ) -> StepWrite:
        """One transaction of a StepMeter's writer: steps, metrics, drops, cost, config, GPUs."""
        with self._write() as (s, _):
            return meter.write_batch(
                s.connection(), run_id, rows, metrics=metrics, dropped=dropped,
                cost_us=cost_us, fates=fates, config=config, gpus=gpus,
            )  # fmt: skip

    def meter_summary(self, run: str) -> records.MeterSummary:
        with self._read() as (s, inv):
            return meter.summary(s, inv, run)

    def run_id(self, run: str) -> int:
        with self._read() as (s, inv):
            return lookup.run_row(s, inv, run).id
