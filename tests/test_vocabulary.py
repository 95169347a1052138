"""The vocabulary is spelled once: no fate, verdict, event kind, log effect, finding kind,
hypothesis status, watch outcome or phase is written as a bare string outside
`ledger/model/`.

The scan reads each module with `ast` and looks only where a string stands for one of
those words: a comparison (`x == "oom"`, `x in ("oom", …)`), an assignment, a `return`,
a dictionary's key, a keyword argument named for the vocabulary (`fate="crashed"`), the
value of such a key in a dictionary literal, and a positional argument of a call. Prose,
regular expressions and f-strings are never looked at. A planted violation shows it fails.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path

import pytest

from ledger.model import terms

ROOT = Path(__file__).resolve().parent.parent / "ledger"

# The vocabularies whose values may not be spelled as strings outside ledger/model/.
VOCABULARIES: tuple[type[StrEnum], ...] = (
    terms.Fate,
    terms.EventKind,
    terms.LogEffect,
    terms.HypothesisStatus,
    terms.Verdict,
    terms.WatchOutcome,
    terms.FindingKind,
    terms.ComparisonKind,
    terms.WatchPhase,
    terms.RunPhase,
)
# LaunchSource and OpenRecord are typed too, but their words (log, hook, reason, args…)
# name other things as often: the scan leaves them out.
WORDS: frozenset[str] = frozenset(v.value for enum in VOCABULARIES for v in enum)

# The directories the scan holds to the rule (under ledger/).
SCANNED = (
    "analyze",
    "logs",
    "watch",
    "hook",
    "importers",
    "report",
    "demo",
    "serve",
    "present",
    "readings",
    "store",
    "cli",
    "usecases",
)
# The small leaf packages and top-level modules, held to it too.
SCANNED_TOO = (
    "db",
    "cleantext.py",
    "collector.py",
    "heap.py",
    "blas.py",
    "shutdown.py",
    "redact",
    "__init__.py",
    "__main__.py",
    "config.py",
    "errors.py",
    "hashing.py",
    "interrupts.py",
    "launchcmd.py",
    "proc.py",
    "shellwords.py",
)

# Keyword arguments and dictionary keys whose value is a word of the vocabulary.
VOCAB_NAMES = frozenset(
    {"fate", "verdict", "kind", "effect", "outcome", "status", "decision", "launch_fate"}
)

# Words that are spelled as strings on purpose: (path under ledger/, the word, a piece of
# its line that pins the place, why it is not the vocabulary). Keep it short and true.
ALLOWED: tuple[tuple[str, str, str, str], ...] = (
    (
        "analyze/diagnose/config.py",
        "nccl",
        '"cudnn", "nccl"',
        "a package whose version is compared",
    ),
    ("analyze/diagnose/config.py", "patch", 'c.table == "patch"', "the evidence's table"),
    ("logs/progress.py", "progress", '"progress"', "a bar's label when it has none"),
    ("logs/runconfig.py", "nccl", '("nccl",', "a configuration key (NCCL's version)"),
    ("watch/sources.py", "progress", 'get("progress")', "a key of the ingest summary"),
    ("hook/lightning.py", "finished", "FINAL_STATUS", "Lightning's own status word"),
    ("hook/lightning.py", "failed", "FINAL_STATUS", "Lightning's own status word"),
    ("hook/runinfo.py", "nccl", '"nccl"', "the attribute torch.cuda.nccl"),
    ("hook/torch_side.py", "graph_break", "counters.get", "dynamo's counter's name"),
    ("hook/writer.py", "open", 'warn("open"', "the key of a warning said once"),
    ("importers/wandb.py", "exit", 'kind == "exit"', "a W&B record's type"),
    ("demo/trainer.py", "oom", "args.ending", "the stand-in trainer's --ending choice"),
    ("demo/trainer.py", "nccl", "args.ending", "the stand-in trainer's --ending choice"),
    ("demo/trainer.py", "stall", "args.ending", "the stand-in trainer's --ending choice"),
    ("serve/app.py", "compare", "", "a page of the UI (its path and template)"),
    ("serve/app.py", "error", '"error"', "the key of a JSON error body"),
    ("serve/views.py", "patch", '"patch":', "a key of a run's page data"),
    ("db/models.py", "patch", "__tablename__", "a table's name"),
    ("launchcmd.py", "exit", '"exit",', "a shell builtin"),
    ("cli/logs.py", "progress", 'get("progress")', "a key of the ingest summary"),
    (
        "store/fixes.py",
        "patch",
        'NotFoundError("patch"',
        "what was not found",
    ),
    ("store/gate.py", "patch", '("patch", ', "a table's name in the gate's rules"),
    ("store/series.py", "patch", '"patch", "hypothesis"', "a table's name"),
    ("store/why.py", "patch", 'ChangeRow("patch"', "the evidence's table"),
    ("store/timeline.py", "patch", '"patch",', "a timeline entry's kind: the table it comes from"),
    (
        "store/timeline.py",
        "running",
        'status = "running"',
        "a deploy step's state",
    ),
    ("shellwords.py", "done", '"done"', "a shell keyword"),
)


def _allowed(name: str, word: str, line: str) -> bool:
    return any(name == path and word == w and piece in line for path, w, piece, _why in ALLOWED)


def _vocab(node: ast.expr | None) -> Iterator[ast.Constant]:
    """The string constants of the vocabulary in `node`: itself, a collection literal's
    items, or either branch of a conditional expression."""
    if node is None:
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in WORDS:
        yield node
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for item in node.elts:
            yield from _vocab(item)
    elif isinstance(node, ast.IfExp):
        yield from _vocab(node.body)
        yield from _vocab(node.orelse)
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            yield from _vocab(value)


def _is_all(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
    )


def _key_name(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def spelled(tree: ast.AST) -> Iterator[ast.Constant]:
    """Every place in `tree` where a word of the vocabulary is spelled as a string."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            # `"oom" in text` looks for a substring; `x in ("oom", …)` names kinds
            pairs = list(zip(node.ops, node.comparators, strict=True))
            substring = all(
                isinstance(op, ast.In | ast.NotIn)
                and not isinstance(right, ast.Tuple | ast.List | ast.Set)
                for op, right in pairs
            )
            if not substring:
                yield from _vocab(node.left)
            for _op, right in pairs:
                yield from _vocab(right)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.Return | ast.AugAssign):
            if not _is_all(node):  # `__all__` lists names of objects
                yield from _vocab(node.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                yield from _vocab(key)
                if _key_name(key) in VOCAB_NAMES:
                    yield from _vocab(value)
        elif isinstance(node, ast.Call):
            for arg in node.args:
                yield from _vocab(arg)
            for keyword in node.keywords:
                if keyword.arg in VOCAB_NAMES:
                    yield from _vocab(keyword.value)
        elif isinstance(node, ast.For | ast.comprehension):
            yield from _vocab(node.iter)  # `for kind in ("oom", …)`
        elif isinstance(node, ast.arguments):
            # a default: `def f(fate="unknown")`
            for default in [*node.defaults, *node.kw_defaults]:
                yield from _vocab(default)


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of docstring constants (prose, never looked at)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def violations(root: Path, directories: tuple[str, ...]) -> list[str]:
    """`path:line: 'word'` for each word spelled as a string in those directories (or
    modules) under `root`."""
    out = []
    for directory in directories:
        where = root / directory
        for path in sorted(where.rglob("*.py")) if where.is_dir() else [where]:
            name = path.relative_to(root).as_posix()
            text = path.read_text(encoding="utf-8")
            lines = text.splitlines()
            tree = ast.parse(text, filename=str(path))
            prose = _docstrings(tree)
            seen = set()
            for const in spelled(tree):
                line = lines[const.lineno - 1]
                if id(const) in prose or _allowed(name, const.value, line):
                    continue
                where = (const.lineno, const.col_offset)
                if where not in seen:
                    seen.add(where)
                    out.append(f"ledger/{name}:{const.lineno}: {const.value!r}")
    return sorted(set(out), key=lambda v: (v.split(":")[0], int(v.split(":")[1])))


def test_no_vocabulary_spelled_outside_model() -> None:
    found = violations(ROOT, SCANNED + SCANNED_TOO)
    assert not found, "spell these with ledger.model.terms' enums:\n" + "\n".join(found)


def test_the_lists_cover_the_package() -> None:
    """Every subpackage and module is scanned or waiting to be swept (model is the
    vocabulary itself)."""
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.name for p in ROOT.glob("*.py")}
    unlisted = (packages | modules) - set(SCANNED) - {"model"}
    assert unlisted <= set(SCANNED_TOO), sorted(unlisted - set(SCANNED_TOO))


def test_allowed_entries_are_still_needed() -> None:
    """An allow-list entry that matches nothing any more is dead: remove it."""
    for name, word, piece, _why in ALLOWED:
        text = (ROOT / name).read_text(encoding="utf-8")
        lines = text.splitlines()
        found = [c for c in spelled(ast.parse(text)) if c.value == word]
        assert any(piece in lines[c.lineno - 1] for c in found), (name, word, piece)


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("def f(run):\n    return run.fate == 'crashed'\n", 2),
        ("def f(e):\n    return e.kind in ('oom', 'nccl')\n", 2),
        ("FATE = 'killed'\n", 1),
        ("def f(x):\n    return 'regression' if x else 'same'\n", 2),
        ("COUNTS = {'stalled': 4}\n", 1),
        ("def f(g):\n    return g(fate='unknown')\n", 2),
        ("OUT = {'verdict': 'no-change'}\n", 1),
        ("def f(found):\n    found('exit_error')\n", 2),
        ("def f(outcome='undecided'):\n    return outcome\n", 1),
        ("for kind in (('config_change', 1),):\n    pass\n", 1),
    ],
)
def test_a_planted_violation_fails(tmp_path: Path, source: str, line: int) -> None:
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "bad.py").write_text(source, encoding="utf-8")
    found = violations(tmp_path, ("planted",))
    assert found and all(v.startswith(f"ledger/planted/bad.py:{line}:") for v in found), found


def test_prose_and_substrings_are_not_vocabulary(tmp_path: Path) -> None:
    source = (
        '"""A run that crashed is "crashed"."""\n'
        "import re\n"
        "def f(text, log):\n"
        '    """oom"""\n'
        '    log.warning("the run went oom")\n'
        '    return "oom" in text or re.search("nccl", text) is None\n'
    )
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "fine.py").write_text(source, encoding="utf-8")
    # `re.search("nccl", …)` is a positional argument of a call: a pattern, yet spelled as
    # the word; the scan reports it, so a pattern that is a bare word must be written
    # another way or allowed with its reason.
    assert violations(tmp_path, ("planted",)) == ["ledger/planted/fine.py:6: 'nccl'"]
