"""`ledger serve`: the live local UI in a browser."""

from __future__ import annotations

import click

from ledger.cli.app import cli, root_option


@cli.command()
@click.option(
    "--db",
    metavar="PATH|URL",
    help="The ledger (as `ledger --db`; default: the one every command finds).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The address to listen on. Anything beyond the loopback needs --token.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="The port (0: any free one).",
)
@click.option("--no-open", "no_open", is_flag=True, help="Do not open a browser.")
@click.option(
    "--token",
    envvar="LEDGER_SERVE_TOKEN",
    metavar="T",
    help="Answer only requests that carry T (header, ?token=T, then a cookie); "
    "default: $LEDGER_SERVE_TOKEN.",
)
def serve(db: str | None, host: str, port: int, no_open: bool, token: str | None) -> None:
    """Serve the investigation as live pages: the attempts against the baseline, each run's
    throughput, loss, step times, memory and GPUs with its events, deploy steps, probes,
    configuration and why findings, and runs compared side by side. Pages update as runs
    are written. The ledger is opened read-only; the server listens on 127.0.0.1 unless
    told otherwise. Needs the `serve` extra: pip install 'ledger[serve]'.

    \b
      ledger serve
      ledger serve --port 9000 --no-open
      ledger serve --host 0.0.0.0 --token "$(openssl rand -hex 16)"
    """
    from ledger.serve import require_web_stack
    from ledger.serve.server import check_binding
    from ledger.serve.server import serve as run_server
    from ledger.usecases.ledger import Ledger

    require_web_stack()
    check_binding(host, token)  # before the ledger is opened
    lg = Ledger.open(
        db or root_option("db"),
        create=False,
        investigation=root_option("investigation"),
        read_only=True,
    )
    try:
        run_server(
            lg, host=host, port=port, token=token or None, open_browser=not no_open,
            say=lambda line: click.echo(line, err=True),
        )  # fmt: skip
    finally:
        lg.close()
