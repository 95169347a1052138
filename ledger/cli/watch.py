"""`ledger watch`: follow a relaunch and say the moment it is back, slower, dead or stalled."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO

import click

from ledger.cli.app import cli, emit, json_option, open_ledger, warn
from ledger.cli.params import Percent, seconds
from ledger.errors import LedgerError
from ledger.model.terms import WATCH_DECISIONS, WatchOutcome, WatchPhase
from ledger.watch.codes import EXIT_CODES

if TYPE_CHECKING:
    from ledger.model.analysis import MonitorState
    from ledger.model.records import WatchResult, WatchUpdate
    from ledger.usecases.ledger import Ledger


@cli.command()
@click.argument("run")
@click.option(
    "--log", "log", type=click.Path(dir_okay=False), metavar="PATH",
    help="Follow this log file as it grows (it may not exist yet).",
)  # fmt: skip
@click.option("--against", metavar="RUN", help="Compare with this run instead of the baseline.")
@click.option(
    "--threshold", type=Percent(), default="2", show_default=True, metavar="PCT",
    help="Smallest difference that counts, in percent (within it: same).",
)  # fmt: skip
@click.option(
    "--stall-after", type=seconds(zero=False), metavar="S",
    help="Silence for this long is a stall (default: from the run's own pace; 15 min "
    "while it loads).",
)  # fmt: skip
@click.option(
    "--timeout", type=seconds(zero=False), metavar="S",
    help="Give up after this long: undecided.",
)  # fmt: skip
@click.option(
    "--interval", type=seconds(zero=False), default=0.25, show_default=True, metavar="S",
    help="Seconds between looks.",
)  # fmt: skip
@click.option(
    "--notify", metavar="CMD",
    help="Run this shell command once at the decision, with the JSON result on its stdin "
    "(notify-send, a chat webhook with curl -d @-, a pager).",
)  # fmt: skip
@click.option(
    "--stop-on", "stop_on", metavar="OUTCOMES", default="",
    help="Stop a trainer watch launched (-- COMMAND) at these outcomes, comma-separated "
    "(regression, failed, stalled, same, improvement, undecided). Default: never; a viewer "
    "(tail -F, kubectl logs -f…) is always stopped at the decision.",
)  # fmt: skip
@json_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def watch(
    run: str,
    log: str | None,
    against: str | None,
    threshold: float,
    stall_after: float | None,
    timeout: float | None,
    interval: float,
    notify: str | None,
    stop_on: str,
    as_json: bool,
    command: tuple[str, ...],
) -> None:
    """Follow RUN until it is back to the baseline, slower, dead or stalled:
    ledger watch RUN [--log PATH | -- COMMAND…]

    The source is a log file (--log), a command's standard output (after --: `ssh host
    tail -n +1 -F train.log`, or the training command itself), or, with neither, the
    run's rows in the ledger (a StepMeter writing from elsewhere). What it reads is stored
    as `ledger ingest` would store it. The reference is the investigation's baseline, or
    --against RUN (RUN@N names one launch of a run).

    A command, or a log the run has not read yet, is a new launch of RUN (RUN@2, RUN@3…):
    only what it produces is judged. So is a relaunch appended to a log whose run finished
    or failed: watch waits for it, and judges it alone. A viewer command (tail -F,
    kubectl/docker logs -f, journalctl -f, through ssh or not) is stopped at the decision;
    a trainer is not: watch says the decision at once, then stays until the trainer ends,
    storing all its output and its fate from how it ended (--stop-on stops it instead).
    Ctrl-C or SIGTERM leaves a trainer running, and says so.

    It decides as soon as the statistics allow — the interval is valid however often it is
    looked at (docs/watch.md) — and at once when the run dies or stops printing. Exit
    status: 0 same or faster, 1 regression (and nothing else), 3 failed (also a trainer
    that failed after the decision), 4 stalled, 5 undecided (timeout, or the run ended
    first), 2 usage, 6 an error that stopped watch, 130 Ctrl-C (128 + the signal: 143
    SIGTERM, 129 SIGHUP).

    \b
      ledger watch eager_dynamiccopy --log train_eager_dynamiccopy.log
      ledger watch eager_dynamiccopy --against eager_unpadded -- ssh box tail -n +1 -F train.log
      ledger watch eager_b --stop-on regression,failed -- torchrun --nproc-per-node 8 train.py
      ledger watch eager_dynamiccopy --notify 'notify-send "ledger watch"'
    """
    from ledger.watch import ERROR

    stops = [w.strip() for w in stop_on.split(",") if w.strip()]
    with _signals_as_interrupts() as received:
        try:
            lg = open_ledger()
        except LedgerError as exc:
            raise _watch_error(exc, ERROR) from exc
        try:
            code = _watch(lg, run, log, against, threshold, stall_after, timeout, interval,
                          notify, stops, as_json, command, received)  # fmt: skip
        finally:
            lg.close()
    sys.exit(code)


def _watch(
    lg: Ledger, run: str, log: str | None, against: str | None, threshold: float,
    stall_after: float | None, timeout: float | None, interval: float, notify: str | None,
    stop_on: list[str], as_json: bool, command: tuple[str, ...], received: list[int],
) -> int:  # fmt: skip
    from ledger.watch import ERROR
    from ledger.watch import watch as follow_run

    status = Status(sys.stderr if as_json else sys.stdout)
    watcher = None
    result: WatchResult | None = None
    try:
        watcher = follow_run(
            lg, run, log=log, command=command or None, against=against, threshold=threshold,
            stall_after=stall_after, timeout=timeout, interval=interval, stop_on=stop_on,
        )  # fmt: skip
        updates = watcher.updates()
        try:
            for update in updates:
                status.show(update)
                if update.decision is not None:
                    _said_at_once(status, update.decision, notify)
                result = update.result
        except KeyboardInterrupt:
            updates.close()  # the watcher stores what is known, and stops a viewer
            status.end()
            if watcher.said:
                warn(f"{run}: {watcher.said}")
            number = received[0] if received else signal.SIGINT
            if number == signal.SIGINT:
                raise
            click.echo(f"Error: interrupted by {signal.Signals(number).name} (what was "
                       "recorded before is kept)", err=True)  # fmt: skip
            return 128 + number
    except LedgerError as exc:
        if exc.exit_code == 2:
            raise
        raise _watch_error(exc, ERROR) from exc
    status.end()
    assert result is not None  # the watcher's last update carries it
    if notify and (watcher is None or not _decided_before(result)):
        _notify(notify, result)
    if status.tty:
        click.echo("\a", nl=False)
    emit(result, as_json, render_ending if _decided_before(result) else render_result)
    return result.exit_status if result.exit_status is not None else 0


def _decided_before(result: WatchResult) -> bool:
    """The decision was said (and notified) while watch stayed with the trainer."""
    return result.role == "trainer" and not result.left_running and not result.stopped and (
        result.outcome in (*WATCH_DECISIONS, WatchOutcome.FAILED)
    )  # fmt: skip


def _said_at_once(status: Status, decision: WatchResult, notify: str | None) -> None:
    """A decision while watch stays with a trainer: said (and notified) now, not at its end."""
    status.line(render_result(decision))
    status.line(
        f"{decision.run}: the trainer runs on to its own end; watch keeps storing its output "
        "(Ctrl-C stops watching and leaves it running; --stop-on stops it at a decision)"
    )
    if notify:
        _notify(notify, decision)


class WatchFailed(click.ClickException):
    """Raised when an error stops `ledger watch`: exit 6, so that 1 only ever means regression."""

    exit_code = 6  # ledger.watch.ERROR


def _watch_error(exc: Exception, code: int) -> WatchFailed:
    failed = WatchFailed(str(exc))
    assert failed.exit_code == code
    return failed


@contextlib.contextmanager
def _signals_as_interrupts() -> Iterator[list[int]]:
    """SIGTERM and SIGHUP end watch as Ctrl-C does (the watcher then stores what is known
    and stops a viewer); the list says which signal came."""
    received: list[int] = []

    def interrupt(number: int, _frame: object) -> None:
        received.append(number)
        raise KeyboardInterrupt

    previous = {n: signal.signal(n, interrupt) for n in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield received
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


class Status:
    """Where the run stands: one line redrawn in place on a terminal; elsewhere one line
    per phase change (and for what is worth saying once)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.phase: str | None = None
        self.width = 0
        self.estimate: int | None = None  # the remaining steps last said on its own line

    def show(self, update: WatchUpdate) -> None:
        if update.note:
            self._line(update.note)
        if update.result is not None or update.decision is not None:
            return
        text = describe(update)
        if self.tty:
            line = text[:160]
            self.stream.write("\r" + line + " " * max(self.width - len(line), 0))
            self.stream.flush()
            self.width = len(line)
        elif update.phase != self.phase or self._estimate_moved(update):
            self._line(text)
        self.phase = update.phase

    def _estimate_moved(self, update: WatchUpdate) -> bool:
        """One line per phase would leave the first estimate of the steps still needed
        standing for the whole run: a new line whenever it has halved or doubled since."""
        state = update.monitor
        if update.phase != WatchPhase.STEADY or state is None:
            return False
        now = _remaining(state)
        said, self.estimate = self.estimate, now if self.phase == WatchPhase.STEADY else None
        if self.phase != WatchPhase.STEADY:
            self.estimate = now
            return False
        if now is None or said is None:
            self.estimate = said if now is None else now
            return now is not None and said is None
        if now * 2 <= said or now >= said * 2:
            return True
        self.estimate = said
        return False

    def end(self) -> None:
        if self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()
            self.width = 0

    def line(self, text: str) -> None:
        """A line said once, above the redrawn status."""
        self._line(text)

    def _line(self, text: str) -> None:
        self.end()
        self.stream.write(text + "\n")
        self.stream.flush()


def describe(update: WatchUpdate) -> str:
    """The status line: `steady 340 steps · effective 13.9K (13.7K–14.1K) tok/s · 98 % of
    the baseline · undecided: about 120 more steps to resolve ±2 %`."""
    from ledger.present.words import short_value

    head = f"{update.run}: {update.phase}"
    if update.phase == WatchPhase.ATTACHED:
        at = f" (step {update.last_step:,})" if update.last_step is not None else ""
        return f"{update.run}: decided; following the trainer to its end{at}"
    if update.phase == WatchPhase.WAITING:
        return f"{head} for training output ({update.elapsed_s:,.0f} s)"
    if update.phase == WatchPhase.LOADING:
        bar = update.loading or {}
        where = f" {bar.get('desc') or ''} {bar.get('n')}/{bar.get('total') or '?'}".rstrip()
        rate = f" at {bar['rate']:.3g} {bar.get('unit') or 'it/s'}" if bar.get("rate") else ""
        eta = f", about {bar['eta_s']:,.0f} s to go" if bar.get("eta_s") is not None else ""
        return f"{head}{where}{rate}{eta}"
    state = update.monitor
    if state is None:
        return head
    if update.phase == WatchPhase.WARMUP:
        return f"{head}: {state.steps:,} steps, excluded until the level settles"
    parts = [f"{head} {state.steady_steps:,} steps"]
    if state.effective is not None:
        ci = state.effective_ci
        interval = f" ({short_value(ci[0])}–{short_value(ci[1])})" if ci else ""
        parts.append(f"effective {short_value(state.effective)}{interval}")
    if state.median is not None:
        parts.append(f"median {short_value(state.median)}")
    if state.pct_of_reference is not None:
        parts.append(f"{state.pct_of_reference:.1f} % of the {state.reference.kind}")
    if state.decision is None:
        remaining = _remaining(state)
        if remaining is not None:
            parts.append(
                f"undecided: about {remaining:,} more steps to resolve "
                f"±{state.threshold_pct:g} % (at the noise so far)"
            )
        elif state.steady_steps < ESTIMATE_AFTER and state.remaining_steps is not None:
            parts.append("undecided: too few steady steps yet to tell how many more")
        else:
            parts.append(WatchOutcome.UNDECIDED)
    return " · ".join(parts)


# Before this many steady steps the noise is too little known for the remaining-steps
# estimate to mean much (it was off by a factor of 60 at 20 steps): none is said.
ESTIMATE_AFTER = 50


def _remaining(state: MonitorState) -> int | None:
    if state.steady_steps < ESTIMATE_AFTER:
        return None
    return state.remaining_steps


def render_result(result: WatchResult) -> str:
    text = _verdict_text(result)
    if result.role == "trainer" and result.exit_code is not None:
        text += f"\n  the trainer ended (exit {result.exit_code}): fate {result.fate}"
    elif result.left_running:
        text += (
            f"\n  the trainer was left running (fate {result.fate}; see `ledger show {result.run}`)"
        )
    elif result.stopped and result.role == "viewer":
        text += "\n  the viewer command was stopped (the run it shows was not)"
    return text


def render_ending(result: WatchResult) -> str:
    """How a trainer ended, after its decision was said: the fate, not the decision again."""
    name = f"{result.run}@{result.launch}" if result.launch and result.launch > 1 else result.run
    late = result.exit_status != EXIT_CODES[result.outcome]
    then = f"; it failed after the {result.outcome} decision" if late else ""
    return (
        f"{name}: the trainer ended (exit {result.exit_code}) after {result.elapsed_s:,.0f} s: "
        f"fate {result.fate}{then} (decided {result.outcome.upper()} at step "
        f"{result.decided_at_step or '?'})"
    )


def _verdict_text(result: WatchResult) -> str:
    from ledger.present.words import short_value

    name = f"{result.run}@{result.launch}" if result.launch and result.launch > 1 else result.run
    head = f"{name}: {result.outcome.upper()}"
    if result.outcome in WATCH_DECISIONS and result.effective:
        ref = result.reference
        against = "the baseline" if ref["kind"] == "baseline" else f"run {ref['run']}"
        pct = f"{result.pct_of_reference:.1f} %" if result.pct_of_reference is not None else "?"
        at = f" at step {result.decided_at_step:,}" if result.decided_at_step else ""
        return (
            f"{head} — effective {short_value(result.effective)}, {pct} of {against} "
            f"({short_value(ref['value'])}){at}, after {result.elapsed_s:,.0f} s\n  {result.reason}"
        )
    return f"{head} — {result.reason} (fate {result.fate}, after {result.elapsed_s:,.0f} s)"


def _notify(command: str, result: WatchResult) -> None:
    """Run the user's notification command once, with the result as JSON on its stdin."""
    payload = json.dumps(result.to_dict(), allow_nan=False)
    try:
        done = subprocess.run(
            command, shell=True, input=payload, text=True, timeout=60, check=False,
            capture_output=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        warn(f"warning: the --notify command ran past 60 s: {command}")
        return
    if done.returncode:
        said = (done.stderr or done.stdout).strip().splitlines()
        warn(f"warning: the --notify command exited {done.returncode}: {said[-1] if said else ''}")
