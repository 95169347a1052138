"""`ledger watch`: follow a relaunch and say the moment it is back, slower, dead or stalled."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, TextIO

import click

from ledger.cli.app import cli, emit, json_option, warn, with_ledger
from ledger.cli.params import Percent, seconds

if TYPE_CHECKING:
    from ledger.model.records import WatchResult, WatchUpdate
    from ledger.store import Ledger


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
@json_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@with_ledger()
def watch(
    lg: Ledger,
    run: str,
    log: str | None,
    against: str | None,
    threshold: float,
    stall_after: float | None,
    timeout: float | None,
    interval: float,
    notify: str | None,
    as_json: bool,
    command: tuple[str, ...],
) -> None:
    """Follow RUN until it is back to the baseline, slower, dead or stalled:
    ledger watch RUN [--log PATH | -- COMMAND…]

    The source is a log file (--log), a command's standard output (after --: `ssh host
    tail -n +1 -F train.log`, or the training command itself), or, with neither, the
    run's rows in the ledger (a StepMeter writing from elsewhere). What it reads is stored
    as `ledger ingest` would store it. The reference is the investigation's baseline, or
    --against RUN.

    It decides as soon as the statistics allow — the interval is valid however often it is
    looked at (docs/watch.md) — and at once when the run dies or stops printing. Exit
    status: 0 same or faster, 1 regression, 3 failed, 4 stalled, 5 undecided (timeout, or
    the run ended first), 2 usage, 130 interrupted.

    \b
      ledger watch eager_dynamiccopy --log train_eager_dynamiccopy.log
      ledger watch eager_dynamiccopy --against eager_unpadded -- ssh box tail -n +1 -F train.log
      ledger watch eager_dynamiccopy --notify 'notify-send "ledger watch"'
    """
    from ledger.watch import EXIT_CODES
    from ledger.watch import watch as follow_run

    updates = follow_run(
        lg, run, log=log, command=command or None, against=against, threshold=threshold,
        stall_after=stall_after, timeout=timeout, interval=interval,
    )  # fmt: skip
    status = Status(sys.stderr if as_json else sys.stdout)
    result: WatchResult | None = None
    for update in updates:
        status.show(update)
        result = update.result
    status.end()
    assert result is not None  # the watcher's last update carries it
    if notify:
        _notify(notify, result)
    if status.tty:
        click.echo("\a", nl=False)
    emit(result, as_json, render_result)
    sys.exit(EXIT_CODES[result.outcome])


class Status:
    """Where the run stands: one line redrawn in place on a terminal; elsewhere one line
    per phase change (and for what is worth saying once)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.phase: str | None = None
        self.width = 0

    def show(self, update: WatchUpdate) -> None:
        if update.note:
            self._line(update.note)
        if update.result is not None:
            return
        text = describe(update)
        if self.tty:
            line = text[:160]
            self.stream.write("\r" + line + " " * max(self.width - len(line), 0))
            self.stream.flush()
            self.width = len(line)
        elif update.phase != self.phase:
            self._line(text)
        self.phase = update.phase

    def end(self) -> None:
        if self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()
            self.width = 0

    def _line(self, text: str) -> None:
        self.end()
        self.stream.write(text + "\n")
        self.stream.flush()


def describe(update: WatchUpdate) -> str:
    """The status line: `steady 340 steps · effective 13.9K (13.7K–14.1K) tok/s · 98 % of
    the baseline · undecided: about 120 more steps to resolve ±2 %`."""
    from ledger.analyze.wording import short_value

    head = f"{update.run}: {update.phase}"
    if update.phase == "waiting":
        return f"{head} for training output ({update.elapsed_s:,.0f} s)"
    if update.phase == "loading":
        bar = update.loading or {}
        where = f" {bar.get('desc') or ''} {bar.get('n')}/{bar.get('total') or '?'}".rstrip()
        rate = f" at {bar['rate']:.3g} {bar.get('unit') or 'it/s'}" if bar.get("rate") else ""
        eta = f", about {bar['eta_s']:,.0f} s to go" if bar.get("eta_s") is not None else ""
        return f"{head}{where}{rate}{eta}"
    state = update.monitor
    if state is None:
        return head
    if update.phase == "warmup":
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
        if state.remaining_steps is not None:
            parts.append(
                f"undecided: about {state.remaining_steps:,} more steps to resolve "
                f"±{state.threshold_pct:g} %"
            )
        else:
            parts.append("undecided")
    return " · ".join(parts)


def render_result(result: WatchResult) -> str:
    from ledger.analyze.wording import short_value

    head = f"{result.run}: {result.outcome.upper()}"
    if result.outcome in ("regression", "same", "improvement") and result.effective:
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
