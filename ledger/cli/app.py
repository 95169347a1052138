"""The root command, the error boundary, and what every command shares.

Every failure leaves as one line `Error: …` on stderr with exit status 2 for usage
mistakes and 1 for the rest; `--debug` (or LEDGER_DEBUG=1) shows the traceback instead.
This module imports only click and ledger's light modules: commands import the API
inside their callbacks, so `ledger --help` stays fast.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, Final, Literal, NoReturn, ParamSpec, TypeVar

import click

from ledger import __version__
from ledger.errors import LedgerError

# the commands' modules take these from here with the rest of their helpers
from ledger.present.table import local_time as local_time
from ledger.present.table import table as table

if TYPE_CHECKING:
    from ledger.usecases.ledger import Ledger

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")


def _take_debug(args: list[str]) -> tuple[list[str], bool]:
    """The arguments without --debug, and whether it (or LEDGER_DEBUG) asked for tracebacks.

    --debug may come anywhere before `--` (after the subcommand too: `ledger ingest x
    --debug`); after `--` it belongs to the command being run.
    """
    end = args.index("--") if "--" in args else len(args)
    asked = "--debug" in args[:end]
    if asked:
        args = [a for a in args[:end] if a != "--debug"] + args[end:]
    return args, asked or os.environ.get("LEDGER_DEBUG", "") not in ("", "0")


def _fail(message: str, code: int) -> NoReturn:
    line = " ".join(str(message).split())  # one line, whatever the message held
    click.echo(f"Error: {line}", err=True)
    sys.exit(code)


class LedgerGroup(click.Group):
    """A click group whose every failure is one line on stderr and a meaningful exit status."""

    def main(self, args: Sequence[str] | None = None, *a: Any, **kw: Any) -> Any:
        argv, debug = _take_debug(list(sys.argv[1:] if args is None else args))
        if debug:
            return super().main(argv, *a, **kw)
        kw["standalone_mode"] = False
        try:
            code = super().main(argv, *a, **kw)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            if "No such option" in exc.format_message() and _takes_command(exc.ctx):
                hint = " (put the command to run after --)"
            _fail(exc.format_message() + hint, 2)
        except click.Abort:
            # click turns Ctrl-C inside a command into Abort (we ask no questions, so it is
            # never an answered prompt): the same line and status as an interrupt.
            _fail("interrupted (what was recorded before is kept)", 130)
        except click.ClickException as exc:
            _fail(exc.format_message(), exc.exit_code)
        except LedgerError as exc:
            _fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted (what was recorded before is kept)", 130)
        except BrokenPipeError:
            # `ledger timeline | head`: the reader left; say nothing, like other Unix tools.
            sys.stderr = open(os.devnull, "w")  # noqa: SIM115 — silence the interpreter's flush
            sys.exit(1)
        except Exception as exc:  # a bug: still one line, and a way to see the traceback
            _fail(
                f"internal error: {type(exc).__name__}: {exc} "
                "(run again with --debug for the traceback, and please report it)",
                1,
            )
        sys.exit(code if isinstance(code, int) else 0)


def _takes_command(ctx: click.Context | None) -> bool:
    return ctx is not None and any(
        isinstance(p, click.Argument) and p.name == "command" for p in ctx.command.params
    )


@click.group(cls=LedgerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    metavar="PATH|URL",
    help="The ledger: a file path or SQLAlchemy URL (postgresql+psycopg://…). "
    "Default: $LEDGER_DB, else the nearest .ledger/ledger.db upwards, else ./.ledger/ledger.db.",
)
@click.option(
    "--investigation",
    metavar="NAME",
    envvar="LEDGER_INVESTIGATION",
    help="Which investigation in the ledger (default: 'default').",
)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(__version__, prog_name="ledger")
@click.pass_context
def cli(ctx: click.Context, db: str | None, investigation: str | None, debug: bool) -> None:
    """Keep every hypothesis, patch, deploy, log and probe of a throughput hunt as linked rows.

    \b
    The loop, command by command:
      ledger init --baseline 14200 --unit tok/s
      ledger hypothesis add "torch.compile recompiles because mask closures change"
      ledger record-fix --hypothesis 1 --summary "gate the cache" --file train.py --run eager_dc
      ledger deploy --run eager_dc --step copy --artifact build/train.py -- scp build/train.py h:
      ledger deploy --run eager_dc --step relaunch -- ssh h "pct exec 200 -- ./launch.sh"
      ledger show eager_dc
      ledger timeline
    """
    ctx.obj = {"db": db, "investigation": investigation}


# -- shared pieces -------------------------------------------------------------------------


def json_option(f: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON value instead of text."
    )(f)


def run_option(
    required: bool = True, help: str = "The run, e.g. eager_dynamiccopy."
) -> Callable[[F], F]:
    return click.option("--run", "run", metavar="NAME", required=required, help=help)


# A command that only reads but keeps what saves the next one work (compare keeps its
# analyses) opens the ledger to write where it may, and read-only where it may not.
UNLESS_WRITABLE: Final = "unless-writable"
Reads = bool | Literal["unless-writable"]


def open_ledger(*, read_only: Reads = False, check: bool = False) -> Ledger:
    """The ledger named by --db / discovery, for the command being run. Only `ledger init`
    makes a ledger: every other command says where it looked when there is none."""
    from ledger.usecases.ledger import Ledger

    options = click.get_current_context().find_root().obj or {}
    if read_only == UNLESS_WRITABLE:
        read_only = not Ledger.writable(options.get("db"))
    return Ledger.open(
        options.get("db"),
        create=False,
        investigation=options.get("investigation"),
        read_only=read_only,
        check=check,
    )


def root_option(name: str) -> Any:
    """A value of the root command's options (--db, --investigation)."""
    return (click.get_current_context().find_root().obj or {}).get(name)


def with_ledger(
    *, read_only: Reads | Callable[[dict[str, Any]], Reads] = False, check: bool = False
) -> Callable[[Callable[Concatenate[Ledger, P], R]], Callable[P, R]]:
    """Open the ledger before the command and close it after; passes it first, as `lg`.

    Commands that only read pass `read_only` (or a test of their arguments), so they change
    nothing in the file and work in a folder they cannot write (UNLESS_WRITABLE: read-only
    only where the ledger cannot be written); commands that write much pass `check`, which
    refuses a damaged file first.
    """

    def decorate(f: Callable[Concatenate[Ledger, P], R]) -> Callable[P, R]:
        @functools.wraps(f)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            reads = read_only(dict(kwargs)) if callable(read_only) else read_only
            lg = open_ledger(read_only=reads, check=check)
            try:
                return f(lg, *args, **kwargs)
            finally:
                lg.close()

        return wrapper

    return decorate


T = TypeVar("T")


def emit(value: T, as_json: bool, text: Callable[[T], str | None]) -> None:
    """Print `value` (an API record, or a list of them) as JSON, or as the text that
    `text(value)` renders for a person."""
    if as_json:
        from ledger.model.records import jsonable

        click.echo(json.dumps(jsonable(value), indent=2, allow_nan=False))
        return
    rendered = text(value)
    if rendered:
        click.echo(printable(rendered))


def printable(text: str) -> str:
    """Text for a terminal: control characters a stored name or output may hold (ESC, a
    carriage return, a bell) written as escapes, so they cannot repaint the screen; line
    breaks and tabs stay."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def warn(message: str) -> None:
    click.echo(click.style(message, fg="yellow"), err=True)


def live_output(as_json: bool) -> Callable[[bytes], None]:
    """Where a command's output is shown as it runs: stdout, or stderr when stdout carries JSON."""
    stream = sys.stderr if as_json else sys.stdout

    def echo(chunk: bytes) -> None:
        binary = getattr(stream, "buffer", None)
        if binary is None:
            stream.write(chunk.decode(errors="replace"))
            return
        stream.flush()
        binary.write(chunk)
        binary.flush()

    return echo
