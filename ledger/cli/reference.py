"""docs/commands.md, generated from the CLI's own help so it cannot drift from it.

    python -m ledger.cli.reference > docs/commands.md      (or: make docs)

tests/test_docs.py fails when the file is stale.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

from ledger.cli import cli

HEADER = """# Command reference

Generated from `ledger --help` and each command's `--help` by
`python -m ledger.cli.reference` (`make docs`); do not edit by hand.

Every command that reads or records takes `--json` and then prints one JSON value. Errors
are one line on stderr, `Error: …`, with exit status 2 for usage mistakes and 1 otherwise;
`ledger --debug …` shows the traceback instead.
"""


def _commands(group: click.Group, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
    for name in sorted(group.commands):
        command = group.commands[name]
        yield [*path, name], command
        if isinstance(command, click.Group):
            yield from _commands(command, [*path, name])


def _help(path: list[str], command: click.Command) -> str:
    parent = click.Context(cli, info_name="ledger", **cli.context_settings)
    ctx = parent
    for name in path:
        group = ctx.command
        assert isinstance(group, click.Group)  # every command on a path has subcommands
        ctx = click.Context(group.commands[name], info_name=name, parent=ctx)
    formatter = ctx.make_formatter()
    formatter.width = 100
    command.format_help(ctx, formatter)
    return formatter.getvalue().rstrip()


def render() -> str:
    parts = [HEADER, "## ledger\n", "```", _help([], cli), "```\n"]
    for path, command in _commands(cli, []):
        parts += [f"## ledger {' '.join(path)}\n", "```", _help(path, command), "```\n"]
    return "\n".join(parts)


if __name__ == "__main__":
    click.echo(render(), nl=False)
