"""The docs stay true: every table and column of the schema is described in docs/schema.md."""

from __future__ import annotations

import re
from pathlib import Path

from ledger.db.models import Base

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _documented_columns() -> dict[str, set[str]]:
    text = (DOCS / "schema.md").read_text()
    tables: dict[str, set[str]] = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        name, _, body = section.partition("\n")
        tables[name.strip()] = set(re.findall(r"^\| (\w+) \|", body, flags=re.M)) - {"column"}
    return tables


def test_every_column_is_documented() -> None:
    documented = _documented_columns()
    for table in Base.metadata.sorted_tables:
        assert table.name in documented, f"docs/schema.md has no section for {table.name}"
        missing = {c.name for c in table.columns} - documented[table.name]
        assert not missing, f"docs/schema.md does not describe {table.name}.{sorted(missing)}"
        stale = documented[table.name] - {c.name for c in table.columns}
        assert not stale, f"docs/schema.md describes columns {table.name} no longer has: {stale}"


def test_command_reference_is_current() -> None:
    from ledger.cli.reference import render

    assert (DOCS / "commands.md").read_text() == render(), (
        "docs/commands.md is stale: run `make docs`"
    )
