"""Read-only reads for live views (`ledger serve`): a run's step columns downsampled per
pixel bucket, the GPU samples the hook took during a run, a run's configuration beside a
reference run's, and a cheap version of the investigation that changes when a row a view
shows is written.

Downsampling keeps each bucket's minimum and maximum, never a mean, so a single stalled
step among a million still reaches the chart. The rows are read in bulk
(ledger.store.columnar, as compare reads them) and bucketed with numpy, one rank's
contiguous run of steps at a time (the primary key's order: no sort in the database).
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.db.engine import session_scope, translate_errors
from ledger.model.records import from_row
from ledger.model.series import ConfigItem, Downsampled, Envelope, GpuReading, RunConfiguration
from ledger.store import launches, lookup
from ledger.store.columnar import BULK_ROWS, fetch_floats
from ledger.store.steps import column_counts, placeholder, rank_bounds

if TYPE_CHECKING:
    import numpy as np

# The step columns a run page draws.
CHART_COLUMNS: tuple[str, ...] = (
    "throughput",
    "loss",
    "step_time_s",
    "wait_s",
    "memory_allocated_mib",
    "memory_reserved_mib",
)
KEPT_ANSWERS = 32  # downsampled answers kept (a page's charts, zooms, compared runs)
MAX_WIDTH = 8192  # buckets: wider than any screen
PER_RANK_LIMIT = 64  # ranks drawn one line each; more would be a blur


class LiveReads:
    """The reads above on one ledger's engine and investigation (Ledger.live_reads())."""

    def __init__(self, engine: Engine, url: str, investigation: str) -> None:
        self.engine = engine
        self.url = url
        self.investigation = investigation
        self._kept: OrderedDict[tuple[Any, ...], tuple[Any, Downsampled]] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def _read(self) -> Iterator[tuple[Session, int]]:
        with translate_errors(self.url), session_scope(self.engine, write=False) as s:
            yield s, lookup.investigation_id(s, self.investigation)

    def version(self) -> str:
        """A string that changes when a run, step, event, deploy step, probe, GPU sample,
        comparison, hypothesis or patch is written: what a live page polls. Each part is an
        aggregate that reads one end of an index, not a scan."""
        with self._read() as (s, inv):
            conn = s.connection()
            mark = placeholder(conn.dialect.name)
            latest = ", ".join(
                f"(SELECT max(id) FROM {table})"
                for table in ("comparison", "log_event", "deploy_step", "probe", "gpu_sample",
                              "patch", "hypothesis")
            )  # fmt: skip
            totals = conn.exec_driver_sql(
                f"SELECT {latest}, (SELECT max(resolved_at) FROM hypothesis), "
                f"(SELECT baseline_value FROM investigation WHERE id = {mark})",
                (inv,),
            ).one()
            per_run = conn.exec_driver_sql(
                "SELECT r.id, r.fate, r.started_at, r.ended_at, "
                "(SELECT max(number) FROM launch l WHERE l.run_id = r.id), "
                "(SELECT max(s.step) FROM step s WHERE s.run_id = r.id AND s.launch = "
                "(SELECT max(u.launch) FROM step u WHERE u.run_id = r.id) AND s.rank = "
                "(SELECT min(t.rank) FROM step t WHERE t.run_id = r.id)) "
                f"FROM run r WHERE r.investigation_id = {mark} ORDER BY r.id",
                (inv,),
            ).all()
        seen = repr((tuple(totals), [tuple(row) for row in per_run]))
        return hashlib.sha256(seen.encode()).hexdigest()[:16]

    def downsampled(
        self,
        run: str,
        width: int,
        *,
        columns: Sequence[str] = CHART_COLUMNS,
        first: int | None = None,
        last: int | None = None,
    ) -> Downsampled:
        """The run's steps from `first` to `last` (default: all) in at most `width` buckets.

        Kept (a few dozen answers) until the run's steps change: its ranks, first or last
        step, each read from one end of the primary key."""
        width = max(1, min(int(width), MAX_WIDTH))
        with self._read() as (s, inv):
            conn = s.connection()
            named = launches.find(s, inv, run)  # RUN (its latest launch) or RUN@N
            run_id, launch = named.run.id, named.launch
            bounds = step_bounds(conn, run_id, launch)
            key = (run_id, launch, width, tuple(columns), first, last)
            with self._lock:
                kept = self._kept.get(key)
            if kept is not None and kept[0] == bounds:
                return kept[1]
            _, _, run_first, run_last = bounds
            low = run_first if first is None or run_first is None else max(first, run_first)
            high = run_last if last is None or run_last is None else min(last, run_last)
            if low is None or high is None or high < low:
                return Downsampled(run, width, run_first, run_last, 0, 0, [], {})
            mark = placeholder(conn.dialect.name)
            ranged = (
                f"FROM step WHERE run_id = {mark} AND launch = {mark} "
                f"AND step BETWEEN {mark} AND {mark}"
            )
            params = (run_id, launch, low, high)
            # one read of every column (a count of which hold values would be a second scan)
            table = fetch_floats(
                conn, ("rank", "step", *columns), f"{ranged} ORDER BY rank, step", params,
                bulk=high - low >= BULK_ROWS,
            )  # fmt: skip
        found = bucketed(run, table, tuple(columns), width, int(low), int(high), bounds[2:])
        with self._lock:
            self._kept[key] = (bounds, found)
            while len(self._kept) > KEPT_ANSWERS:
                self._kept.popitem(last=False)
        return found

    def gpu_readings(self, run: str) -> list[GpuReading]:
        """The GPU samples the hook took during the run, oldest first (probes' are in show())."""
        with self._read() as (s, inv):
            run_id = lookup.run_id(s, inv, run)
            rows = s.scalars(
                select(m.GpuSample)
                .where(m.GpuSample.run_id == run_id, m.GpuSample.probe_id.is_(None))
                .order_by(m.GpuSample.sampled_at, m.GpuSample.id)
            ).all()
            return [
                from_row(GpuReading, g, sampled_at=g.sampled_at and g.sampled_at.isoformat())
                for g in rows
            ]

    def configuration(self, run: str, reference: str | None) -> RunConfiguration:
        """What `run` ran with, each value beside `reference`'s (None: no reference)."""
        with self._read() as (s, inv):
            mine = _config(s, lookup.run_id(s, inv, run))
            theirs = _config(s, lookup.run_id(s, inv, reference)) if reference else {}
        items = [
            ConfigItem(source, key, value, theirs.get((source, key)),
                       reference is not None and theirs.get((source, key)) != value)
            for (source, key), value in mine.items()
        ]  # fmt: skip
        missing = [
            ConfigItem(source, key, None, value, True)
            for (source, key), value in theirs.items()
            if (source, key) not in mine
        ]
        return RunConfiguration(run, reference, items, missing)


def step_bounds(conn: Connection, run_id: int, launch: int) -> tuple[Any, Any, Any, Any]:
    """(lowest rank, highest rank, first step, last step) of a launch, from the ends of the
    primary key (run_id, launch, rank, step), one aggregate a subquery (SQLite reads an end
    of the index for each, not the range); a scan only for a run of very many ranks."""
    low, high = rank_bounds(conn, run_id, launch)
    mark = placeholder(conn.dialect.name)
    if low is None or high is None:
        return None, None, None, None
    if high - low >= PER_RANK_LIMIT:
        _, _, first, last = column_counts(
            conn, f"FROM step WHERE run_id = {mark} AND launch = {mark}", (run_id, launch),
            ("step",),
        )  # fmt: skip
        return low, high, first, last
    ranks = range(low, high + 1)
    ends = ", ".join(
        f"(SELECT {f}(step) FROM step WHERE run_id = {mark} AND launch = {mark} AND rank = {mark})"
        for _ in ranks
        for f in ("min", "max")
    )
    params = tuple(v for rank in ranks for v in (run_id, launch, rank, run_id, launch, rank))
    row = conn.exec_driver_sql(f"SELECT {ends}", params).one()
    firsts = [v for v in row[0::2] if v is not None]
    lasts = [v for v in row[1::2] if v is not None]
    return low, high, min(firsts), max(lasts)


def _config(session: Session, run_id: int) -> dict[tuple[str, str], str | None]:
    rows = session.scalars(
        select(m.RunConfig)
        .where(m.RunConfig.run_id == run_id)
        .order_by(m.RunConfig.source, m.RunConfig.key)
    ).all()
    return {(r.source, r.key): r.value for r in rows}


def bucketed(
    run: str,
    table: np.ndarray,
    held: Sequence[str],
    width: int,
    low: int,
    high: int,
    bounds: tuple[int | None, int | None],
) -> Downsampled:
    """Bucket rows (rank, step, *held) ordered by rank then step: bucket k holds the steps
    from low + k·span/width on, span = high − low + 1."""
    import numpy as np

    span = high - low + 1
    buckets = min(width, span)
    n_cols = len(held)
    lows = np.full((n_cols, buckets), np.nan)
    highs = np.full((n_cols, buckets), np.nan)
    first_step = np.full(buckets, np.inf)
    per_rank: dict[int, Any] = {}
    rank = table[:, 0]
    ranks = np.unique(rank)
    cut = np.flatnonzero(np.diff(rank)) + 1  # where each rank's rows begin
    throughput = list(held).index("throughput") + 2 if "throughput" in held else None
    for segment in np.split(table, cut):
        steps = segment[:, 1].astype(np.int64)
        bucket = (steps - low) * buckets // span
        starts = np.concatenate(([0], np.flatnonzero(np.diff(bucket)) + 1))
        where = bucket[starts]
        np.fmin.at(first_step, where, steps[starts].astype(np.float64))
        with np.errstate(invalid="ignore"):
            for i in range(n_cols):
                values = segment[:, i + 2]
                lows[i, where] = np.fmin(lows[i, where], np.fmin.reduceat(values, starts))
                highs[i, where] = np.fmax(highs[i, where], np.fmax.reduceat(values, starts))
            if throughput is not None and 1 < len(ranks) <= PER_RANK_LIMIT:
                values = segment[:, throughput]
                seen = ~np.isnan(values)
                sums = np.add.reduceat(np.where(seen, values, 0.0), starts)
                counts = np.add.reduceat(seen.astype(np.int64), starts)
                mean = np.full(buckets, np.nan)
                mean[where] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
                per_rank[int(segment[0, 0])] = mean
    kept = np.isfinite(first_step)
    columns = {
        name: Envelope(_floats(lows[i, kept]), _floats(highs[i, kept]))
        for i, name in enumerate(held)
        if not np.isnan(highs[i]).all()  # a column the run never recorded is not sent
    }
    return Downsampled(
        run=run,
        width=width,
        first_step=bounds[0],
        last_step=bounds[1],
        rows=len(table),
        ranks=len(ranks),
        steps=[int(v) for v in first_step[kept]],
        columns=columns,
        per_rank={r: _floats(mean[kept]) for r, mean in per_rank.items()},
    )


def _floats(values: np.ndarray) -> list[float | None]:
    """NaN and ±inf as None: JSON has neither, and the chart shows a gap there."""
    return [v if math.isfinite(v) else None for v in values.tolist()]
