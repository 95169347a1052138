"""numpy's BLAS on one thread in a command (ledger.blas): no worker thread started at
numpy's import, the variable gone once numpy is loaded, the user's own choice kept. Each
case is a fresh interpreter: OpenBLAS reads its variable once, as it loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import two_runs

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/proc/self/task") or (os.cpu_count() or 1) < 2,
    reason="counts threads in /proc, and OpenBLAS starts none on one CPU",
)

CODE = """
import os, sys
from ledger import blas
if "one" in sys.argv:
    blas.one_thread()
import numpy
print(len(os.listdir("/proc/self/task")), os.environ.get("OPENBLAS_NUM_THREADS"))
"""


def run(*args: str, **env: str) -> tuple[int, str]:
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run(
        [sys.executable, "-c", CODE, *args],
        capture_output=True, text=True, check=True, env={**environ, **env},
    )  # fmt: skip
    threads, variable = done.stdout.split()
    return int(threads), variable


def test_numpy_loads_with_one_thread_and_the_variable_goes_again() -> None:
    assert run()[0] >= 2  # OpenBLAS's own workers, without it
    assert run("one") == (1, "None")


def test_the_users_choice_stands() -> None:
    assert run("one", OPENBLAS_NUM_THREADS="2") == (2, "2")


def test_a_command_that_reads_numbers_has_no_blas_worker(tmp_path: Path) -> None:
    db = two_runs(tmp_path / "ledger.db")
    code = (
        "import atexit, os, sys\n"
        "atexit.register(lambda: print(len(os.listdir('/proc/self/task')), "
        "'numpy' in sys.modules, os.environ.get('OPENBLAS_NUM_THREADS'), file=sys.stderr))\n"
        "sys.argv = ['ledger', '--db', sys.argv[1], 'compare', 'a', 'b']\n"
        "from ledger.cli import main\n"
        "main()\n"
    )
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(db)], capture_output=True, text=True, env=environ
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.split()[-3:] == ["1", "True", "None"], done.stderr
