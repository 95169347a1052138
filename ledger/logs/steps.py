"""Steps and bars into the run state: step numbers (a line's own, a position in an epoch, a
bar's count, or the next one), distinct steps and ranks, throughput, a restart told by a
step counter that falls back, the end told by a last step or a bar at its total, and the
rows ingest stores. The reader's hot path calls `take()` for every step line."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from itertools import repeat

from ledger.logs import pairs
from ledger.logs.keys import LOSS
from ledger.logs.numbers import Unreadable, int64
from ledger.logs.progress import Bar
from ledger.logs.record import Recorder
from ledger.logs.runstate import MAX_BARS, MAX_RANKS, RunFacts, RunState
from ledger.logs.shapes import Read
from ledger.logs.state import BIN, EXACT
from ledger.logs.templates import FLAT_METRICS, FLAT_ROW, FLAT_STEP_TIME, FLAT_THROUGHPUT, Flat
from ledger.model.logs import INT64_MAX
from ledger.model.terms import EventKind as K
from ledger.model.terms import RunPhase

_INF = float("inf")
_log = math.log
_EVAL = re.compile(r"eval|valid|test|predict|sanity", re.I)
# A bar's description that carries metrics: torchtune's `<epoch>|<step>|Loss: <f>`.
_DESC_METRIC = re.compile(
    r"^(?:(?P<epoch>\d{1,9})\|(?P<step>\d{1,18})\|)?(?P<metrics>.*\b[Ll]oss\s*[:=]\s*[-+.\d].*)$"
)
_EPOCH_OF = re.compile(r"[Ee]poch\s*[:=]?\s*(\d+)(?:\s*/\s*(\d+))?")


class Steps:
    """Counts steps and reads bars, over a RunState."""

    def __init__(
        self,
        state: RunState,
        rec: Recorder,
        *,
        rows: bool,
        flush_bar: Callable[[], None],
    ) -> None:
        self.state = state
        self.rec = rec
        self.rows = rows
        self.flush_bar = flush_bar
        self.ranks = set(state.ranks)
        # The last bar text's reading (text, loss, metrics): a redrawn bar repeats its
        # postfix state after state, and reading the pairs was most of a bar state's cost.
        self._said: tuple[str, float | None, tuple[tuple[str, float], ...]] | None = None

    # -- step lines --------------------------------------------------------------------------

    def take_read(self, line: int, read: Read) -> None:
        self.take(line, read.flat, read.names, read.unit, read.shape, read.summary)
        for name in read.dropped:  # the line is read; each value it lost is counted
            self.rec.unread_value(line, f"value out of range: {name}")

    def take(
        self, line: int, flat: Flat, names: tuple[str, ...], unit: str | None, shape: str,
        summary: bool,
    ) -> None:  # fmt: skip
        """Count one step line (a Flat, see ledger.logs.templates)."""
        st = self.state
        run = st.run
        rank = flat[0]
        if rank is None:
            rank = 0
        elif not 0 <= rank <= INT64_MAX:
            raise Unreadable("rank out of range")
        step, position = flat[1], flat[3]
        if position is not None:
            if "epochs" in names:  # `Epoch [3/10], Step [100/600]`: the run is 10 epochs
                epochs = flat[FLAT_METRICS][names.index("epochs")]
                if epochs == epochs and 0 < epochs < 1e9:
                    st.epochs = int(epochs)
            step, total, summary = self._position(step, flat[2], position, flat[4], summary)
        else:
            total = flat[2]
        if summary:
            self._summary(flat, names, rank, step)
            return
        if step is None:
            step = self._next(rank)
        elif not -INT64_MAX <= step <= INT64_MAX:
            raise Unreadable("step out of range")
        if total:
            st.total = int64(total)
        top = run.max_step
        if (
            top is not None
            and step < top
            and (run.since_step in ("fatal", "ended") or (step <= 1 and top >= 10))
        ):
            self.rec.restart(line, f"step {step} after step {top}")
            run = st.run
            top = None
        st.last_by_rank[rank] = step
        st.last_step = step
        if rank not in self.ranks and len(self.ranks) < MAX_RANKS:
            self.ranks.add(rank)
            st.ranks.append(rank)
        throughput = flat[FLAT_THROUGHPUT]
        derive = st.tokens_per_step and flat[FLAT_STEP_TIME] and unit in (None, "tok/s")
        if throughput is None and derive:
            throughput = st.tokens_per_step / flat[FLAT_STEP_TIME]
            st.unit = st.unit or "tok/s"
        if throughput is not None and -_INF < throughput < _INF:  # not NaN, not inf
            rate = st.rate
            if rate.first is None:
                rate.first = throughput
                rate.unit = unit or st.unit
            rate.last = throughput
            q = rate.sample  # Quantiles.add, written out: this runs for every step line
            q.n += 1
            if q.n <= EXACT:
                q.exact.append(throughput)
            if throughput > 0:
                b = int(_log(throughput) * BIN)
                bins = q.bins
                bins[b] = bins.get(b, 0) + 1
            else:
                q.zeros += 1
        st.steps.add(step)
        if top is None or step > top:
            run.max_step = step
            run.activity += 1
            if not run.trained or run.phase != RunPhase.TRAINING:
                run.trained = True
                run.phase = RunPhase.TRAINING
                st.content.evidence = True
            run.phase_what = ""  # the last step, spelled out when asked (fate.facts)
            if st.max_step is None or step > st.max_step:
                st.max_step = step
        if run.since_step:
            run.since_step = ""
        if st.total and step >= st.total and step == run.max_step:
            self.rec.finished(f"step {step} of {st.total}", line, said=True)
        shapes = st.shapes
        shapes[shape] = shapes.get(shape, 0) + 1
        if self.rows:
            self._row(rank, step, flat, names, throughput)

    def take_many(
        self, line: int, flats: list[Flat], names: tuple[str, ...], unit: str | None,
        shape: str, summary: bool,
    ) -> None:  # fmt: skip
        """`take()` for consecutive lines from `line` on, the common case written out (a
        step line of a known rank at or after the last step): the hot path of a log."""
        st = self.state
        take = self._take_one
        total = st.total  # a line that repeats the run's known length changes nothing
        if (
            summary or not flats or flats[0][3] is not None
            or (flats[0][2] is not None and flats[0][2] != total)
        ):  # fmt: skip
            for i, flat in enumerate(flats):
                take(line + i, flat, names, unit, shape, summary)
            return
        run = st.run
        ranks = self.ranks
        by_rank = st.last_by_rank
        steps = st.steps
        rate = st.rate
        q = rate.sample
        bins = q.bins
        exact = q.exact
        rows = self.rows
        out_steps = self.rec.out.steps
        out_metrics = self.rec.out.metrics
        log, inf, scale, kept = _log, _INF, BIN, EXACT
        top = run.max_step
        # what only a line taken the slow way changes, checked again after each such line
        settled = rate.first is not None and not run.since_step
        done = 0
        step = None
        for i, flat in enumerate(flats):
            rank = flat[0]
            if rank is None:  # a line without a rank is rank 0's
                rank = 0
            step = flat[1]
            tp = flat[9]
            if (
                not settled or top is None or step is None or rank not in ranks or step < top
                or step > INT64_MAX or tp is None or not -inf < tp < inf
                or flat[3] is not None or (flat[2] is not None and flat[2] != total)
            ):  # fmt: skip
                if done:
                    st.last_step = flats[i - 1][1]
                    rate.last = flats[i - 1][9]
                    self._advanced(line + i - 1, run, done, top, shape)
                    done = 0
                take(line + i, flat, names, unit, shape, summary)
                run = st.run
                top = run.max_step
                total = st.total
                settled = rate.first is not None and not run.since_step
                continue
            by_rank[rank] = step
            n = q.n = q.n + 1
            if n <= kept:
                exact.append(tp)
            if tp > 0:
                b = int(log(tp) * scale)
                bins[b] = bins.get(b, 0) + 1
            else:
                q.zeros += 1
            last = steps.runs[-1]
            if step != last[1]:
                if step == last[1] + last[2] and last[2]:
                    last[1] = step
                    steps.count += 1
                else:
                    steps.add(step)
            if step > top:
                top = step
                run.activity += 1
            done += 1
            if rows:
                out_steps.append((rank, step, *flat[5:13]))
                values = flat[13]
                if values:
                    out_metrics.extend(zip(repeat(rank), repeat(step), names, values, strict=False))
        if done:
            rate.last = flats[-1][9]
            st.last_step = step
            self._advanced(line + len(flats) - 1, run, done, top, shape)

    def _advanced(self, line: int, run: RunFacts, lines: int, top: int | None, shape: str) -> None:
        """What the written-out path of take_many leaves to do after `lines` lines."""
        st = self.state
        if top is not None and (run.max_step is None or top > run.max_step):
            run.max_step = top
            run.phase_what = ""
            if st.max_step is None or top > st.max_step:
                st.max_step = top
            if st.total and top >= st.total:
                self.rec.finished(f"step {top} of {st.total}", line, said=True)
        st.shapes[shape] = st.shapes.get(shape, 0) + lines

    def _take_one(
        self, line: int, flat: Flat, names: tuple[str, ...], unit: str | None, shape: str,
        summary: bool,
    ) -> None:  # fmt: skip
        try:
            self.take(line, flat, names, unit, shape, summary)
        except Unreadable as exc:
            self.rec.unread(line, str(exc))

    def _row(
        self, rank: int, step: int, flat: Flat, names: tuple[str, ...], tp: float | None
    ) -> None:
        out = self.rec.out
        row = flat[FLAT_ROW]
        if tp is not None and row[4] is None:
            row = (*row[:4], tp, *row[5:])
        out.steps.append((rank, step, *row))
        values = flat[FLAT_METRICS]
        if values:
            out.metrics.extend(zip(repeat(rank), repeat(step), names, values, strict=False))

    def _position(
        self, step: int | None, total: int | None, position: int, epoch: float | None,
        summary: bool,
    ) -> tuple[int | None, int | None, bool]:  # fmt: skip
        """A position inside an epoch: the global step, when the epoch is known. A position
        of another length, in an epoch only an earlier line named, is an evaluation."""
        st = self.state
        said = epoch is not None
        if epoch is None and st.epoch is not None:
            epoch = float(st.epoch)
        if epoch is not None and total and float(epoch).is_integer():
            if st.epoch_len is None:
                st.epoch_len = total
            elif total != st.epoch_len and not said:
                summary = True  # Keras' `313/313 [===]` of evaluate() after the epochs
            e = int(epoch)
            if st.epoch_base is None or e < st.epoch_base:
                st.epoch_base = e
            st.epoch_zero = st.epoch_zero or e == 0
            if step is None:
                step = int64((e - st.epoch_base) * total + position)
            if st.epochs and not st.total:  # the run's length, when the epochs are told
                last = st.epochs - (1 if st.epoch_zero else 0)  # after the fits before it
                st.total = int64(max(last - st.epoch_base + 1, 1) * total)
            return step, None, summary  # the epoch's length, not the run's
        return (step if step is not None else position), total, summary

    def _next(self, rank: int) -> int:
        """A step line without a number: the training bar's count, else the next number."""
        st = self.state
        last = st.last_by_rank.get(rank, 0)
        self.flush_bar()
        bar = st.bar
        if bar is not None and not bar.loading and not _EVAL.search(bar.desc) and bar.n > last:
            return int64(int(bar.n))
        return last + 1

    def _summary(self, flat: Flat, names: tuple[str, ...], rank: int, step: int | None) -> None:
        """Evaluation figures repeat a step: they go to that step, which is not counted."""
        st = self.state
        if step is None:
            step = st.last_by_rank.get(rank)
        st.content.evidence = True
        if step is None or not self.rows:
            return
        values = flat[FLAT_METRICS]
        if values:
            self.rec.out.metrics.extend(
                zip(repeat(rank), repeat(step), names, values, strict=False)
            )

    # -- bars ------------------------------------------------------------------------------

    def bar(self, bar: Bar) -> None:
        st = self.state
        rec = self.rec
        prev = next((b for b in st.bars if b.key == bar.key), None)
        st.bar = bar
        st.content.evidence = True
        evaluating = bool(_EVAL.search(bar.desc))
        if bar.loading:
            rec.start(bar.line, bar.describe(), strong=False)  # weights again, after a failure
            rec.loading(bar.line, bar.describe())
        elif not evaluating:
            self._training_bar(bar, prev)
        if bar.done and (prev is None or not prev.done):
            rec.emit(bar.line, K.PROGRESS, bar.describe(), None, st.last_step)
            if (
                not bar.loading
                and not evaluating
                and (st.main_bar == (bar.desc, bar.total) or self._last_epoch(bar))
            ):
                rec.finished(bar.describe(), bar.line)
        if prev is not None:
            st.bars.remove(prev)
        elif len(st.bars) >= MAX_BARS:
            del st.bars[0]
        st.bars.append(bar)

    def _training_bar(self, bar: Bar, prev: Bar | None) -> None:
        st = self.state
        main = st.main_bar is None or st.main_bar == (bar.desc, bar.total)
        if prev is not None and bar.n < prev.n and main and st.run.since_step in ("fatal", "ended"):
            self.rec.restart(bar.line, f"{bar.describe()} after {prev.describe()}")
        run = st.run
        if prev is None or bar.n > prev.n or (prev.done and not bar.done):
            run.activity += 1
        if bar.n > 0:
            run.trained = True
        run.phase = RunPhase.TRAINING
        run.phase_what = bar.describe()
        m = _EPOCH_OF.search(bar.desc)
        if m is not None:
            e = int(m.group(1))
            st.epoch_zero = st.epoch_zero or e == 0
            if m.group(2):
                st.epochs = int(m.group(2))
        if bar.rate is not None:
            rate = st.bar_rate
            if rate.unit is None:
                rate.unit = bar.unit
            if bar.unit == rate.unit:
                rate.add(bar.rate)
        if st.main_bar is None and bar.total and "epoch" not in bar.desc.lower():
            st.main_bar = (bar.desc, bar.total)
        if (bar.postfix and "=" in bar.postfix) or _DESC_METRIC.search(bar.desc):
            self._bar_step(bar, m)

    def _bar_step(self, bar: Bar, epoch: re.Match[str] | None) -> None:
        """A bar state with metrics after its rate (`loss=2.3, acc=0.8`), or in its
        description (torchtune's `1|100|Loss: 1.23`), is a step."""
        said = _DESC_METRIC.search(bar.desc)
        text = f"{said.group('metrics')} | {bar.postfix}" if said else bar.postfix
        loss, metrics = self._metrics_of(text)
        if loss is None and not metrics:
            return
        n = int64(int(bar.n))
        if n <= 0:
            return  # no step done yet: the postfix shows what came before
        step = n
        if said is not None and said.group("step"):
            step = int64(int(said.group("step")))  # the global step the description says
        elif epoch is not None and bar.total:
            e = int(epoch.group(1))
            st = self.state
            if st.epoch_base is None or e < st.epoch_base:
                st.epoch_base = e
            step = int64((e - st.epoch_base) * int(bar.total) + n)
        flat = (
            0, step, None, None, None, None, None, None, None, bar.rate, loss,
            None, None, tuple(x for _n, x in metrics),
        )  # fmt: skip
        unit = _bar_unit(bar.unit)
        self.state.unit = self.state.unit or unit
        self.take(bar.line, flat, tuple(n for n, _x in metrics), unit, "bar postfix", False)

    def _metrics_of(self, text: str) -> tuple[float | None, tuple[tuple[str, float], ...]]:
        """The loss and other metrics a bar's text says (`v_num` is Lightning's version,
        not a metric); the last text's reading is kept, a text that raises is not."""
        last = self._said
        if last is not None and last[0] == text:
            return last[1], last[2]
        values, _unit = pairs.find(text, [], None)
        line = pairs.convert(pairs.texts_of(text, values), values, None)
        metrics = tuple((n, x) for n, x in line.metrics if n != "v_num")
        loss = line.values.get(LOSS)
        self._said = (text, loss, metrics)
        return loss, metrics

    def _last_epoch(self, bar: Bar) -> bool:
        m = _EPOCH_OF.search(bar.desc)
        if m is None:
            return False
        e = int(m.group(1))
        epochs = int(m.group(2)) if m.group(2) else self.state.epochs
        if not epochs:
            return False
        return e >= epochs - (1 if self.state.epoch_zero else 0)


def _bar_unit(unit: str | None) -> str | None:
    if unit is None:
        return None
    from ledger.logs.keys import rate_unit

    return rate_unit(unit) or unit
