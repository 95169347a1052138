"""The Ledger's methods for launches and for the torch-side hook: a base class of
ledger.store.ledger.Ledger, kept apart so that the facade stays one screenful per concern.

Each method owns its transaction, as every method of the facade does (`_read`, `_write`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from ledger.model import records
from ledger.model.records import FateChange, StepWrite
from ledger.model.terms import Fate
from ledger.store import launches, lookup, meter


class LaunchMethods:
    """Launches of a run (ledger.store.launches) and the StepMeter's writes."""

    if TYPE_CHECKING:

        def _read(self) -> AbstractContextManager[tuple[Session, int]]: ...

        def _write(self) -> AbstractContextManager[tuple[Session, int]]: ...

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
        self, run: str, launch: int, fate: str, reason: str | None, *,
        exit_code: int | None = None,
    ) -> None:  # fmt: skip
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
        """One transaction of a StepMeter's writer: steps, metrics, drop count, cost, the
        run's configuration, GPU samples, fates."""
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
