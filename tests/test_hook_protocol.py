"""The hook's protocol: one message type each, through the wire and back as itself; and the
hook's modules import one another without a cycle (type-only imports included)."""

from __future__ import annotations

import ast
import math
import os
from pathlib import Path

import pytest

from ledger.hook import protocol, wire
from ledger.hook.protocol import (
    Close,
    Closed,
    Config,
    Flush,
    Flushed,
    Hello,
    Log,
    Meta,
    Say,
    SetFate,
    Stats,
    Step,
)
from ledger.model.terms import Fate

HOOK = Path(__file__).resolve().parent.parent / "ledger" / "hook"

EVERY_MESSAGE = [
    Hello("sqlite:///x.db", "run", None, 1.5, ["train.py", "--lr", "1"], 1.0, 60.0, 10, 5.0, "/"),
    Step(1 << 70, 10, 20, 4096, math.inf, {"lr": 3e-4, "n\ud800": None}, 0.002, (1.0, 2.0, 3.0)),
    Step(3, 10, 20, None, None, None, None, None),
    Log(7, {"eval_loss": 0.25}),
    SetFate(Fate.OOM, "OutOfMemoryError: CUDA out of memory.", True),
    Flush(3),
    Close(),
    Meta(2, [900, 1200], {"dynamo_recompiles": 1}, 0, 1, 3, 123456789, 1.7e9),
    Config({"torch": "2.13.0"}),
    Stats(10, 1, 2),
    Flushed(10, 1, 2, 3),
    Closed(10, 1, 2),
    Say(True, "ledger.hook: a line"),
]


def test_every_message_crosses_the_pipe_as_itself() -> None:
    read, write = os.pipe()
    try:
        wire.send(write, [protocol.pack(m) for m in EVERY_MESSAGE])
        os.close(write)
        frame = wire.Reader(read).read()
    finally:
        os.close(read)
    assert frame is not None
    back = [protocol.unpack(item) for item in frame]
    assert [type(m) for m in back] == [type(m) for m in EVERY_MESSAGE]
    for got, sent in zip(back, EVERY_MESSAGE, strict=True):
        assert repr(got) == repr(sent)  # repr: NaN-safe, and the field names are checked
    fate = back[4]
    assert isinstance(fate, SetFate) and fate.fate is Fate.OOM  # the enum, not its text
    assert protocol.pack_step(EVERY_MESSAGE[1]) == protocol.pack(EVERY_MESSAGE[1])


@pytest.mark.parametrize(
    "item", [(), ("meta",), (99, 1), [protocol.Tag.FLUSH.value, 1], (protocol.Tag.FLUSH.value,)]
)
def test_anything_else_is_refused(item: object) -> None:
    with pytest.raises(ValueError):
        protocol.unpack(item)


def test_fate_of_gives_the_fate_as_its_enum() -> None:
    oom = type("OutOfMemoryError", (RuntimeError,), {})
    assert protocol.fate_of(oom, oom("CUDA out of memory.\nmore")) == SetFate(
        Fate.OOM, "OutOfMemoryError: CUDA out of memory.", True
    )
    assert protocol.fate_of(KeyboardInterrupt, None) == SetFate(
        Fate.KILLED, "KeyboardInterrupt", True
    )
    assert protocol.fate_of(SystemExit, SystemExit(0)) is None


def _imports(path: Path) -> set[str]:
    """The ledger.hook modules this module imports, at run time or for type checking."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "ledger.hook":
                found.update(f"ledger.hook.{a.name}" for a in node.names)
            elif node.module.startswith("ledger.hook."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("ledger.hook."))
    return {m for m in found if (HOOK / f"{m.rsplit('.', 1)[1]}.py").exists()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of the graph, as the path around it; None without one."""
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> list[str] | None:
        if state.get(module) == 1:
            return [*path, module]
        if state.get(module) == 2:
            return None
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            found = visit(target, [*path, module])
            if found:
                return found
        state[module] = 2
        return None

    for module in sorted(graph):
        found = visit(module, [])
        if found:
            return found
    return None


def test_the_hook_has_no_import_cycle() -> None:
    graph = {f"ledger.hook.{p.stem}": _imports(p) for p in HOOK.glob("*.py")}
    graph.pop("ledger.hook.__init__")
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])
    # The forwarder and the exit hooks are given what they need, never the meter.
    assert "ledger.hook.meter" not in graph["ledger.hook.link"]
    assert "ledger.hook.meter" not in graph["ledger.hook.exits"]
    # The check sees a cycle where there is one (so its silence means something).
    assert _cycle({**graph, "ledger.hook.protocol": {"ledger.hook.link"}}) is not None
