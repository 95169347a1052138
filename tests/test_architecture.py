"""The import contract: imports point one way, and each layer knows only what it must.

    cli, serve → present → usecases (the Ledger), watch, demo → report → store, hook
        → analyze, logs, importers, db → readings, wording → model, errors, config

Every `import` in ledger/ is read with ast — at module level and inside functions, since a
lazy import is still a dependency — and checked against the layer table below (it is
docs/architecture.md's). Tests that plant a forbidden import prove each rule can fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ledger"

# The layer of each module, by the longest matching prefix of its dotted name.
LAYERS = {
    "ledger.model": "model",
    "ledger.errors": "base",
    "ledger.config": "base",
    "ledger.hashing": "base",
    "ledger.redact": "base",
    "ledger.proc": "base",
    "ledger.interrupts": "base",
    "ledger.collector": "base",
    "ledger.heap": "base",
    "ledger.shutdown": "base",
    "ledger.blas": "base",
    "ledger.launchcmd": "base",
    "ledger.shellwords": "base",
    "ledger.cleantext": "base",
    "ledger.readings": "readings",
    "ledger.analyze.wording": "wording",
    "ledger.db": "db",
    "ledger.logs": "logs",
    "ledger.importers": "importers",
    "ledger.analyze": "analyze",
    "ledger.store": "store",
    "ledger.hook": "hook",
    "ledger.report": "report",
    "ledger.usecases": "usecases",
    "ledger.demo": "demo",
    # watch is the watch use case (and ingest's follow), a package of its own for its size:
    # it and the other use cases call each other
    "ledger.watch": "usecases",
    "ledger.present": "present",
    "ledger.serve": "serve",
    "ledger.cli": "cli",
    "ledger.__main__": "cli",
    "ledger": "package",
}
BELOW_STORE = {"model", "base", "readings", "wording"}
# What each layer may import from ledger itself.
ALLOWED = {
    "model": {"model"},
    "base": {"model", "base"},
    # plain arrays and rows the store fills and the analysis reads
    "readings": {"model", "base", "readings"},
    # the words of a verdict: the analysis writes its sentences with them, the front ends too
    "wording": {"model", "base", "wording"},
    "db": {"model", "base", "db"},
    "logs": {"model", "base", "logs"},
    "importers": {"model", "base", "importers"},
    "analyze": BELOW_STORE | {"analyze"},
    # persistence only: rows in and out; the log reader runs inside its sessions (ingest
    # commits as it reads), so logs is below it; it analyses, draws and imports nothing
    "store": BELOW_STORE | {"db", "logs", "store"},
    "hook": {"model", "base", "store", "hook"},
    "report": BELOW_STORE | {"report"},
    "usecases": BELOW_STORE | {"db", "logs", "importers", "analyze", "store", "report", "usecases"},
    "demo": {"model", "base", "usecases", "demo", "package"},
    "present": BELOW_STORE | {"present"},
    # the front ends: use cases, presentation and records, never the store or the analysis
    "serve": {"model", "base", "usecases", "present", "serve", "package"},
    "cli": {
        "model",
        "base",
        "usecases",
        "present",
        "report",  # the figure formats `report --out` names
        "logs",  # `parse`, which needs no ledger
        "demo",
        "serve",
        "cli",
        "package",
    },
    "package": {"model", "base", "usecases", "package"},
}
# Third-party libraries a layer must never import (not even lazily).
FORBIDDEN = {
    "model": {"sqlalchemy", "pandas", "numpy", "matplotlib", "click", "torch", "scipy"},
    "base": {"sqlalchemy", "pandas", "matplotlib", "click", "torch"},
    "readings": {"sqlalchemy", "matplotlib", "click", "torch", "alembic", "scipy"},
    "wording": {"sqlalchemy", "pandas", "numpy", "matplotlib", "click", "torch", "scipy"},
    "logs": {"sqlalchemy", "click", "matplotlib", "pandas", "torch", "alembic"},
    "importers": {"sqlalchemy", "click", "matplotlib", "pandas", "torch", "alembic"},
    "analyze": {"sqlalchemy", "click", "matplotlib", "torch", "alembic"},
    "db": {"click", "matplotlib", "pandas", "torch"},
    "report": {"sqlalchemy", "click", "torch", "alembic"},
    "store": {"click", "torch", "matplotlib", "scipy"},
    "hook": {"click", "pandas", "matplotlib"},
    "usecases": {"click", "torch"},
    "present": {"sqlalchemy", "click", "matplotlib", "torch", "alembic", "scipy"},
    # one call of the API per endpoint: no SQL, no analysis of its own, no click
    "serve": {"sqlalchemy", "click", "matplotlib", "torch", "alembic", "scipy", "numpy", "pandas"},
    "cli": {"sqlalchemy"},
}


def layer_of(module: str) -> str:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return LAYERS[prefix]
    raise AssertionError(f"{module} has no layer: add it to LAYERS")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, module: str, is_package: bool) -> set[str]:
    """Every module `source` imports, relative imports resolved."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            # `from ledger import records` names a module too
            found.update(f"{base}.{alias.name}" for alias in node.names if base == "ledger")
    return found


def violations(files: dict[str, tuple[str, bool]]) -> list[str]:
    problems = []
    for module, (source, is_package) in sorted(files.items()):
        mine = layer_of(module)
        for target in sorted(imports_of(source, module, is_package)):
            top = target.split(".")[0]
            if top == "ledger":
                if target in LAYERS or target.startswith("ledger."):
                    theirs = layer_of(target)
                    if theirs not in ALLOWED[mine]:
                        problems.append(f"{module} ({mine}) imports {target} ({theirs})")
            elif top in FORBIDDEN.get(mine, set()):
                problems.append(f"{module} ({mine}) imports {top}")
    return problems


def package_files() -> dict[str, tuple[str, bool]]:
    return {
        module_name(path): (path.read_text(encoding="utf-8"), path.name == "__init__.py")
        for path in PACKAGE.rglob("*.py")
    }


def test_imports_point_one_way() -> None:
    assert violations(package_files()) == []


@pytest.mark.parametrize(
    ("module", "planted", "expected"),
    [
        ("ledger.logs.reader", "from ledger.store import Ledger", "imports ledger.store"),
        ("ledger.analyze.stats", "def f():\n    import matplotlib.pyplot", "imports matplotlib"),
        ("ledger.model.terms", "import sqlalchemy", "imports sqlalchemy"),
        ("ledger.importers.mlflow", "from ledger.store import Ledger", "imports ledger.store"),
        ("ledger.hook.meter", "def f():\n    from ledger.cli import cli", "imports ledger.cli"),
        ("ledger.store.runs", "from ..cli.app import cli", "imports ledger.cli.app"),
        ("ledger.serve.app", "from ledger.cli.app import cli", "imports ledger.cli.app"),
        ("ledger.serve.views", "def f():\n    import sqlalchemy", "imports sqlalchemy"),
        ("ledger.store.report", "from ledger.serve import views", "imports ledger.serve"),
        # the store is persistence only
        (
            "ledger.store.compare",
            "def f():\n    from ledger.analyze import x",
            "imports ledger.analyze",
        ),
        ("ledger.store.facade", "from ledger.report.plots import x", "imports ledger.report"),
        ("ledger.store.runs", "from ledger.usecases import compare", "imports ledger.usecases"),
        ("ledger.store.why", "from ledger.watch import watch", "imports ledger.watch"),
        ("ledger.store.imports", "import ledger.importers", "imports ledger.importers"),
        # the front ends go through the use cases and the presentation
        ("ledger.cli.read", "def f():\n    from ledger.store import Store", "imports ledger.store"),
        ("ledger.cli.why", "from ledger.analyze.wording import pct", "imports ledger.analyze"),
        ("ledger.cli.analyze", "from ledger.analyze import analyze_run", "imports ledger.analyze"),
        ("ledger.serve.app", "from ledger.store.series import LiveReads", "imports ledger.store"),
        ("ledger.present.compare", "from ledger.usecases import why", "imports ledger.usecases"),
        ("ledger.report.html", "from ledger.store import Store", "imports ledger.store"),
        ("ledger.analyze.wording", "from ledger.analyze import series", "imports ledger.analyze"),
    ],
)
def test_the_contract_catches_a_planted_import(module: str, planted: str, expected: str) -> None:
    files = package_files()
    source, is_package = files[module]
    files[module] = (f"{source}\n{planted}\n", is_package)
    assert any(expected in problem for problem in violations(files))


def test_nothing_imports_the_cli() -> None:
    users = [
        module
        for module, (source, is_package) in package_files().items()
        if layer_of(module) != "cli"
        and any(t.startswith("ledger.cli") for t in imports_of(source, module, is_package))
    ]
    assert users == []


def test_no_module_is_over_600_lines() -> None:
    long = {
        module_name(path): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 600
    }
    assert long == {}
