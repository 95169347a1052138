"""numpy's BLAS on one thread in a `ledger` command.

numpy's OpenBLAS starts a worker thread for each further CPU when numpy is imported, and
each one spins a while, waiting for work, before it sleeps. On two cores that was 50 ms of
CPU at numpy's import, on the second core, or against the command itself when another
program holds that core. The analysis calls no BLAS routine worth a thread: it has no
matrix products, only a polynomial fit of a few hundred points.

`one_thread` (the command line's entry point, before numpy is imported) sets
OPENBLAS_NUM_THREADS=1 while numpy loads, unless the user set it. It takes the variable
away again as soon as numpy is loaded, so that a program the command launches (a training
run, a deploy step) gets the environment it had. A command that never imports numpy never
sees it.

The library's users (the training hook, notebooks) never go through `one_thread`: their
process's BLAS is theirs.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.machinery import ModuleSpec
from types import ModuleType

VARIABLE = "OPENBLAS_NUM_THREADS"


class _WhileNumpyLoads:
    """A finder that answers for numpy alone, once: numpy's own spec, whose loading runs
    with VARIABLE set."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != "numpy":
            return None
        sys.meta_path.remove(self)  # numpy's submodules, and everything after, go by
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        load = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            with _set():
                load(module)

        setattr(loader, "exec_module", exec_module)  # noqa: B010 — this loader's, numpy's alone
        return spec


@contextmanager
def _set() -> Iterator[None]:
    if VARIABLE in os.environ:  # the user's own choice
        yield
        return
    os.environ[VARIABLE] = "1"
    try:
        yield
    finally:
        os.environ.pop(VARIABLE, None)


def one_thread() -> None:
    """Load numpy's BLAS with one thread when numpy is first imported (see the module's
    docstring); nothing when numpy is loaded already or the user chose a number."""
    if "numpy" in sys.modules or VARIABLE in os.environ:
        return
    if not any(isinstance(f, _WhileNumpyLoads) for f in sys.meta_path):
        sys.meta_path.insert(0, _WhileNumpyLoads())
