"""Nothing in ledger/ swallows an exception without a word: an `except` whose body is only
`pass`, `continue` or `...`, and `contextlib.suppress`, are refused here. What could not be
read or written is counted or said (a log line at least), so a failure hidden in a loop
shows up somewhere."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ledger"

# Handlers that are control flow, not a failure hidden: (module, function, why).
ALLOWED = {
    ("importers/endings.py", "announced_total", "a value that is not a count: the next name"),
    ("logs/numbers.py", "to_float", "not a plain float: the next spelling is tried"),
    ("proc.py", "interruptible", "the signal it waits for, raised to end the wait"),
    ("proc.py", "_group_alive", "a process that ended while the group was listed"),
    ("store/deploys.py", "store_flags", "a key holding a secret is left out; `kept` counts"),
    ("store/fixes.py", "_display_path", "a path outside the repository stays as given"),
    ("store/steps.py", "_send", "a refused batch: the rows are retried one by one below"),
    ("store/steps.py", "metric_name", "not encodable as it is: escaped below"),
}


def silent_handlers(source: str) -> list[int]:
    """Line numbers of the handlers that say nothing and of every `suppress(...)`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ExceptHandler):
            quiet = all(
                isinstance(s, ast.Pass | ast.Continue)
                or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
                for s in node.body
            )
            if quiet:
                found.append(node.lineno)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "suppress":
                found.append(node.lineno)
    return found


def enclosing_function(source: str, line: int) -> str:
    best, name = 0, "<module>"
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            end = node.end_lineno or node.lineno
            if node.lineno <= line <= end and node.lineno > best:
                best, name = node.lineno, node.name
    return name


def test_no_module_swallows_an_exception_silently() -> None:
    allowed = {(module, function) for module, function, _ in ALLOWED}
    quiet, used = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        module = path.relative_to(PACKAGE).as_posix()
        for line in silent_handlers(source):
            where = (module, enclosing_function(source, line))
            if where in allowed:
                used.add(where)
            else:
                quiet.append(f"ledger/{module}:{line} ({where[1]})")
    assert not quiet, "count it or say it (a log line):\n" + "\n".join(quiet)
    assert used == allowed, f"allowed but no longer there: {sorted(allowed - used)}"


def test_the_scan_finds_what_it_refuses() -> None:
    planted = (
        "import contextlib\n"
        "try:\n    f()\nexcept OSError:\n    pass\n"  # line 4
        "for x in y:\n    try:\n        g(x)\n    except ValueError:\n        continue\n"  # 9
        "with contextlib.suppress(KeyError):\n    h()\n"  # 11
        "try:\n    f()\nexcept OSError as exc:\n    log.debug('gone: %r', exc)\n"
    )
    assert silent_handlers(planted) == [4, 9, 11]
