"""Commands that read logs: parse (no ledger needed), ingest, probe, and log patterns."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import click

from ledger.cli.app import cli, emit, json_option, live_output, run_option, warn, with_ledger
from ledger.cli.params import NUMBER, TOKENS_PER_STEP, seconds

if TYPE_CHECKING:
    from ledger.model import records
    from ledger.usecases.ledger import Ledger


def pattern_option(f: Any) -> Any:
    return click.option(
        "--pattern",
        "patterns",
        multiple=True,
        metavar="REGEX",
        help="A step-line shape of your own: a regex with named groups (step, loss, "
        "throughput, rank, step_time_ms…). Repeatable; `ledger pattern add` keeps one.",
    )(f)


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def render_summary(s: dict[str, Any], name: str | None = None) -> str:
    """A short summary of a log for a person."""
    head = f"{name}: " if name else ""
    lines = [f"{head}{s['fate']}" + (f" — {s['fate_reason']}" if s.get("fate_reason") else "")]
    if s.get("steps"):
        last = s.get("last_step")
        total = f"/{s['total_steps']}" if s.get("total_steps") else ""
        lines.append(f"  {s['steps']:,} steps on {s['ranks']} rank(s), last step {last}{total}")
    tp = s.get("throughput") or {}
    if tp.get("first") is not None:
        lines.append(
            f"  throughput ({tp['unit'] or 'no unit'}): first {_fmt(tp['first'])}, "
            f"last {_fmt(tp['last'])}, median {_fmt(tp.get('median'))}"
        )
    p = s.get("progress")
    if p:
        total = f"/{p['total']}" if p.get("total") else ""
        rate = f" at {p['rate']} {p['unit']}" if p.get("rate") is not None else ""
        lines.append(f"  last bar: {p['desc'] or '(no description)'} {p['n']}{total}{rate}")
    if s.get("events"):
        lines.append("  events: " + ", ".join(f"{k} {v}" for k, v in s["events"].items()))
    if s.get("last_event"):
        e = s["last_event"]
        lines.append(f"  last event (line {e['line']}, {e['kind']}): {e['text'][:160]}")
    if s.get("gpus"):
        from ledger.logs.nvsmi import describe

        lines.append("  " + describe(s["gpus"]))
    lines.extend(unread_lines(s))
    return "\n".join(lines)


SHOWN_UNREAD = 5


def unread_lines(s: dict[str, Any]) -> list[str]:
    """What could not be read: the count, up to five of the lines with their numbers, and
    how to teach the reader their shape."""
    n = s.get("unread_lines") or 0
    values = s.get("unread_values") or 0
    unread = s.get("unread") or []
    out = []
    if n:
        first = next((u for u in unread if not u["reason"].startswith("value ")), None)
        where = f" (first: line {first['line']}, {first['reason']})" if first else ""
        out.append(f"  {n:,} line{'s' if n != 1 else ''} could not be read{where}")
    if values:
        out.append(f"  {values:,} value{'s' if values != 1 else ''} could not be read "
                   "(their lines were)")  # fmt: skip
    shown = [u for u in unread if u.get("text")][:SHOWN_UNREAD]
    for u in shown:
        out.append(f"    line {u['line']}: {u['text'][:160]}")
    if shown:
        out.append("  " + teach_hint(shown[0]["text"]))
    return out


def teach_hint(text: str) -> str:
    """One line: how to teach the reader the shape of an unread line."""
    import shlex

    from ledger.logs.metriclike import suggest

    regex = shlex.quote(suggest(text))
    return f"to read lines of this shape, teach it: ledger pattern add {regex}"


@cli.command()
@click.argument("log", required=False, type=click.Path(dir_okay=False, allow_dash=True))
@pattern_option
@click.option(
    "--tokens-per-step",
    type=TOKENS_PER_STEP,
    metavar="N",
    help="Tokens per step, to derive tok/s from step times when a log prints no throughput.",
)
@click.option("--rules", is_flag=True, help="Print the fate rule table and exit.")
@json_option
def parse(
    log: str | None,
    patterns: tuple[str, ...],
    tokens_per_step: float | None,
    rules: bool,
    as_json: bool,
) -> None:
    """Read LOG and say what ingest would conclude: fate, steps, throughput, bars, events.

    LOG is a file (plain or gzip) or - for standard input (ssh host tail train.log |
    ledger parse -). It says how many lines it could not read, if any. Needs no ledger.
    With --json: {"content", "fate", "steps", "ranks", "throughput", "progress", "events",
    "last_event", "gpus", "unread_lines", "unread", "position", "config", …}.
    """
    import stat

    from ledger.errors import InputFileError, UsageError
    from ledger.logs import parse_file, parse_stream
    from ledger.logs.fate import rule_table

    if rules:
        click.echo(rule_table())
        return
    if log is None:
        raise click.UsageError("Missing argument 'LOG'.")
    if log != "-":
        try:
            info = os.stat(log)
        except FileNotFoundError:
            raise InputFileError(f"{log}: no such file") from None
        except OSError as exc:
            raise InputFileError(f"cannot read {log}: {exc.strerror or exc}") from exc
        if not stat.S_ISREG(info.st_mode):
            raise InputFileError(
                f"{log} is not a regular file; to read a pipe, give - and pipe it in"
            )
    try:
        if log == "-":
            summary = parse_stream(
                sys.stdin.buffer, patterns=patterns,
                tokens_per_step=tokens_per_step,
            )  # fmt: skip
        else:
            summary = parse_file(log, patterns=patterns, tokens_per_step=tokens_per_step)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    except OSError as exc:
        raise InputFileError(f"cannot read {log}: {exc.strerror or exc}") from exc
    data = summary.to_dict()
    name = "stdin" if log == "-" else os.path.basename(log)
    emit(data, as_json, lambda d: render_summary(d, name))


@cli.command()
@click.argument("logs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@run_option(required=False, help="The run (default: from the file name, train_X.log → X).")
@click.option("--follow", is_flag=True, help="Keep reading as the log grows, until a final fate.")
@click.option(
    "--interval", type=seconds(zero=False), default=2.0, show_default=True, metavar="S",
    help="With --follow: seconds between looks at the file.",
)  # fmt: skip
@click.option(
    "--stall-after", type=seconds(zero=False), default=300.0, show_default=True, metavar="S",
    help="A log that stops growing this long while running is stalled.",
)  # fmt: skip
@pattern_option
@click.option(
    "--tokens-per-step", type=TOKENS_PER_STEP, metavar="N", help="To derive tok/s from step time."
)
@json_option
@with_ledger(check=True)
def ingest(
    lg: Ledger,
    logs: tuple[str, ...],
    run: str | None,
    follow: bool,
    interval: float,
    stall_after: float,
    patterns: tuple[str, ...],
    tokens_per_step: float | None,
    as_json: bool,
) -> None:
    """Store the steps, metrics and events of LOG… under a run.

    Incremental and idempotent: a second ingest of the same file adds nothing, an
    appended file adds only its new lines, a truncated or replaced one is read again.
    Hugging Face trainer_state.json files and gzip logs ingest too. `-` reads standard
    input to its end (`ssh host cat train.log | ledger ingest - --run R`), kept as a file
    beside the ledger; to follow a stream as it grows, use `ledger watch R -- COMMAND`.
    """
    if follow and len(logs) != 1:
        raise click.UsageError("--follow follows one log")
    stdin = None
    if "-" in logs:
        if len(logs) != 1 or follow or run is None:
            raise click.UsageError("standard input (-) is ingested alone, with --run NAME")
        logs, stdin = (), sys.stdin.buffer
    from ledger.usecases.ingest import IngestRequest
    from ledger.usecases.ingest import ingest as ingest_logs

    request = IngestRequest(
        logs, run, stdin=stdin, follow=follow, interval=interval, stall_after=stall_after,
        patterns=patterns, tokens_per_step=tokens_per_step,
    )  # fmt: skip
    # Ctrl-C while following leaves the group's one line and exit status 130; every look
    # before it is stored (each look is its own transaction).
    outcome = ingest_logs(
        lg, request, meter=None if as_json else _progress_bar,
        on_look=None if as_json else lambda r: click.echo(_ingest_line(r), err=True),
        on_skip=lambda exc: warn(f"skipped: {exc}"),
    )  # fmt: skip
    results = outcome.results
    for r in results:
        _warn_unread(r)
    emit(
        results if len(results) > 1 else results[0],
        as_json,
        lambda _: "\n".join(_ingest_line(r) for r in results),
    )
    if outcome.skipped:
        sys.exit(1)


def _warn_unread(r: records.IngestResult) -> None:
    """Once per file: lines that look like metrics were not read (and how to teach them)."""
    shown = [u for u in r.summary.get("unread") or [] if u.get("text")]
    if not r.unread_lines or not shown or not r.read_bytes:  # nothing new: said before
        return
    n = r.unread_lines
    first = shown[0]
    warn(
        f"warning: {r.path}: {n:,} line{'s' if n != 1 else ''} could not be read, e.g. "
        f"line {first['line']}: {first['text'][:120]}; {teach_hint(first['text'])}"
    )


def _ingest_line(r: records.IngestResult) -> str:
    what = f"{r.steps:,} step rows, {r.metrics:,} metrics, {r.events:,} events"
    if not (r.steps or r.metrics or r.events):
        what = "nothing new"
    reset = f" ({r.reset}: read again from the start)" if r.reset else ""
    reason = f" — {r.fate_reason[:120]}" if r.fate_reason else ""
    unread = f", {r.unread_lines:,} lines could not be read" if r.unread_lines else ""
    return (
        f"{r.run}: {r.path}: {r.read_bytes:,} bytes read, {what}{unread}{reset}; "
        f"fate {r.fate}{reason}"
    )


class _Bar:
    """A progress bar on stderr for big files, only when stderr is a terminal."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = max(size, 1)
        self.shown = -1

    def __call__(self, done: int, size: int) -> None:
        pct = int(100 * done / max(size, 1))
        if pct != self.shown:
            self.shown = pct
            sys.stderr.write(f"\r{self.name}: {pct:3d}% of {size / 1e6:,.0f} MB")
            sys.stderr.flush()

    def close(self) -> None:
        if self.shown >= 0:
            sys.stderr.write("\n")


def _progress_bar(log: str) -> _Bar | None:
    try:
        size = os.path.getsize(log)
    except OSError:
        return None
    if size < 50_000_000 or not sys.stderr.isatty():
        return None
    return _Bar(os.path.basename(log), size)


@cli.command()
@run_option()
@click.option("--wait", type=seconds(), default=0.0, metavar="S",
              help="Seconds to wait before running the command (the `sleep 360`).")  # fmt: skip
@click.option("--timeout", type=seconds(zero=False), metavar="S",
              help="Kill the command after this long; the probe is still recorded.")  # fmt: skip
@click.option(
    "--stall-after", type=seconds(zero=False), default=300.0, show_default=True, metavar="S",
    help="Same position as the previous probe this long ago: stalled.",
)  # fmt: skip
@click.option(
    "--show-output", is_flag=True,
    help="Also print the command's output as it comes (on stderr); by default only the verdict.",
)  # fmt: skip
@click.option(
    "--new", is_flag=True,
    help="RUN is a new run: make it (without --new an unknown run is refused, so a typo "
    "does not make a stray run).",
)  # fmt: skip
@pattern_option
@json_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@with_ledger()
def probe(
    lg: Ledger,
    run: str,
    wait: float,
    timeout: float | None,
    stall_after: float,
    show_output: bool,
    new: bool,
    patterns: tuple[str, ...],
    as_json: bool,
    command: tuple[str, ...],
) -> None:
    """Check on a run and record what it said: ledger probe --run R --wait 360 -- ssh host '…'

    Runs COMMAND (no shell; write sh -c '…' for one) after --wait seconds, keeps its
    output (last 64 KiB, redacted), reads it for the fate, the last bar and step, and
    stores nvidia-smi rows (CSV or table) as GPU samples. Exits with the command's status.
    SIGTERM, SIGHUP or Ctrl-C (during the wait too) stop the command's process group and
    record the probe with how it ended.
    """
    echo = live_output(as_json=True) if show_output else None  # stderr: stdout has the verdict
    result = lg.probe(
        run, command, wait=wait, timeout=timeout, echo=echo, patterns=patterns,
        stall_after=stall_after, new=new,
    )  # fmt: skip
    emit(result, as_json, lambda r: r.conclusion)
    if result.exit_code:
        sys.exit(result.exit_code if 0 < result.exit_code < 256 else 1)


@cli.group()
def pattern() -> None:
    """Step-line shapes of your own, kept in the ledger and used by ingest and probe."""


@pattern.command("add")
@click.argument("regex")
@json_option
@with_ledger()
def pattern_add(lg: Ledger, regex: str, as_json: bool) -> None:
    r"""Keep REGEX, a step-line shape of your own, for ingest and probe to use.

    Name the values with groups: step, rank, total, loss, throughput, unit, step_time_s,
    step_time_ms, tokens, memory_allocated_mib, memory_reserved_mib; other names become
    metrics. For example: 'it (?P<step>\d+) loss (?P<loss>[\d.]+) (?P<throughput>[\d.]+) tok/s'
    """
    patterns = lg.add_log_pattern(regex)
    emit(patterns, as_json, lambda p: f"{len(p)} pattern(s) kept")


@pattern.command("list")
@json_option
@with_ledger(read_only=True)
def pattern_list(lg: Ledger, as_json: bool) -> None:
    """List the kept patterns, numbered."""
    patterns = lg.log_patterns()
    emit(
        patterns,
        as_json,
        lambda p: "\n".join(f"#{i} {x}" for i, x in enumerate(p, 1)) or "no patterns kept",
    )


@pattern.command("remove")
@click.argument("number", type=NUMBER)
@json_option
@with_ledger()
def pattern_remove(lg: Ledger, number: int, as_json: bool) -> None:
    """Forget pattern NUMBER (as `ledger pattern list` numbers them)."""
    patterns = lg.remove_log_pattern(number)
    emit(patterns, as_json, lambda p: f"{len(p)} pattern(s) kept")
